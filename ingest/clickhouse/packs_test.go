package clickhouse_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
)

func TestClickHousePackedUsage(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	storetest.RequirePackedUsage(t, st, 300)
}

// A database written before run packs gets them from its runs when
// migrated (0015, in Go): usage from the packs answers as from the runs, and
// batches written after add packs of their own.
func TestRunPacksBackfill(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	ctx := context.Background()
	db := "`" + st.Database() + "`"
	log := slog.New(slog.DiscardHandler)
	samples := storetest.Samples(t, storetest.Trace(t, 12_000, 37))
	old, later := samples[:len(samples)*2/3], samples[len(samples)*2/3:]
	mem := ingest.NewMemStore()
	for _, s := range []ingest.Store{st, mem} {
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: s, Logger: log})
		require.NoError(t, err)
		storetest.WriteStreamed(t, w, old, 1_500, 500)
	}
	// Back to the schema before run packs: the table gone, 0014 and 0015
	// not recorded.
	require.NoError(t, st.Conn().Exec(ctx, "DROP TABLE "+db+".run_packs"))
	require.NoError(t, st.Conn().Exec(ctx, "ALTER TABLE "+db+".schema_migrations DELETE WHERE version IN (14, 15)"))
	require.Eventually(t, func() bool {
		var n uint64
		require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM "+db+".schema_migrations WHERE version IN (14, 15)").Scan(&n))
		return n == 0
	}, 10*time.Second, 50*time.Millisecond)
	res, err := st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{14, 15}, res.Applied)
	count := func() uint64 {
		var n uint64
		require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM "+db+".run_packs").Scan(&n))
		return n
	}
	require.Positive(t, count(), "the migration filled run_packs")
	storetest.RequirePacksAsRuns(t, st, mem, old, 5)

	n := count()
	for _, s := range []ingest.Store{st, mem} {
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: s, Logger: log})
		require.NoError(t, err)
		storetest.WriteStreamed(t, w, later, 1_000, 500)
	}
	require.Greater(t, count(), n, "batches after the migration write packs")
	storetest.RequirePacksAsRuns(t, st, mem, samples, 6)
}
