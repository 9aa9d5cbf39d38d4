package billing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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
	latest := map[string]schemas.Sample{}
	var later []string // instances whose latest sample starts after now
	err := src.LatestSamples(ctx, lo, func(s *schemas.Sample) error {
		if s.StartMS > nowMS+tol {
			later = append(later, s.InstanceID)
			return nil
		}
		if s.Project != "" && s.EndMS()+tol >= nowMS {
			if cur, ok := latest[s.InstanceID]; !ok || s.StartMS >= cur.StartMS {
				latest[s.InstanceID] = *s
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("held now: latest samples: %w", err)
	}
	var fromRaw []Held
	if len(later) > 0 {
		// Now lies in the past of these instances (a moment in the store's
		// past, or a node whose clock runs ahead): their latest sample does
		// not describe now, their raw samples do, read by instance where
		// the store can.
		slices.Sort(later)
		later = slices.Compact(later)
		for _, id := range later {
			delete(latest, id)
		}
		ir, ok := src.(InstanceRows)
		if !ok {
			return HeldNowWithin(ctx, src, cat, now, lookback)
		}
		fromRaw, err = heldFromSamples(cat, now, lookback, func(from, to int64, fn func(*schemas.Sample) error) error {
			return ir.InstanceSamples(ctx, later, from, to, fn)
		})
		if err != nil {
			return nil, err
		}
	}
	if len(latest) == 0 {
		return fromRaw, nil
	}
	// The runs of the held instances (every key of each: another holder's
	// run ends a holding) and the idle time of the keys idle now.
	runs := map[string][]Run{}
	idleKeys := map[Key]bool{}
	for _, s := range latest {
		if IsIdleSample(cat, &s) {
			idleKeys[schemas.KeyOf(&s)] = true
		}
	}
	idleTime := map[Key][][2]int64{}
	feed := &IdleFeeder{cat: cat, p0: lo, p1: nowMS + 1, add: func(k Key, s, e int64) {
		if e > s {
			idleTime[k] = append(idleTime[k], [2]int64{s, e})
		}
	}}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	idleRuns := make(chan []IdleRun, 4)
	go func() {
		defer close(idleRuns)
		if len(idleKeys) == 0 {
			errc <- nil
			return
		}
		errc <- src.IdleRuns(rctx, lo, nowMS+1, MaxIdleThreshold(cat)+1e-9, func(rs []IdleRun) error { return send(rctx, idleRuns, rs) })
	}()
	occErr := src.Occupancy(rctx, lo, nowMS, func(rs []Run) error {
		for _, r := range rs {
			if _, ok := latest[r.Key.InstanceID]; ok && r.EndMS > r.StartMS {
				runs[r.Key.InstanceID] = append(runs[r.Key.InstanceID], r)
			}
		}
		return nil
	})
	if occErr != nil {
		cancel()
	}
	for rs := range idleRuns {
		for i := range rs {
			if idleKeys[rs[i].Key] {
				feed.Add(&rs[i])
			}
		}
	}
	if err := errors.Join(occErr, <-errc); err != nil {
		return nil, fmt.Errorf("held now: %w", err)
	}
	if err := feed.ResolveFrom(ctx, src); err != nil {
		return nil, fmt.Errorf("held now: %w", err)
	}
	out := make([]Held, 0, len(latest)+len(fromRaw))
	out = append(out, fromRaw...)
	for id, last := range latest {
		k := schemas.KeyOf(&last)
		h := Held{InstanceID: id, Node: last.Node, Project: last.Project, User: last.User, GPUModel: last.GPUModel,
			Profile: last.Profile, LastSample: time.UnixMilli(last.StartMS).UTC(), HolderRef: last.HolderRef}
		if sku, ok := cat.ResolveSKU(last.GPUModel, last.Profile); ok {
			h.SKU = sku.ID
		}
		since, broke := holdingStart(runs[id], k, last.StartMS, tol)
		clipped := !broke && since <= lo+tol
		if clipped {
			h.SinceClipped = true
			since = max(since, lo)
		}
		h.Since = time.UnixMilli(since).UTC()
		if h.Idle = IsIdleSample(cat, &last); h.Idle {
			idleSince := streakStart(idleTime[k], runs[id], k, since, last.StartMS)
			if clipped && idleSince <= since {
				h.IdleSinceClipped = true
			}
			h.IdleSince = time.UnixMilli(max(idleSince, lo)).UTC()
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Held) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.InstanceID, b.InstanceID))
	})
	return out, nil
}

// holdingStart walks back from the latest sample's start over the runs of
// the instance: a run of key k joins the holding when it ends within tol of
// its current start and no run of another key comes between (ends after
// it and starts before the current start). broke reports that some run of
// the instance starts before the holding (a gap over the tolerance or
// another holder ended it there), so that the holding did not begin before
// the runs read.
func holdingStart(rs []Run, k Key, startMS, tol int64) (since int64, broke bool) {
	slices.SortFunc(rs, func(a, b Run) int { return cmp.Compare(b.EndMS, a.EndMS) })
	cur := startMS
	for i := range rs {
		r := &rs[i]
		if r.Key != k || r.EndMS+tol < cur || r.StartMS >= cur {
			continue
		}
		blocked := false
		for j := range rs {
			if x := &rs[j]; x.Key != k && x.StartMS < cur && x.EndMS > r.EndMS {
				blocked = true
				break
			}
		}
		if blocked {
			break
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
func streakStart(idle [][2]int64, runs []Run, k Key, since, lastMS int64) int64 {
	slices.SortFunc(idle, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var merged [][2]int64
	for _, iv := range idle {
		if n := len(merged); n > 0 && iv[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], iv[1])
			continue
		}
		merged = append(merged, iv)
	}
	// The idle stretch holding the latest sample.
	j := -1
	for i := range merged {
		if merged[i][0] <= lastMS && lastMS < merged[i][1] {
			j = i
		}
	}
	if j < 0 {
		return lastMS // its idle row is not stored yet: the streak is the sample
	}
	held := func(a, b int64) bool { // the key held the instance at some point of [a, b)
		for i := range runs {
			if r := &runs[i]; r.Key == k && r.StartMS < b && r.EndMS > a {
				return true
			}
		}
		return false
	}
	start := merged[j][0]
	for ; start > since; j-- {
		prevEnd := since
		if j > 0 {
			prevEnd = max(merged[j-1][1], since)
		}
		if held(prevEnd, start) || j == 0 || merged[j-1][1] <= since {
			break
		}
		start = merged[j-1][0]
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
