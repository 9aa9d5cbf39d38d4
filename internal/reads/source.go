package reads

import (
	"context"
	"errors"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// UsageSource is where billing reads stored usage from (ingest.MemStore,
// ingest/sqlite, ingest/clickhouse). A store only fetches rows; BillFrom owns
// the algorithm (which rows, how idle is decided, the exact fallback). Rows
// may come in any order and with any duplication: billing unions them, so the
// result is the same as feeding the raw samples with Accumulator.Add. Each
// method calls fn with chunks of rows from one goroutine; fn owns each chunk
// (a store must not reuse one it handed over).
//
// A store must not bridge gaps itself: only touching or overlapping samples
// may have been merged into one run, because the gap tolerance is a catalog
// setting known only at billing time.
type UsageSource interface {
	// Occupancy returns every stored occupancy run with EndMS >= lo and
	// StartMS <= hi, runs of equal (Key, StartMS) merged to their longest
	// end or not.
	Occupancy(ctx context.Context, lo, hi int64, fn func([]schemas.Run) error) error
	// IdleRuns returns every stored idle run with EndMS > from and
	// StartMS < to whose class is IdleClassNull or whose MinUtil is below
	// maxUtil (more may come).
	IdleRuns(ctx context.Context, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error
	// RawIdle returns the held raw samples with known util below utilBelow of
	// the given instances that start in [from, to) (more may come).
	RawIdle(ctx context.Context, instances []string, from, to int64, utilBelow float64, fn func([]schemas.RawPoint) error) error
}

// BillFrom bills period p under cat from a stored source: occupancy and idle
// runs are read in parallel, idle runs are decided with each project's
// threshold (IdleVerdict), and the raw samples of runs a threshold cuts
// through are read last.
func BillFrom(ctx context.Context, src UsageSource, cat *schemas.Catalog, p billing.Period) (*billing.Result, error) {
	acc := billing.NewAccumulator(cat, p)
	lo, hi := billing.ScanWindow(cat, p)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feed := billing.NewIdleFeeder(acc, cat, p)
	// Class 0 (util null, no process: always idle) or a class whose smallest
	// util is below the largest threshold of the catalog: a loose pre-filter,
	// decided exactly here with the project's own threshold.
	err := readRuns(ctx, src, runRange{occFrom: lo, occTo: hi, idleFrom: p.StartMS(), idleTo: p.EndMS(), maxUtil: billing.MaxIdleThreshold(cat) + 1e-9},
		func(rows []schemas.Run) {
			for i := range rows {
				acc.AddOccupancy(rows[i].Key, rows[i].StartMS, rows[i].EndMS, false)
			}
		},
		func(runs []schemas.IdleRun) {
			for i := range runs {
				feed.Add(&runs[i])
			}
		})
	if err != nil {
		return nil, err
	}
	if err := ResolveIdle(ctx, feed, src); err != nil {
		return nil, err
	}
	return acc.Invoices(), nil
}

// runRange is what readRuns reads: the occupancy runs of [occFrom, occTo)
// and the idle runs of [idleFrom, idleTo) whose smallest util is below
// maxUtil.
type runRange struct {
	occFrom, occTo, idleFrom, idleTo int64
	maxUtil                          float64
}

// readRuns reads the occupancy runs and the idle runs of r from src at
// once, each in a goroutine of its own, and hands their chunks to onOcc
// and onIdle in this goroutine, so that neither needs a lock. It returns
// when both reads ended, with their errors. The caller cancels ctx when it
// returns, which stops a read still sending.
func readRuns(ctx context.Context, src UsageSource, r runRange, onOcc func([]schemas.Run), onIdle func([]schemas.IdleRun)) error {
	occ := make(chan []schemas.Run, 4)
	idle := make(chan []schemas.IdleRun, 4)
	errc := make(chan error, 2)
	go func() {
		defer close(occ)
		errc <- src.Occupancy(ctx, r.occFrom, r.occTo, func(rs []schemas.Run) error { return send(ctx, occ, rs) })
	}()
	go func() {
		defer close(idle)
		errc <- src.IdleRuns(ctx, r.idleFrom, r.idleTo, r.maxUtil, func(rs []schemas.IdleRun) error { return send(ctx, idle, rs) })
	}()
	for occ != nil || idle != nil {
		select {
		case rows, ok := <-occ:
			if !ok {
				occ = nil
				continue
			}
			onOcc(rows)
		case runs, ok := <-idle:
			if !ok {
				idle = nil
				continue
			}
			onIdle(runs)
		}
	}
	return errors.Join(<-errc, <-errc)
}

// send hands a store's chunk to BillFrom's loop unless ctx ends first.
func send[T any](ctx context.Context, out chan<- []T, rows []T) error {
	select {
	case out <- rows:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ResolveIdle reads the raw samples of f's pending runs from src, in one
// RawIdle, and resolves them (nothing when none is pending).
func ResolveIdle(ctx context.Context, f *billing.IdleFeeder, src UsageSource) error {
	if !f.Pending() {
		return nil
	}
	insts, from, to, below := f.PendingRange()
	err := src.RawIdle(ctx, insts, from, to, below, func(pts []schemas.RawPoint) error {
		for i := range pts {
			f.Raw(&pts[i])
		}
		return nil
	})
	if err != nil {
		return err
	}
	return f.Resolve()
}

// Biller bills one month of src under cat with BillFrom: the advice's Biller
// over a usage store.
func Biller(src UsageSource, cat *schemas.Catalog) func(ctx context.Context, p billing.Period) (*billing.Result, error) {
	return func(ctx context.Context, p billing.Period) (*billing.Result, error) {
		return BillFrom(ctx, src, cat, p)
	}
}
