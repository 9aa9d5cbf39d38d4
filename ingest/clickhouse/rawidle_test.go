package clickhouse_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/ingesttest"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
)

// With a threshold inside an idle class, the raw samples of every run it cuts
// through are read back. At 7 000 such instances their ids alone are larger
// than the server's max_query_size (256 KiB by default), so they must not be
// spelled out in the query: the store bills them exactly like the file.
func TestRawIdleFallbackAt7000Instances(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	st := open(t, addr, testenv.UniqueName(t, "ch"))
	ctx := context.Background()
	data, idBytes := straddlingInstances(t, 7000)
	var maxQuery string
	require.NoError(t, st.Conn().QueryRow(ctx, "SELECT value FROM system.settings WHERE name = 'max_query_size'").Scan(&maxQuery))
	limit, err := strconv.Atoi(maxQuery)
	require.NoError(t, err)
	require.Greater(t, idBytes, limit, "the instance list alone exceeds max_query_size")

	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, ingesttest.Samples(t, data)))
	cat := ingesttest.Catalogs(t)["thr-cuts"] // threshold 0.02 for nlp-lab: inside class 1 [0, 0.05)
	require.InDelta(t, 0.02, cat.IdlePolicyFor("nlp-lab").Threshold, 1e-12)
	ingesttest.RequireSameInvoices(t, data, map[string]*schemas.Catalog{"thr-cuts": cat}, st)
}

// straddlingInstances are samples of n instances of nlp-lab, each an idle run
// of class 1 with utils on both sides of 0.02, and the bytes their ids take
// as a quoted list.
func straddlingInstances(t testing.TB, n int) (data []byte, idBytes int) {
	p0 := billing.NewPeriod(2026, time.November, ingesttest.Shanghai(t)).StartMS()
	for i := range n {
		id := fmt.Sprintf("MIG-%08x-aaaa-4000-8000-%012x", i, i*7919)
		idBytes += len(id) + 3 // quoted, comma-separated
		for j, util := range []float64{0.01, 0.03, 0.01, 0.04} {
			s := schemas.Sample{StartMS: p0 + 3600_000 + int64(i%60)*1000 + int64(j)*60_000, IntervalMS: 60_000, Node: "node-" + strconv.Itoa(i/7),
				GPUUUID: fmt.Sprintf("GPU-%08x", i/7), GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: id, Profile: "1g.10gb",
				Project: "nlp-lab", User: "u" + strconv.Itoa(i%50), Util: util, UtilKnown: true, Processes: 1, MemTotal: 10 << 30}
			data = append(s.AppendJSON(data), '\n')
		}
	}
	return data, idBytes
}

// BenchmarkRawIdleFallback bills a month whose idle runs all need their raw
// samples (3 000 instances: few enough for a literal IN list, to compare).
func BenchmarkRawIdleFallback(b *testing.B) {
	addr := testenv.ClickHouseAddr(b)
	st := open(b, addr, testenv.UniqueName(b, "ch"))
	ctx := context.Background()
	data, _ := straddlingInstances(b, 3000)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	require.NoError(b, w.Write(ctx, ingesttest.Samples(b, data)))
	cat := ingesttest.Catalogs(b)["thr-cuts"]
	p := billing.NewPeriod(2026, time.November, cat.Location)
	for b.Loop() {
		if _, err := billing.BillFrom(ctx, st, cat, p); err != nil {
			b.Fatal(err)
		}
	}
}
