package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	_ "modernc.org/sqlite"
)

func TestLoadMigrationsRejectsGapsAndStrayFiles(t *testing.T) {
	ok := fstest.MapFS{"m/0001_a.sql": {Data: []byte("x")}, "m/0002_b.sql": {Data: []byte("y")}}
	ms, err := LoadMigrations(ok, "m")
	if err != nil || len(ms) != 2 || ms[1].Version != 2 || ms[1].SQL != "y" {
		t.Fatalf("LoadMigrations = %+v, %v", ms, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":      {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"repeat":   {"m/0001_a.sql": {}, "m/0001_b.sql": {}},
		"no one":   {"m/0002_b.sql": {}},
		"misnamed": {"m/0001_a.sql": {}, "m/2_b.sql": {}},
		"stray":    {"m/0001_a.sql": {}, "m/README": {}},
	} {
		if _, err := LoadMigrations(fsys, "m"); err == nil {
			t.Errorf("%s: LoadMigrations accepted %v", name, fsys)
		}
	}
}

// A failing migration leaves the schema as it was: all pending migrations
// run in one transaction.
func TestFailingMigrationChangesNothing(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	d := Dialect{Name: "sqlite", Rebind: func(q string) string { return q }, IsUnique: func(error) bool { return false }}
	clock := func() time.Time { return time.Unix(0, 0) }
	ms := []Migration{
		{Version: 1, Name: "0001_a.sql", SQL: "CREATE TABLE a (x INTEGER); CREATE TABLE b (y INTEGER);"},
		{Version: 2, Name: "0002_bad.sql", SQL: "CREATE TABLE c (z INTEGER); THIS IS NOT SQL;"},
	}
	s := &Store{db: db, d: d, now: clock}
	err = s.migrate(ctx, ms)
	if err == nil || !strings.Contains(err.Error(), "0002_bad.sql") {
		t.Fatalf("migrate = %v, want an error naming 0002_bad.sql", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name IN ('a', 'b', 'c', 'ledger_schema_migrations')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tables after a failed migration (%v), want none", n, err)
	}
	// Fixed, it applies both; applying again does nothing.
	ms[1].SQL = "CREATE TABLE c (z INTEGER);"
	for range 2 {
		if err := s.migrate(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.QueryRow(`SELECT count(*) FROM ledger_schema_migrations`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d migrations recorded (%v), want 2", n, err)
	}
	_ = db.Close()
}
