package ingest

import (
	"context"
	"slices"

	"github.com/cardhour/cardhour/schemas"
)

// InstanceSamples implements reads.InstanceRows, with the fields the
// databases keep.
func (m *MemStore) InstanceSamples(ctx context.Context, instances []string, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	return m.heldSamples(ctx, fromMS, toMS, func(s *schemas.Sample) bool { return slices.Contains(instances, s.InstanceID) }, true, fn)
}
