package billing

import (
	"cmp"
	"slices"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// Idle detection (billing-semantics §6). An idle streak is a stretch of time in
// which a held instance was idle without interruption: the union of its idle
// samples, with gaps up to the gap tolerance bridged as long as no busy sample
// falls into the gap. A streak longer than the project's warn_after raises one
// warning to the holder; longer than release_after, it triggers the release where
// the project's policy enables it.

// IdleStreak is one uninterrupted idle stretch of a held instance.
type IdleStreak struct {
	Key        schemas.Key
	Start, End int64 // ms; End is the end of the last idle sample seen
	Policy     schemas.IdlePolicy
}

// Duration is the streak's length.
func (s IdleStreak) Duration() time.Duration { return time.Duration(s.End-s.Start) * time.Millisecond }

// Warn reports whether the streak is long enough for a warning.
func (s IdleStreak) Warn() bool { return s.Duration() > s.Policy.WarnAfter }

// WarnAt is when the warning is due.
func (s IdleStreak) WarnAt() int64 { return s.Start + s.Policy.WarnAfter.Milliseconds() }

// Release reports whether the streak triggers a release under the policy.
func (s IdleStreak) Release() bool {
	return s.Policy.AutoRelease && s.Policy.ReleaseAfter > 0 && s.Duration() > s.Policy.ReleaseAfter
}

// ReleaseAt is when the release is due.
func (s IdleStreak) ReleaseAt() int64 { return s.Start + s.Policy.ReleaseAfter.Milliseconds() }

// IdleDetector finds idle streaks in a stream of samples, in any order. Memory
// grows with the number of idle and busy runs, not with samples.
type IdleDetector struct {
	cat  *schemas.Catalog
	keys map[schemas.Key]*idleState
}

type idleState struct {
	idle IntervalSet // tolerance: the catalog's gap tolerance
	busy IntervalSet
}

// NewIdleDetector returns a detector that applies the catalog's idle policies.
func NewIdleDetector(cat *schemas.Catalog) *IdleDetector {
	return &IdleDetector{cat: cat, keys: map[schemas.Key]*idleState{}}
}

// Add feeds one validated sample. Unheld samples are ignored: a free instance is
// not anybody's idle slice.
func (d *IdleDetector) Add(s *schemas.Sample) {
	if s.Project == "" {
		return
	}
	st := d.state(schemas.Key{Project: s.Project, User: s.User, InstanceID: s.InstanceID, GPUModel: s.GPUModel, Profile: s.Profile})
	if IsIdle(d.cat, s) {
		st.idle.Add(s.StartMS, s.EndMS())
	} else {
		st.busy.Add(s.StartMS, s.EndMS())
	}
}

// Streaks returns every idle streak at least minLen long, ordered by start, then
// key. A busy sample that overlaps idle time (a replay with a different reading)
// wins: that time is not idle, and the streak is split there.
func (d *IdleDetector) Streaks(minLen time.Duration) []IdleStreak {
	var out []IdleStreak
	for k, st := range d.keys {
		policy := d.cat.IdlePolicyFor(k.Project)
		for _, p := range subtract(st.idle.Pieces(), st.busy.Pieces()) {
			if time.Duration(p.Len())*time.Millisecond >= minLen {
				out = append(out, IdleStreak{Key: k, Start: p.Start, End: p.End, Policy: policy})
			}
		}
	}
	slices.SortFunc(out, func(a, b IdleStreak) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), compareKeys(a.Key, b.Key))
	})
	return out
}

// subtract returns a minus b; both sorted and disjoint.
func subtract(a, b []Interval) []Interval {
	var out []Interval
	j := 0
	for _, p := range a {
		cur := p.Start
		for j < len(b) && b[j].End <= cur {
			j++
		}
		for k := j; k < len(b) && b[k].Start < p.End; k++ {
			if b[k].Start > cur {
				out = append(out, Interval{cur, b[k].Start})
			}
			cur = max(cur, b[k].End)
		}
		if cur < p.End {
			out = append(out, Interval{cur, p.End})
		}
	}
	return out
}

// Merge adds everything b has seen into d (for parallel input).
func (d *IdleDetector) Merge(b *IdleDetector) {
	for k, bs := range b.keys {
		st := d.state(k)
		st.idle.AddSet(&bs.idle)
		st.busy.AddSet(&bs.busy)
	}
}

func (d *IdleDetector) state(k schemas.Key) *idleState {
	st, ok := d.keys[k]
	if !ok {
		st = &idleState{idle: IntervalSet{Tol: d.cat.Defaults.GapToleranceMS}}
		d.keys[k] = st
	}
	return st
}
