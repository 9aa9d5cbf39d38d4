//go:build !collector

package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/testenv"
)

// A mistyped store is an error naming it, not an empty invoice, and nothing
// is created.
func TestBillFromMissingStore(t *testing.T) {
	typo := filepath.Join(t.TempDir(), "typo.db")
	code, out, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", "sqlite://"+typo, "--period", "2026-11")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "no store at "+typo+": run `cardhour ingest` or `cardhour migrate` first")
	require.NoFileExists(t, typo)
}

// Lines a back-fill rejected are recorded in the store; billing the period
// from the store says so (in the output and on stderr) while billing the same
// valid lines, and a second back-fill of the file counts nothing twice.
func TestBillFromStoreWarnsOfRejectedInput(t *testing.T) {
	data, err := os.ReadFile(exampleSamples)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	bad := append([]string{}, lines[:4]...)
	bad = append(bad, `{"ts":"2026-11-03T10:00:00+08:00","interval_s":-60}`, `{"ts":"2026-11-04T10:00:00+08:00", broken`)
	bad = append(bad, lines[4:]...)
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(bad, "\n")+"\n"), 0o644))
	store := "sqlite://" + filepath.Join(dir, "cardhour.db")
	for range 2 {
		code, out, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", path, "--listen", "")
		require.Equal(t, 1, code, "invalid lines still make the back-fill exit non-zero")
		require.Contains(t, out, "2 invalid lines not stored, recorded as rejected in the store")
		require.Contains(t, errOut, "bad.jsonl:5:")
	}
	code, out, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", store, "--period", "2026-11")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"total": "7.18"`, "the valid lines are billed as from the file")
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	want := "period 2026-11: 2 samples or messages were rejected at ingest and are not billed (first reasons: invalid_field at file:" + abs + ":5: "
	require.Contains(t, out, want)
	require.Contains(t, errOut, "warning: "+want)
	require.Contains(t, out, "malformed_json at file:"+abs+":6: ")

	// Another period has no rejects and no warning.
	code, out, errOut = runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", store, "--period", "2026-12")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "rejected at ingest")
}

// migrate takes --store like the other commands, for SQLite too.
func TestMigrateSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	code, out, errOut := runCLI(t, "", "migrate", "--store", "sqlite://"+path)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "SQLite "+path+" at schema version")
	code, out, errOut = runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", "sqlite://"+path, "--period", "2026-11")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"invoices"`)

	code, _, errOut = runCLI(t, "", "migrate")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--store or --state is required")
	code, _, errOut = runCLI(t, "", "migrate", "--store", "sqlite://"+path, "--clickhouse", "127.0.0.1:9000")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "not both")
}

// ingest into a store it must not write fails at once, with the reason.
func TestIngestIntoNewerStoreFailsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	_, err = db.Exec("PRAGMA user_version = 999")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	code, _, errOut := runCLI(t, "", "ingest", "--store", "sqlite://"+path, "--from-file", exampleSamples, "--listen", "")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "schema version 999, newer than this build of cardhour knows")

	code, _, errOut = runCLI(t, "", "ingest", "--store", "sqlite://"+filepath.Join(t.TempDir(), "nodir", "x.db"), "--from-file", exampleSamples, "--listen", "")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "nodir does not exist")
}

// The deprecated ClickHouse flags of migrate still work, and --store does the
// same; bill then reads the database, which bill alone never creates.
func TestMigrateClickHouse(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	db := testenv.UniqueName(t, "cli")
	code, _, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", "clickhouse://"+addr+"/"+db, "--period", "2026-11")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "the database does not exist")

	code, out, errOut := runCLI(t, "", "migrate", "--clickhouse", addr, "--database", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "deprecated; use --store clickhouse://"+addr+"/"+db)
	require.Contains(t, out, "database "+db+" at schema version")
	dropDatabaseAtEnd(t, addr, db)
	code, out, errOut = runCLI(t, "", "migrate", "--store", "clickhouse://"+addr+"/"+db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "applied now: []")
	code, out, errOut = runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", "clickhouse://"+addr+"/"+db, "--period", "2026-11")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"invoices"`)
}
