package clickhouse_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
)

// Without Migrate (readers, and writers not asked to migrate), Open creates
// nothing and fails clearly when the database, its schema or its version is
// not this build's.
func TestOpenWithoutMigrateChecksTheSchema(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	ctx := context.Background()
	db := testenv.UniqueName(t, "ch")
	cfg := clickhouse.Config{Addr: addr, Database: db, Logger: slog.New(slog.DiscardHandler)}
	_, err := clickhouse.Open(ctx, cfg)
	require.ErrorContains(t, err, "no store at clickhouse://"+addr+"/"+db+": the database does not exist")
	require.ErrorContains(t, err, "cardhour migrate --store clickhouse://"+addr+"/"+db)
	require.True(t, ingest.IsPermanent(err))

	st := open(t, addr, db) // migrated; dropped at the end
	var n uint64
	require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = '"+db+"'").Scan(&n))
	require.EqualValues(t, 1, n)
	ro, err := clickhouse.Open(ctx, cfg)
	require.NoError(t, err, "a migrated database opens without Migrate")
	require.NoError(t, ro.Close())

	latest, err := clickhouse.SchemaVersion()
	require.NoError(t, err)
	// Record versions 1..top only.
	record := func(top int) {
		require.NoError(t, st.Conn().Exec(ctx, "TRUNCATE TABLE `"+db+"`.schema_migrations"))
		b, err := st.Conn().PrepareBatch(ctx, "INSERT INTO `"+db+"`.schema_migrations (version, name, applied_at)")
		require.NoError(t, err)
		for v := 1; v <= top; v++ {
			require.NoError(t, b.Append(uint32(v), "m", time.Now().UTC()))
		}
		require.NoError(t, b.Send())
	}
	record(99)
	_, err = clickhouse.Open(ctx, cfg)
	require.ErrorContains(t, err, "has schema version 99, newer than this build of cardhour knows")
	require.True(t, ingest.IsPermanent(err))
	_, err = st.Migrate(ctx)
	require.ErrorContains(t, err, "newer than this build of cardhour knows", "migrate does not touch a newer schema")
	require.True(t, ingest.IsPermanent(err))

	record(4)
	_, err = clickhouse.Open(ctx, cfg)
	require.ErrorContains(t, err, "has schema version 4, this build needs "+itoa(latest))
	require.True(t, ingest.IsPermanent(err))

	require.NoError(t, st.Conn().Exec(ctx, "DROP TABLE `"+db+"`.schema_migrations"))
	_, err = clickhouse.Open(ctx, cfg)
	require.ErrorContains(t, err, "holds no cardhour schema (no schema_migrations table)")
}

// A write to a table that is gone is permanent (retrying cannot create it); a
// server that is away is not.
func TestWriteErrorsAreClassified(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	ctx := context.Background()
	st := open(t, addr, testenv.UniqueName(t, "ch"))
	samples := storetest.Samples(t, storetest.Trace(t, 200, 1))
	require.NoError(t, st.Conn().Exec(ctx, "DROP TABLE `"+st.Database()+"`.occupancy"))
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler), RetryMin: time.Millisecond, RetryMax: time.Millisecond})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // only reached if it were retried
	defer cancel()
	err = w.Write(wctx, samples)
	require.Error(t, err)
	require.True(t, ingest.IsPermanent(err))
	require.ErrorContains(t, err, "failed permanently")

	proxy := storetest.NewProxy(t, addr)
	other := openConfig(t, clickhouse.Config{Addr: proxy.Addr(), Database: testenv.UniqueName(t, "ch"), DialTimeout: time.Second})
	proxy.Pause()
	err = other.Write(ctx, &ingest.Batch{Samples: samples})
	require.Error(t, err)
	require.False(t, ingest.IsPermanent(err), "a server that went away is transient: %v", err)
	proxy.Resume()
}

// Rejects are counted once per source, however often they are written, and
// summed up per time range.
func TestRejects(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	ctx := context.Background()
	st := open(t, addr, testenv.UniqueName(t, "ch"))
	nov := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC).UnixMilli()
	rs := []ingest.Reject{
		{TimeMS: nov + 3000, Source: "file:/a:3", Reason: "invalid_field", Error: "interval_s: must be > 0"},
		{TimeMS: nov + 1000, Source: "kafka:t/0/7#2", Reason: "malformed_json", Error: "bad"},
		{TimeMS: nov + 9000, Source: "file:/a:9", Reason: "invalid_field", Error: "later"},
	}
	require.NoError(t, st.WriteRejects(ctx, rs))
	require.NoError(t, st.WriteRejects(ctx, rs[:2])) // a replay
	sum, err := st.RejectSummary(ctx, nov, nov+5000, 1)
	require.NoError(t, err)
	require.EqualValues(t, 2, sum.Count)
	require.Equal(t, []ingest.Reject{rs[1]}, sum.First)
	sum, err = st.RejectSummary(ctx, nov+5000, nov+10000, 5)
	require.NoError(t, err)
	require.EqualValues(t, 1, sum.Count)
	require.Equal(t, "later", sum.First[0].Error)
	sum, err = st.RejectSummary(ctx, 0, nov, 5)
	require.NoError(t, err)
	require.Zero(t, sum.Count)
}

func itoa(v int) string { return strconv.Itoa(v) }
