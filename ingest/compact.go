package ingest

import (
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// DefaultMaxOpenRuns bounds the Compactor's memory (open runs kept between batches).
const DefaultMaxOpenRuns = 1 << 18

// Compactor turns samples into occupancy and idle-candidate runs. It keeps the
// run each key is in (its "open" run) between batches, so that a key sampled
// every few seconds grows one row per batch, rewritten with the same start and a
// later end, instead of one row per sample; stores keep the longest row per
// (key, start).
//
// Correctness does not depend on that state: every row it emits is the union of
// samples it has seen, touching or overlapping, so any set of rows it emits, from
// any number of compactors, restarts and replays, has the same union as the
// samples. Losing the state (crash, restart, MaxOpenRuns reached) only costs
// compaction. It never bridges a gap: the tolerance belongs to the catalog.
//
// A Compactor is not safe for concurrent use.
type Compactor struct {
	maxOpen int
	occ     map[billing.Key]*openRun
	idle    map[billing.Key]*openIdle
	dirtyO  []billing.Key
	dirtyI  []billing.Key

	// The UTC month last looked up, [monLo, monHi): most samples fall in it.
	monLo, monHi int64
}

type openRun struct {
	start, end int64
	dirty      bool
}

type openIdle struct {
	openRun
	class    uint8
	min, max float64
}

// NewCompactor returns a Compactor keeping at most maxOpen open runs (0: default).
func NewCompactor(maxOpen int) *Compactor {
	if maxOpen <= 0 {
		maxOpen = DefaultMaxOpenRuns
	}
	return &Compactor{maxOpen: maxOpen, occ: map[billing.Key]*openRun{}, idle: map[billing.Key]*openIdle{}}
}

// IdleCandidate reports whether a held sample can be idle under some catalog:
// util null and no process, or util < 1 (thresholds are at most 1).
func IdleCandidate(s *schemas.Sample) bool {
	if s.Project == "" {
		return false
	}
	_, ok := IdleClassOf(s)
	return ok
}

// Build returns the batch for samples: the samples themselves and the runs they
// create or extend. The samples slice is kept in the batch, not copied. It is
// Add then EmitOpen.
func (c *Compactor) Build(samples []schemas.Sample) *Batch {
	b := &Batch{Samples: samples}
	c.Add(b, samples)
	c.EmitOpen(b)
	return b
}

// Add folds samples into the open runs and appends to b the runs they complete
// (a run closed by a gap, a finished month, a late sample of its own). The open
// runs they extend are emitted by the next EmitOpen: until then the samples are
// not all covered by emitted rows.
func (c *Compactor) Add(b *Batch, samples []schemas.Sample) {
	for i := range samples {
		s := &samples[i]
		if s.Project == "" {
			continue // unheld: raw row only, it bills nobody
		}
		k := billing.Key{Project: s.Project, User: s.User, InstanceID: s.InstanceID, GPUModel: s.GPUModel, Profile: s.Profile}
		start, end := s.StartMS, s.EndMS()
		b.Occupancy = c.addOcc(b.Occupancy, k, start, end)
		if class, ok := IdleClassOf(s); ok {
			util := 0.0
			if s.UtilKnown {
				util = s.Util
			}
			e := end
			if m := c.nextMonth(start); end > m {
				// The part of the sample after the UTC month boundary is a row of
				// its own (MinUtil = MaxUtil: never decided from raw samples), so
				// that every sample merged into a run starts inside each row it
				// contributes to: the raw fallback finds a run's samples by start.
				b.Idle = c.appendIdle(b.Idle, k, m, end, class, util, util)
				e = m
			}
			b.Idle = c.addIdle(b.Idle, k, start, e, class, util)
		}
	}
}

// EmitOpen appends to b every open run that grew since it was last emitted.
// Afterwards the rows emitted so far cover every sample added so far.
func (c *Compactor) EmitOpen(b *Batch) {
	for _, k := range c.dirtyO {
		if r := c.occ[k]; r != nil && r.dirty {
			b.Occupancy = c.appendRun(b.Occupancy, k, r.start, r.end)
			r.dirty = false
		}
	}
	for _, k := range c.dirtyI {
		if r := c.idle[k]; r != nil && r.dirty {
			b.Idle = c.appendIdle(b.Idle, k, r.start, r.end, r.class, r.min, r.max)
			r.dirty = false
		}
	}
	c.dirtyO, c.dirtyI = c.dirtyO[:0], c.dirtyI[:0]
	// Every open run has just been emitted, so forgetting them loses nothing but
	// compaction of the next batch.
	if len(c.occ) > c.maxOpen {
		clear(c.occ)
	}
	if len(c.idle) > c.maxOpen {
		clear(c.idle)
	}
}

func (c *Compactor) addOcc(out []Run, k billing.Key, start, end int64) []Run {
	r := c.occ[k]
	switch {
	case r == nil:
		r = &openRun{start: start, end: end}
		c.occ[k] = r
	case start <= r.end && end >= r.start: // touches or overlaps: extend
		r.start, r.end = min(r.start, start), max(r.end, end)
	case start > r.end: // after a gap: the open run is complete
		if r.dirty {
			out = c.appendRun(out, k, r.start, r.end)
		}
		r.start, r.end = start, end
	default: // late sample before the open run, disjoint from it: its own row
		return c.appendRun(out, k, start, end)
	}
	if !r.dirty {
		r.dirty = true
		c.dirtyO = append(c.dirtyO, k)
	}
	// Cut at UTC month boundaries: the finished months are final rows.
	for b := c.nextMonth(r.start); r.end > b; b = c.nextMonth(r.start) {
		out = append(out, Run{Key: k, StartMS: r.start, EndMS: b})
		r.start = b
	}
	return out
}

func (c *Compactor) addIdle(out []IdleRun, k billing.Key, start, end int64, class uint8, util float64) []IdleRun {
	r := c.idle[k]
	switch {
	case r == nil:
		r = &openIdle{openRun: openRun{start: start, end: end}, class: class, min: util, max: util}
		c.idle[k] = r
	case r.class == class && start <= r.end && end >= r.start:
		r.start, r.end = min(r.start, start), max(r.end, end)
		r.min, r.max = min(r.min, util), max(r.max, util)
	case start > r.end || r.class != class:
		if start <= r.end && end >= r.start && start < r.start {
			// Overlaps the open run from before, in another class: its own row.
			return c.appendIdle(out, k, start, end, class, util, util)
		}
		if r.dirty {
			out = c.appendIdle(out, k, r.start, r.end, r.class, r.min, r.max)
		}
		r.start, r.end, r.class, r.min, r.max = start, end, class, util, util
	default:
		return c.appendIdle(out, k, start, end, class, util, util)
	}
	if !r.dirty {
		r.dirty = true
		c.dirtyI = append(c.dirtyI, k)
	}
	for b := c.nextMonth(r.start); r.end > b; b = c.nextMonth(r.start) {
		out = append(out, IdleRun{Run: Run{Key: k, StartMS: r.start, EndMS: b}, Class: r.class, MinUtil: r.min, MaxUtil: r.max})
		r.start = b
	}
	return out
}

func (c *Compactor) appendRun(out []Run, k billing.Key, start, end int64) []Run {
	for b := c.nextMonth(start); end > b; b = c.nextMonth(start) {
		out = append(out, Run{Key: k, StartMS: start, EndMS: b})
		start = b
	}
	return append(out, Run{Key: k, StartMS: start, EndMS: end})
}

func (c *Compactor) appendIdle(out []IdleRun, k billing.Key, start, end int64, class uint8, lo, hi float64) []IdleRun {
	for b := c.nextMonth(start); end > b; b = c.nextMonth(start) {
		out = append(out, IdleRun{Run: Run{Key: k, StartMS: start, EndMS: b}, Class: class, MinUtil: lo, MaxUtil: hi})
		start = b
	}
	return append(out, IdleRun{Run: Run{Key: k, StartMS: start, EndMS: end}, Class: class, MinUtil: lo, MaxUtil: hi})
}

func (c *Compactor) nextMonth(ms int64) int64 {
	if ms >= c.monLo && ms < c.monHi {
		return c.monHi
	}
	c.monLo, c.monHi = MonthStartMS(ms), nextMonthMS(ms)
	return c.monHi
}

// nextMonthMS is the start of the UTC month after the one containing ms.
func nextMonthMS(ms int64) int64 {
	t := time.UnixMilli(ms).UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
}

// MonthStartMS is the start of the UTC month containing ms: the partition of a
// run starting at ms.
func MonthStartMS(ms int64) int64 {
	t := time.UnixMilli(ms).UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).UnixMilli()
}
