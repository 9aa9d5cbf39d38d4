package postgres_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/ledger/postgres"
	"github.com/cardhour/cardhour/internal/testenv"
)

func backend(t *testing.T) ledgertest.Opener { return openDSN(testenv.PostgresDSN(t)) }

// openDSN opens stores on the database dsn names.
func openDSN(dsn string) ledgertest.Opener {
	return func(t *testing.T, clock func() time.Time) ledger.Store {
		s, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

func TestConformance(t *testing.T) { ledgertest.Run(t, backend) }

// Replicas starting together migrate once (the advisory lock), and all of
// them come up.
func TestConcurrentStartsMigrateOnce(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	clock := ledgertest.NewClock(time.Now())
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Clock: clock.Now, MaxConns: 2})
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("start %d: %v", i, err)
		}
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close() //nolint:errcheck // test
	var n, v int
	if err := db.QueryRow(`SELECT count(*), max(version) FROM ledger_schema_migrations`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != v || n < 1 {
		t.Fatalf("%d migration rows for version %d: each must be applied once", n, v)
	}
}

func TestOpenValidates(t *testing.T) {
	_, err := postgres.Open(context.Background(), postgres.Config{MaxConns: -1})
	if err == nil || !strings.Contains(err.Error(), "DSN is required") || !strings.Contains(err.Error(), "clock is required") ||
		!strings.Contains(err.Error(), "max conns") {
		t.Fatalf("Open with nothing: %v", err)
	}
}

// The release lists made every cycle are served by their indexes. The table
// is analyzed and sequential scans are priced out, as on a ledger grown too
// large to scan: the plan then shows whether an index can serve the query.
func TestReleaseListsUseIndexes(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx := context.Background()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close() //nolint:errcheck // test
	ledgertest.ReleaseListsUseIndexes(t, openDSN(dsn), func(t *testing.T, query string, args ...any) (*sql.Rows, int) {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		for _, q := range []string{"ANALYZE ledger_releases", "SET enable_seqscan = off"} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := conn.QueryContext(ctx, "EXPLAIN "+postgres.Rebind(query), args...)
		if err != nil {
			t.Fatal(err)
		}
		return rows, 0
	})
}
