package advice

import (
	"cmp"
	"slices"

	"github.com/cardhour/cardhour/billing"
)

// levels returns, for k = 1 .. the peak, how long at least k of the intervals
// were open at once (ms): levels[k-1]. Intervals are half-open.
func levels(ivs []billing.Interval) []int64 {
	type ev struct {
		t int64
		d int
	}
	evs := make([]ev, 0, 2*len(ivs))
	for _, iv := range ivs {
		if iv.End > iv.Start {
			evs = append(evs, ev{iv.Start, +1}, ev{iv.End, -1})
		}
	}
	// Ends before starts at the same instant: [a,b) and [b,c) never overlap.
	slices.SortFunc(evs, func(x, y ev) int { return cmp.Or(cmp.Compare(x.t, y.t), cmp.Compare(x.d, y.d)) })
	var at []int64 // at[c]: time with exactly c open
	c := 0
	for j, e := range evs {
		if j > 0 && c > 0 {
			for len(at) <= c {
				at = append(at, 0)
			}
			at[c] += e.t - evs[j-1].t
		}
		c += e.d
	}
	if len(at) <= 1 {
		return nil
	}
	out := make([]int64, len(at)-1)
	var acc int64
	for k := len(at) - 1; k >= 1; k-- {
		acc += at[k]
		out[k-1] = acc
	}
	return out
}

// sessionLevels is levels of the sessions themselves: what reservation
// coverage sees (each session of the engine is one coverable stream).
func sessionLevels(ss []billing.Session) []int64 {
	ivs := make([]billing.Interval, len(ss))
	for i, s := range ss {
		ivs[i] = billing.Interval{Start: s.Start, End: s.End}
	}
	return levels(ivs)
}

// instanceLevels is the concurrency profile: the union of the sessions of
// each instance (whoever held it), then how many instances were held at once.
func instanceLevels(ss []billing.Session) []int64 { return levels(instanceIntervals(ss)) }

// addLevels adds b into a (k by k), growing a.
func addLevels(a, b []int64) []int64 {
	for len(a) < len(b) {
		a = append(a, 0)
	}
	for k, v := range b {
		a[k] += v
	}
	return a
}

// dailyPeaks returns, for each day [bounds[d], bounds[d+1]), the most of the
// intervals open at once during it.
func dailyPeaks(ivs []billing.Interval, bounds []int64) []int64 {
	type ev struct {
		t int64
		d int
	}
	evs := make([]ev, 0, 2*len(ivs))
	for _, iv := range ivs {
		if iv.End > iv.Start {
			evs = append(evs, ev{iv.Start, +1}, ev{iv.End, -1})
		}
	}
	slices.SortFunc(evs, func(x, y ev) int { return cmp.Or(cmp.Compare(x.t, y.t), cmp.Compare(x.d, y.d)) })
	peaks := make([]int64, max(0, len(bounds)-1))
	d := 0
	// mark records level c over [lo, hi): the days it overlaps see at least c.
	mark := func(lo, hi int64, c int64) {
		for d > 0 && bounds[d] > lo {
			d--
		}
		for d < len(peaks) && bounds[d+1] <= lo {
			d++
		}
		for k := d; k < len(peaks) && bounds[k] < hi; k++ {
			peaks[k] = max(peaks[k], c)
		}
	}
	var c int64
	for j, e := range evs {
		if j > 0 && c > 0 && e.t > evs[j-1].t {
			mark(evs[j-1].t, e.t, c)
		}
		c += int64(e.d)
	}
	return peaks
}

// instanceIntervals are the sessions united per instance (whoever held it).
func instanceIntervals(ss []billing.Session) []billing.Interval {
	by := map[string]*billing.IntervalSet{}
	var order []string
	for _, s := range ss {
		set, ok := by[s.Key.InstanceID]
		if !ok {
			set = &billing.IntervalSet{}
			by[s.Key.InstanceID] = set
			order = append(order, s.Key.InstanceID)
		}
		set.Add(s.Start, s.End)
	}
	var ivs []billing.Interval
	for _, id := range order {
		ivs = append(ivs, by[id].Pieces()...)
	}
	return ivs
}
