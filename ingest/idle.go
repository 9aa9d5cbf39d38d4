package ingest

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// IdleClasses is the number of known-utilisation idle classes (1…IdleClasses).
const IdleClasses = 5

// IdleClassBounds returns the exclusive upper bounds of the known-utilisation
// idle classes: class 1 is util in [0, 0.05), class 2 [0.05, 0.10), … class 5
// [0.50, 1). A threshold equal to one of them (the default 0.05 is) never cuts
// through a run, so a month close reads idle runs only. Any other threshold is
// still exact: runs it cuts through are decided from their raw samples.
//
// There is deliberately no bound at 0.01: whole cards and H100 instances left
// idle report 0, 1 or 2 % from one sample to the next, and a bound there would
// cut their idle stretches into runs of one or two samples.
//
// The bounds are fixed: stored runs carry their class, and the migrations that
// classified older rows in SQL (SQLite, ClickHouse 0005) spell the same numbers,
// which tests compare with these.
func IdleClassBounds() [IdleClasses]float64 {
	return [IdleClasses]float64{0.05, 0.10, 0.20, 0.50, 1}
}

// IdleClassNull is the class of held samples with util null and no process.
const IdleClassNull = 0

// IdleClassOf returns the idle class of a held sample, or ok=false when the
// sample cannot be idle under any catalog (util null with processes, util >= 1).
func IdleClassOf(s *schemas.Sample) (class uint8, ok bool) {
	if !s.UtilKnown {
		return IdleClassNull, s.Processes == 0
	}
	for i, b := range IdleClassBounds() {
		if s.Util < b {
			return uint8(i + 1), true
		}
	}
	return 0, false
}

// Verdict is what an idle run is under a catalog.
type Verdict uint8

// Verdicts of IdleVerdict.
const (
	NotIdle  Verdict = iota // no sample of the run is idle
	AllIdle                 // every sample of the run is idle
	Straddle                // the threshold falls inside [MinUtil, MaxUtil]: raw samples decide
)

// IdleVerdict decides r under the idle threshold of its project.
func IdleVerdict(cat *schemas.Catalog, r *IdleRun) Verdict {
	if r.Class == IdleClassNull {
		return AllIdle // util unknown and no process: billing.IsIdleUtil is true
	}
	t := cat.IdlePolicyFor(r.Key.Project).Threshold
	switch {
	case r.MaxUtil < t:
		return AllIdle
	case r.MinUtil >= t:
		return NotIdle
	}
	return Straddle
}

// RawPoint is a raw sample with known utilisation, as the exact idle fallback
// reads it.
type RawPoint struct {
	Key            billing.Key
	StartMS, EndMS int64
	Util           float64
}

// IdleFeeder feeds idle runs to an accumulator: runs idle entirely are added at
// once, runs the threshold cuts through are kept until Resolve gets their raw
// samples. Readers use it after their own (possibly looser) pre-filter.
type IdleFeeder struct {
	cat *schemas.Catalog
	p0  int64
	p1  int64
	acc *billing.Accumulator

	pending map[billing.Key]*straddles
}

type straddles struct {
	runs   []IdleRun
	maxEnd []int64 // prefix maximum of runs[i].EndMS, once sorted
	found  []bool
	sorted bool
}

// NewIdleFeeder returns a feeder of acc for period p under cat.
func NewIdleFeeder(acc *billing.Accumulator, cat *schemas.Catalog, p billing.Period) *IdleFeeder {
	return &IdleFeeder{cat: cat, p0: p.StartMS(), p1: p.EndMS(), acc: acc}
}

// Add decides r: idle time counts only inside the period.
func (f *IdleFeeder) Add(r *IdleRun) {
	if r.EndMS <= f.p0 || r.StartMS >= f.p1 || r.EndMS <= r.StartMS {
		return
	}
	switch IdleVerdict(f.cat, r) {
	case AllIdle:
		f.acc.AddOccupancy(r.Key, r.StartMS, r.EndMS, true)
	case Straddle:
		if f.pending == nil {
			f.pending = map[billing.Key]*straddles{}
		}
		st := f.pending[r.Key]
		if st == nil {
			st = &straddles{}
			f.pending[r.Key] = st
		}
		st.runs = append(st.runs, *r)
		st.sorted = false
	}
}

// Pending reports whether some runs wait for their raw samples.
func (f *IdleFeeder) Pending() bool { return len(f.pending) > 0 }

// PendingRange returns the instances with pending runs, the range [lo, hi)
// their runs cover (the raw samples needed start in it), and the largest class
// bound of their classes (the samples needed have util below it).
func (f *IdleFeeder) PendingRange() (instances []string, lo, hi int64, utilBelow float64) {
	seen := map[string]bool{}
	lo, hi = int64(1<<62), int64(-1<<62)
	for k, st := range f.pending {
		if !seen[k.InstanceID] {
			seen[k.InstanceID] = true
			instances = append(instances, k.InstanceID)
		}
		for i := range st.runs {
			lo, hi = min(lo, st.runs[i].StartMS), max(hi, st.runs[i].EndMS)
			utilBelow = max(utilBelow, IdleClassBounds()[st.runs[i].Class-1])
		}
	}
	slices.Sort(instances)
	return instances, lo, hi, utilBelow
}

// PendingRuns calls fn for every pending run (for per-run raw queries).
func (f *IdleFeeder) PendingRuns(fn func(r *IdleRun) error) error {
	for _, st := range f.pending {
		for i := range st.runs {
			if err := fn(&st.runs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Raw offers one raw sample with known util. Any sample may be offered; those
// of a key with pending runs that start inside one of them are the run's
// samples (the Compactor guarantees that a sample merged into a run starts
// inside it), and their idle time is added, clipped to the run.
func (f *IdleFeeder) Raw(pt *RawPoint) {
	st := f.pending[pt.Key]
	if st == nil {
		return
	}
	if !st.sorted {
		slices.SortFunc(st.runs, func(a, b IdleRun) int { return cmp.Compare(a.StartMS, b.StartMS) })
		st.maxEnd = st.maxEnd[:0]
		var m int64 = -1 << 62
		for i := range st.runs {
			m = max(m, st.runs[i].EndMS)
			st.maxEnd = append(st.maxEnd, m)
		}
		st.found = make([]bool, len(st.runs))
		st.sorted = true
	}
	idle := pt.Util < f.cat.IdlePolicyFor(pt.Key.Project).Threshold
	// Runs with StartMS <= pt.StartMS, walked back while one may still contain it.
	i, _ := slices.BinarySearchFunc(st.runs, pt.StartMS+1, func(r IdleRun, t int64) int { return cmp.Compare(r.StartMS, t) })
	for j := i - 1; j >= 0 && st.maxEnd[j] > pt.StartMS; j-- {
		r := &st.runs[j]
		if pt.StartMS < r.EndMS {
			st.found[j] = true
			if idle {
				f.acc.AddOccupancy(r.Key, pt.StartMS, min(pt.EndMS, r.EndMS), true)
			}
		}
	}
}

// Resolve checks that every pending run got at least one raw sample. A run
// without any means its raw samples are gone (a raw retention shorter than the
// months billed): that is an error, never a silently different invoice.
func (f *IdleFeeder) Resolve() error {
	for k, st := range f.pending {
		if !st.sorted {
			return f.missing(k, &st.runs[0])
		}
		for i, ok := range st.found {
			if !ok {
				return f.missing(k, &st.runs[i])
			}
		}
	}
	f.pending = nil
	return nil
}

func (f *IdleFeeder) missing(k billing.Key, r *IdleRun) error {
	bounds := IdleClassBounds()
	return fmt.Errorf("idle time of %s/%s on %s from %s to %s depends on raw samples (util %g…%g against threshold %g) that are no longer stored; "+
		"bill with a threshold at a class bound (%v) or restore the raw samples",
		k.Project, k.User, k.InstanceID, time.UnixMilli(r.StartMS).UTC().Format(time.RFC3339), time.UnixMilli(r.EndMS).UTC().Format(time.RFC3339),
		r.MinUtil, r.MaxUtil, f.cat.IdlePolicyFor(k.Project).Threshold, bounds[:IdleClasses-1])
}
