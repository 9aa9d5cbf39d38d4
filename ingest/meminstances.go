package ingest

import (
	"context"
	"slices"

	"github.com/cardhour/cardhour/schemas"
)

// InstanceSamples implements billing.InstanceRows, with the fields the
// databases keep.
func (m *MemStore) InstanceSamples(ctx context.Context, instances []string, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	var out []schemas.Sample
	m.mu.Lock()
	_ = m.uniqueSamples(fromMS, toMS, func(s *schemas.Sample) error {
		if s.Project != "" && slices.Contains(instances, s.InstanceID) {
			x := *s // the fields the databases return
			x.MemUsed, x.MemTotal, x.UtilSource, x.SchemaField = 0, 0, "", ""
			if !x.UtilKnown {
				x.Util = 0
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
