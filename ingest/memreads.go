package ingest

import (
	"context"
	"slices"

	"github.com/cardhour/cardhour/schemas"
)

// sampleKey is a raw sample's identity in every store: a replay of it
// replaces, never adds.
type sampleKey struct {
	instance, project, user string
	start                   int64
}

// uniqueSamples calls fn for each stored sample once (the last written of
// equal identities) whose start lies in [from, to). m.mu must be held.
func (m *MemStore) uniqueSamples(from, to int64, fn func(*schemas.Sample) error) error {
	seen := map[sampleKey]int{}
	for i := range m.samples {
		s := &m.samples[i]
		if s.StartMS >= from && s.StartMS < to {
			seen[sampleKey{s.InstanceID, s.Project, s.User, s.StartMS}] = i
		}
	}
	idx := make([]int, 0, len(seen))
	for _, i := range seen {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		if err := fn(&m.samples[i]); err != nil {
			return err
		}
	}
	return nil
}

// UsageRows implements schemas.UsageRows, grouping like the databases do.
func (m *MemStore) UsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) error {
	m.mu.Lock()
	groups := map[schemas.UsageRow]*schemas.UsageRow{}
	var order []*schemas.UsageRow
	_ = m.uniqueSamples(q.FromMS, q.ToMS, func(s *schemas.Sample) error {
		if !KeySelected(q, schemas.KeyOf(s)) || !inList(q.Nodes, s.Node) {
			return nil
		}
		k := q.GroupOf(schemas.KeyOf(s), s.Node)
		if q.BucketMS > 0 {
			k.BucketMS = s.StartMS - ((s.StartMS-q.BucketOffsetMS)%q.BucketMS+q.BucketMS)%q.BucketMS
		}
		g := groups[k]
		if g == nil {
			c := k
			g = &c
			groups[k] = g
			order = append(order, g)
		}
		g.HeldMS += s.IntervalMS
		t, ok := q.IdleByProject[s.Project]
		if !ok {
			t = q.IdleDefault
		}
		if (s.UtilKnown && s.Util < t) || (!s.UtilKnown && s.Processes == 0) {
			g.IdleMS += s.IntervalMS
		}
		return nil
	})
	m.mu.Unlock()
	for _, g := range order {
		if err := fn(*g); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// OccupancyOf implements reads.KeyedRuns: Occupancy, only the runs of the
// keys q selects (KeySelected).
func (m *MemStore) OccupancyOf(ctx context.Context, q schemas.UsageRowQuery, lo, hi int64, fn func([]schemas.Run) error) error {
	return m.Occupancy(ctx, lo, hi, func(rs []schemas.Run) error {
		return fn(slices.DeleteFunc(rs, func(r schemas.Run) bool { return !KeySelected(q, r.Key) }))
	})
}

// IdleRunsOf implements reads.KeyedRuns: IdleRuns, only the runs of the keys
// q selects (KeySelected).
func (m *MemStore) IdleRunsOf(ctx context.Context, q schemas.UsageRowQuery, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error {
	return m.IdleRuns(ctx, from, to, maxUtil, func(rs []schemas.IdleRun) error {
		return fn(slices.DeleteFunc(rs, func(r schemas.IdleRun) bool { return !KeySelected(q, r.Key) }))
	})
}

func inList(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }

// HeldSamples implements schemas.HeldRows.
func (m *MemStore) HeldSamples(ctx context.Context, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	return m.heldSamples(ctx, fromMS, toMS, func(*schemas.Sample) bool { return true }, false, fn)
}

// heldSamples calls fn with copies of the held samples in [fromMS, toMS)
// that keep says to keep, taken under the lock and handed over outside it;
// trimmed, with only the fields the databases keep.
func (m *MemStore) heldSamples(ctx context.Context, fromMS, toMS int64, keep func(*schemas.Sample) bool, trimmed bool, fn func(*schemas.Sample) error) error {
	var out []schemas.Sample
	m.mu.Lock()
	_ = m.uniqueSamples(fromMS, toMS, func(s *schemas.Sample) error {
		if s.Project != "" && keep(s) {
			x := *s
			if trimmed {
				x.MemUsed, x.MemTotal, x.UtilSource, x.SchemaField = 0, 0, "", ""
				if !x.UtilKnown {
					x.Util = 0
				}
			}
			out = append(out, x)
		}
		return nil
	})
	m.mu.Unlock()
	for i := range out {
		if err := fn(&out[i]); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// LatestSamples implements reads.LatestRows from the latest samples written
// (Batch.Latest), with the fields the database stores keep (no memory, util
// source or schema field).
func (m *MemStore) LatestSamples(ctx context.Context, fromMS int64, fn func(*schemas.Sample) error) error {
	var out []schemas.Sample
	m.mu.Lock()
	for _, s := range m.latest {
		if s.StartMS >= fromMS {
			s.MemUsed, s.MemTotal, s.UtilSource, s.SchemaField = 0, 0, "", ""
			if !s.UtilKnown {
				s.Util = 0
			}
			out = append(out, s)
		}
	}
	m.mu.Unlock()
	for i := range out {
		if err := fn(&out[i]); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Rejects implements schemas.QualityRows.
func (m *MemStore) Rejects(ctx context.Context, fromMS, toMS int64, first int) (int64, []schemas.RejectRow, error) {
	sum, err := m.RejectSummary(ctx, fromMS, toMS, first)
	return sum.Count, RejectRows(sum.First), err
}

// RejectRows are rejects as billing's data-quality reads take them.
func RejectRows(rs []Reject) []schemas.RejectRow {
	out := make([]schemas.RejectRow, len(rs))
	for i, r := range rs {
		out[i] = schemas.RejectRow{TimeMS: r.TimeMS, Source: r.Source, Reason: r.Reason, Error: r.Error}
	}
	return out
}

// NodeBuckets implements schemas.QualityRows from the node minutes written
// with the samples (Activity); the raw samples answer the parts of the range
// that are not whole minutes (MinuteSpan).
func (m *MemStore) NodeBuckets(ctx context.Context, fromMS, toMS, bucketMS int64, fn func(schemas.NodeBucketRow) error) error {
	seen := map[schemas.NodeBucketRow]bool{}
	m.mu.Lock()
	raw := func(from, to int64) {
		_ = m.uniqueSamples(from, to, func(s *schemas.Sample) error {
			seen[schemas.NodeBucketRow{Node: s.Node, BucketMS: s.StartMS - s.StartMS%bucketMS}] = true
			return nil
		})
	}
	if lo, hi, ok := MinuteSpan(fromMS, toMS, bucketMS); ok {
		raw(fromMS, lo)
		for n := range m.nodeMinutes {
			if n.MinuteMS >= lo && n.MinuteMS < hi {
				seen[schemas.NodeBucketRow{Node: n.Node, BucketMS: n.MinuteMS - n.MinuteMS%bucketMS}] = true
			}
		}
		raw(hi, toMS)
	} else {
		raw(fromMS, toMS)
	}
	m.mu.Unlock()
	for r := range seen {
		if err := fn(r); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// NodeLatest implements reads.NodeLatestRows from the node minutes written
// with the samples (Activity), the raw samples answering the parts of the
// range that are not whole minutes (MinuteSpan), as NodeBuckets does.
func (m *MemStore) NodeLatest(ctx context.Context, fromMS, toMS int64, fn func(schemas.NodeBucketRow) error) error {
	newest := map[string]int64{}
	see := func(node string, minute int64) {
		if b, ok := newest[node]; !ok || minute > b {
			newest[node] = minute
		}
	}
	m.mu.Lock()
	raw := func(from, to int64) {
		_ = m.uniqueSamples(from, to, func(s *schemas.Sample) error {
			see(s.Node, MinuteOf(s.StartMS))
			return nil
		})
	}
	if lo, hi, ok := MinuteSpan(fromMS, toMS, ActivityMinuteMS); ok {
		raw(fromMS, lo)
		for n := range m.nodeMinutes {
			if n.MinuteMS >= lo && n.MinuteMS < hi {
				see(n.Node, n.MinuteMS)
			}
		}
		raw(hi, toMS)
	} else {
		raw(fromMS, toMS)
	}
	m.mu.Unlock()
	for node, b := range newest {
		if err := fn(schemas.NodeBucketRow{Node: node, BucketMS: b}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Unattributed implements schemas.QualityRows from the busy unheld samples
// written with the samples (Activity); a threshold of 0 from all samples.
func (m *MemStore) Unattributed(ctx context.Context, fromMS, toMS int64, minUtil float64, fn func(schemas.UnattributedUsage) error) error {
	sums := map[[2]string]int64{}
	add := func(s *schemas.Sample) error {
		if s.Project == "" && s.StartMS >= fromMS && s.StartMS < toMS && (s.Processes > 0 || (s.UtilKnown && s.Util >= minUtil)) {
			sums[[2]string{s.Node, s.InstanceID}] += s.IntervalMS
		}
		return nil
	}
	m.mu.Lock()
	if minUtil > 0 {
		for _, s := range m.unheld {
			_ = add(&s)
		}
	} else {
		_ = m.uniqueSamples(fromMS, toMS, add)
	}
	m.mu.Unlock()
	for k, ms := range sums {
		if err := fn(schemas.UnattributedUsage{Node: k[0], InstanceID: k[1], Seconds: ms}); err != nil {
			return err
		}
	}
	return ctx.Err()
}
