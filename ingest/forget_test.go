package ingest_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
)

// A writer whose compactor must forget most of its open runs (a bound far
// below the trace's keys) bills exactly like the file for every catalog, and
// like a writer that forgets nothing; it counts the runs it forgot in
// cardhour_ingest_runs_forgotten_total and says so in its log.
func TestForgettingNeverChangesABill(t *testing.T) {
	data := storetest.Trace(t, 40_000, 31)
	samples := storetest.Samples(t, data)
	cats := storetest.Catalogs(t)
	write := func(maxOpen int, streamed bool) (*ingest.MemStore, *ingest.Writer, *ingest.Metrics, string) {
		st := ingest.NewMemStore()
		var logs testenv.SyncBuffer
		m := ingest.NewMetrics(prometheus.NewRegistry())
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: m, MaxOpenRuns: maxOpen})
		require.NoError(t, err)
		if streamed {
			storetest.WriteStreamed(t, w, samples, 3000, 700)
		} else {
			for i := 0; i < len(samples); i += 2000 {
				require.NoError(t, w.Write(context.Background(), samples[i:min(i+2000, len(samples))]))
			}
		}
		return st, w, m, logs.String()
	}
	all, wAll, _, _ := write(0, false)
	require.Zero(t, wAll.CompactorStats().Forgotten)
	_, occAll, idleAll, _ := all.Counts()
	for _, streamed := range []bool{false, true} {
		st, w, m, logs := write(8, streamed)
		s := w.CompactorStats()
		_, occ, idle, _ := st.Counts()
		t.Logf("streamed %v: forgot %d runs; rows written %d + %d (nothing forgotten: %d + %d)", streamed, s.Forgotten, occ, idle, occAll, idleAll)
		require.Greater(t, s.Forgotten, int64(1000), "the bound makes the compactor forget")
		require.LessOrEqual(t, s.OpenOcc, 8)
		require.LessOrEqual(t, s.OpenIdle, 8)
		require.Equal(t, float64(s.Forgotten), testutil.ToFloat64(m.RunsForgotten))
		require.Contains(t, logs, "compactor forgot the open runs")
		require.Equal(t, 1, strings.Count(logs, "compactor forgot"), "logged at most once a minute")
		storetest.RequireSameInvoices(t, data, cats, st)
	}
	storetest.RequireSameInvoices(t, data, cats, all)
}
