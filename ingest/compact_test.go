package ingest_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

// held is a held sample of one key, [start, start+interval) in seconds from t0,
// with util and no process, or (util < 0) busy: util unknown and a process.
func held(inst string, start, interval int64, util float64) schemas.Sample {
	const t0 = 1_793_000_000_000 // 2026-10-27, far from a month boundary
	s := schemas.Sample{StartMS: t0 + start*1000, IntervalMS: interval * 1000, Node: "n", GPUUUID: "g",
		GPUModel: "NVIDIA H100 80GB HBM3", InstanceID: inst, Profile: "1g.10gb", Project: "p", User: "u", MemTotal: 1}
	if util >= 0 {
		s.UtilKnown, s.Util = true, util
	} else {
		s.Processes = 1
	}
	return s
}

// spans returns the occupancy rows of b as [start, end) seconds from t0.
func spans(b *ingest.Batch) [][2]int64 {
	var out [][2]int64
	for _, r := range b.Occupancy {
		out = append(out, [2]int64{(r.StartMS - 1_793_000_000_000) / 1000, (r.EndMS - 1_793_000_000_000) / 1000})
	}
	return out
}

// A late sample joins the open runs it touches, extends a run before its start
// (a row with the new start: the longer row wins nothing, the union is the
// same), or opens a run of its own next to the others; it never becomes a row
// of one sample while a run it touches is open.
func TestLateSampleMergesIntoTheRunsItTouches(t *testing.T) {
	c := ingest.NewCompactor(0)
	b := c.Build([]schemas.Sample{held("a", 0, 10, -1), held("a", 10, 10, -1), held("a", 40, 10, -1)})
	require.ElementsMatch(t, [][2]int64{{0, 20}, {40, 50}}, spans(b), "a gap cuts the run")

	b = c.Build([]schemas.Sample{held("a", 20, 20, -1)})
	require.Equal(t, [][2]int64{{0, 50}}, spans(b), "a late sample bridging two runs joins them")
	require.EqualValues(t, 1, c.Stats().Joined)

	b = c.Build([]schemas.Sample{held("a", -10, 10, -1), held("a", 50, 10, -1)})
	require.Equal(t, [][2]int64{{-10, 60}}, spans(b), "extended before its start: written with the new start")
	require.EqualValues(t, 1, c.Stats().ExtendedBack)

	b = c.Build([]schemas.Sample{held("a", -100, 10, -1), held("a", 60, 10, -1), held("a", -90, 10, -1)})
	require.ElementsMatch(t, [][2]int64{{-100, -80}, {-10, 70}}, spans(b), "a late disjoint sample opens a run that grows")
	require.EqualValues(t, 2, c.Stats().Opened, "the run after the gap at 20 s and the late one")

	b = c.Build([]schemas.Sample{held("a", 30, 10, -1), held("a", -95, 5, -1)})
	require.Empty(t, b.Occupancy, "samples inside open runs change no row")

	// Idle runs likewise, per class: a late class-1 sample joins the class-1
	// run it touches, not the class-5 run it overlaps.
	c = ingest.NewCompactor(0)
	b = c.Build([]schemas.Sample{held("i", 0, 10, 0.01), held("i", 10, 10, 0.6), held("i", 20, 10, 0.02)})
	require.Len(t, b.Idle, 3)
	b = c.Build([]schemas.Sample{held("i", 10, 10, 0.03)})
	require.Len(t, b.Idle, 1)
	r := b.Idle[0]
	require.Equal(t, [4]float64{0, 30, 0.01, math.Nextafter(0.04, 0)}, [4]float64{float64(r.StartMS-1_793_000_000_000) / 1000, float64(r.EndMS-1_793_000_000_000) / 1000, r.MinUtil, r.MaxUtil},
		"the range of utils 0.01 to 0.03, widened to hundredths")
	require.EqualValues(t, 1, r.Class)
}

// Batch.Latest holds, per key, the key's held sample with the greatest start
// (ties: the one added later), copied, once the key has a newer one: replays
// of older samples emit nothing, unheld samples never count, and samples
// added piece by piece from a reused buffer (the streamed path) are emitted by
// the next EmitOpen.
func TestCompactorLatest(t *testing.T) {
	at := func(s schemas.Sample, user, ref string) schemas.Sample {
		s.User, s.HolderRef = user, ref
		return s
	}
	unheld := held("a", 40, 10, 0)
	unheld.Project, unheld.User = "", ""
	batch := []schemas.Sample{
		held("a", 0, 10, 0.5), held("a", 20, 10, -1), held("a", 10, 10, 0.5), // out of order
		at(held("a", 5, 10, 0.1), "v", ""), // another key of instance a
		unheld,
		held("c", 100, 10, 0), held("c", 50, 10, 0),
		at(held("d", 7, 10, 0), "u", "pid:1"), at(held("d", 7, 10, 0), "u", "pid:2"), // a tie: the later
	}
	c := ingest.NewCompactor(0)
	b := c.Build(batch)
	want := []schemas.Sample{batch[1], batch[3], batch[5], batch[8]}
	require.ElementsMatch(t, want, b.Latest)
	require.Equal(t, len(b.Samples)+len(b.Occupancy)+len(b.Idle)+len(want), b.Rows())
	for i := range batch {
		batch[i] = schemas.Sample{} // callers reuse their slices
	}
	require.ElementsMatch(t, want, b.Latest, "Latest holds copies")

	b = c.Build([]schemas.Sample{held("a", 0, 10, 0.5), held("c", 60, 10, 0), unheld})
	require.Empty(t, b.Latest, "older samples than the keys' latest change none")
	b = c.Build([]schemas.Sample{held("a", 20, 10, -1), held("c", 110, 10, 0.2)})
	require.ElementsMatch(t, []schemas.Sample{held("a", 20, 10, -1), held("c", 110, 10, 0.2)}, b.Latest, "a tie and a newer sample")

	// Piece by piece from one buffer, several Adds before one EmitOpen.
	buf := make([]schemas.Sample, 2)
	var pending ingest.Batch
	for i := range int64(5) {
		buf[0], buf[1] = held("e", 100+20*i, 10, 0), held("f", 300-20*i, 10, 0)
		c.Add(&pending, buf)
	}
	buf[0], buf[1] = schemas.Sample{}, schemas.Sample{}
	require.Empty(t, pending.Latest, "emitted by EmitOpen")
	c.EmitOpen(&pending)
	require.ElementsMatch(t, []schemas.Sample{held("e", 180, 10, 0), held("f", 300, 10, 0)}, pending.Latest)
	c.EmitOpen(&pending)
	require.Len(t, pending.Latest, 2, "nothing new: nothing appended")
}

// A key keeps at most ingest.RunsPerKey open runs: opening one more evicts
// the least recently extended, written at once when it grew since it was last
// written, so the rows emitted still cover every sample.
func TestEvictedRunIsWritten(t *testing.T) {
	c := ingest.NewCompactor(0)
	var b ingest.Batch
	for i := range int64(ingest.RunsPerKey) {
		c.Add(&b, []schemas.Sample{held("a", i*100, 10, -1)})
	}
	require.Empty(t, b.Occupancy, "open runs wait for EmitOpen")
	c.Add(&b, []schemas.Sample{held("a", 0, 20, -1)}) // the first run is the most recent again
	c.Add(&b, []schemas.Sample{held("a", 1000, 10, -1)})
	require.Equal(t, [][2]int64{{100, 110}}, spans(&b), "the least recently extended run is evicted and written")
	require.EqualValues(t, 1, c.Stats().Evicted)
	c.EmitOpen(&b)
	require.ElementsMatch(t, [][2]int64{{100, 110}, {0, 20}, {200, 210}, {300, 310}, {1000, 1010}}, spans(&b))

	// A clean run evicted is not written again.
	b = ingest.Batch{}
	c.Add(&b, []schemas.Sample{held("a", 2000, 10, -1)})
	require.Empty(t, b.Occupancy)
	require.EqualValues(t, 2, c.Stats().Evicted)
}

// Beyond MaxOpenRuns the compactor forgets the keys seen least recently,
// only as many as it must: a forgotten key's next sample starts a new row, a
// kept key's extends its run.
func TestCompactorForgetsLeastRecentlySeen(t *testing.T) {
	c := ingest.NewCompactor(2)
	c.Build([]schemas.Sample{held("a", 0, 10, -1)})
	c.Build([]schemas.Sample{held("b", 0, 10, -1)})
	c.Build([]schemas.Sample{held("a", 10, 10, -1)}) // a is seen again: b is now the oldest
	c.Build([]schemas.Sample{held("c", 0, 10, -1)})
	require.EqualValues(t, 1, c.Stats().Forgotten, "one key forgotten, not all")
	require.Equal(t, 2, c.Stats().OpenOcc)
	require.Equal(t, [][2]int64{{0, 30}}, spans(c.Build([]schemas.Sample{held("a", 20, 10, -1)})), "a was kept")
	require.Equal(t, [][2]int64{{10, 20}}, spans(c.Build([]schemas.Sample{held("b", 10, 10, -1)})), "b was forgotten")
	require.EqualValues(t, 2, c.Stats().Forgotten, "c, the oldest then, was forgotten to keep b")
}

// An idle run's range holds its samples' utilisations, widened to
// ingest.UtilGrid: under a threshold on that grid its verdict (idle entirely when
// MaxUtil < T, not at all when MinUtil >= T) is the exact one, and it stays
// inside its class.
func TestUtilRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	utils := []float64{0, 0.05, 0.07, 0.1, 0.2, 0.29, 0.5, math.Nextafter(0.05, 0), math.Nextafter(0.07, 1), math.Nextafter(1, 0), 0.999, 1e-12}
	for range 20_000 {
		utils = append(utils, rng.Float64(), float64(rng.IntN(100))/100, math.Nextafter(float64(rng.IntN(100)+1)/100, 0))
	}
	for _, u := range utils {
		lo, hi := ingest.UtilRange(u)
		require.True(t, lo <= u && u <= hi && hi < 1, "util %v: [%v, %v]", u, lo, hi)
		c, _ := ingest.IdleClassOf(&schemas.Sample{UtilKnown: true, Util: u})
		for _, x := range []float64{lo, hi} {
			cx, _ := ingest.IdleClassOf(&schemas.Sample{UtilKnown: true, Util: x})
			require.Equal(t, c, cx, "util %v: %v is in another class", u, x)
		}
		for _, th := range ingest.UtilGrid {
			require.Equal(t, u < th, hi < th, "util %v, threshold %v: idle entirely", u, th)
			require.Equal(t, u >= th, lo >= th, "util %v, threshold %v: not idle", u, th)
		}
	}
}

// collapsed is what the stores keep of rows: the longest end per occupancy
// (key, start), and per idle (key, class, start, utilisation range).
type collapsed struct {
	occ  map[occKey]int64
	idle map[idleKey]int64
}

type occKey struct {
	k     schemas.Key
	start int64
}

type idleKey struct {
	occKey
	class    uint8
	min, max float64
}

func (c *collapsed) add(b *ingest.Batch) {
	if c.occ == nil {
		c.occ, c.idle = map[occKey]int64{}, map[idleKey]int64{}
	}
	for _, r := range b.Occupancy {
		k := occKey{r.Key, r.StartMS}
		c.occ[k] = max(c.occ[k], r.EndMS)
	}
	for _, r := range b.Idle {
		k := idleKey{occKey{r.Key, r.StartMS}, r.Class, r.MinUtil, r.MaxUtil}
		c.idle[k] = max(c.idle[k], r.EndMS)
	}
}

// runs is what a reader makes of the idle rows: per (key, class, start), the
// longest end and the widest utilisation range.
func (c *collapsed) runs() map[idleKey]int64 {
	out := map[idleKey]int64{}
	lo, hi := map[idleKey]float64{}, map[idleKey]float64{}
	for k, e := range c.idle {
		g := idleKey{occKey: k.occKey, class: k.class}
		if _, ok := out[g]; !ok {
			lo[g], hi[g] = k.min, k.max
		}
		out[g] = max(out[g], e)
		lo[g], hi[g] = min(lo[g], k.min), max(hi[g], k.max)
	}
	res := map[idleKey]int64{}
	for g, e := range out {
		g2 := g
		g2.min, g2.max = lo[g], hi[g]
		res[g2] = e
	}
	return res
}

// A month replayed into a running compactor, in time order but in other
// batches, rebuilds the runs of the first pass with the same (key, start): the
// stores collapse them, and the rows they keep are those of one pass.
func TestReplayRebuildsTheSameRows(t *testing.T) {
	samples := storetest.Samples(t, storetest.Trace(t, 60_000, 7))
	c := ingest.NewCompactor(0)
	var once, thrice collapsed
	emitted := 0
	pass := func(batch int) {
		for i := 0; i < len(samples); i += batch {
			b := c.Build(samples[i:min(i+batch, len(samples))])
			thrice.add(b)
			emitted += len(b.Occupancy) + len(b.Idle)
		}
	}
	pass(5000)
	once.occ, once.idle = maps(thrice.occ), maps(thrice.idle)
	first := emitted
	pass(3001)
	pass(20_000)
	t.Logf("rows emitted: %d by the first pass, %d by the two replays; stored: occupancy %d → %d, idle %d → %d; %+v",
		first, emitted-first, len(once.occ), len(thrice.occ), len(once.idle), len(thrice.idle), c.Stats())
	require.Equal(t, once.occ, thrice.occ, "occupancy rows after collapse")
	require.Equal(t, once.runs(), thrice.runs(), "idle runs as readers see them")
	// Idle rows keep their utilisation range in the key, and the compactor
	// writes every range a run passed through: a replay in other batches
	// keeps the rows of the first pass.
	require.Equal(t, once.idle, thrice.idle, "idle rows after collapse")
	require.Less(t, emitted-first, first, "the replays write fewer rows than the first pass")
}

func maps[K comparable](m map[K]int64) map[K]int64 {
	out := make(map[K]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// A month written three times through one Writer, in other batches and streamed
// as the Kafka worker does, bills exactly like the file, and its stored rows
// are those of one pass after collapse.
func TestMonthReplayedThriceBillsLikeOnce(t *testing.T) {
	data := storetest.Trace(t, 40_000, 11)
	samples := storetest.Samples(t, data)
	ctx := context.Background()
	store := ingest.NewMemStore()
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger()})
	require.NoError(t, err)
	for i := 0; i < len(samples); i += 4000 {
		require.NoError(t, w.Write(ctx, samples[i:min(i+4000, len(samples))]))
	}
	_, occ1, idle1, _ := store.Counts()
	storetest.WriteStreamed(t, w, samples, 7000, 1000)
	storetest.WriteStreamed(t, w, samples, 2500, 512)
	_, occ3, idle3, _ := store.Counts()
	t.Logf("rows written: occupancy %d once, %d in all; idle %d once, %d in all", occ1, occ3, idle1, idle3)
	require.Less(t, occ3, 3*occ1, "the replays write fewer occupancy rows than the first pass")
	require.Less(t, idle3, 3*idle1, "the replays write fewer idle rows than the first pass")
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), store)
}

// Under a small MaxOpenRuns, with late samples and shuffled batches, the rows
// emitted after every batch cover exactly the samples added so far (per key),
// and the state stays within its bound.
func TestCompactorRowsCoverSamples(t *testing.T) {
	samples := storetest.Samples(t, storetest.Trace(t, 20_000, 9))
	rng := rand.New(rand.NewPCG(3, 4))
	for _, maxOpen := range []int{1, 16, 0} {
		c := ingest.NewCompactor(maxOpen)
		want := map[schemas.Key]*billing.IntervalSet{}
		got := map[schemas.Key]*billing.IntervalSet{}
		add := func(m map[schemas.Key]*billing.IntervalSet, k schemas.Key, s, e int64) {
			if m[k] == nil {
				m[k] = &billing.IntervalSet{}
			}
			m[k].Add(s, e)
		}
		for pass := range 2 {
			for i := 0; i < len(samples); {
				n := 1 + rng.IntN(3000)
				batch := append([]schemas.Sample(nil), samples[i:min(i+n, len(samples))]...)
				if pass == 1 || rng.IntN(3) == 0 {
					rng.Shuffle(len(batch), func(a, b int) { batch[a], batch[b] = batch[b], batch[a] })
				}
				for j := range batch {
					if s := &batch[j]; s.Project != "" {
						add(want, schemas.Key{Project: s.Project, User: s.User, InstanceID: s.InstanceID, GPUModel: s.GPUModel, Profile: s.Profile}, s.StartMS, s.EndMS())
					}
				}
				b := c.Build(batch)
				for _, r := range b.Occupancy {
					require.Less(t, r.StartMS, r.EndMS)
					require.LessOrEqual(t, r.EndMS, ingest.MonthStartMS(r.StartMS)+32*86_400_000)
					require.Equal(t, ingest.MonthStartMS(r.StartMS), ingest.MonthStartMS(r.EndMS-1), "a run crosses a UTC month")
					add(got, r.Key, r.StartMS, r.EndMS)
				}
				require.Equal(t, len(want), len(got))
				for k, w := range want {
					require.Equal(t, w.Pieces(), got[k].Pieces(), "maxOpen %d, key %v", maxOpen, k)
				}
				i += n
			}
		}
		t.Logf("maxOpen %d: %+v", maxOpen, c.Stats())
		if maxOpen > 0 {
			require.Positive(t, c.Stats().Forgotten)
		}
	}
}

// BenchmarkCompactor: samples through Compactor.Build in batches of 50 000,
// in order into a fresh compactor ("once"), and the same samples again into the
// compactor that took them once ("replayed"), for a month of 64 instances at
// 300 s (553 000 samples, the compactor's state in cache) and 12 hours of 7 000
// instances (1 M samples, the state of a real fleet). Reports ns per sample and
// the rows emitted per pass.
func BenchmarkCompactor(b *testing.B) {
	for _, shape := range []struct {
		instances int
		span      time.Duration
	}{{64, 30 * 24 * time.Hour}, {7000, 12 * time.Hour}} {
		start := billing.NewPeriod(2026, time.November, time.UTC).StartMS()
		end := start + shape.span.Milliseconds()
		var samples []schemas.Sample
		_, err := gen.Each(gen.Config{Samples: math.MaxInt64, StartMS: start, IntervalMS: 300_000, Instances: shape.instances, Seed: 42},
			func(s *schemas.Sample) error {
				if s.StartMS >= end {
					return io.EOF
				}
				samples = append(samples, *s)
				return nil
			})
		require.ErrorIs(b, err, io.EOF)
		pass := func(c *ingest.Compactor) (rows int) {
			for i := 0; i < len(samples); i += 50_000 {
				bt := c.Build(samples[i:min(i+50_000, len(samples))])
				rows += len(bt.Occupancy) + len(bt.Idle)
			}
			return rows
		}
		for _, replayed := range []bool{false, true} {
			name := fmt.Sprintf("instances=%d/once", shape.instances)
			if replayed {
				name = fmt.Sprintf("instances=%d/replayed", shape.instances)
			}
			b.Run(name, func(b *testing.B) {
				rows := 0
				for b.Loop() {
					b.StopTimer()
					c := ingest.NewCompactor(0)
					if replayed {
						pass(c)
					}
					b.StartTimer()
					rows = pass(c)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(samples)), "ns/sample")
				b.ReportMetric(float64(rows), "rows/pass")
			})
		}
	}
}

// A node's samples held back by an outage and delivered afterwards, oldest
// first, interleaved with its live samples (a spool draining while the
// collector keeps sampling): the late samples grow runs of their own, joined to
// the runs they reach, instead of one row per late sample.
func TestSpoolBacklogInterleavedWithLiveSamples(t *testing.T) {
	samples := storetest.Samples(t, storetest.Trace(t, 60_000, 23))
	lo, hi := samples[0].StartMS, samples[len(samples)-1].StartMS
	outFrom, outTo := lo+(hi-lo)/4, lo+(hi-lo)/2
	var live, backlog []schemas.Sample
	for _, s := range samples {
		if s.Node == "gpu-node-00" && s.StartMS >= outFrom && s.StartMS < outTo {
			backlog = append(backlog, s)
		} else {
			live = append(live, s)
		}
	}
	require.NotEmpty(t, backlog)
	held := map[schemas.Key]bool{}
	for _, s := range backlog {
		if s.Project != "" {
			held[schemas.Key{Project: s.Project, User: s.User, InstanceID: s.InstanceID, GPUModel: s.GPUModel, Profile: s.Profile}] = true
		}
	}
	keys, nLate := len(held), len(backlog)
	var clean, late collapsed
	c := ingest.NewCompactor(0)
	for i := 0; i < len(samples); i += 2000 {
		clean.add(c.Build(samples[i:min(i+2000, len(samples))]))
	}
	c = ingest.NewCompactor(0)
	for i := 0; i < len(live); i += 2000 {
		batch := live[i:min(i+2000, len(live))]
		if batch[0].StartMS >= outTo && len(backlog) > 0 { // the spool drains 300 samples a batch
			n := min(300, len(backlog))
			batch = append(append([]schemas.Sample(nil), batch...), backlog[:n]...)
			backlog = backlog[n:]
		}
		late.add(c.Build(batch))
	}
	require.Empty(t, backlog)
	t.Logf("%d late samples of %d keys; occupancy rows: %d in order, %d with the backlog late; idle rows %d, %d; %+v",
		nLate, keys, len(clean.occ), len(late.occ), len(clean.idle), len(late.idle), c.Stats())
	// What remains is a row or two per key the outage cut: the live run that
	// opened at the outage's end, kept when the backlog joined it to the runs
	// before, and runs evicted while both were open.
	require.LessOrEqual(t, len(late.occ), len(clean.occ)+2*keys, "occupancy rows")
	require.LessOrEqual(t, len(late.idle), len(clean.idle)+2*keys, "idle rows")
}
