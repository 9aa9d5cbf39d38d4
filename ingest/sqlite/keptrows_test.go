package sqlite_test

import (
	"context"
	"database/sql"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/internal/storetest"
)

// The rows SQLite keeps (every occupancy and idle_spans row, as stored) are
// the same whatever batches the same samples were written in: whole, one by
// one, and in random sizes written whole or streamed.
func TestKeptRowsDoNotDependOnBatches(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	data := storetest.Trace(t, 5_000, 41)
	samples := storetest.Samples(t, data)
	rng := rand.New(rand.NewPCG(9, 10))
	kept := func(name string, most int, streamed bool) []string {
		path := filepath.Join(t.TempDir(), name+".db")
		st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Logger: log})
		require.NoError(t, err)
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
		require.NoError(t, err)
		for i := 0; i < len(samples); {
			n := len(samples)
			if most > 0 {
				n = 1 + rng.IntN(most)
			}
			batch := samples[i:min(i+n, len(samples))]
			i += len(batch)
			if streamed {
				storetest.WriteStreamed(t, w, batch, len(batch), 1+rng.IntN(len(batch)))
			} else {
				require.NoError(t, w.Write(ctx, batch))
			}
		}
		require.Zero(t, w.CompactorStats().Forgotten)
		if most == 0 {
			storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
		}
		require.NoError(t, st.Close())
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		defer db.Close()
		r, err := db.Query(`SELECT concat_ws('|', 'occ', project, user, instance_id, gpu_model, profile, start_ms, end_ms) FROM occupancy
			UNION ALL SELECT concat_ws('|', 'idle', project, user, instance_id, gpu_model, profile, class, start_ms, min_util, max_util, end_ms) FROM idle_spans
			ORDER BY 1`)
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
	want := kept("whole", 0, false)
	require.NotEmpty(t, want)
	for _, split := range []struct {
		name     string
		most     int
		streamed bool
	}{{"ones", 1, false}, {"small", 40, true}, {"large", 3000, false}, {"large-streamed", 3000, true}} {
		got := kept(split.name, split.most, split.streamed)
		t.Logf("%s: %d rows kept", split.name, len(got))
		require.Equal(t, want, got, "rows kept, batches %s", split.name)
	}
}
