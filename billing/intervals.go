package billing

import "sort"

// Interval is a half-open span of time [Start, End) in Unix milliseconds.
type Interval struct {
	Start, End int64
}

// Len is the interval's length in milliseconds.
func (iv Interval) Len() int64 { return iv.End - iv.Start }

// IntervalSet is a sorted list of disjoint intervals. Add merges an interval into
// the set and joins every piece whose gap to it is at most the set's tolerance, so
// after any sequence of Adds the set holds the union of all added intervals with
// gaps up to the tolerance bridged. Union and bridging are idempotent, commutative
// and associative: the order of Adds and repeated Adds never change the result.
//
// Samples of one key usually arrive in time order, so the common case (append to
// or extend the last piece) is O(1); out-of-order Adds cost a binary search and a
// copy.
type IntervalSet struct {
	Tol int64 // gaps up to this many milliseconds are bridged
	iv  []Interval
}

// Pieces returns the set's pieces in order. The slice is owned by the set.
func (s *IntervalSet) Pieces() []Interval { return s.iv }

// Len is the number of pieces.
func (s *IntervalSet) Len() int { return len(s.iv) }

// Add merges [start, end) into the set. Empty intervals are ignored.
func (s *IntervalSet) Add(start, end int64) {
	if end <= start {
		return
	}
	n := len(s.iv)
	if n == 0 || start > s.iv[n-1].End+s.Tol {
		s.iv = append(s.iv, Interval{start, end})
		return
	}
	if last := &s.iv[n-1]; start >= last.Start {
		if end > last.End {
			last.End = end
		}
		return
	}
	// General case: pieces i..j-1 are within tolerance of [start,end).
	i := sort.Search(n, func(k int) bool { return s.iv[k].End+s.Tol >= start })
	j := sort.Search(n, func(k int) bool { return s.iv[k].Start > end+s.Tol })
	if i == j {
		s.iv = append(s.iv, Interval{})
		copy(s.iv[i+1:], s.iv[i:])
		s.iv[i] = Interval{start, end}
		return
	}
	merged := Interval{min(start, s.iv[i].Start), max(end, s.iv[j-1].End)}
	s.iv[i] = merged
	s.iv = append(s.iv[:i+1], s.iv[j:]...)
}

// AddSet merges every piece of o into the set.
func (s *IntervalSet) AddSet(o *IntervalSet) {
	for _, p := range o.iv {
		s.Add(p.Start, p.End)
	}
}

// Clip returns the pieces of the set intersected with [lo, hi), dropping empty ones.
func (s *IntervalSet) Clip(lo, hi int64) []Interval {
	var out []Interval
	for _, p := range s.iv {
		if p.End <= lo || p.Start >= hi {
			continue
		}
		out = append(out, Interval{max(p.Start, lo), min(p.End, hi)})
	}
	return out
}

// bridgeClip joins the sorted, disjoint pieces whose gap is at most tol and
// returns the joined pieces intersected with [lo, hi), dropping empty ones: the
// same as adding the pieces to an IntervalSet with tolerance tol and clipping it.
func bridgeClip(pieces []Interval, tol, lo, hi int64) []Interval {
	var out []Interval
	for i := 0; i < len(pieces); {
		cur := pieces[i]
		for i++; i < len(pieces) && pieces[i].Start <= cur.End+tol; i++ {
			cur.End = max(cur.End, pieces[i].End)
		}
		if cur.End <= lo || cur.Start >= hi {
			continue
		}
		out = append(out, Interval{max(cur.Start, lo), min(cur.End, hi)})
	}
	return out
}

// overlap returns the total length of the intersection of two sorted lists of
// disjoint intervals.
func overlap(a, b []Interval) int64 {
	var total int64
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].Start, b[j].Start), min(a[i].End, b[j].End)
		if hi > lo {
			total += hi - lo
		}
		if a[i].End < b[j].End {
			i++
		} else {
			j++
		}
	}
	return total
}
