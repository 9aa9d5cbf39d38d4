package billing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	if err := ResolveIdle(ctx, feed, u.src); err != nil {
		return err
	}
	sums := NewBucketSums(q)
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
		for _, r := range union(x.held) {
			sums.Span(g, r.StartMS, r.EndMS, false)
		}
		for _, r := range union(x.idle) {
			sums.Span(g, r.StartMS, r.EndMS, true)
		}
	}
	return sums.Emit(fn)
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

// BucketSums adds up held and idle time per group and bucket of a usage
// query: a span's partial first and last buckets directly, the whole buckets
// between them as a difference array (O(1) per span however long), summed
// once by Emit. The Go usage path and ClickHouse's (which computes the same
// entries in SQL) share it.
type BucketSums struct {
	q       UsageRowQuery
	base, n int64
	groups  map[UsageRow]*bucketAcc
	order   []*bucketAcc
}

type bucketAcc struct {
	g                  UsageRow
	held, idle         []int64 // per bucket
	heldDiff, idleDiff []int64 // difference arrays
}

// NewBucketSums returns the sums of q's buckets (one bucket when q has none).
func NewBucketSums(q UsageRowQuery) *BucketSums {
	b := &BucketSums{q: q, n: 1, groups: map[UsageRow]*bucketAcc{}}
	if q.BucketMS > 0 {
		b.base = q.FromMS - mod(q.FromMS-q.BucketOffsetMS, q.BucketMS)
		b.n = (q.ToMS-1-b.base)/q.BucketMS + 1
	}
	return b
}

// Base is the start of bucket 0, Buckets the number of buckets.
func (b *BucketSums) Base() int64    { return b.base }
func (b *BucketSums) Buckets() int64 { return b.n }

func (b *BucketSums) group(g UsageRow) *bucketAcc {
	a := b.groups[g]
	if a == nil {
		a = &bucketAcc{g: g, held: make([]int64, b.n+1), idle: make([]int64, b.n+1), heldDiff: make([]int64, b.n+1), idleDiff: make([]int64, b.n+1)}
		b.groups[g] = a
		b.order = append(b.order, a)
	}
	return a
}

// Span adds [s, e), clipped to the query's range, to g's held or idle time.
func (b *BucketSums) Span(g UsageRow, s, e int64, idle bool) {
	q := b.q
	s, e = max(s, q.FromMS), min(e, q.ToMS)
	if s >= e {
		return
	}
	a := b.group(g)
	vals, diff := a.held, a.heldDiff
	if idle {
		vals, diff = a.idle, a.idleDiff
	}
	if q.BucketMS == 0 {
		vals[0] += e - s
		return
	}
	i0, i1 := (s-b.base)/q.BucketMS, (e-1-b.base)/q.BucketMS
	if i0 == i1 {
		vals[i0] += e - s
		return
	}
	vals[i0] += b.base + (i0+1)*q.BucketMS - s
	vals[i1] += e - (b.base + i1*q.BucketMS)
	diff[i0+1] += q.BucketMS
	diff[i1] -= q.BucketMS
}

// Add adds entries computed elsewhere to bucket idx of g: direct parts and
// difference-array entries, held and idle.
func (b *BucketSums) Add(g UsageRow, idx, held, heldDiff, idle, idleDiff int64) error {
	if idx < 0 || idx > b.n {
		return fmt.Errorf("bucket %d out of range [0, %d]", idx, b.n)
	}
	a := b.group(g)
	a.held[idx] += held
	a.heldDiff[idx] += heldDiff
	a.idle[idx] += idle
	a.idleDiff[idx] += idleDiff
	return nil
}

// Emit calls fn with every group's non-empty buckets, groups in the order
// they were first added.
func (b *BucketSums) Emit(fn func(UsageRow) error) error {
	for _, a := range b.order {
		var h, i int64
		for k := range b.n {
			h += a.heldDiff[k]
			i += a.idleDiff[k]
			r := a.g
			r.HeldMS, r.IdleMS = a.held[k]+h, a.idle[k]+i
			if r.HeldMS == 0 && r.IdleMS == 0 {
				continue
			}
			if b.q.BucketMS > 0 {
				r.BucketMS = b.base + k*b.q.BucketMS
			}
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}
