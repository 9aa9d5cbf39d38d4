package schemas

import "fmt"

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
	last    *bucketAcc // the group found last: spans come in runs of one group
	slab    []int64    // where the next groups' buckets are cut from
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
		b.base = q.FromMS - floorMod(q.FromMS-q.BucketOffsetMS, q.BucketMS)
		b.n = (q.ToMS-1-b.base)/q.BucketMS + 1
	}
	return b
}

// Base is the start of bucket 0, Buckets the number of buckets.
func (b *BucketSums) Base() int64    { return b.base }
func (b *BucketSums) Buckets() int64 { return b.n }

func (b *BucketSums) group(g UsageRow) *bucketAcc {
	if b.last != nil && b.last.g == g {
		return b.last
	}
	a := b.groups[g]
	if a == nil {
		a = &bucketAcc{g: g}
		w := int(b.n + 1)
		if len(b.slab) < 4*w {
			b.slab = make([]int64, 4*w*max(1, min(64, 1<<12/w)))
		}
		a.held, a.idle, a.heldDiff, a.idleDiff = b.slab[:w:w], b.slab[w:2*w:2*w], b.slab[2*w:3*w:3*w], b.slab[3*w:4*w:4*w]
		b.slab = b.slab[4*w:]
		b.groups[g] = a
		b.order = append(b.order, a)
	}
	b.last = a
	return a
}

// Span adds [s, e), clipped to the query's range, to g's held or idle time.
func (b *BucketSums) Span(g UsageRow, s, e int64, idle bool) {
	sg := b.Group(g)
	sg.Span(s, e, idle)
}

// SpanGroup is one group of a BucketSums, looked up once for the many spans
// of a key (Group).
type SpanGroup struct {
	b *BucketSums
	g UsageRow
	a *bucketAcc // nil until a span adds time
}

// Group returns g's group, to add spans to.
func (b *BucketSums) Group(g UsageRow) SpanGroup { return SpanGroup{b: b, g: g} }

// Span adds [s, e), clipped to the query's range, to the group's held or
// idle time (BucketSums.Span).
func (sg *SpanGroup) Span(s, e int64, idle bool) {
	b := sg.b
	q := b.q
	s, e = max(s, q.FromMS), min(e, q.ToMS)
	if s >= e {
		return
	}
	if sg.a == nil {
		sg.a = b.group(sg.g)
	}
	a := sg.a
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

// floorMod is a mod b in [0, b) for b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
