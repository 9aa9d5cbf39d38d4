package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

func TestSQLitePackedUsage(t *testing.T) {
	for seed := range uint64(2) {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "cardhour.db"), Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		storetest.RequirePackedUsage(t, st, 200+seed)
		require.NoError(t, st.Close())
	}
}

// A store written before run packs gets them from its runs when migrated:
// usage from the packs answers as from the runs, and batches written after
// the migration add packs of their own.
func TestRunPacksBackfill(t *testing.T) {
	ctx := context.Background()
	st, path, log := openTemp(t)
	samples := storetest.Samples(t, storetest.Trace(t, 12_000, 31))
	old, later := samples[:len(samples)*2/3], samples[len(samples)*2/3:]
	mem := ingest.NewMemStore()
	storetest.WriteStreamedTo(t, old, 1_500, 500, st, mem)
	require.NoError(t, st.Close())

	st = reopenBefore(t, path, "run_packs")
	require.Positive(t, countPacks(t, path), "the migration filled run_packs")
	storetest.RequirePacksAsRuns(t, st, mem, old, 5)

	n := countPacks(t, path)
	storetest.WriteStreamedTo(t, later, 1_000, 500, st, mem)
	require.Greater(t, countPacks(t, path), n, "batches after the migration write packs")
	n = countPacks(t, path)
	storetest.RequirePacksAsRuns(t, st, mem, samples, 6)

	// The back-fill run again (a crash before its version was recorded)
	// replaces every pack by those of the runs, and the answers stay the same.
	require.NoError(t, st.Close())
	setUserVersion(t, path, sqlite.VersionBefore("-- go: fill run_packs"))
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	require.Less(t, countPacks(t, path), n, "one pack per project and day, not per batch")
	storetest.RequirePacksAsRuns(t, st, mem, samples, 7)
}

// setUserVersion sets the store's schema version, as a store that has
// applied only the migrations before v would have it.
func setUserVersion(t *testing.T, path string, v int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v))
	require.NoError(t, err)
}

func countPacks(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM run_packs`).Scan(&n))
	return n
}

// Small batches do not pile up packs: a project and day keeps at most a few
// (the batch that would leave more merges them), and usage from the merged
// packs answers as from the run rows and from a MemStore, replays included.
func TestRunPacksMergeSmallBatches(t *testing.T) {
	st, path, _ := openTemp(t)
	t.Cleanup(func() { _ = st.Close() })
	samples := storetest.Samples(t, storetest.Trace(t, 6_000, 41))
	mem := ingest.NewMemStore()
	batches := storetest.WriteStreamedTo(t, samples, 60, 60, st, mem)
	storetest.WriteStreamedTo(t, samples[1_000:2_500], 45, 45, st, mem) // a stretch written again, in other batches
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var most, days int
	require.NoError(t, db.QueryRow(`SELECT max(n), count(*) FROM (SELECT count(*) AS n FROM run_packs GROUP BY project, day_ms)`).Scan(&most, &days))
	require.Greater(t, batches, 5*days, "the test writes many batches per project and day")
	require.LessOrEqual(t, most, 5, "packs of one project and day after %d batches over %d project-days", batches, days)
	storetest.RequirePacksAsRuns(t, st, mem, samples, 8)
}

// A store written before packs were sealed has its version-1 packs sealed
// when migrated (user_version 37), and usage from them answers as before.
func TestRunPacksReseal(t *testing.T) {
	ctx := context.Background()
	st, path, log := openTemp(t)
	samples := storetest.Samples(t, storetest.Trace(t, 8_000, 53))
	mem := ingest.NewMemStore()
	storetest.WriteStreamedTo(t, samples, 4_000, 500, st, mem)
	require.NoError(t, st.Close())

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	// versions counts the packs by version: plain (1) and sealed (2).
	versions := func() [2]int {
		var v [2]int
		require.NoError(t, db.QueryRow(`SELECT count(*) FILTER (WHERE substr(runs, 1, 1) = x'01'), count(*) FILTER (WHERE substr(runs, 1, 1) = x'02') FROM run_packs`).Scan(&v[0], &v[1]))
		return v
	}
	written := versions()
	require.Greater(t, written[1], 2*written[0], "packs are written sealed where that makes them smaller")

	// Back to version-1 packs, as a build before sealing wrote them, and to
	// the version before the migration.
	rows, err := db.Query(`SELECT rowid, runs FROM run_packs`)
	require.NoError(t, err)
	plain := map[int64][]byte{}
	for rows.Next() {
		var id int64
		var b []byte
		require.NoError(t, rows.Scan(&id, &b))
		plain[id], err = schemas.Unseal(b)
		require.NoError(t, err)
	}
	require.NoError(t, rows.Err())
	for id, b := range plain {
		_, err := db.Exec(`UPDATE run_packs SET runs = ? WHERE rowid = ?`, b, id)
		require.NoError(t, err)
	}
	require.Equal(t, [2]int{written[0] + written[1], 0}, versions())
	setUserVersion(t, path, sqlite.VersionBefore("-- go: seal the version-1 packs"))

	st, err = sqlite.Open(ctx, sqlite.Config{Path: path, Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	require.Equal(t, written, versions(), "the migration sealed what a new store seals")
	storetest.RequirePacksAsRuns(t, st, mem, samples, 8)
}
