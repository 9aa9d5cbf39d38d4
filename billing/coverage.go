package billing

import (
	"cmp"
	"slices"
)

// applyCoverage sets CoveredMS on sessions of one (project, SKU) that hold q
// reserved instances: at every instant the first q active sessions, ordered by
// (start, instance, user), are covered (billing-semantics §3).
//
// It sweeps the session starts and ends in time order. The active sessions are
// kept sorted by that order; because sessions are activated in order of start
// (ties by instance and user), activation is an append. After the events of one
// instant only the sessions within k places of the q-th, or of the end when fewer
// than q are active (k = events at that instant), can have crossed the boundary,
// so each instant costs O(k) besides the removals.
func applyCoverage(sessions []*Session, q int64) {
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
		// The next instant with events.
		t := ends[j].End
		if i < len(starts) && starts[i].Start < t {
			t = starts[i].Start
		}
		events := 0
		// Half-open intervals: a session ending at t is no longer active at t.
		for j < len(ends) && ends[j].End == t {
			s := ends[j]
			idx, found := slices.BinarySearchFunc(active, s, func(a slot, b *Session) int { return order(a.s, b) })
			if !found {
				panic("BUG: billing coverage: ending session not active")
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
		// Sessions that crossed the boundary sit within events places of it; new
		// sessions (appended at the tail) sit within events places of the end.
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
