package billing

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/cardhour/cardhour/schemas"
)

// runUsage answers a UsageRowQuery from a store's compact rows (occupancy and
// idle runs, UsageSource) instead of its raw samples: per key the union of its
// runs, clipped to [FromMS, ToMS) and split at bucket boundaries, and the union
// of its idle time, decided per run with the project's threshold like BillFrom
// (runs the threshold cuts through are resolved from their raw samples).
// Occupancy carries no node: a query grouped or filtered by node goes to the
// store's GROUP BY over raw samples instead (usageSourceFor).
type runUsage struct {
	src UsageSource
	cat *schemas.Catalog
}

// usageSourceFor returns the reader Usage uses for rq: the compact rows of src
// when it has them and rq needs no node, else src's own GROUP BY.
func usageSourceFor(src UsageRows, cat *schemas.Catalog, rq UsageRowQuery) UsageRows {
	us, ok := src.(UsageSource)
	if !ok || rq.ByNode || len(rq.Nodes) > 0 {
		return src
	}
	return runUsage{src: us, cat: cat}
}

type spans struct{ held, idle []Run }

// UsageRows implements UsageRows over compact rows.
func (u runUsage) UsageRows(ctx context.Context, q UsageRowQuery, fn func(UsageRow) error) error {
	keep := func(k Key) bool {
		return k.Project != "" && inList(q.Projects, k.Project) && inList(q.Users, k.User) &&
			(q.Models == nil || slices.Contains(q.Models, [2]string{k.GPUModel, k.Profile}))
	}
	byKey := map[Key]*spans{}
	get := func(k Key) *spans {
		s := byKey[k]
		if s == nil {
			s = &spans{}
			byKey[k] = s
		}
		return s
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	occ := make(chan []Run, 4)
	idle := make(chan []IdleRun, 4)
	errc := make(chan error, 2)
	go func() {
		defer close(occ)
		errc <- u.src.Occupancy(ctx, q.FromMS, q.ToMS, func(rs []Run) error { return send(ctx, occ, rs) })
	}()
	go func() {
		defer close(idle)
		errc <- u.src.IdleRuns(ctx, q.FromMS, q.ToMS, MaxIdleThreshold(u.cat)+1e-9, func(rs []IdleRun) error { return send(ctx, idle, rs) })
	}()
	feed := &IdleFeeder{cat: u.cat, p0: q.FromMS, p1: q.ToMS, add: func(k Key, s, e int64) {
		x := get(k)
		x.idle = append(x.idle, Run{Key: k, StartMS: s, EndMS: e})
	}}
	for occ != nil || idle != nil {
		select {
		case rows, ok := <-occ:
			if !ok {
				occ = nil
				continue
			}
			for i := range rows {
				if keep(rows[i].Key) && rows[i].EndMS > q.FromMS && rows[i].StartMS < q.ToMS {
					x := get(rows[i].Key)
					x.held = append(x.held, rows[i])
				}
			}
		case runs, ok := <-idle:
			if !ok {
				idle = nil
				continue
			}
			for i := range runs {
				if keep(runs[i].Key) {
					feed.Add(&runs[i])
				}
			}
		}
	}
	if err := errors.Join(<-errc, <-errc); err != nil {
		return err
	}
	if feed.Pending() {
		insts, from, to, below := feed.PendingRange()
		err := u.src.RawIdle(ctx, insts, from, to, below, func(pts []RawPoint) error {
			for i := range pts {
				feed.Raw(&pts[i])
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := feed.Resolve(); err != nil {
			return err
		}
	}
	// Per group, bucket sums: part buckets added directly, the whole buckets
	// between a span's first and last as a difference array (O(1) per span).
	var base, n int64 = 0, 1
	if q.BucketMS > 0 {
		base = q.FromMS - mod(q.FromMS-q.BucketOffsetMS, q.BucketMS)
		n = (q.ToMS-1-base)/q.BucketMS + 1
	}
	type acc struct {
		g                  UsageRow
		held, idle         []int64 // per bucket
		heldDiff, idleDiff []int64
	}
	groups := map[UsageRow]*acc{}
	add := func(a *acc, s, e int64, idle bool) {
		s, e = max(s, q.FromMS), min(e, q.ToMS)
		if s >= e {
			return
		}
		vals, diff := a.held, a.heldDiff
		if idle {
			vals, diff = a.idle, a.idleDiff
		}
		if q.BucketMS == 0 {
			vals[0] += e - s
			return
		}
		i0, i1 := (s-base)/q.BucketMS, (e-1-base)/q.BucketMS
		if i0 == i1 {
			vals[i0] += e - s
			return
		}
		vals[i0] += base + (i0+1)*q.BucketMS - s
		vals[i1] += e - (base + i1*q.BucketMS)
		diff[i0+1] += q.BucketMS
		diff[i1] -= q.BucketMS
	}
	for k, x := range byKey {
		g := UsageRow{GPUModel: k.GPUModel, Profile: k.Profile}
		if q.ByProject {
			g.Project = k.Project
		}
		if q.ByUser {
			g.User = k.User
		}
		if q.ByInstance {
			g.InstanceID = k.InstanceID
		}
		a := groups[g]
		if a == nil {
			a = &acc{g: g, held: make([]int64, n), idle: make([]int64, n), heldDiff: make([]int64, n+1), idleDiff: make([]int64, n+1)}
			groups[g] = a
		}
		for _, r := range union(x.held) {
			add(a, r.StartMS, r.EndMS, false)
		}
		for _, r := range union(x.idle) {
			add(a, r.StartMS, r.EndMS, true)
		}
	}
	for _, a := range groups {
		var h, i int64
		for b := range n {
			h += a.heldDiff[b]
			i += a.idleDiff[b]
			r := a.g
			r.HeldMS, r.IdleMS = a.held[b]+h, a.idle[b]+i
			if r.HeldMS == 0 && r.IdleMS == 0 {
				continue
			}
			if q.BucketMS > 0 {
				r.BucketMS = base + b*q.BucketMS
			}
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// union returns the disjoint union of runs (of one key), sorted by start.
func union(rs []Run) []Run {
	slices.SortFunc(rs, func(a, b Run) int { return cmp.Compare(a.StartMS, b.StartMS) })
	out := rs[:0]
	for _, r := range rs {
		if r.EndMS <= r.StartMS {
			continue
		}
		if n := len(out); n > 0 && r.StartMS <= out[n-1].EndMS {
			out[n-1].EndMS = max(out[n-1].EndMS, r.EndMS)
			continue
		}
		out = append(out, r)
	}
	return out
}

func mod(a, b int64) int64 {
	if m := a % b; m < 0 {
		return m + b
	}
	return a % b
}

func inList(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
