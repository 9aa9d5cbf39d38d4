package storetest

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// rawQuality answers reads.QualityRows by scanning raw samples, as every store
// did before the data-quality rollup (ingest.Activity): the reference the
// stores' answers must equal. Rejects come from the store under test.
type rawQuality struct {
	samples []schemas.Sample // unique identities, the last written kept
	rejects reads.QualityRows
}

func newRawQuality(written []schemas.Sample, rejects reads.QualityRows) *rawQuality {
	type id struct {
		inst, project, user string
		start               int64
	}
	last := map[id]int{}
	for i, s := range written {
		last[id{s.InstanceID, s.Project, s.User, s.StartMS}] = i
	}
	r := &rawQuality{rejects: rejects}
	for i, s := range written {
		if last[id{s.InstanceID, s.Project, s.User, s.StartMS}] == i {
			r.samples = append(r.samples, s)
		}
	}
	return r
}

func (r *rawQuality) Rejects(ctx context.Context, fromMS, toMS int64, first int) (int64, []schemas.RejectRow, error) {
	return r.rejects.Rejects(ctx, fromMS, toMS, first)
}

func (r *rawQuality) NodeBuckets(_ context.Context, fromMS, toMS, bucketMS int64, fn func(schemas.NodeBucketRow) error) error {
	for _, s := range r.samples {
		if s.StartMS >= fromMS && s.StartMS < toMS {
			if err := fn(schemas.NodeBucketRow{Node: s.Node, BucketMS: s.StartMS - s.StartMS%bucketMS}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *rawQuality) Unattributed(_ context.Context, fromMS, toMS int64, minUtil float64, fn func(schemas.UnattributedUsage) error) error {
	sums := map[[2]string]int64{}
	for _, s := range r.samples {
		if s.StartMS >= fromMS && s.StartMS < toMS && s.Project == "" && (s.Processes > 0 || (s.UtilKnown && s.Util >= minUtil)) {
			sums[[2]string{s.Node, s.InstanceID}] += s.IntervalMS
		}
	}
	for k, ms := range sums {
		if err := fn(schemas.UnattributedUsage{Node: k[0], InstanceID: k[1], Seconds: ms}); err != nil {
			return err
		}
	}
	return nil
}

// QualityTrace is the data-quality trace: samples of five nodes around the
// start of November 2026 in Asia/Shanghai (2026-10-31T16:00Z) and the UTC
// month's (2026-11-01T00:00Z), with silent gaps just under and over
// reads.SilentGap, samples in a minute that a check's now cuts, and unheld
// samples busy under some thresholds only.
func QualityTrace(t testing.TB) []schemas.Sample {
	t.Helper()
	const a100 = "NVIDIA A100-SXM4-80GB"
	var out []schemas.Sample
	add := func(node, inst, project string, start time.Time, n int, every time.Duration, util float64, known bool, procs int64) {
		for i := range n {
			user := ""
			if project != "" {
				user = "u-" + node
			}
			out = append(out, schemas.Sample{StartMS: start.Add(time.Duration(i) * every).UnixMilli(), IntervalMS: every.Milliseconds(),
				Node: node, GPUUUID: "GPU-" + node, GPUModel: a100, InstanceID: inst, Profile: "1g.10gb", Project: project, User: user,
				Util: util, UtilKnown: known, Processes: procs, MemTotal: 1 << 30})
		}
	}
	// q1: held, every 10 s across the Shanghai month start (15:50Z to
	// 16:30Z), then silent 9 min (not reported), then 10 min (reported).
	add("q1", "mig-q1", "nlp-lab", utc("2026-10-31T15:50:00Z"), 240, 10*time.Second, 0.9, true, 1)
	add("q1", "mig-q1", "nlp-lab", utc("2026-10-31T16:39:00Z"), 6, 10*time.Second, 0.9, true, 1)
	add("q1", "mig-q1", "nlp-lab", utc("2026-10-31T16:50:00Z"), 30, 10*time.Second, 0.9, true, 1)
	// q2: across the UTC month start, then stops (silent till the end).
	add("q2", "mig-q2", "cv-lab", utc("2026-10-31T23:55:00Z"), 60, 10*time.Second, 0.5, true, 1)
	// q3: one sample at 06:35:10, before a check at 06:35:30 in the same
	// minute; q4: one at 06:35:40, after it (the rollup's minute has both).
	add("q3", "mig-q3", "nlp-lab", utc("2026-11-02T06:20:00Z"), 1, time.Minute, 0.9, true, 1)
	add("q3", "mig-q3", "nlp-lab", utc("2026-11-02T06:35:10Z"), 1, 10*time.Second, 0.9, true, 1)
	add("q4", "mig-q4", "nlp-lab", utc("2026-11-02T06:20:00Z"), 1, time.Minute, 0.9, true, 1)
	add("q4", "mig-q4", "nlp-lab", utc("2026-11-02T06:35:40Z"), 1, 10*time.Second, 0.9, true, 1)
	// q5: unheld, busy by processes (util unknown), by util 0.3, by util
	// 0.01 only under a threshold at or below it, idle util 0 (busy only
	// under threshold 0), idle util unknown (never busy); one busy sample
	// starts before the Shanghai month and runs into it.
	add("q5", "mig-p", "", utc("2026-10-31T15:59:30Z"), 20, 10*time.Second, 0, false, 2)
	add("q5", "mig-u3", "", utc("2026-11-01T01:00:00Z"), 12, 10*time.Second, 0.3, true, 0)
	add("q5", "mig-u01", "", utc("2026-11-01T01:00:00Z"), 6, 10*time.Second, 0.01, true, 0)
	add("q5", "mig-u0", "", utc("2026-11-01T01:00:00Z"), 9, 10*time.Second, 0, true, 0)
	add("q5", "mig-un", "", utc("2026-11-01T01:00:00Z"), 3, 10*time.Second, 0, false, 0)
	// q5 also holds an instance (unheld samples of a held instance's
	// identity are another identity, kept both).
	add("q5", "mig-u3", "nlp-lab", utc("2026-11-01T01:00:00Z"), 12, 10*time.Second, 0.3, true, 1)
	return out
}

// QualityTraceBefore splits QualityTrace at cut: the samples starting before
// it (silent gaps, a node that stops, busy unheld usage) and the others.
func QualityTraceBefore(t testing.TB, cut time.Time) (before, after []schemas.Sample) {
	t.Helper()
	for _, s := range QualityTrace(t) {
		if s.StartMS < cut.UnixMilli() {
			before = append(before, s)
		} else {
			after = append(after, s)
		}
	}
	require.NotEmpty(t, before)
	require.NotEmpty(t, after)
	return before, after
}

// RequireDataQuality checks that reads.CheckDataQuality on st, an empty
// store, answers exactly what the same check over the raw samples answers
// (what every store answered before the rollup), for several catalogs'
// thresholds (0 included), periods and check times (a minute's middle, the
// period's end), after batches written whole and streamed in pieces
// (ingest.RawStreamer), replays through fresh compactors and writers, and
// direct reads of ranges and buckets that are not whole minutes.
func RequireDataQuality(t *testing.T, st ingest.Backend) {
	ctx := context.Background()
	samples := QualityTrace(t)
	half := len(samples) / 2
	c := ingest.NewCompactor(0)
	for i := 0; i < half; i += 50 {
		require.NoError(t, st.Write(ctx, c.Build(samples[i:min(i+50, half)])))
	}
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	WriteStreamed(t, w, samples[half:], 40, 7)
	// Replays: a restarted worker (a fresh compactor) writes a part again
	// whole, another streams a part again.
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(samples[half/3:half+half/3])))
	w2, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	WriteStreamed(t, w2, samples[half/2:], 64, 9)
	written := append(append(append(append([]schemas.Sample(nil), samples[:half]...), samples[half:]...), samples[half/3:half+half/3]...), samples[half/2:]...)
	ref := newRawQuality(written, st)
	RequireDataQualityOf(t, st, written)
	requireNodeLatest(t, st, ref)

	cat := Catalogs(t)["example"]
	// Hand-checked: November in Shanghai, checked at 06:35:30Z. q3's sample
	// at 06:35:10 counts (not silent); q4's at 06:35:40 has not started (q4
	// silent from 06:21); q1's 9-minute gap is not reported, its 10-minute
	// one is; q2 stopped at 00:05Z; q5 is unheld from 16:00Z (its samples
	// before are October's) to 16:03Z and from 01:00Z to 01:02Z.
	p := billing.NewPeriod(2026, time.November, cat.Location)
	dq, err := reads.CheckDataQuality(ctx, st, cat, p, utc("2026-11-02T06:35:30Z"))
	require.NoError(t, err)
	require.Equal(t, []reads.SilentNode{
		{Node: "q1", From: utc("2026-10-31T16:40:00Z"), Until: utc("2026-10-31T16:50:00Z")},
		{Node: "q1", From: utc("2026-10-31T16:55:00Z")},
		{Node: "q2", From: utc("2026-11-01T00:05:00Z")},
		{Node: "q3", From: utc("2026-11-02T06:21:00Z"), Until: utc("2026-11-02T06:35:00Z")},
		{Node: "q4", From: utc("2026-11-02T06:21:00Z")},
		{Node: "q5", From: utc("2026-10-31T16:03:00Z"), Until: utc("2026-11-01T01:00:00Z")},
		{Node: "q5", From: utc("2026-11-01T01:02:00Z")},
	}, dq.Silent)
	// Threshold 0.05: the processes (from 16:00Z: 17 × 10 s, the one
	// starting at 15:59:50 is October's) and util 0.3 (12 × 10 s).
	require.Equal(t, []schemas.UnattributedUsage{
		{Node: "q5", InstanceID: "mig-p", Seconds: 170},
		{Node: "q5", InstanceID: "mig-u3", Seconds: 120},
	}, dq.Unattributed)
	// Threshold 0: every unheld sample of known util too (util 0.01 and 0).
	zero := *cat
	zero.Defaults.Idle.Threshold = 0
	dq, err = reads.CheckDataQuality(ctx, st, &zero, p, utc("2026-11-02T06:35:30Z"))
	require.NoError(t, err)
	require.Equal(t, []schemas.UnattributedUsage{
		{Node: "q5", InstanceID: "mig-p", Seconds: 170},
		{Node: "q5", InstanceID: "mig-u0", Seconds: 90},
		{Node: "q5", InstanceID: "mig-u01", Seconds: 60},
		{Node: "q5", InstanceID: "mig-u3", Seconds: 120},
	}, dq.Unattributed)

	// Ranges that are not whole minutes and buckets of several minutes (or
	// not of whole minutes): the same buckets as the raw samples give.
	buckets := func(src reads.QualityRows, from, to, bucket int64) []schemas.NodeBucketRow {
		t.Helper()
		var out []schemas.NodeBucketRow
		require.NoError(t, src.NodeBuckets(ctx, from, to, bucket, func(r schemas.NodeBucketRow) error {
			out = append(out, r)
			return nil
		}))
		slices.SortFunc(out, func(a, b schemas.NodeBucketRow) int {
			return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.BucketMS, b.BucketMS))
		})
		return slices.Compact(out)
	}
	from, to := utc("2026-10-31T15:55:12Z").UnixMilli(), utc("2026-11-02T06:35:30Z").UnixMilli()
	for _, r := range [][3]int64{{from, to, 60_000}, {from, to, 120_000}, {from, to, 90_000}, {from, from + 30_000, 60_000},
		{from + 48_000, from + 50_000, 60_000}, {utc("2026-10-31T16:00:00Z").UnixMilli(), to, 600_000}} {
		want := buckets(ref, r[0], r[1], r[2])
		require.NotEmpty(t, want, "range %v", r)
		require.Equal(t, want, buckets(st, r[0], r[1], r[2]), "range %v", r)
	}
}

// requireNodeLatest checks that st tells each node's newest minute directly
// (reads.NodeLatestRows) as the raw samples do, over ranges that are whole
// minutes and ranges that are not, and NodesNow on the quality trace by
// hand: the nodes of the last day, silent or not, every node or only a
// project's.
func requireNodeLatest(t *testing.T, st ingest.Backend, ref *rawQuality) {
	t.Helper()
	ctx := context.Background()
	_, ok := st.(reads.NodeLatestRows)
	require.True(t, ok, "every usage store tells each node's newest minute (reads.NodeLatestRows)")
	from, to := utc("2026-10-31T15:55:12Z").UnixMilli(), utc("2026-11-02T06:35:30Z").UnixMilli()
	for _, r := range [][2]int64{{from, to}, {from, from + 30_000}, {from + 48_000, from + 50_000}, {utc("2026-10-31T16:00:00Z").UnixMilli(), to},
		{from, utc("2026-11-02T06:35:00Z").UnixMilli()}, {from, utc("2026-11-01T00:04:55Z").UnixMilli()}, {utc("2026-11-01T00:04:55Z").UnixMilli(), to}} {
		want, err := reads.NodeLatest(ctx, ref, r[0], r[1])
		require.NoError(t, err)
		require.NotEmpty(t, want, "range %v", r)
		got, err := reads.NodeLatest(ctx, st, r[0], r[1])
		require.NoError(t, err)
		require.Equal(t, want, got, "range %v", r)
	}
	// At 00:10Z on 1 November: q2 sent its last sample at 00:04:50 (not
	// silent yet), q1 and q5 stopped hours ago, q3 and q4 start later.
	now := utc("2026-11-01T00:10:00Z")
	nodes, err := reads.NodesNow(ctx, st, st, nil, now, reads.NodeQuery{})
	require.NoError(t, err)
	require.Equal(t, []reads.NodeState{
		{Node: "q1", LastSample: utc("2026-10-31T16:54:00Z"), Silent: true},
		{Node: "q2", LastSample: utc("2026-11-01T00:04:00Z")},
		{Node: "q5", LastSample: utc("2026-10-31T16:02:00Z"), Silent: true},
	}, nodes)
	// nlp-lab's latest held samples: q1's (q3's, q4's and q5's are later).
	nodes, err = reads.NodesNow(ctx, st, st, nil, now, reads.NodeQuery{Project: "nlp-lab"})
	require.NoError(t, err)
	require.Equal(t, []reads.NodeState{{Node: "q1", LastSample: utc("2026-10-31T16:54:00Z"), Silent: true}}, nodes)
}

// RequireDataQualityOf checks that reads.CheckDataQuality on st answers what
// the same check over written (every sample written to st, in order) answers,
// for the example catalog with several idle thresholds (0 included), both
// months of the quality trace and check times inside a minute, on one and
// after the period's end.
func RequireDataQualityOf(t *testing.T, st ingest.Backend, written []schemas.Sample) {
	t.Helper()
	ctx := context.Background()
	ref := newRawQuality(written, st)
	silent, unattributed := 0, 0
	cat := Catalogs(t)["example"]
	for _, thr := range []float64{0.05, 0.3, 0.01, 0.005, 0} {
		c := *cat
		c.Defaults.Idle.Threshold = thr
		for _, period := range []string{"2026-10", "2026-11"} {
			p, err := billing.ParsePeriod(period, c.Location)
			require.NoError(t, err)
			for _, now := range []time.Time{utc("2026-11-02T06:35:30Z"), utc("2026-11-02T06:35:00Z"), utc("2026-11-01T00:00:30Z"), p.End.Add(time.Hour)} {
				want, err := reads.CheckDataQuality(ctx, ref, &c, p, now)
				require.NoError(t, err)
				got, err := reads.CheckDataQuality(ctx, st, &c, p, now)
				require.NoError(t, err)
				require.Equal(t, want, got, "threshold %g, period %s, now %s", thr, period, now)
				silent += len(want.Silent)
				unattributed += len(want.Unattributed)
			}
		}
	}
	require.Positive(t, silent, "the checks report silent nodes")
	require.Positive(t, unattributed, "the checks report unattributed usage")
}
