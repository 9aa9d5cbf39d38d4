package billing

import (
	"cmp"
	"slices"
)

// applyCoverage sets CoveredMS on sessions of one (project, SKU) that hold q
// reserved instances: at every instant the first q active sessions, ordered by
// (start, instance, user), are covered (billing-semantics §3).
//
// It sweeps the session starts and ends in time order. A session's place in
// that order is its rank; the active sessions are a set of ranks, kept in a
// Fenwick tree so that the x-th active session is found in O(log n). After
// the events of one instant only the sessions within k places of the q-th,
// or of the end when fewer than q are active (k = events at that instant),
// can have crossed the boundary, so each instant costs O(k log n).
func applyCoverage(sessions []*Session, q int64) {
	for _, s := range sessions {
		s.CoveredMS = 0
	}
	if q <= 0 || len(sessions) == 0 {
		return
	}
	n := len(sessions)
	starts := slices.Clone(sessions)
	slices.SortFunc(starts, func(a, b *Session) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Key.InstanceID, b.Key.InstanceID), cmp.Compare(a.Key.User, b.Key.User))
	})
	ends := make([]int, n) // ranks, by end
	for r := range ends {
		ends[r] = r
	}
	slices.SortFunc(ends, func(a, b int) int { return cmp.Compare(starts[a].End, starts[b].End) })
	var (
		set     = newRankSet(n)
		covered = make([]bool, n)
		since   = make([]int64, n)
	)
	Q := min(q, int64(n))
	i, j := 0, 0
	for i < n || j < n {
		// The next instant with events.
		t := starts[ends[j]].End
		if i < n && starts[i].Start < t {
			t = starts[i].Start
		}
		events := int64(0)
		// Half-open intervals: a session ending at t is no longer active at t.
		for ; j < n && starts[ends[j]].End == t; j++ {
			r := ends[j]
			if covered[r] {
				starts[r].CoveredMS += t - since[r]
				covered[r] = false
			}
			set.remove(r)
			events++
		}
		for ; i < n && starts[i].Start == t; i++ {
			set.add(i)
			events++
		}
		// Sessions that crossed the boundary sit within events places of it; new
		// sessions (the greatest ranks) sit within events places of the end.
		active := int64(set.size)
		lo, hi := max(0, min(Q, active)-events), min(active, Q+events)
		for x := lo; x < hi; x++ {
			r := set.at(int(x))
			switch want := x < Q; {
			case want && !covered[r]:
				covered[r], since[r] = true, t
			case !want && covered[r]:
				starts[r].CoveredMS += t - since[r]
				covered[r] = false
			}
		}
	}
}

// rankSet is a set of ranks 0…n-1 in a Fenwick tree: add, remove and the
// x-th smallest member in O(log n).
type rankSet struct {
	tree []int32 // 1-based partial counts
	in   []bool
	size int
	top  int // the greatest power of two not above n
}

func newRankSet(n int) *rankSet {
	top := 1
	for top*2 <= n {
		top *= 2
	}
	return &rankSet{tree: make([]int32, n+1), in: make([]bool, n), top: top}
}

func (s *rankSet) add(r int) {
	if s.in[r] {
		panic("BUG: billing coverage: session activated twice")
	}
	s.in[r] = true
	s.size++
	for k := r + 1; k < len(s.tree); k += k & -k {
		s.tree[k]++
	}
}

func (s *rankSet) remove(r int) {
	if !s.in[r] {
		panic("BUG: billing coverage: ending session not active")
	}
	s.in[r] = false
	s.size--
	for k := r + 1; k < len(s.tree); k += k & -k {
		s.tree[k]--
	}
}

// at is the x-th smallest member (from 0); x < size.
func (s *rankSet) at(x int) int {
	pos, left := 0, int32(x+1)
	for step := s.top; step > 0; step /= 2 {
		if next := pos + step; next < len(s.tree) && s.tree[next] < left {
			pos = next
			left -= s.tree[next]
		}
	}
	return pos // the 1-based position pos+1, as a rank
}
