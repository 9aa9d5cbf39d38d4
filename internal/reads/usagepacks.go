package reads

import (
	"context"
	"slices"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// PackedRuns is a store that keeps, besides its run rows, the same runs
// packed per project, UTC day and write (schemas.RunPack): a usage read of
// one project decodes a few dozen packs instead of reading thousands of run
// rows. Implemented by ingest/sqlite and ingest/clickhouse.
type PackedRuns interface {
	// RunPacks calls fn with every pack of the projects (of every project
	// when projects is empty) that may hold a run overlapping [lo, hi]
	// (more may come); fn may keep no reference to pack after it returns.
	// It returns false, having called fn never, when the store keeps no
	// packs (a schema before them): Usage then reads the run rows.
	RunPacks(ctx context.Context, projects []string, lo, hi int64, fn func(pack []byte) error) (bool, error)
}

// readPacks is readSpans from the packs of pr: the same runs as the run
// rows (repeats included, which the unions absorb), filtered by key once per
// pack key, by time per run as readSpans does, and idle runs decided as the
// idle feeder decides them. It returns false when pr keeps no packs.
func (u runUsage) readPacks(ctx context.Context, pr PackedRuns, q schemas.UsageRowQuery, byKey *keySpans) (bool, error) {
	keep := func(k schemas.Key) bool {
		return k.Project != "" && inList(q.Projects, k.Project) && inList(q.Users, k.User) &&
			(q.Models == nil || slices.Contains(q.Models, [2]string{k.GPUModel, k.Profile}))
	}
	feed := billing.NewIdleSink(u.cat, q.FromMS, q.ToMS, func(k schemas.Key, s, e int64) {
		x := byKey.of(k)
		x.idle = append(x.idle, ival{s, e})
	})
	maxUtil := billing.MaxIdleThreshold(u.cat) + 1e-9
	d := &byKey.pack
	ok, err := pr.RunPacks(ctx, q.Projects, q.FromMS, q.ToMS, func(pack []byte) error {
		if err := d.Decode(pack); err != nil {
			return err
		}
		of := packSpans(d, byKey, keep)
		for _, r := range d.Occ {
			if x := of[r.Key]; x != nil && r.EndMS > q.FromMS && r.StartMS < q.ToMS {
				x.held = append(x.held, ival{r.StartMS, r.EndMS})
			}
		}
		for i := range d.Idle {
			r := &d.Idle[i]
			x := of[r.Key]
			if x == nil || (r.Class != schemas.IdleClassNull && r.MinUtil >= maxUtil) {
				continue // what IdleRuns leaves out
			}
			addIdle(u.cat, feed, x, r, q.FromMS, q.ToMS)
		}
		return nil
	})
	if !ok || err != nil {
		return ok, err
	}
	return true, ResolveIdle(ctx, feed, u.src)
}

// addIdle is the idle feeder's Add for a run of x's key k: a run idle
// entirely is added to x at once (no lookup of its key), one the threshold
// cuts through waits in feed for its raw samples.
func addIdle(cat *schemas.Catalog, feed *billing.IdleFeeder, x *spans, r *schemas.PackIdleRun, from, to int64) {
	if r.EndMS <= from || r.StartMS >= to || r.EndMS <= r.StartMS {
		return
	}
	ir := schemas.IdleRun{Run: schemas.Run{Key: x.key, StartMS: r.StartMS, EndMS: r.EndMS}, Class: r.Class, MinUtil: r.MinUtil, MaxUtil: r.MaxUtil}
	switch billing.IdleVerdict(cat, &ir) {
	case billing.AllIdle:
		x.idle = append(x.idle, ival{r.StartMS, r.EndMS})
	case billing.Straddle:
		feed.Add(&ir)
	}
}

// packSpans returns the spans of each key of d (nil for a key keep drops),
// in byKey.of: looked up by the key's encoded bytes in byKey.seen (no
// allocation once a key was seen in this read), built and filtered by keep
// the first time.
func packSpans(d *schemas.DecodedPack, byKey *keySpans, keep func(schemas.Key) bool) []*spans {
	byRaw := byKey.seen[string(d.ProjectBytes())]
	if byRaw == nil {
		byRaw = map[string]*spans{}
		byKey.seen[string(d.ProjectBytes())] = byRaw
	}
	of := byKey.packOf[:0]
	for i := range d.Keys() {
		x, ok := byRaw[string(d.KeyBytes(i))]
		if !ok {
			if k := d.Key(i); keep(k) {
				x = byKey.of(k)
			}
			byRaw[string(d.KeyBytes(i))] = x
		}
		of = append(of, x)
	}
	byKey.packOf = of
	return of
}
