package reads

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// HeldLookback is how far back HeldNow reads samples to find when a held
// instance's current occupancy (and idle streak) began; an earlier start is
// reported as the lookback's start with SinceClipped set.
const HeldLookback = 24 * time.Hour

// Held is an instance held right now. The API serves it as it is; the
// fields marked "-" are the watcher's, not served.
type Held struct {
	InstanceID string `json:"instance"`
	Node       string `json:"node"`
	GPUUUID    string `json:"gpu"` // the card, of the latest sample (a MIG slice's or a share's card)
	Project    string `json:"project"`
	User       string `json:"user"`
	SKU        string `json:"sku,omitempty"` // empty when no catalog SKU prices it
	GPUModel   string `json:"gpu_model"`
	Profile    string `json:"profile,omitempty"`
	// Share is a share's fraction of the card as its profile states it
	// (schemas.ParseShareProfile; the larger of memory and compute where it
	// states both), a decimal string ("0.05" for "1/20"); empty for a whole
	// card, a MIG slice, and a share whose profile states no size (a vGPU
	// type such as "A16-1Q").
	Share string `json:"share,omitempty"`
	// Since is the start of the current occupancy, gaps up to the tolerance
	// bridged; SinceClipped: the occupancy began before the lookback
	// (HeldLookback for HeldNow), Since is the lookback's start.
	Since        time.Time `json:"since"`
	SinceClipped bool      `json:"-"`
	LastSample   time.Time `json:"last_sample"`         // start of the latest sample
	Idle         bool      `json:"idle"`                // the latest sample is idle under the project's threshold
	IdleSince    time.Time `json:"idle_since,omitzero"` // start of the current idle streak (zero when busy)
	// IdleSinceClipped: the idle streak began before the lookback (every
	// sample read is idle): IdleSince is the lookback's start, not the
	// streak's, and moves with now.
	IdleSinceClipped bool `json:"-"`
	// HolderRef is how to reach the holding workload, from the latest sample
	// (schemas.Sample.HolderRef; empty when the collector knew none).
	HolderRef string `json:"-"`
	// Cost is the list price of the holding so far, from Since to the
	// clock of the read (PriceHeld: the billing engine's UsageAmount with
	// the SKU's hourly price); nil when no SKU prices it or it was not
	// priced. For a holding older than the lookback it is the cost since
	// Since, the lookback's start.
	Cost *billing.Money `json:"cost,omitempty"`
}

// PriceHeld sets the cost so far of each holding at now, as the watcher's
// messages state it: the held time since Since, at the SKU's hourly list
// price (billing.UsageAmount).
func PriceHeld(cat *schemas.Catalog, held []Held, now time.Time) {
	for i := range held {
		h := &held[i]
		h.Cost = nil
		if sku, ok := cat.SKUByID(h.SKU); ok && h.Since.Before(now) {
			h.Cost = &billing.Money{Decimal: billing.UsageAmount(int64(now.Sub(h.Since)/time.Second), sku.HourlyPrice)}
		}
	}
}

// HeldRows is a store that returns the held samples (project not empty)
// starting in [fromMS, toMS), in any order; a replayed sample may come twice.
// Implemented by ingest.MemStore, ingest/sqlite and ingest/clickhouse.
type HeldRows interface {
	HeldSamples(ctx context.Context, fromMS, toMS int64, fn func(*schemas.Sample) error) error
}

// LatestRows is a store that keeps the latest held sample of every instance.
// Implemented by ingest.MemStore, ingest/sqlite and ingest/clickhouse.
type LatestRows interface {
	// LatestSamples calls fn with the latest stored held sample (greatest StartMS;
	// project not empty) of each instance whose latest held sample starts at or after
	// fromMS, once per instance, in any order. Fields as HeldSamples returns them
	// (instance, start, interval, node, gpu uuid/model, profile, project, user,
	// util/UtilKnown, processes, holder_ref, share_kind/share_mem/share_cores).
	LatestSamples(ctx context.Context, fromMS int64, fn func(*schemas.Sample) error) error
}

// IsIdleSample reports whether a held sample is idle under cat: util known
// and below the project's threshold, or util unknown and no process.
func IsIdleSample(cat *schemas.Catalog, s *schemas.Sample) bool {
	return billing.IsIdleUtil(cat, s.Project, s.UtilKnown, s.Util, s.Processes == 0)
}

// HeldNow returns the instances held at now: those whose latest sample ends
// within the catalog's gap tolerance of now, with their holder, since when,
// and whether they idle. Sorted by node, then instance. It is HeldAt with
// HeldLookback.
func HeldNow(ctx context.Context, src HeldRows, cat *schemas.Catalog, now time.Time) ([]Held, error) {
	return HeldAt(ctx, src, cat, now, HeldLookback)
}

// HeldAt is HeldNow looking lookback back: from the store's compact rows
// (HeldNowFrom) when it keeps them, else from its raw samples
// (HeldNowWithin).
func HeldAt(ctx context.Context, src HeldRows, cat *schemas.Catalog, now time.Time, lookback time.Duration) ([]Held, error) {
	if c, ok := src.(CompactHeld); ok {
		return HeldNowFrom(ctx, c, cat, now, lookback)
	}
	return HeldNowWithin(ctx, src, cat, now, lookback)
}

// HeldNowWithin is HeldNow reading samples lookback back instead of
// HeldLookback: a holding or an idle streak that began earlier is reported
// as beginning at the lookback's start, with SinceClipped or
// IdleSinceClipped set. A reader that needs only the recent past (the
// watcher, whose decisions fall within its policies' durations) reads
// that much, not a day of samples.
func HeldNowWithin(ctx context.Context, src HeldRows, cat *schemas.Catalog, now time.Time, lookback time.Duration) ([]Held, error) {
	if lookback <= 0 {
		return nil, fmt.Errorf("held now: lookback %s: want a positive duration", lookback)
	}
	return heldFromSamples(cat, now, lookback, func(from, to int64, fn func(*schemas.Sample) error) error {
		return src.HeldSamples(ctx, from, to, fn)
	})
}

// heldFromSamples is HeldNowWithin over the held samples read returns
// (those starting in [from, to)).
func heldFromSamples(cat *schemas.Catalog, now time.Time, lookback time.Duration, read func(from, to int64, fn func(*schemas.Sample) error) error) ([]Held, error) {
	tol := cat.Defaults.GapToleranceMS
	nowMS := now.UnixMilli()
	from := now.Add(-lookback).UnixMilli()
	by := map[string][]schemas.Sample{}
	err := read(from, nowMS+1, func(s *schemas.Sample) error {
		by[s.InstanceID] = append(by[s.InstanceID], *s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("held now: %w", err)
	}
	var out []Held
	for _, ss := range by {
		slices.SortFunc(ss, func(a, b schemas.Sample) int { return cmp.Compare(a.StartMS, b.StartMS) })
		last := ss[len(ss)-1]
		if last.EndMS()+tol < nowMS {
			continue // released or silent
		}
		h := heldBy(cat, &last)
		// Walk back while the same holder holds it without a gap over the tolerance.
		since, idle := last.StartMS, IsIdleSample(cat, &last)
		idleSince, idleOpen := last.StartMS, idle
		clipped := true
		for i := len(ss) - 2; i >= 0; i-- {
			s := &ss[i]
			if s.Project != last.Project || s.User != last.User || s.GPUModel != last.GPUModel || s.Profile != last.Profile ||
				s.EndMS()+tol < since {
				clipped = false
				break
			}
			since = min(since, s.StartMS)
			if idleOpen {
				if IsIdleSample(cat, s) {
					idleSince = min(idleSince, s.StartMS)
				} else {
					idleOpen = false // the streak began after this busy sample
				}
			}
		}
		if clipped && since <= from+tol {
			h.SinceClipped = true
			h.IdleSinceClipped = idle && idleOpen
		}
		h.Since = time.UnixMilli(since).UTC()
		h.Idle = idle
		if idle {
			h.IdleSince = time.UnixMilli(idleSince).UTC()
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Held) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.InstanceID, b.InstanceID))
	})
	return out, nil
}

// heldBy is the Held that the latest sample last describes, without its
// starts (Since, IdleSince) and flags.
func heldBy(cat *schemas.Catalog, last *schemas.Sample) Held {
	h := Held{InstanceID: last.InstanceID, Node: last.Node, GPUUUID: last.GPUUUID, Project: last.Project, User: last.User, GPUModel: last.GPUModel,
		Profile: last.Profile, LastSample: time.UnixMilli(last.StartMS).UTC(), HolderRef: last.HolderRef}
	if sku, ok := cat.ResolveSKU(last.GPUModel, last.Profile); ok {
		h.SKU = sku.ID
	}
	h.Share = shareOf(last.Profile)
	return h
}

// shareOf is Held.Share of a profile.
func shareOf(profile string) string {
	sh, ok := schemas.ParseShareProfile(profile)
	if !ok {
		return ""
	}
	f, ok := sh.By(schemas.ShareByMax)
	if !ok {
		return ""
	}
	return f.String()
}
