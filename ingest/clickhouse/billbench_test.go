package clickhouse_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
)

// BenchmarkBillFromClickHouse is a month close (November, example catalog)
// of a generated 400 000-sample trace read back from ClickHouse.
func BenchmarkBillFromClickHouse(b *testing.B) {
	st := open(b, testenv.ClickHouseAddr(b), testenv.UniqueName(b, "ch"))
	ctx := context.Background()
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	require.NoError(b, w.Write(ctx, storetest.Samples(b, storetest.Trace(b, 400_000, 3))))
	cat := storetest.Catalogs(b)["example"]
	p := billing.NewPeriod(2026, time.November, cat.Location)
	for b.Loop() {
		if _, err := reads.BillFrom(ctx, st, cat, p); err != nil {
			b.Fatal(err)
		}
	}
}
