package storetest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// ReadsCatalog is the example catalog in America/New_York (its 2026-11-01
// has 25 hours) with ai101's idle threshold raised to 0.5.
func ReadsCatalog(t testing.TB) *schemas.Catalog {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	y, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "schemas", "examples", "catalog.yaml"))
	require.NoError(t, err)
	s := strings.NewReplacer("timezone: Asia/Shanghai", "timezone: America/New_York",
		"      warn_after: 10m", "      threshold: 0.5\n      warn_after: 10m").Replace(string(y))
	require.NotEqual(t, string(y), s)
	cat, err := schemas.ParseCatalog([]byte(s), "billing.yaml")
	require.NoError(t, err)
	return cat
}

func minutes(inst, node, model, profile, project, user string, from time.Time, n int, util func(i int) (float64, bool), procs int64) []schemas.Sample {
	out := make([]schemas.Sample, n)
	for i := range out {
		u, known := util(i)
		out[i] = schemas.Sample{StartMS: from.Add(time.Duration(i) * time.Minute).UnixMilli(), IntervalMS: 60_000, Node: node,
			GPUUUID: "GPU-" + node, GPUModel: model, InstanceID: inst, Profile: profile, Project: project, User: user,
			Util: u, UtilKnown: known, Processes: procs, MemTotal: 1 << 30}
	}
	return out
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// RequireReads checks reads.Usage, reads.HeldNow,
// reads.CheckDataQuality, the latest samples (reads.LatestRows) and the
// share fields of samples read back on st,
// an empty store, against hand-computed answers: every store must give the
// same (a replayed batch, a DST day, filters by node and SKU, per-project idle
// thresholds, unpriced and unattributed usage).
func RequireReads(t *testing.T, st ingest.Backend) {
	ctx := context.Background()
	cat := ReadsCatalog(t)
	const a100, h100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
	// alice: 2 h from 2026-11-01 23:00 EST (04:00Z), the first 30 min idle.
	alice := minutes("mig-a", "n1", a100, "1g.10gb", "nlp-lab", "alice", utc("2026-11-02T04:00:00Z"), 120,
		func(i int) (float64, bool) { return map[bool]float64{true: 0.01, false: 0.9}[i < 30], true }, 1)
	// bob: 30 min at util 0.3, idle under ai101's threshold 0.5 only.
	bob := minutes("mig-b", "n2", h100, "1g.10gb", "ai101", "bob", utc("2026-11-02T06:00:00Z"), 30,
		func(int) (float64, bool) { return 0.3, true }, 1)
	// carol: 10 min on a model no SKU prices.
	carol := minutes("x-1", "n3", "Unknown GPU", "full", "nlp-lab", "carol", utc("2026-11-02T06:20:00Z"), 10,
		func(int) (float64, bool) { return 0.9, true }, 1)
	// Busy with no holder (10 min), and one unheld idle sample on n1.
	orphan := minutes("mig-c", "n2", h100, "1g.10gb", "", "", utc("2026-11-02T06:00:00Z"), 10,
		func(int) (float64, bool) { return 0, false }, 2)
	quiet := minutes("mig-d", "n1", a100, "1g.10gb", "", "", utc("2026-11-02T06:20:00Z"), 1,
		func(int) (float64, bool) { return 0, true }, 0)
	// Holder references: alice's Slurm job (also in the replays below), bob's
	// pod, and carol's process, which changes half way (a new process of the
	// same holder: the occupancy goes on, the latest sample's reference counts).
	setRef := func(ss []schemas.Sample, ref string) {
		for i := range ss {
			ss[i].HolderRef = ref
		}
	}
	setRef(alice, "slurm:812345")
	setRef(bob, "k8s:ai101/nb-bob")
	setRef(carol[:5], "pid:4242")
	setRef(carol[5:], "pid:4343")
	// Written like the ingest worker does (samples with their runs); alice's
	// first hour is replayed by a restarted worker (a new compactor).
	ver, ok := st.(reads.DataVersioner)
	require.True(t, ok, "every usage store tells its data version (reads.DataVersioner)")
	version := func() string {
		t.Helper()
		v, err := ver.DataVersion(ctx)
		require.NoError(t, err)
		return v
	}
	empty := version()
	c := ingest.NewCompactor(0)
	for _, b := range [][]schemas.Sample{alice, bob, carol, orphan, quiet} {
		require.NoError(t, st.Write(ctx, c.Build(b)))
	}
	written := version()
	require.NotEqual(t, empty, written, "the data version must change when a batch is written")
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(alice[:60])))
	require.NotEqual(t, written, version(), "a replayed batch is a write: the version changes")
	// A replay of a middle part: runs with other starts overlapping the first.
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(alice[20:50])))
	require.NoError(t, st.WriteRejects(ctx, []ingest.Reject{
		{TimeMS: utc("2026-11-02T05:00:00Z").UnixMilli(), Source: "file:a:1", Reason: schemas.RejectInvalidField, Error: "bad util"},
		{TimeMS: utc("2026-11-02T05:01:00Z").UnixMilli(), Source: "file:a:2", Reason: schemas.RejectMalformedJSON, Error: "bad json"},
		{TimeMS: utc("2026-10-02T05:00:00Z").UnixMilli(), Source: "file:a:0", Reason: schemas.RejectMalformedJSON, Error: "october"},
	}))

	usage := func(q reads.UsageQuery) *reads.UsageReport {
		t.Helper()
		if q.From.IsZero() {
			q.From, q.To = utc("2026-11-01T00:00:00Z"), utc("2026-12-01T00:00:00Z")
		}
		r, err := reads.Usage(ctx, st, cat, q)
		require.NoError(t, err)
		return r
	}
	// Amounts as Usage rounds them (a zero too compares equal).
	dec := func(s string) billing.Money {
		return billing.Money{Decimal: billing.RoundMoney(decimal.RequireFromString(s))}
	}
	byProject := usage(reads.UsageQuery{GroupBy: []string{reads.ByProject}})
	require.Equal(t, []reads.UsageGroup{
		{Project: "ai101", HeldSeconds: 1800, IdleSeconds: 1800, BusySeconds: 0, Efficiency: "0.0", Cost: dec("1.50"), IdleCost: dec("1.50")},
		{Project: "nlp-lab", HeldSeconds: 7800, IdleSeconds: 1800, BusySeconds: 6000, Efficiency: "76.9", Cost: dec("3.60"), IdleCost: dec("0.90")},
	}, byProject.Rows)
	require.Equal(t, reads.UsageGroup{HeldSeconds: 9600, IdleSeconds: 3600, BusySeconds: 6000, Efficiency: "62.5", Cost: dec("5.10"), IdleCost: dec("2.40")}, byProject.Total)
	require.EqualValues(t, 600, byProject.UnpricedSeconds)

	byDay := usage(reads.UsageQuery{GroupBy: []string{reads.ByDay}})
	require.Equal(t, []reads.UsageGroup{
		{Day: "2026-11-01", HeldSeconds: 3600, IdleSeconds: 1800, BusySeconds: 1800, Efficiency: "50.0", Cost: dec("1.80"), IdleCost: dec("0.90")},
		{Day: "2026-11-02", HeldSeconds: 6000, IdleSeconds: 1800, BusySeconds: 4200, Efficiency: "70.0", Cost: dec("3.30"), IdleCost: dec("1.50")},
	}, byDay.Rows)

	// Months: the calendar month in the catalog's zone (alice's first hour
	// is 1 November in New York, 2 November in UTC), over a range that
	// crosses the end of daylight saving time, and a day within its month.
	monthRange := reads.UsageQuery{From: utc("2026-10-01T04:00:00Z"), To: utc("2026-12-01T05:00:00Z")}
	byMonth := usage(reads.UsageQuery{From: monthRange.From, To: monthRange.To, GroupBy: []string{reads.ByMonth, reads.ByProject}})
	require.Equal(t, []reads.UsageGroup{
		{Project: "ai101", Month: "2026-11", HeldSeconds: 1800, IdleSeconds: 1800, BusySeconds: 0, Efficiency: "0.0", Cost: dec("1.50"), IdleCost: dec("1.50")},
		{Project: "nlp-lab", Month: "2026-11", HeldSeconds: 7800, IdleSeconds: 1800, BusySeconds: 6000, Efficiency: "76.9", Cost: dec("3.60"), IdleCost: dec("0.90")},
	}, byMonth.Rows)
	require.Equal(t, byProject.Total, byMonth.Total)
	monthDay := usage(reads.UsageQuery{GroupBy: []string{reads.ByDay, reads.ByMonth}})
	require.Equal(t, []reads.UsageGroup{
		{Month: "2026-11", Day: "2026-11-01", HeldSeconds: 3600, IdleSeconds: 1800, BusySeconds: 1800, Efficiency: "50.0", Cost: dec("1.80"), IdleCost: dec("0.90")},
		{Month: "2026-11", Day: "2026-11-02", HeldSeconds: 6000, IdleSeconds: 1800, BusySeconds: 4200, Efficiency: "70.0", Cost: dec("3.30"), IdleCost: dec("1.50")},
	}, monthDay.Rows)
	// October alone has nothing; by node (raw samples), the same month.
	october := usage(reads.UsageQuery{From: monthRange.From, To: utc("2026-11-01T04:00:00Z"), GroupBy: []string{reads.ByMonth}})
	require.Empty(t, october.Rows)
	monthN1 := usage(reads.UsageQuery{From: monthRange.From, To: monthRange.To, GroupBy: []string{reads.ByMonth, reads.ByNode}, Nodes: []string{"n1"}})
	require.Equal(t, []reads.UsageGroup{
		{Node: "n1", Month: "2026-11", HeldSeconds: 7200, IdleSeconds: 1800, BusySeconds: 5400, Efficiency: "75.0", Cost: dec("3.60"), IdleCost: dec("0.90")},
	}, monthN1.Rows)

	// Days of a fixed UTC offset (EST from 2026-11-02 local midnight): one-day
	// buckets, by the runs and (filtered by node) by raw samples.
	est := usage(reads.UsageQuery{From: utc("2026-11-02T05:00:00Z"), To: utc("2026-11-10T05:00:00Z"), GroupBy: []string{reads.ByDay}})
	require.Equal(t, byDay.Rows[1:], est.Rows)
	estN1 := usage(reads.UsageQuery{From: utc("2026-11-02T05:00:00Z"), To: utc("2026-11-10T05:00:00Z"), GroupBy: []string{reads.ByDay}, Nodes: []string{"n1"}})
	require.Equal(t, []reads.UsageGroup{{Day: "2026-11-02", HeldSeconds: 3600, BusySeconds: 3600, Efficiency: "100.0", Cost: dec("1.80"), IdleCost: dec("0")}}, estN1.Rows)

	// A default threshold between class bounds (0.02): runs it cuts through
	// are decided from raw samples; alice's 0.01 is still idle, 0.9 is not.
	cut := *cat
	cut.Defaults.Idle.Threshold = 0.02
	cutDay, err := reads.Usage(ctx, st, &cut, reads.UsageQuery{From: utc("2026-11-01T00:00:00Z"), To: utc("2026-12-01T00:00:00Z"), GroupBy: []string{reads.ByDay}})
	require.NoError(t, err)
	require.Equal(t, byDay.Rows, cutDay.Rows)

	n1 := usage(reads.UsageQuery{GroupBy: []string{reads.ByHour, reads.ByNode, reads.BySKU, reads.ByUser}, Nodes: []string{"n1"}})
	require.Equal(t, []reads.UsageGroup{
		{User: "alice", SKU: "a100-80g-1g.10gb", Node: "n1", Hour: "2026-11-01T23:00:00-05:00", HeldSeconds: 3600, IdleSeconds: 1800, BusySeconds: 1800, Efficiency: "50.0", Cost: dec("1.80"), IdleCost: dec("0.90")},
		{User: "alice", SKU: "a100-80g-1g.10gb", Node: "n1", Hour: "2026-11-02T00:00:00-05:00", HeldSeconds: 3600, BusySeconds: 3600, Efficiency: "100.0", Cost: dec("1.80"), IdleCost: dec("0")},
	}, n1.Rows)

	h := usage(reads.UsageQuery{GroupBy: []string{reads.ByInstance}, SKUs: []string{"h100-1g.10gb"}, Users: []string{"bob", "alice"}})
	require.Equal(t, []reads.UsageGroup{{InstanceID: "mig-b", HeldSeconds: 1800, IdleSeconds: 1800, BusySeconds: 0, Efficiency: "0.0", Cost: dec("1.50"), IdleCost: dec("1.50")}}, h.Rows)
	none := usage(reads.UsageQuery{GroupBy: []string{reads.ByProject}, Projects: []string{"cv-lab"}})
	require.Empty(t, none.Rows)
	part := usage(reads.UsageQuery{From: utc("2026-11-02T04:30:00Z"), To: utc("2026-11-02T05:00:00Z")})
	require.Equal(t, []reads.UsageGroup{{HeldSeconds: 1800, BusySeconds: 1800, Efficiency: "100.0", Cost: dec("0.90"), IdleCost: dec("0")}}, part.Rows)

	_, err = reads.Usage(ctx, st, cat, reads.UsageQuery{From: utc("2026-11-02T00:00:00Z"), To: utc("2026-11-01T00:00:00Z")})
	require.ErrorContains(t, err, "is not before")
	_, err = reads.Usage(ctx, st, cat, reads.UsageQuery{From: utc("2026-11-01T00:00:00Z"), To: utc("2026-11-02T00:00:00Z"), GroupBy: []string{"week"}})
	require.ErrorContains(t, err, `group_by: unknown dimension "week"`)
	_, err = reads.Usage(ctx, st, cat, reads.UsageQuery{From: utc("2026-11-01T00:00:00Z"), To: utc("2026-11-02T00:00:00Z"), SKUs: []string{"nope"}})
	require.ErrorContains(t, err, `sku: "nope" is not in the catalog`)

	held, err := reads.HeldNow(ctx, st, cat, utc("2026-11-02T06:30:10Z"))
	require.NoError(t, err)
	require.Equal(t, []reads.Held{
		{InstanceID: "mig-b", Node: "n2", GPUUUID: "GPU-n2", Project: "ai101", User: "bob", SKU: "h100-1g.10gb", GPUModel: h100, Profile: "1g.10gb",
			Since: utc("2026-11-02T06:00:00Z"), LastSample: utc("2026-11-02T06:29:00Z"), Idle: true, IdleSince: utc("2026-11-02T06:00:00Z"),
			HolderRef: "k8s:ai101/nb-bob"},
		{InstanceID: "x-1", Node: "n3", GPUUUID: "GPU-n3", Project: "nlp-lab", User: "carol", GPUModel: "Unknown GPU", Profile: "full",
			Since: utc("2026-11-02T06:20:00Z"), LastSample: utc("2026-11-02T06:29:00Z"), HolderRef: "pid:4343"},
	}, held)
	// HeldNow answers the present from the compact rows; the raw samples
	// say the same.
	compact, err := reads.HeldNowFrom(ctx, st, cat, utc("2026-11-02T06:30:10Z"), reads.HeldLookback)
	require.NoError(t, err)
	require.Equal(t, held, compact)
	raw, err := reads.HeldNowWithin(ctx, st, cat, utc("2026-11-02T06:30:10Z"), reads.HeldLookback)
	require.NoError(t, err)
	require.Equal(t, held, raw)
	requireInstanceSamples(t, st)
	// A moment in the store's past (alice still held): from raw samples.
	held, err = reads.HeldNow(ctx, st, cat, utc("2026-11-02T05:45:00Z"))
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, "mig-a", held[0].InstanceID)
	require.Equal(t, utc("2026-11-02T04:00:00Z"), held[0].Since)
	require.False(t, held[0].Idle)
	require.Equal(t, "slurm:812345", held[0].HolderRef)
	// Held samples carry the reference as written, replayed ones too.
	refs := map[string]map[int64]string{}
	require.NoError(t, st.HeldSamples(ctx, utc("2026-11-02T04:00:00Z").UnixMilli(), utc("2026-11-02T07:00:00Z").UnixMilli(),
		func(s *schemas.Sample) error {
			if refs[s.InstanceID] == nil {
				refs[s.InstanceID] = map[int64]string{}
			}
			refs[s.InstanceID][s.StartMS] = s.HolderRef
			return nil
		}))
	require.Len(t, refs["mig-a"], 120)
	for _, ref := range refs["mig-a"] {
		require.Equal(t, "slurm:812345", ref)
	}
	require.Len(t, refs["x-1"], 10)
	require.Equal(t, "pid:4242", refs["x-1"][utc("2026-11-02T06:24:00Z").UnixMilli()])
	require.Equal(t, "pid:4343", refs["x-1"][utc("2026-11-02T06:25:00Z").UnixMilli()])

	p, err := billing.ParsePeriod("2026-11", cat.Location)
	require.NoError(t, err)
	dq, err := reads.CheckDataQuality(ctx, st, cat, p, utc("2026-11-02T06:35:00Z"))
	require.NoError(t, err)
	require.EqualValues(t, 2, dq.Rejected)
	require.Len(t, dq.FirstRejected, 2)
	require.Equal(t, "file:a:1", dq.FirstRejected[0].Source)
	require.Equal(t, []reads.SilentNode{
		{Node: "n1", From: utc("2026-11-02T06:00:00Z"), Until: utc("2026-11-02T06:20:00Z")},
		{Node: "n1", From: utc("2026-11-02T06:21:00Z")},
	}, dq.Silent)
	require.Equal(t, []schemas.UnattributedUsage{{Node: "n2", InstanceID: "mig-c", Seconds: 600}}, dq.Unattributed)

	// The data version stays while nothing is written (reads and rejects
	// change no usage report), and a cache over it answers like Usage until
	// a write, then with the new data.
	v := version()
	require.Equal(t, v, version())
	uc := reads.NewUsageCache(st, ver, reads.UsageCacheConfig{Poll: time.Nanosecond, MaxStale: -1})
	q := reads.UsageQuery{From: utc("2026-11-01T00:00:00Z"), To: utc("2026-12-01T00:00:00Z"), GroupBy: []string{reads.ByProject}}
	got, err := uc.Usage(ctx, cat, q)
	require.NoError(t, err)
	require.Equal(t, byProject, got)
	dave := minutes("mig-e", "n2", h100, "1g.10gb", "ai101", "dave", utc("2026-11-03T06:00:00Z"), 10,
		func(int) (float64, bool) { return 0.9, true }, 1)
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(dave)))
	require.NotEqual(t, v, version())
	got, err = uc.Usage(ctx, cat, q)
	require.NoError(t, err)
	require.Equal(t, []reads.UsageGroup{
		{Project: "ai101", HeldSeconds: 2400, IdleSeconds: 1800, BusySeconds: 600, Efficiency: "25.0", Cost: dec("2.00"), IdleCost: dec("1.50")},
		{Project: "nlp-lab", HeldSeconds: 7800, IdleSeconds: 1800, BusySeconds: 6000, Efficiency: "76.9", Cost: dec("3.60"), IdleCost: dec("0.90")},
	}, got.Rows)
	again, err := uc.Usage(ctx, cat, q)
	require.NoError(t, err)
	require.Same(t, got, again, "no write since: the same report")
	stats := uc.Stats()
	require.Equal(t, [2]uint64{2, 1}, [2]uint64{stats.Misses, stats.Hits}, "one computation per data version")

	requireLatest(t, st, map[string]schemas.Sample{"mig-a": alice[119], "mig-b": bob[29], "x-1": carol[9], "mig-e": dave[9]})
	requireShares(t, st)
}
