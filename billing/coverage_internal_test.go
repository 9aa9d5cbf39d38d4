package billing

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// applyCoverageSorted is the coverage sweep over a sorted slice of the active
// sessions (an O(n) removal per end): the reference applyCoverage's Fenwick
// tree must agree with, session by session.
func applyCoverageSorted(sessions []*Session, q int64) {
	for _, s := range sessions {
		s.CoveredMS = 0
	}
	if q <= 0 || len(sessions) == 0 {
		return
	}
	order := func(a, b *Session) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Key.InstanceID, b.Key.InstanceID), cmp.Compare(a.Key.User, b.Key.User))
	}
	starts := slices.Clone(sessions)
	slices.SortFunc(starts, order)
	ends := slices.Clone(sessions)
	slices.SortFunc(ends, func(a, b *Session) int { return cmp.Compare(a.End, b.End) })
	type slot struct {
		s       *Session
		covered bool
		since   int64
	}
	var active []slot
	Q := int(min(q, int64(len(sessions))))
	i, j := 0, 0
	for i < len(starts) || j < len(ends) {
		t := ends[j].End
		if i < len(starts) && starts[i].Start < t {
			t = starts[i].Start
		}
		events := 0
		for j < len(ends) && ends[j].End == t {
			s := ends[j]
			idx, found := slices.BinarySearchFunc(active, s, func(a slot, b *Session) int { return order(a.s, b) })
			if !found {
				panic("ending session not active")
			}
			if active[idx].covered {
				s.CoveredMS += t - active[idx].since
			}
			active = slices.Delete(active, idx, idx+1)
			j++
			events++
		}
		for i < len(starts) && starts[i].Start == t {
			active = append(active, slot{s: starts[i]})
			i++
			events++
		}
		lo, hi := max(0, min(Q, len(active))-events), min(len(active), Q+events)
		for x := lo; x < hi; x++ {
			sl := &active[x]
			switch want := x < Q; {
			case want && !sl.covered:
				sl.covered, sl.since = true, t
			case !want && sl.covered:
				sl.s.CoveredMS += t - sl.since
				sl.covered = false
			}
		}
	}
}

// coveredAt is coverage decided one instant at a time, from its definition:
// at every instant the first q active sessions by (start, instance, user).
func coveredAt(sessions []*Session, q int64) map[*Session]int64 {
	var ts []int64
	for _, s := range sessions {
		ts = append(ts, s.Start, s.End)
	}
	slices.Sort(ts)
	ts = slices.Compact(ts)
	out := map[*Session]int64{}
	for k := 0; k+1 < len(ts); k++ {
		var act []*Session
		for _, s := range sessions {
			if s.Start <= ts[k] && ts[k] < s.End {
				act = append(act, s)
			}
		}
		slices.SortFunc(act, func(a, b *Session) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Key.InstanceID, b.Key.InstanceID), cmp.Compare(a.Key.User, b.Key.User))
		})
		for x := 0; x < len(act) && int64(x) < q; x++ {
			out[act[x]] += ts[k+1] - ts[k]
		}
	}
	return out
}

func TestApplyCoverageAgreesWithTheSweepAndTheDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 400 {
		n := 1 + rng.IntN(40)
		if trial%50 == 0 {
			n = 300 + rng.IntN(300)
		}
		span := int64(1 + rng.IntN(60)) // small spans: many ties at one instant
		a, b := make([]*Session, n), make([]*Session, n)
		for k := range a {
			start := rng.Int64N(span)
			s := Session{Key: schemas.Key{InstanceID: fmt.Sprintf("MIG-%d", rng.IntN(n)), User: fmt.Sprintf("u%d", k)},
				Start: start, End: start + 1 + rng.Int64N(span)}
			a[k], b[k] = &s, new(Session)
			*b[k] = s
		}
		q := rng.Int64N(int64(n) + 2)
		applyCoverage(a, q)
		applyCoverageSorted(b, q)
		var want map[*Session]int64
		if n <= 40 {
			want = coveredAt(a, q)
		}
		for k := range a {
			require.Equal(t, b[k].CoveredMS, a[k].CoveredMS, "trial %d, n %d, q %d, session %d", trial, n, q, k)
			if want != nil {
				require.Equal(t, want[a[k]], a[k].CoveredMS, "trial %d: session %d against the definition", trial, k)
			}
		}
	}
}

// BenchmarkApplyCoverage: one (project, SKU) of many concurrent sessions
// (a fleet's month of hourly holdings), against the sorted-slice sweep.
func BenchmarkApplyCoverage(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 60000
	ss := make([]*Session, n)
	for k := range ss {
		start := rng.Int64N(720) * 3_600_000
		ss[k] = &Session{Key: schemas.Key{InstanceID: fmt.Sprintf("MIG-%05d", k), User: "u"}, Start: start, End: start + (1+rng.Int64N(200))*3_600_000}
	}
	for _, c := range []struct {
		name string
		fn   func([]*Session, int64)
	}{{"fenwick", applyCoverage}, {"sorted-slice", applyCoverageSorted}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.fn(ss, n/4)
			}
		})
	}
}
