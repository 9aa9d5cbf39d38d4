package clickhouse_test

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
)

// The hourly sums answer what the raw samples answer: before any refresh
// (every hour from raw_samples), after one (whole hours from util_hours),
// after a replay and samples written late into hours already summed (those
// hours from raw_samples again), and after the next refresh, which computes
// just those hours. The reference is the in-memory store given the same
// samples; the trace crosses a UTC month and has duplicates.
func TestHourlySumsAnswerLikeRawSamples(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	// No clock skew between the writes and the computations (one server):
	// an hour written in an earlier second than a computation began is in it.
	st := openConfig(t, clickhouse.Config{Addr: addr, Database: testenv.UniqueName(t, "ch"), ClockSkew: -1})
	ctx := context.Background()
	samples := storetest.Samples(t, storetest.Trace(t, 200_000, 5))
	mem := ingest.NewMemStore()
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	storetest.WriteStreamed(t, w, samples, 30_000, 4096)
	require.NoError(t, mem.Write(ctx, ingest.NewCompactor(0).Build(samples)))

	first, last := samples[0].StartMS, samples[0].StartMS
	for _, s := range samples {
		first, last = min(first, s.StartMS), max(last, s.StartMS)
	}
	queries := []schemas.UtilRowQuery{
		{FromMS: first - 7200_000, ToMS: last + 7200_000},                                                    // by model: the occupancy
		{FromMS: first - 7200_000, ToMS: last + 7200_000, ByNode: true, AllModels: true, BucketMS: 3600_000}, // the heat map
		{FromMS: first + 1234_567, ToMS: last - 987_654, ByNode: true, BucketMS: 3600_000},                   // not whole hours
		{FromMS: first + 600_000, ToMS: last, ByNode: true, BucketMS: 2 * 3600_000},
		{FromMS: first + 60_000, ToMS: first + 120_000, ByNode: true, BucketMS: 3600_000}, // within an hour
		{FromMS: first, ToMS: last, ByNode: true, BucketMS: 900_000},                      // quarter hours: raw only
	}
	cat := storetest.ReadsCatalog(t)
	heat := reads.HeatmapQuery{From: time.UnixMilli(hourStart(first) - 3600_000), To: time.UnixMilli(hourStart(last) + 7200_000), Rows: 3}
	same := func(stage string) {
		t.Helper()
		for i, q := range queries {
			require.Equal(t, utilRows(t, mem, q), utilRows(t, st, q), "%s: query %d %+v", stage, i, q)
		}
		// The heat map in groups of nodes, summed in the database here and
		// in Go from the reference's rows.
		want, err := reads.UtilHeatmap(ctx, mem, cat, heat)
		require.NoError(t, err)
		got, err := reads.UtilHeatmap(ctx, st, cat, heat)
		require.NoError(t, err)
		require.Greater(t, want.GroupSize, 1)
		require.Equal(t, want, got, "%s: the heat map in groups", stage)
	}
	same("before any refresh")
	distinct := map[int64]bool{}
	for _, s := range samples {
		distinct[hourStart(s.StartMS)] = true
	}
	hours := len(distinct)
	state := func(fresh, stale int) {
		t.Helper()
		f, s, err := st.HourlySumsState(ctx, first-7200_000, last+7200_000)
		require.NoError(t, err)
		require.Equal(t, [2]int{fresh, stale}, [2]int{f, s}, "hours summed and hours read from raw samples")
	}
	state(0, hours)

	nextSecond()
	res, err := st.RefreshHourlySums(ctx)
	require.NoError(t, err)
	require.Equal(t, hours, res.Hours, "every hour of the trace is summed")
	require.Greater(t, res.Rows, res.Hours)
	state(hours, 0)
	same("after a refresh")
	again, err := st.RefreshHourlySums(ctx)
	require.NoError(t, err)
	require.Zero(t, again.Hours, "nothing was written since: nothing to compute")

	// A replay of a piece, and new samples of an instance no one saw, late,
	// into two summed hours (a spool delivered after an outage).
	late := make([]schemas.Sample, 0, 40)
	for i := range 40 {
		s := samples[100]
		s.InstanceID, s.Node, s.StartMS, s.Project, s.Util, s.UtilKnown = "late-mig", "late-node", first+int64(i)*90_000, "", 0.5, true
		late = append(late, s)
	}
	replay := slices.Clone(samples[5000:9000])
	storetest.WriteStreamed(t, w, replay, 30_000, 4096)
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(late)), "a batch written whole, not streamed")
	require.NoError(t, mem.Write(ctx, ingest.NewCompactor(0).Build(late)))
	replay = append(replay, late...)
	touched := map[int64]bool{}
	for _, s := range replay {
		touched[hourStart(s.StartMS)] = true
	}
	state(hours-len(touched), len(touched))
	same("after a replay and late samples")
	nextSecond()
	res, err = st.RefreshHourlySums(ctx)
	require.NoError(t, err)
	require.Equal(t, len(touched), res.Hours, "only the hours written to are computed again")
	state(hours, 0)
	same("after the second refresh")
}

// nextSecond waits for the wall clock's next second: the servers' clocks
// have a resolution of one second.
func nextSecond() {
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
}

func hourStart(ms int64) int64 { return ms - ms%3600_000 }

// utilRows are a store's rows for q, sorted, util × ms rounded to 1e-6 ms
// (the stores sum floats in different orders).
func utilRows(t *testing.T, src interface {
	UtilRows(context.Context, schemas.UtilRowQuery, func(schemas.UtilRow) error) error
}, q schemas.UtilRowQuery) []schemas.UtilRow {
	t.Helper()
	var out []schemas.UtilRow
	require.NoError(t, src.UtilRows(context.Background(), q, func(r schemas.UtilRow) error {
		r.UtilMS = float64(int64(r.UtilMS*1e6+0.5)) / 1e6
		out = append(out, r)
		return nil
	}))
	slices.SortFunc(out, func(a, b schemas.UtilRow) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.GPUModel, b.GPUModel), cmp.Compare(a.BucketMS, b.BucketMS))
	})
	return out
}

var _ ingest.HourlySums = (*clickhouse.Store)(nil)

// A store written before the hourly sums (schema version 19, no marks) gets
// its hours marked by migration 22: each is read from the raw samples until
// the first refresh computes it.
func TestHourlySumsOfAnUpgradedStore(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	st := openConfig(t, clickhouse.Config{Addr: addr, Database: testenv.UniqueName(t, "ch"), ClockSkew: -1})
	ctx := context.Background()
	samples := storetest.Samples(t, storetest.Trace(t, 30_000, 9))
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(samples)))
	db := "`" + st.Database() + "`"
	require.NoError(t, st.Conn().Exec(ctx, "TRUNCATE TABLE "+db+".sample_hours"))
	require.NoError(t, st.Conn().Exec(ctx, "ALTER TABLE "+db+".schema_migrations DELETE WHERE version > 19"))
	require.Eventually(t, func() bool {
		var n uint64
		return st.Conn().QueryRow(ctx, "SELECT count() FROM "+db+".schema_migrations WHERE version > 19").Scan(&n) == nil && n == 0
	}, 10*time.Second, 50*time.Millisecond)
	first, last := samples[0].StartMS, samples[0].StartMS
	for _, s := range samples {
		first, last = min(first, s.StartMS), max(last, s.StartMS)
	}
	f, s, err := st.HourlySumsState(ctx, first, last+1)
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 0}, [2]int{f, s}, "no hour is marked before the migration")

	res, err := st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{20, 21, 22}, res.Applied)
	distinct := map[int64]bool{}
	for _, s := range samples {
		distinct[hourStart(s.StartMS)] = true
	}
	hours := len(distinct)
	f, s, err = st.HourlySumsState(ctx, first, last+1)
	require.NoError(t, err)
	require.Equal(t, [2]int{0, hours}, [2]int{f, s}, "every hour with samples is marked")
	nextSecond()
	r, err := st.RefreshHourlySums(ctx)
	require.NoError(t, err)
	require.Equal(t, hours, r.Hours)
	mem := ingest.NewMemStore()
	require.NoError(t, mem.Write(ctx, ingest.NewCompactor(0).Build(samples)))
	q := schemas.UtilRowQuery{FromMS: hourStart(first), ToMS: hourStart(last) + 3600_000, ByNode: true, BucketMS: 3600_000}
	require.Equal(t, utilRows(t, mem, q), utilRows(t, st, q))
}

// A refresh right after a back-fill (hours written within the clock skew,
// 5 s by default) waits the skew out: every hour is fresh after it, none
// left to the raw samples until a next refresh that a back-fill never runs.
func TestHourlySumsRightAfterABackfill(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	ctx := context.Background()
	samples := storetest.Samples(t, storetest.Trace(t, 20_000, 3))
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(samples)))
	distinct := map[int64]bool{}
	for _, s := range samples {
		distinct[hourStart(s.StartMS)] = true
	}
	res, err := st.RefreshHourlySums(ctx)
	require.NoError(t, err)
	require.Equal(t, len(distinct), res.Hours)
	require.GreaterOrEqual(t, res.Took, 5*time.Second, "it waited the clock skew out")
	fresh, stale, err := st.HourlySumsState(ctx, 0, time.Now().UnixMilli())
	require.NoError(t, err)
	require.Equal(t, [2]int{len(distinct), 0}, [2]int{fresh, stale})
}
