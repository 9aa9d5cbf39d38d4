package sqlite_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ingestsqlite "github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/ledger/sqlite"
)

func backend(t *testing.T) ledgertest.Opener {
	return openAt(filepath.Join(t.TempDir(), "cardhour.db"))
}

// openAt opens stores on the database file at path.
func openAt(path string) ledgertest.Opener {
	return func(t *testing.T, clock func() time.Time) ledger.Store {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

func TestConformance(t *testing.T) { ledgertest.Run(t, backend) }

// The ledger can live in the usage store's file: neither touches the
// other's tables or schema version.
func TestSharesTheUsageStoreFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cardhour.db")
	usage, err := ingestsqlite.Open(ctx, ingestsqlite.Config{Path: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	clock := ledgertest.NewClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.PutCatalog(ctx, "cli", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := usage.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened in the other order, both still open and migrate cleanly.
	if st, err = sqlite.Open(ctx, sqlite.Config{Path: path, Clock: clock.Now}); err != nil {
		t.Fatal(err)
	}
	defer st.Close() //nolint:errcheck // test
	if usage, err = ingestsqlite.Open(ctx, ingestsqlite.Config{Path: path, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	defer usage.Close() //nolint:errcheck // test
	if v, err := st.CurrentCatalog(ctx); err != nil || string(v.Content) != "x" {
		t.Fatalf("catalog after reopening: %+v, %v", v, err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close() //nolint:errcheck // test
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"ledger_invoices", "ledger_schema_migrations", "occupancy", "raw_samples", "idle_spans"} {
		if !strings.Contains(got, want) {
			t.Errorf("tables %q: %s missing", got, want)
		}
	}
}

func TestOpenValidates(t *testing.T) {
	_, err := sqlite.Open(context.Background(), sqlite.Config{})
	if err == nil || !strings.Contains(err.Error(), "path is required") || !strings.Contains(err.Error(), "clock is required") {
		t.Fatalf("Open with nothing: %v", err)
	}
}

// A database migrated by a newer program is refused, not downgraded.
func TestRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cardhour.db")
	clock := ledgertest.NewClock(time.Now())
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ledger_schema_migrations (version, name, applied_ms) VALUES (999, '0999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	_, err = sqlite.Open(ctx, sqlite.Config{Path: path, Clock: clock.Now})
	if err == nil || !strings.Contains(err.Error(), "newer than this program knows") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

// The release lists made every cycle are served by their indexes.
func TestReleaseListsUseIndexes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cardhour.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close() //nolint:errcheck // read-only
	ledgertest.ReleaseListsUseIndexes(t, openAt(path), func(t *testing.T, query string, args ...any) (*sql.Rows, int) {
		rows, err := db.Query("EXPLAIN QUERY PLAN "+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		return rows, 3 // id, parent, notused, detail
	})
}
