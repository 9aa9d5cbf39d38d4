package billing

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// Verdict is what an idle run is under a catalog.
type Verdict uint8

// Verdicts of IdleVerdict.
const (
	NotIdle  Verdict = iota // no sample of the run is idle
	AllIdle                 // every sample of the run is idle
	Straddle                // the threshold falls inside [MinUtil, MaxUtil]: raw samples decide
)

// IdleVerdict decides r under the idle threshold of its project.
func IdleVerdict(cat *schemas.Catalog, r *schemas.IdleRun) Verdict {
	if r.Class == schemas.IdleClassNull {
		return AllIdle // util unknown and no process: IsIdleUtil is true
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

// IdleFeeder feeds idle runs to an accumulator: runs idle entirely are added at
// once, runs the threshold cuts through are kept until Resolve gets their raw
// samples. BillFrom uses it after the store's (possibly looser) pre-filter.
type IdleFeeder struct {
	cat *schemas.Catalog
	p0  int64
	p1  int64
	add func(k schemas.Key, startMS, endMS int64) // idle time found

	pending map[schemas.Key]*straddles
}

type straddles struct {
	runs   []schemas.IdleRun
	maxEnd []int64 // prefix maximum of runs[i].EndMS, once sorted
	found  []bool
	sorted bool
}

// NewIdleFeeder returns a feeder of acc for period p under cat.
func NewIdleFeeder(acc *Accumulator, cat *schemas.Catalog, p Period) *IdleFeeder {
	return &IdleFeeder{cat: cat, p0: p.StartMS(), p1: p.EndMS(),
		add: func(k schemas.Key, s, e int64) { acc.AddOccupancy(k, s, e, true) }}
}

// NewIdleSink returns a feeder that hands the idle time it finds in
// [fromMS, toMS) to add instead of an accumulator (usage reports and held-now
// answers collect it themselves).
func NewIdleSink(cat *schemas.Catalog, fromMS, toMS int64, add func(k schemas.Key, startMS, endMS int64)) *IdleFeeder {
	return &IdleFeeder{cat: cat, p0: fromMS, p1: toMS, add: add}
}

// Add decides r: idle time counts only inside the period.
func (f *IdleFeeder) Add(r *schemas.IdleRun) {
	if r.EndMS <= f.p0 || r.StartMS >= f.p1 || r.EndMS <= r.StartMS {
		return
	}
	switch IdleVerdict(f.cat, r) {
	case AllIdle:
		f.add(r.Key, r.StartMS, r.EndMS)
	case Straddle:
		if f.pending == nil {
			f.pending = map[schemas.Key]*straddles{}
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
			utilBelow = max(utilBelow, schemas.IdleClassBounds()[st.runs[i].Class-1])
		}
	}
	slices.Sort(instances)
	return instances, lo, hi, utilBelow
}

// PendingRuns calls fn for every pending run (for per-run raw queries).
func (f *IdleFeeder) PendingRuns(fn func(r *schemas.IdleRun) error) error {
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
func (f *IdleFeeder) Raw(pt *schemas.RawPoint) {
	st := f.pending[pt.Key]
	if st == nil {
		return
	}
	if !st.sorted {
		slices.SortFunc(st.runs, func(a, b schemas.IdleRun) int { return cmp.Compare(a.StartMS, b.StartMS) })
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
	i, _ := slices.BinarySearchFunc(st.runs, pt.StartMS+1, func(r schemas.IdleRun, t int64) int { return cmp.Compare(r.StartMS, t) })
	for j := i - 1; j >= 0 && st.maxEnd[j] > pt.StartMS; j-- {
		r := &st.runs[j]
		if pt.StartMS < r.EndMS {
			st.found[j] = true
			if idle {
				f.add(r.Key, pt.StartMS, min(pt.EndMS, r.EndMS))
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

func (f *IdleFeeder) missing(k schemas.Key, r *schemas.IdleRun) error {
	bounds := schemas.IdleClassBounds()
	return fmt.Errorf("idle time of %s/%s on %s from %s to %s depends on raw samples (util %g…%g against threshold %g) that are no longer stored; "+
		"bill with a threshold at a class bound (%v) or restore the raw samples",
		k.Project, k.User, k.InstanceID, time.UnixMilli(r.StartMS).UTC().Format(time.RFC3339), time.UnixMilli(r.EndMS).UTC().Format(time.RFC3339),
		r.MinUtil, r.MaxUtil, f.cat.IdlePolicyFor(k.Project).Threshold, bounds[:schemas.IdleClasses-1])
}
