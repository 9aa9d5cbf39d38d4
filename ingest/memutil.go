package ingest

import (
	"context"

	"github.com/cardhour/cardhour/schemas"
)

// UtilRows implements reads.UtilRows over every stored sample, held or not,
// grouping like the databases do (UtilSQL).
func (m *MemStore) UtilRows(ctx context.Context, q schemas.UtilRowQuery, fn func(schemas.UtilRow) error) error {
	type key struct {
		node, model string
		bucket      int64
	}
	m.mu.Lock()
	groups := map[key]*schemas.UtilRow{}
	var order []*schemas.UtilRow
	_ = m.uniqueSamples(q.FromMS, q.ToMS, func(s *schemas.Sample) error {
		var k key
		if !q.AllModels {
			k.model = s.GPUModel
		}
		if q.ByNode {
			k.node = s.Node
		}
		if q.BucketMS > 0 {
			k.bucket = s.StartMS - (s.StartMS%q.BucketMS+q.BucketMS)%q.BucketMS
		}
		g := groups[k]
		if g == nil {
			g = &schemas.UtilRow{Node: k.node, GPUModel: k.model, BucketMS: k.bucket}
			groups[k] = g
			order = append(order, g)
		}
		g.SeenMS += s.IntervalMS
		held := s.Project != ""
		if held {
			g.HeldMS += s.IntervalMS
		}
		if s.UtilKnown {
			g.MeasuredMS += s.IntervalMS
			g.UtilMS += s.Util * float64(s.IntervalMS)
		} else if held {
			g.HeldUnmeasuredMS += s.IntervalMS
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
