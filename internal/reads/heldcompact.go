package reads

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// CompactHeld is a store that answers HeldNow from its compact rows: the
// latest held sample of each instance (LatestRows), the occupancy and idle
// runs billing reads (UsageSource), and the raw samples as the fallback
// for a moment in the store's past (HeldRows). Implemented by
// ingest.MemStore, ingest/sqlite and ingest/clickhouse.
type CompactHeld interface {
	LatestRows
	UsageSource
	HeldRows
}

// HeldNowFrom is HeldNowWithin computed from compact rows: which instances
// are held, by whom, and their latest sample come from the latest held
// sample of each instance; since when from the occupancy runs of its key,
// joined backwards while their gaps are within the tolerance and no other
// key of the instance comes between (as HeldNowWithin walks samples); idle
// since when from the idle runs of its key under the project's threshold
// (raw samples only for runs the threshold cuts through, as BillFrom), the
// streak ending at the latest time the key held the instance without being
// idle. Its cost grows with the compact rows of the look-back's month, not
// with the raw samples of the look-back: a store keyed by instance and
// time (ClickHouse's raw_samples, partitioned by month) cannot read "the
// last hours" of every instance without scanning the month.
//
// The result is HeldNowWithin's for samples that do not overlap one
// another, except where the look-back cuts a holding: a clipped start
// (SinceClipped, IdleSinceClipped) is the start of the runs read, within
// the tolerance of the look-back's start, where HeldNowWithin gives its
// first sample after it; and a holding that begins just after it is
// clipped or not as the runs show, where the raw samples cannot tell. An
// instance whose latest sample starts more than the gap tolerance after
// now (now is a moment in the store's past, or the node's clock runs
// ahead) is not described by it: HeldNowFrom answers for it as
// HeldNowWithin does, from its raw samples, read by instance
// (InstanceRows) where the store can and else by time.
func HeldNowFrom(ctx context.Context, src CompactHeld, cat *schemas.Catalog, now time.Time, lookback time.Duration) ([]Held, error) {
	if lookback <= 0 {
		return nil, fmt.Errorf("held now: lookback %s: want a positive duration", lookback)
	}
	tol := cat.Defaults.GapToleranceMS
	nowMS := now.UnixMilli()
	lo := now.Add(-lookback).UnixMilli()
	rows, err := readCompact(ctx, src, cat, lo, nowMS, tol)
	if err != nil {
		return nil, err
	}
	latest := rows.latest
	var fromRaw []Held
	if len(rows.later) > 0 {
		// Now lies in the past of these instances (a moment in the store's
		// past, or a node whose clock runs ahead): their latest sample does
		// not describe now, their raw samples do, read by instance where
		// the store can.
		ir, ok := src.(InstanceRows)
		if !ok {
			return HeldNowWithin(ctx, src, cat, now, lookback)
		}
		fromRaw, err = heldFromSamples(cat, now, lookback, func(from, to int64, fn func(*schemas.Sample) error) error {
			return ir.InstanceSamples(ctx, rows.later, from, to, fn)
		})
		if err != nil {
			return nil, err
		}
	}
	if len(latest) == 0 {
		return fromRaw, nil
	}
	runs := heldRuns(rows.occupancy, latest)
	idleTime, err := idleTimeNow(ctx, src, cat, latest, rows.idle, lo, nowMS)
	if err != nil {
		return nil, err
	}
	out := make([]Held, 0, len(latest)+len(fromRaw))
	out = append(out, fromRaw...)
	for id, last := range latest {
		out = append(out, heldFromRuns(cat, &last, runs[id], idleTime, lo, tol))
	}
	slices.SortFunc(out, func(a, b Held) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.InstanceID, b.InstanceID))
	})
	return out, nil
}

// latestHeld reads the latest held sample of each instance since lo: those
// that end within tol of now (nowMS) by instance, and the instances whose
// latest sample starts more than tol after now (later).
func latestHeld(ctx context.Context, src LatestRows, lo, nowMS, tol int64) (latest map[string]schemas.Sample, later []string, err error) {
	latest = map[string]schemas.Sample{}
	err = src.LatestSamples(ctx, lo, func(s *schemas.Sample) error {
		switch {
		case s.StartMS > nowMS+tol:
			later = append(later, s.InstanceID)
		case s.EndMS()+tol >= nowMS:
			latest[s.InstanceID] = *s
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("held now: latest samples: %w", err)
	}
	return latest, later, nil
}

// compactRows are the rows HeldNowFrom reads over its look-back [lo, now]:
// the latest held sample of each instance (latestHeld), every occupancy
// run and every idle run under the catalog's greatest threshold. They are
// read at once, each kind on its own, and sorted out afterwards.
type compactRows struct {
	latest    map[string]schemas.Sample
	later     []string
	occupancy []schemas.Run
	idle      []schemas.IdleRun
}

func readCompact(ctx context.Context, src CompactHeld, cat *schemas.Catalog, lo, nowMS, tol int64) (*compactRows, error) {
	var r compactRows
	var errLatest, errOcc, errIdle error
	var wg sync.WaitGroup
	wg.Go(func() { r.latest, r.later, errLatest = latestHeld(ctx, src, lo, nowMS, tol) })
	wg.Go(func() {
		errOcc = src.Occupancy(ctx, lo, nowMS, func(rs []schemas.Run) error {
			for _, x := range rs {
				if x.EndMS > x.StartMS {
					r.occupancy = append(r.occupancy, x)
				}
			}
			return nil
		})
		if errOcc != nil {
			errOcc = fmt.Errorf("held now: %w", errOcc)
		}
	})
	wg.Go(func() {
		errIdle = src.IdleRuns(ctx, lo, nowMS+1, billing.MaxIdleThreshold(cat)+1e-9, func(rs []schemas.IdleRun) error {
			r.idle = append(r.idle, rs...)
			return nil
		})
		if errIdle != nil {
			errIdle = fmt.Errorf("held now: %w", errIdle)
		}
	})
	wg.Wait()
	if err := errors.Join(errLatest, errOcc, errIdle); err != nil {
		return nil, err
	}
	return &r, nil
}

// heldRuns returns the occupancy runs of the held instances, by instance:
// every key of each, since another holder's run ends a holding.
func heldRuns(occupancy []schemas.Run, latest map[string]schemas.Sample) map[string][]schemas.Run {
	runs := map[string][]schemas.Run{}
	for _, r := range occupancy {
		if _, ok := latest[r.Key.InstanceID]; ok {
			runs[r.Key.InstanceID] = append(runs[r.Key.InstanceID], r)
		}
	}
	return runs
}

// idleTimeNow returns the idle time since lo of the keys whose latest sample
// is idle, under each project's threshold, from the idle runs read (raw
// samples only for runs the threshold cuts through).
func idleTimeNow(ctx context.Context, src UsageSource, cat *schemas.Catalog, latest map[string]schemas.Sample, idle []schemas.IdleRun, lo, nowMS int64) (map[schemas.Key][]schemas.Run, error) {
	idleKeys := map[schemas.Key]bool{}
	for _, s := range latest {
		if IsIdleSample(cat, &s) {
			idleKeys[schemas.KeyOf(&s)] = true
		}
	}
	idleTime := map[schemas.Key][]schemas.Run{}
	if len(idleKeys) == 0 {
		return idleTime, nil
	}
	feed := billing.NewIdleSink(cat, lo, nowMS+1, func(k schemas.Key, s, e int64) {
		if e > s {
			idleTime[k] = append(idleTime[k], schemas.Run{StartMS: s, EndMS: e})
		}
	})
	for i := range idle {
		if idleKeys[idle[i].Key] {
			feed.Add(&idle[i])
		}
	}
	if err := ResolveIdle(ctx, feed, src); err != nil {
		return nil, fmt.Errorf("held now: %w", err)
	}
	return idleTime, nil
}

// heldFromRuns describes the instance whose latest sample is last: since when
// its key holds it (holdingStart over the instance's runs, clipped at the
// look-back's start lo) and, idle now, since when it is idle (streakStart).
func heldFromRuns(cat *schemas.Catalog, last *schemas.Sample, runs []schemas.Run, idleTime map[schemas.Key][]schemas.Run, lo, tol int64) Held {
	k := schemas.KeyOf(last)
	h := heldBy(cat, last)
	since, broke := holdingStart(runs, k, last.StartMS, tol)
	clipped := !broke && since <= lo+tol
	if clipped {
		h.SinceClipped = true
		since = max(since, lo)
	}
	h.Since = time.UnixMilli(since).UTC()
	if h.Idle = IsIdleSample(cat, last); h.Idle {
		idleSince := streakStart(idleTime[k], runs, k, since, last.StartMS)
		if clipped && idleSince <= since {
			h.IdleSinceClipped = true
		}
		h.IdleSince = time.UnixMilli(max(idleSince, lo)).UTC()
	}
	return h
}

// holdingStart walks back from the latest sample's start over the runs of
// the instance: a run of key k joins the holding when it ends within tol of
// its current start and no run of another key comes between (ends after
// it and starts before the current start). broke reports that some run of
// the instance starts before the holding (a gap over the tolerance or
// another holder ended it there), so that the holding did not begin before
// the runs read. Runs are visited latest end first, so the runs of other
// keys ending after the one visited are those visited before it: the
// earliest start among them decides whether one comes between.
func holdingStart(rs []schemas.Run, k schemas.Key, startMS, tol int64) (since int64, broke bool) {
	slices.SortFunc(rs, func(a, b schemas.Run) int { return cmp.Compare(b.EndMS, a.EndMS) })
	cur := startMS
	otherStart := int64(math.MaxInt64) // earliest start of the other keys' runs visited
	for i := range rs {
		r := &rs[i]
		if r.Key != k {
			otherStart = min(otherStart, r.StartMS)
			continue
		}
		if r.EndMS+tol < cur || r.StartMS >= cur {
			continue
		}
		if otherStart < cur {
			break // another holder's run ends after this one and starts before the holding
		}
		cur = r.StartMS
	}
	for i := range rs {
		if rs[i].StartMS < cur {
			return cur, true
		}
	}
	return cur, false
}

// streakStart is the start of the idle streak that contains the latest
// sample (starting at lastMS) of a holding that began at since: idle is
// the key's idle time, runs the instance's occupancy runs. Walking back
// over the idle time, a stretch where the key held the instance without
// being idle ends the streak; a stretch without samples does not (the
// holding bridged it).
func streakStart(idle []schemas.Run, runs []schemas.Run, k schemas.Key, since, lastMS int64) int64 {
	merged := union(idle)
	var occ []schemas.Run
	for i := range runs {
		if runs[i].Key == k {
			occ = append(occ, runs[i])
		}
	}
	occ = union(occ)
	// The first stretch ending after a time t (binary search over the disjoint, sorted union).
	after := func(u []schemas.Run, t int64) int {
		i, _ := slices.BinarySearchFunc(u, t, func(r schemas.Run, t int64) int { return cmp.Compare(r.EndMS, t+1) })
		return i
	}
	// The idle stretch holding the latest sample.
	j := after(merged, lastMS)
	if j == len(merged) || merged[j].StartMS > lastMS {
		return lastMS // its idle row is not stored yet: the streak is the sample
	}
	held := func(a, b int64) bool { // the key held the instance at some point of [a, b)
		i := after(occ, a)
		return i < len(occ) && occ[i].StartMS < b
	}
	start := merged[j].StartMS
	for ; start > since; j-- {
		prevEnd := since
		if j > 0 {
			prevEnd = max(merged[j-1].EndMS, since)
		}
		if held(prevEnd, start) || j == 0 || merged[j-1].EndMS <= since {
			break
		}
		start = merged[j-1].StartMS
	}
	return max(start, since)
}

// InstanceRows is a store that reads the held samples of a few instances
// by its index (instance, then time) rather than by a window of time over
// every instance; the watcher reads a release's evidence with it.
type InstanceRows interface {
	// InstanceSamples calls fn with the held samples (project not empty) of
	// the given instances that start in [fromMS, toMS), in any order; a
	// replayed sample may come twice.
	InstanceSamples(ctx context.Context, instances []string, fromMS, toMS int64, fn func(*schemas.Sample) error) error
}
