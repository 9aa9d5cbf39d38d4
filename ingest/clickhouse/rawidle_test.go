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
	const instances = 7000
	p0 := billing.NewPeriod(2026, time.November, ingesttest.Shanghai(t)).StartMS()
	var data []byte
	idBytes := 0
	for i := range instances {
		id := fmt.Sprintf("MIG-%08x-aaaa-4000-8000-%012x", i, i*7919)
		idBytes += len(id) + 3 // quoted, comma-separated
		for j, util := range []float64{0.01, 0.03, 0.01, 0.04} {
			s := schemas.Sample{StartMS: p0 + 3600_000 + int64(i%60)*1000 + int64(j)*60_000, IntervalMS: 60_000, Node: "node-" + strconv.Itoa(i/7),
				GPUUUID: fmt.Sprintf("GPU-%08x", i/7), GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: id, Profile: "1g.10gb",
				Project: "nlp-lab", User: "u" + strconv.Itoa(i%50), Util: util, UtilKnown: true, Processes: 1, MemTotal: 10 << 30}
			data = append(s.AppendJSON(data), '\n')
		}
	}
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
