package clickhouse_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/ingest/ingesttest"
	"github.com/cardhour/cardhour/internal/testenv"
)

func open(t *testing.T, addr, db string) *clickhouse.Store {
	t.Helper()
	st, err := clickhouse.Open(context.Background(), clickhouse.Config{Addr: addr, Database: db,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Migrate: true, RawRetentionDays: 400})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = st.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS `"+db+"`")
		_ = st.Close()
	})
	return st
}

func TestMigrateIsIdempotent(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	db := testenv.UniqueName(t, "ch")
	st := open(t, addr, db)
	res, err := st.Migrate(context.Background())
	require.NoError(t, err)
	require.Empty(t, res.Applied, "a second migrate applies nothing")
	require.Equal(t, 3, res.Current)
	var n uint64
	require.NoError(t, st.Conn().QueryRow(context.Background(), "SELECT count() FROM `"+db+"`.schema_migrations").Scan(&n))
	require.EqualValues(t, 3, n)
	// A third process opening with Migrate changes nothing either.
	open(t, addr, db)
	require.NoError(t, st.Conn().QueryRow(context.Background(), "SELECT count() FROM `"+db+"`.schema_migrations").Scan(&n))
	require.EqualValues(t, 3, n)
}

func TestBillFromClickHouseEqualsFile(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	st := open(t, addr, testenv.UniqueName(t, "ch"))
	data := ingesttest.Trace(t, 80_000, 11)
	cat, err := os.ReadFile("../../schemas/examples/catalog.yaml")
	require.NoError(t, err)
	cats := ingesttest.Catalogs(t, cat)

	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx := context.Background()
	samples := ingesttest.Samples(t, data)
	for i := 0; i < len(samples); i += 7000 {
		require.NoError(t, w.Write(ctx, samples[i:min(i+7000, len(samples))]))
	}
	ingesttest.RequireSameInvoices(t, data, cats, st)

	// A replay of part of the stream through a fresh compactor (a restart)
	// changes nothing.
	w2, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	require.NoError(t, w2.Write(ctx, samples[len(samples)/3:len(samples)/2]))
	ingesttest.RequireSameInvoices(t, data, cats, st)

	var raw uint64
	require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM (SELECT DISTINCT instance_id, start_ms, project, user FROM `"+
		st.Database()+"`.raw_samples)").Scan(&raw))
	require.Greater(t, raw, uint64(len(samples)*9/10), "every distinct sample is stored raw")
}
