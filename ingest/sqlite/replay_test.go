package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/internal/storetest"
)

// A file holding the month three times, back-filled through one running
// writer (a replay, a spool delivered again), stores the occupancy rows of one
// pass and the same idle runs as readers see them, and bills like the file.
func TestMonthReplayedThriceStoresOnePass(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	data := storetest.Trace(t, 30_000, 19)
	fill := func(name string, copies int) string {
		path := filepath.Join(t.TempDir(), name+".db")
		st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Logger: log})
		require.NoError(t, err)
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
		require.NoError(t, err)
		_, err = ingest.Backfill(ctx, bytes.NewReader(bytes.Repeat(data, copies)), ingest.FileConfig{Writer: w, BatchSize: 4000})
		require.NoError(t, err)
		if copies > 1 {
			storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
		}
		require.NoError(t, st.Close())
		return path
	}
	rows := func(path, query string) []string {
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		defer db.Close()
		r, err := db.Query(query)
		require.NoError(t, err)
		defer r.Close()
		var out []string
		for r.Next() {
			var s string
			require.NoError(t, r.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, r.Err())
		return out
	}
	const (
		occ   = `SELECT concat_ws('|', project, user, instance_id, gpu_model, profile, start_ms, end_ms) FROM occupancy ORDER BY 1`
		idle  = `SELECT concat_ws('|', project, user, instance_id, gpu_model, profile, class, start_ms, max(end_ms), min(min_util), max(max_util)) FROM idle_spans GROUP BY project, user, instance_id, gpu_model, profile, class, start_ms ORDER BY 1`
		nIdle = `SELECT count(*) FROM idle_spans`
	)
	once, thrice := fill("once", 1), fill("thrice", 3)
	require.Equal(t, rows(once, occ), rows(thrice, occ), "occupancy rows")
	require.Equal(t, rows(once, idle), rows(thrice, idle), "idle runs as readers see them")
	n1, err := strconv.Atoi(rows(once, nIdle)[0])
	require.NoError(t, err)
	n3, err := strconv.Atoi(rows(thrice, nIdle)[0])
	require.NoError(t, err)
	t.Logf("occupancy rows %d; idle rows %d once, %d thrice", len(rows(once, occ)), n1, n3)
	// Idle rows keep their utilisation range in the key; the compactor writes
	// every range a run passed through, whatever the batches, so a replay cut
	// into other batches keeps the same rows.
	require.Equal(t, n1, n3, "idle rows")
}
