package billing

import (
	"context"

	"github.com/cardhour/cardhour/schemas"
)

// UsageSource is where billing reads stored usage from (the embedded store or
// ClickHouse). Scan feeds acc, through Accumulator.AddOccupancy, every stored
// occupancy interval of the period's scan window (see ScanWindow) and every idle
// interval that is idle under cat (IsIdleUtil), in any order and with any
// duplication: billing unions them, so the result is the same as feeding the raw
// samples with Accumulator.Add.
//
// An implementation must not bridge gaps itself: only touching or overlapping
// samples may have been merged into one interval, because the gap tolerance is a
// catalog setting known only at billing time.
type UsageSource interface {
	Scan(ctx context.Context, cat *schemas.Catalog, p Period, acc *Accumulator) error
}

// ScanWindow is the closed range [lo, hi] (Unix ms) of stored intervals that can
// affect period p under cat: a gap that reaches into the period is bridged only by
// a piece that ends at most the gap tolerance before it (or starts at most that
// after it), so intervals ending before lo or starting after hi cannot change a
// session in it. A reader must include every interval with end >= lo and
// start <= hi; the accumulator drops the rest itself.
func ScanWindow(cat *schemas.Catalog, p Period) (lo, hi int64) {
	tol := cat.Defaults.GapToleranceMS
	return p.StartMS() - tol, p.EndMS() + tol
}

// IsIdleUtil is IsIdle for a stored idle-candidate interval of a held instance:
// utilKnown and util as sampled; processesZero whether the samples saw no
// compute process (only consulted when util is unknown).
func IsIdleUtil(cat *schemas.Catalog, project string, utilKnown bool, util float64, processesZero bool) bool {
	if utilKnown {
		return util < cat.IdlePolicyFor(project).Threshold
	}
	return processesZero
}

// MaxIdleThreshold is the largest idle threshold of any project in cat; a reader
// may use it to pre-filter idle candidates before checking each with IsIdleUtil.
func MaxIdleThreshold(cat *schemas.Catalog) float64 {
	m := cat.Defaults.Idle.Threshold
	for i := range cat.Projects {
		if p := cat.Projects[i].Idle; p != nil && p.Threshold > m {
			m = p.Threshold
		}
	}
	return m
}

// BillFrom bills period p under cat from a stored source.
func BillFrom(ctx context.Context, src UsageSource, cat *schemas.Catalog, p Period) (*Result, error) {
	acc := NewAccumulator(cat, p)
	if err := src.Scan(ctx, cat, p, acc); err != nil {
		return nil, err
	}
	return acc.Invoices(), nil
}
