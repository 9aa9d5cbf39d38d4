package clickhouse_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/storetest"
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
	data, idBytes := storetest.StraddlingInstances(t, 7000)
	var maxQuery string
	require.NoError(t, st.Conn().QueryRow(ctx, "SELECT value FROM system.settings WHERE name = 'max_query_size'").Scan(&maxQuery))
	limit, err := strconv.Atoi(maxQuery)
	require.NoError(t, err)
	require.Greater(t, idBytes, limit, "the instance list alone exceeds max_query_size")

	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, storetest.Samples(t, data)))
	cat := storetest.Catalogs(t)["thr-cuts"] // threshold 0.02 for nlp-lab: inside class 1 [0, 0.05)
	require.InDelta(t, 0.02, cat.IdlePolicyFor("nlp-lab").Threshold, 1e-12)
	storetest.RequireSameInvoices(t, data, map[string]*schemas.Catalog{"thr-cuts": cat}, st)
}

// BenchmarkRawIdleFallback bills a month whose idle runs all need their raw
// samples (3 000 instances: few enough for a literal IN list, to compare).
func BenchmarkRawIdleFallback(b *testing.B) {
	addr := testenv.ClickHouseAddr(b)
	st := open(b, addr, testenv.UniqueName(b, "ch"))
	ctx := context.Background()
	data, _ := storetest.StraddlingInstances(b, 3000)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	require.NoError(b, w.Write(ctx, storetest.Samples(b, data)))
	cat := storetest.Catalogs(b)["thr-cuts"]
	p := billing.NewPeriod(2026, time.November, cat.Location)
	for b.Loop() {
		if _, err := reads.BillFrom(ctx, st, cat, p); err != nil {
			b.Fatal(err)
		}
	}
}

// Instance ids travel as data, not as SQL: quotes and backslashes in them
// need no escaping and change nothing.
func TestRawIdleFallbackOddInstanceIDs(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	st := open(t, addr, testenv.UniqueName(t, "ch"))
	ctx := context.Background()
	gen, _ := storetest.StraddlingInstances(t, 4)
	samples := storetest.Samples(t, gen)
	odd := map[string]string{}
	var data []byte
	for i := range samples {
		s := &samples[i]
		if odd[s.InstanceID] == "" {
			odd[s.InstanceID] = []string{`MIG-it's`, `MIG-back\slash`, `MIG-'); DROP TABLE raw_samples; --`, "MIG-实例"}[len(odd)]
		}
		s.InstanceID = odd[s.InstanceID]
		data = append(s.AppendJSON(data), '\n')
	}
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, storetest.Samples(t, data)))
	storetest.RequireSameInvoices(t, data, map[string]*schemas.Catalog{"thr-cuts": storetest.Catalogs(t)["thr-cuts"]}, st)
}
