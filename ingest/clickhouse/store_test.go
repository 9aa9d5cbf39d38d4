package clickhouse_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
	chschema "github.com/cardhour/cardhour/schemas/clickhouse"
)

func open(t testing.TB, addr, db string) *clickhouse.Store {
	t.Helper()
	return openConfig(t, clickhouse.Config{Addr: addr, Database: db, RawRetentionDays: 400})
}

// openConfig opens cfg's database, migrated, and drops it when the test ends.
func openConfig(t testing.TB, cfg clickhouse.Config) *clickhouse.Store {
	t.Helper()
	cfg.Logger, cfg.Migrate = slog.New(slog.DiscardHandler), true
	st, err := clickhouse.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = st.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS `"+cfg.Database+"`")
		_ = st.Close()
	})
	return st
}

func TestMigrateIsIdempotent(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	db := testenv.UniqueName(t, "ch")
	st := open(t, addr, db)
	latest, err := clickhouse.SchemaVersion()
	require.NoError(t, err)
	require.Equal(t, 22, latest)
	res, err := st.Migrate(context.Background())
	require.NoError(t, err)
	require.Empty(t, res.Applied, "a second migrate applies nothing")
	require.Equal(t, latest, res.Current)
	var n uint64
	require.NoError(t, st.Conn().QueryRow(context.Background(), "SELECT count() FROM `"+db+"`.schema_migrations").Scan(&n))
	require.EqualValues(t, latest, n)
	// A third process opening with Migrate changes nothing either.
	open(t, addr, db)
	require.NoError(t, st.Conn().QueryRow(context.Background(), "SELECT count() FROM `"+db+"`.schema_migrations").Scan(&n))
	require.EqualValues(t, latest, n)
}

func TestBillFromClickHouseEqualsFile(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	st := open(t, addr, testenv.UniqueName(t, "ch"))
	data := storetest.Trace(t, 80_000, 11)
	cats := storetest.Catalogs(t)

	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx := context.Background()
	samples := storetest.Samples(t, data)
	for i := 0; i < len(samples); i += 7000 {
		require.NoError(t, w.Write(ctx, samples[i:min(i+7000, len(samples))]))
	}
	storetest.RequireSameInvoices(t, data, cats, st)

	// A replay of part of the stream through a fresh compactor (a restart)
	// changes nothing.
	w2, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, w2.Write(ctx, samples[len(samples)/3:len(samples)/2]))
	storetest.RequireSameInvoices(t, data, cats, st)

	var raw uint64
	require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM (SELECT DISTINCT instance_id, start_ms, project, user FROM `"+
		st.Database()+"`.raw_samples)").Scan(&raw))
	require.Greater(t, raw, uint64(len(samples)*9/10), "every distinct sample is stored raw")
	require.Equal(t, storetest.LatestOf(samples), storetest.Latest(t, st, 0))
}

// A database written before schema version 4 keeps its idle time in idle_runs
// (one exact util per run); migration 5 carries it over to idle_spans.
func TestOldIdleRunsMigrate(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	st := open(t, addr, testenv.UniqueName(t, "ch"))
	ctx := context.Background()
	data := storetest.Trace(t, 20_000, 19)
	cats := storetest.Catalogs(t)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	samples := storetest.Samples(t, data)
	require.NoError(t, w.Write(ctx, samples))

	// Back to version 3: idle time only in the old table, no migration recorded
	// after it.
	db := "`" + st.Database() + "`"
	require.NoError(t, st.Conn().Exec(ctx, "TRUNCATE TABLE "+db+".idle_spans"))
	b, err := st.Conn().PrepareBatch(ctx, "INSERT INTO "+db+".idle_runs (start, project, user, instance_id, gpu_model, profile, util_known, util, start_ms, end_ms)")
	require.NoError(t, err)
	for i := range samples {
		s := &samples[i]
		if !ingest.IdleCandidate(s) {
			continue
		}
		known := uint8(0)
		if s.UtilKnown {
			known = 1
		}
		// The old compactor cut runs at UTC month boundaries too.
		for start := s.StartMS; start < s.EndMS(); {
			end := min(s.EndMS(), ingest.MonthStartMS(ingest.MonthStartMS(start)+32*86_400_000))
			require.NoError(t, b.Append(time.UnixMilli(ingest.MonthStartMS(start)).UTC(), s.Project, s.User, s.InstanceID, s.GPUModel, s.Profile,
				known, s.Util, start, end))
			start = end
		}
	}
	require.NoError(t, b.Send())
	require.NoError(t, st.Conn().Exec(ctx, "DROP TABLE "+db+".schema_migrations"))
	require.NoError(t, st.Conn().Exec(ctx, "CREATE TABLE "+db+".schema_migrations (version UInt32, name String, applied_at DateTime('UTC')) ENGINE = MergeTree ORDER BY version"))
	b, err = st.Conn().PrepareBatch(ctx, "INSERT INTO "+db+".schema_migrations (version, name, applied_at)")
	require.NoError(t, err)
	for v, name := range []string{"raw_samples", "occupancy", "idle_runs"} {
		require.NoError(t, b.Append(uint32(v+1), name, time.Now().UTC()))
	}
	require.NoError(t, b.Send())

	res, err := st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{4, 5, 6, 7, 8, 9}, res.Applied[:6], "7 (ADD COLUMN) finds its column and is recorded without running; 8 finds its table, 9 fills it again")
	var n uint64
	require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM "+db+".idle_spans").Scan(&n))
	require.NotZero(t, n)
	storetest.RequireSameInvoices(t, data, cats, st)
}

// A database written before schema version 8 has no latest samples:
// migration 9 takes each instance's latest held raw sample of the last two
// days. Readers then see what ingest would have written.
func TestLatestSamplesBackfill(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	st := open(t, addr, testenv.UniqueName(t, "ch"))
	ctx := context.Background()
	db := "`" + st.Database() + "`"
	now := time.Now().Truncate(time.Minute)
	held := func(inst, user string, start time.Time, n int, util float64, known bool) []schemas.Sample {
		out := make([]schemas.Sample, n)
		for i := range out {
			out[i] = schemas.Sample{StartMS: start.Add(time.Duration(i) * time.Minute).UnixMilli(), IntervalMS: 60_000, Node: "n-" + inst,
				GPUUUID: "GPU-" + inst, GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: inst, Profile: "1g.10gb", Project: "p", User: user,
				Util: util, UtilKnown: known, Processes: 1, MemTotal: 1 << 30, HolderRef: "slurm:" + user}
		}
		return out
	}
	a := held("a", "u1", now.Add(-2*time.Hour), 30, 0.5, true)
	a = append(a, held("a", "u2", now.Add(-90*time.Minute), 20, 0, false)...) // a second holder, util unknown
	free := held("a", "", now.Add(-70*time.Minute), 10, 0, true)              // then nobody
	for i := range free {
		free[i].Project, free[i].User, free[i].HolderRef = "", "", ""
	}
	b := held("b", "u3", now.Add(-72*time.Hour), 10, 0.1, true) // held three days ago only
	c := held("c", "u4", now.Add(-47*time.Hour), 5, 0.2, true)
	for _, ss := range [][]schemas.Sample{a, free, b, c, a[10:40]} { // raw rows only, as before version 8; a replay
		require.NoError(t, st.Write(ctx, &ingest.Batch{Samples: ss}))
	}
	require.Empty(t, storetest.Latest(t, st, 0), "raw samples alone write no latest samples")

	require.NoError(t, st.Conn().Exec(ctx, "TRUNCATE TABLE "+db+".schema_migrations"))
	rec, err := st.Conn().PrepareBatch(ctx, "INSERT INTO "+db+".schema_migrations (version, name, applied_at)")
	require.NoError(t, err)
	for v := 1; v <= 8; v++ {
		require.NoError(t, rec.Append(uint32(v), "m", time.Now().UTC()))
	}
	require.NoError(t, rec.Send())
	res, err := st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, 9, res.Applied[0], "9 and the migrations after it")
	require.Equal(t, map[string]schemas.Sample{
		"a": storetest.LatestFields(a[len(a)-1]),
		"c": storetest.LatestFields(c[len(c)-1]),
	}, storetest.Latest(t, st, 0))
	// Applied again (two processes migrating at once) it changes nothing.
	require.NoError(t, st.Conn().Exec(ctx, "ALTER TABLE "+db+".schema_migrations DELETE WHERE version = 9"))
	require.Eventually(t, func() bool {
		var n uint64
		require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM "+db+".schema_migrations WHERE version = 9").Scan(&n))
		return n == 0
	}, 10*time.Second, 50*time.Millisecond)
	res, err = st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{9}, res.Applied)
	require.Len(t, storetest.Latest(t, st, 0), 2)
	require.Equal(t, storetest.LatestFields(c[len(c)-1]), storetest.Latest(t, st, c[len(c)-1].StartMS)["c"])
}

// A batch streamed in pieces within one insert bills like the file; an aborted
// streamed insert leaves the store usable and its batch, written again, stored.
func TestStreamedRawInsert(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	st := open(t, addr, testenv.UniqueName(t, "ch"))
	data := storetest.Trace(t, 40_000, 13)
	cats := storetest.Catalogs(t)
	samples := storetest.Samples(t, data)
	ctx := context.Background()

	// An insert abandoned half-way (a worker stopping mid-batch).
	rs, err := st.BeginRaw(ctx)
	require.NoError(t, err)
	require.NoError(t, rs.Append(samples[:3000]))
	rs.Abort()

	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	storetest.WriteStreamed(t, w, samples, 15_000, 4096)
	storetest.RequireSameInvoices(t, data, cats, st)
	var raw uint64
	require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM (SELECT DISTINCT instance_id, start_ms, project, user FROM `"+
		st.Database()+"`.raw_samples)").Scan(&raw))
	require.Greater(t, raw, uint64(len(samples)*9/10), "every distinct sample is stored raw")
	require.Equal(t, storetest.LatestOf(samples), storetest.Latest(t, st, 0))
}

// The compression setting reaches the wire: the same samples take several
// times more bytes to the server uncompressed than with LZ4 or ZSTD, and are
// stored the same.
func TestCompressionSetting(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	samples := storetest.Samples(t, storetest.Trace(t, 20_000, 3))
	sent := map[string]int64{}
	for _, method := range []string{"lz4", "zstd", "none"} {
		proxy := storetest.NewProxy(t, addr)
		db := testenv.UniqueName(t, "ch_"+method)
		st := openConfig(t, clickhouse.Config{Addr: proxy.Addr(), Database: db, Compression: method})
		before := proxy.Sent()
		require.NoError(t, st.Write(context.Background(), &ingest.Batch{Samples: samples}))
		sent[method] = proxy.Sent() - before
		var n uint64
		require.NoError(t, st.Conn().QueryRow(context.Background(), "SELECT count() FROM `"+db+"`.raw_samples").Scan(&n))
		require.EqualValues(t, len(samples), n, method)
	}
	t.Logf("bytes sent for %d samples: %v", len(samples), sent)
	require.Greater(t, sent["none"], 3*sent["lz4"], "compress=none sends the blocks uncompressed")
	require.Greater(t, sent["none"], 3*sent["zstd"])
}

// A database written before the data-quality rollup (node_minutes,
// unheld_busy) gets it from its raw samples when migrated: the check answers
// as the raw samples do, and batches written after the migration add to it.
func TestDataQualityRollupBackfill(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	ctx := context.Background()
	db := "`" + st.Database() + "`"
	old, later := storetest.QualityTraceBefore(t, time.Date(2026, 11, 1, 0, 30, 0, 0, time.UTC))
	require.NoError(t, st.Write(ctx, &ingest.Batch{Samples: old}))

	// Back to the schema before the rollup: its tables gone, its migrations
	// not recorded.
	ms, err := chschema.Migrations()
	require.NoError(t, err)
	var rollup []int
	for _, m := range ms {
		if strings.HasPrefix(m.Name, "node_minutes") || strings.HasPrefix(m.Name, "unheld_busy") {
			rollup = append(rollup, m.Version)
		}
	}
	require.Len(t, rollup, 4)
	require.NoError(t, st.Conn().Exec(ctx, "DROP TABLE "+db+".node_minutes"))
	require.NoError(t, st.Conn().Exec(ctx, "DROP TABLE "+db+".unheld_busy"))
	in := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(rollup)), ", "), "[]")
	require.NoError(t, st.Conn().Exec(ctx, "ALTER TABLE "+db+".schema_migrations DELETE WHERE version IN ("+in+")"))
	require.Eventually(t, func() bool {
		var n uint64
		require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM "+db+".schema_migrations WHERE version IN ("+in+")").Scan(&n))
		return n == 0
	}, 10*time.Second, 50*time.Millisecond)
	res, err := st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, rollup, res.Applied)

	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	storetest.WriteStreamed(t, w, later, 50, 13)
	storetest.RequireDataQualityOf(t, st, append(old, later...))
}

// A database of schema version 15, before raw and latest samples kept the
// share fields: migrations 16 and 17 add them (on 18.16 as on current
// releases), rows written before read as no share and bill as before, and
// samples of shares written after come back with their fields. Applied
// again, the two find their columns and are recorded without running.
func TestShareColumnsMigrate(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	st := open(t, addr, testenv.UniqueName(t, "ch"))
	ctx := context.Background()
	db := "`" + st.Database() + "`"
	data := storetest.Trace(t, 10_000, 23)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, storetest.Samples(t, data)))

	for _, table := range []string{"raw_samples", "latest_samples"} {
		require.NoError(t, st.Conn().Exec(ctx, "ALTER TABLE "+db+"."+table+" DROP COLUMN share_kind, DROP COLUMN share_mem, DROP COLUMN share_cores"))
	}
	setVersions := func(last int) {
		t.Helper()
		require.NoError(t, st.Conn().Exec(ctx, "TRUNCATE TABLE "+db+".schema_migrations"))
		rec, err := st.Conn().PrepareBatch(ctx, "INSERT INTO "+db+".schema_migrations (version, name, applied_at)")
		require.NoError(t, err)
		for v := 1; v <= last; v++ {
			require.NoError(t, rec.Append(uint32(v), "m", time.Now().UTC()))
		}
		require.NoError(t, rec.Send())
	}
	setVersions(15)
	res, err := st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{16, 17, 18, 19, 20, 21, 22}, res.Applied)
	var cols uint64
	require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND name IN ('share_kind', 'share_mem', 'share_cores')",
		st.Database()).Scan(&cols))
	require.EqualValues(t, 6, cols, "three columns in raw_samples and in latest_samples")
	storetest.RequireSharesAfterMigration(t, data, st)

	setVersions(15)
	res, err = st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{16, 17, 18, 19, 20, 21, 22}, res.Applied, "recorded again without running")
	require.NoError(t, st.CheckSchema(ctx))
}
