package ingest

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// DefaultMaxOpenRuns bounds the Compactor's memory (open runs of each kind kept
// between batches): 2^20, about 1 M, which a fleet of 100 000 instances with
// four idle runs each stays within (a key's state is about 300 bytes).
const DefaultMaxOpenRuns = 1 << 20

// RunsPerKey is how many open runs the Compactor keeps per key: occupancy runs,
// and idle runs of all classes together.
const RunsPerKey = 4

// Compactor turns samples into occupancy and idle-candidate runs. It keeps per
// key the few runs the key's latest samples extended (its "open" runs) between
// batches, so that a key sampled every few seconds grows one row per batch,
// rewritten with the same start and a later end, instead of one row per sample;
// stores keep the longest row per (key, start).
//
// A sample extends every open run of its key it touches or overlaps (joining
// them when it bridges two), or opens a run of its own; a key holds at most
// RunsPerKey open runs, and opening one more evicts the least recently extended
// (written first when it grew since it was last written). A run is cut only
// where its samples are: at a gap and at a UTC month boundary. So late samples
// (a spool delivered after an outage, a month replayed into a running worker)
// grow runs of their own next to the current ones, and a replay in time order
// rebuilds the runs of the first pass with the same (key, start): the stores
// collapse them instead of keeping one row per replayed sample.
//
// A run's row is identified in the stores by its key, start and (idle runs)
// class and utilisation range; a store keeps the longest row of each. When a
// sample changes that identity (a wider utilisation range, an earlier start, a
// join), the run's row under the old identity is written first if it grew
// since it was last written, so the rows a store keeps are those of every
// identity each run passed through, with its last end: they depend on the
// order of the samples, not on how they were cut into batches (EmitOpen
// calls).
//
// Correctness does not depend on that state: every row it emits is the union of
// samples it has seen, touching or overlapping, so any set of rows it emits, from
// any number of compactors, restarts and replays, has the same union as the
// samples. Losing the state (crash, restart, MaxOpenRuns reached) only costs
// compaction. It never bridges a gap: the tolerance belongs to the catalog.
// Beyond MaxOpenRuns, EmitOpen forgets the keys seen least recently, as many
// as it takes (Stats().Forgotten counts their runs), after every open run was
// written: the cost is proportional to the keys forgotten, never to the keys
// kept.
//
// A Compactor is not safe for concurrent use.
type Compactor struct {
	maxOpen     int
	keys        map[schemas.Key]*keyRuns
	nOcc, nIdle int // open occupancy and idle runs
	dirtyO      []*keyRuns
	dirtyI      []*keyRuns
	round       uint32 // EmitOpen calls so far
	stats       CompactorStats

	// lru is the sentinel of the keys' list by the round they were last seen
	// in, most recent first (lru.older is the newest, lru.newer the oldest).
	lru keyRuns
	// closed receives the runs whose identity a sample ended (openRuns.extend).
	closed []openRun

	// The latest samples that changed since the last EmitOpen, one per key
	// (latest[i] is dirtyL[i]'s), and the keys whose latest lies in the
	// samples of the current Add.
	latest       []schemas.Sample
	dirtyL, addL []*keyRuns

	// The UTC month last looked up, [monLo, monHi): most samples fall in it.
	monLo, monHi int64
}

// CompactorStats counts what the Compactor did beyond extending a run at its end.
type CompactorStats struct {
	// Opened counts runs opened next to open runs of their key: after a gap, in
	// another idle class, or for a late sample disjoint from the open runs.
	Opened int64
	// ExtendedBack counts runs a late sample extended before their start. The
	// run is written again with the earlier start; the row with the later start
	// stays in the store (the union is the same).
	ExtendedBack int64
	// Joined counts open runs joined to another by a sample that bridges them
	// (likewise, the row of the later one stays).
	Joined int64
	// Evicted counts runs evicted to open another of their key (written then
	// when they grew since they were last written).
	Evicted int64
	// Forgotten counts open runs dropped to stay within MaxOpenRuns (they had
	// been written: forgetting costs compaction of later samples, never rows).
	Forgotten int64
	// OpenOcc and OpenIdle are the open occupancy and idle runs now.
	OpenOcc, OpenIdle int
}

// keyRuns are the open runs of a key: one map lookup per sample finds both
// kinds, and the key's latest sample.
type keyRuns struct {
	key          schemas.Key
	older, newer *keyRuns // in Compactor.lru
	seen         uint32   // round of the last sample
	occ          openRuns
	idle         *openRuns // allocated with the key's first idle candidate

	// The key's latest sample is the one with the greatest start added (ties:
	// the one added last), latestMS. While inAdd it is samples[latestAt] of
	// the current Add, which copies it into Compactor.latest at its end (at
	// latestSlot; latestDirty until EmitOpen): a key sampled many times in one
	// call is copied once. (int32: an Add of 2^31 samples would take 400 GiB.)
	latestMS             int64
	latestAt, latestSlot int32
	inAdd, latestDirty   bool
}

// openRuns are the open runs of a key, most recently extended first. Occupancy
// runs have class 0 and no utilisation range. The front run is kept inline with
// the header and the hull of the others, so that a sample extending the front
// run, with no other run within its reach (samples in time order), reads one
// small object; the other runs are allocated once a key has two.
type openRuns struct {
	n      uint8
	dirty  bool // some run is dirty: the key is listed for EmitOpen
	front  openRun
	lo, hi int64 // hull of the runs after the front (n > 1)
	more   *[RunsPerKey - 1]openRun
}

type openRun struct {
	start, end int64
	min, max   float64
	class      uint8
	dirty      bool // grew since it was last emitted
}

// at returns the i-th open run (0: the front one).
func (o *openRuns) at(i int) *openRun {
	if i == 0 {
		return &o.front
	}
	return &o.more[i-1]
}

// rehull recomputes the hull of the runs after the front.
func (o *openRuns) rehull() {
	o.lo, o.hi = math.MaxInt64, math.MinInt64
	for i := 1; i < int(o.n); i++ {
		r := &o.more[i-1]
		o.lo, o.hi = min(o.lo, r.start), max(o.hi, r.end)
	}
}

// extended is what openRuns.extend did.
type extended struct {
	prev    openRun // the front run before the sample (zero when opened)
	opened  bool    // the sample opened a run
	joined  int     // runs joined into the front run
	evicted bool    // a run was evicted to open one: last
	last    openRun
}

// extend folds the sample [start, end) of class with util into the runs of the
// same class it touches or overlaps (joining them) and moves the result to the
// front, or opens a run for it at the front, evicting the last run when the key
// has RunsPerKey. It appends to closed, as they were before the sample, the
// runs that grew since they were last written and whose identity the sample
// ended: a run joined into another, and the extended run when its start or
// utilisation range changed.
func (o *openRuns) extend(start, end int64, class uint8, lo, hi float64, closed *[]openRun) (x extended) {
	n := int(o.n)
	h, i := -1, 0
	if f := &o.front; n > 0 && f.class == class && start <= f.end && end >= f.start {
		h, i, x.prev = 0, 1, *f
		f.start, f.end, f.min, f.max = min(f.start, start), max(f.end, end), min(f.min, lo), max(f.max, hi)
		if n == 1 || start > o.hi || end < o.lo {
			x.closePrev(f, closed)
			return x // no other run within reach
		}
	}
	for ; i < n; i++ {
		r := o.at(i)
		if r.class != class || start > r.end || end < r.start {
			continue
		}
		if h < 0 {
			h, x.prev = i, *r
			r.start, r.end, r.min, r.max = min(r.start, start), max(r.end, end), min(r.min, lo), max(r.max, hi)
			continue
		}
		// The sample touches a second run: it bridges the two (the runs of a key
		// and class never touch each other, so the sample touches every run
		// the joined run touches).
		if r.dirty {
			*closed = append(*closed, *r)
		}
		f := o.at(h)
		f.start, f.end, f.min, f.max = min(f.start, r.start), max(f.end, r.end), min(f.min, r.min), max(f.max, r.max)
		for j := i; j < n-1; j++ {
			*o.at(j) = *o.at(j + 1)
		}
		n--
		i--
		x.joined++
	}
	o.n = uint8(n)
	if h >= 0 {
		if h > 0 {
			f := *o.at(h)
			for j := h; j > 0; j-- {
				*o.at(j) = *o.at(j - 1)
			}
			o.front = f
		}
		x.closePrev(&o.front, closed)
		o.rehull()
		return x
	}
	if n == RunsPerKey {
		x.evicted, x.last = true, *o.at(n - 1)
		n--
	}
	if n > 0 && o.more == nil {
		o.more = new([RunsPerKey - 1]openRun)
	}
	for j := n; j > 0; j-- {
		*o.at(j) = *o.at(j - 1)
	}
	o.front = openRun{start: start, end: end, min: lo, max: hi, class: class}
	o.n = uint8(n + 1)
	o.rehull()
	x.opened = true
	return x
}

// closePrev appends the run as it was before the sample (x.prev) to closed when
// it grew since it was last written and the sample changed its identity (start
// or utilisation range; f is the run now).
func (x *extended) closePrev(f *openRun, closed *[]openRun) {
	if p := &x.prev; p.dirty && (f.start != p.start || f.min != p.min || f.max != p.max) {
		*closed = append(*closed, *p)
	}
}

// UtilGrid are the points an idle run's utilisation range is widened to:
// hundredths below 0.20, twentieths (0.05) from 0.20 to 1.
var UtilGrid = func() []float64 {
	var g []float64
	for k := 0; k <= 100; k++ {
		if k <= 20 || k%5 == 0 {
			g = append(g, float64(k)/100) // the float of the decimal k/100
		}
	}
	return g
}()

// UtilRange is the range an idle run of one sample of utilisation u in
// [0, 1) keeps: lo is the grid point at or below u, hi lies just below the
// grid point above u. A run's range is the union of its samples' ranges, so
// it holds every sample's util, widened outward to UtilGrid: a threshold T on
// the grid (the catalogs' idle thresholds are in per cent, typically below
// 0.20) gives the same verdict as the exact extremes (hi < T exactly when
// every util < T, lo >= T exactly when every util >= T), a threshold off the
// grid may fall inside the range more often (the raw samples then decide),
// and the class bounds, on the grid, are never crossed. The range is part of
// the row's identity in the stores: it changes when a sample reaches another
// cell of the grid, not with every new extreme.
func UtilRange(u float64) (lo, hi float64) {
	i := sort.SearchFloat64s(UtilGrid, u) // the first point >= u
	if i < len(UtilGrid) && UtilGrid[i] == u {
		i++
	}
	if i == 0 || i == len(UtilGrid) { // outside [0, 1): not an idle candidate's util
		return u, u
	}
	return UtilGrid[i-1], math.Nextafter(UtilGrid[i], math.Inf(-1))
}

// NewCompactor returns a Compactor keeping at most maxOpen open runs (0: default).
func NewCompactor(maxOpen int) *Compactor {
	if maxOpen <= 0 {
		maxOpen = DefaultMaxOpenRuns
	}
	c := &Compactor{maxOpen: maxOpen, keys: map[schemas.Key]*keyRuns{}}
	c.lru.older, c.lru.newer = &c.lru, &c.lru
	return c
}

// Stats returns what the Compactor counted so far.
func (c *Compactor) Stats() CompactorStats {
	s := c.stats
	s.OpenOcc, s.OpenIdle = c.nOcc, c.nIdle
	return s
}

// touch moves kr to the front of the list by round (it was seen in this one).
func (c *Compactor) touch(kr *keyRuns) {
	if kr.older != nil { // listed: unlink
		kr.older.newer, kr.newer.older = kr.newer, kr.older
	}
	f := c.lru.older
	kr.older, kr.newer = f, &c.lru
	f.newer, c.lru.older = kr, kr
	kr.seen = c.round
}

// CompactorStats returns what the writer's Compactor counted so far.
func (w *Writer) CompactorStats() CompactorStats { return w.c.Stats() }

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
// (a finished month, a run evicted to open another). The open runs they extend
// are emitted by the next EmitOpen: until then the samples are not all covered
// by emitted rows.
func (c *Compactor) Add(b *Batch, samples []schemas.Sample) {
	defer c.keepLatest(samples)
	for i := range samples {
		s := &samples[i]
		if s.Project == "" {
			continue // unheld: raw row only, it bills nobody
		}
		k := schemas.KeyOf(s)
		kr := c.keys[k]
		if kr == nil {
			kr = &keyRuns{key: k, latestMS: math.MinInt64}
			c.keys[k] = kr
			c.touch(kr)
		} else if kr.seen != c.round {
			c.touch(kr)
		}
		if s.StartMS >= kr.latestMS {
			kr.latestMS, kr.latestAt = s.StartMS, int32(i)
			if !kr.inAdd {
				kr.inAdd = true
				c.addL = append(c.addL, kr)
			}
		}
		start, end := s.StartMS, s.EndMS()
		b.Occupancy = c.addOcc(b.Occupancy, kr, start, end)
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
			if kr.idle == nil {
				kr.idle = &openRuns{}
			}
			b.Idle = c.addIdle(b.Idle, kr, start, e, class, util)
		}
	}
}

// keepLatest copies the latest samples that the Add of samples found.
func (c *Compactor) keepLatest(samples []schemas.Sample) {
	c.latest = slices.Grow(c.latest, len(c.addL)) // at most one more per key
	for _, kr := range c.addL {
		kr.inAdd = false
		if kr.latestDirty {
			c.latest[kr.latestSlot] = samples[kr.latestAt]
			continue
		}
		kr.latestDirty, kr.latestSlot = true, int32(len(c.latest))
		c.latest = append(c.latest, samples[kr.latestAt])
		c.dirtyL = append(c.dirtyL, kr)
	}
	clear(c.addL)
	c.addL = c.addL[:0]
}

// EmitOpen appends to b every open run that grew since it was last emitted,
// and to b.Latest the latest sample of each key whose latest changed since the
// last EmitOpen: the held sample with the greatest start the Compactor saw of
// the key (so a replay of older samples changes none). Afterwards the rows
// emitted so far cover every sample added so far.
func (c *Compactor) EmitOpen(b *Batch) {
	for _, kr := range c.dirtyO {
		if o := &kr.occ; o.dirty {
			for i := range int(o.n) {
				if r := o.at(i); r.dirty {
					b.Occupancy = append(b.Occupancy, schemas.Run{Key: kr.key, StartMS: r.start, EndMS: r.end})
					r.dirty = false
				}
			}
			o.dirty = false
		}
	}
	for _, kr := range c.dirtyI {
		if o := kr.idle; o != nil && o.dirty {
			for i := range int(o.n) {
				if r := o.at(i); r.dirty {
					b.Idle = append(b.Idle, schemas.IdleRun{Run: schemas.Run{Key: kr.key, StartMS: r.start, EndMS: r.end}, Class: r.class, MinUtil: r.min, MaxUtil: r.max})
					r.dirty = false
				}
			}
			o.dirty = false
		}
	}
	clear(c.dirtyO) // the lists are refilled from the front: drop the pointers
	clear(c.dirtyI)
	for _, kr := range c.dirtyL {
		kr.latestDirty = false
	}
	clear(c.dirtyL)
	if len(b.Latest) == 0 {
		// Hand the samples over instead of copying them; c keeps b's buffer.
		b.Latest, c.latest = c.latest, b.Latest[:0]
	} else {
		b.Latest = append(b.Latest, c.latest...)
		clear(c.latest)
		c.latest = c.latest[:0]
	}
	c.dirtyO, c.dirtyI, c.dirtyL = c.dirtyO[:0], c.dirtyI[:0], c.dirtyL[:0]
	// Every open run has just been emitted, so forgetting some loses nothing
	// but compaction of later samples.
	c.bound()
	c.round++
}

// bound keeps the open runs of each kind within maxOpen: it forgets the keys
// seen least recently (sessions that ended first), one by one until both
// kinds are within the bound. Its cost is the keys it forgets.
func (c *Compactor) bound() {
	for c.nOcc > c.maxOpen || c.nIdle > c.maxOpen {
		kr := c.lru.newer // the oldest
		kr.older.newer, kr.newer.older = kr.newer, kr.older
		n := int(kr.occ.n)
		c.nOcc -= n
		if kr.idle != nil {
			c.nIdle -= int(kr.idle.n)
			n += int(kr.idle.n)
		}
		c.stats.Forgotten += int64(n)
		delete(c.keys, kr.key)
	}
}

func (c *Compactor) addOcc(out []schemas.Run, kr *keyRuns, start, end int64) []schemas.Run {
	k, o := kr.key, &kr.occ
	x := o.extend(start, end, 0, 0, 0, &c.closed)
	if x.evicted && x.last.dirty {
		out = append(out, schemas.Run{Key: k, StartMS: x.last.start, EndMS: x.last.end})
	}
	if len(c.closed) > 0 {
		for _, r := range c.closed {
			out = append(out, schemas.Run{Key: k, StartMS: r.start, EndMS: r.end})
		}
		c.closed = c.closed[:0]
	}
	r := &o.front
	// Cut at UTC month boundaries: the finished months are final rows.
	for b := c.nextMonth(r.start); r.end > b; b = c.nextMonth(r.start) {
		out = append(out, schemas.Run{Key: k, StartMS: r.start, EndMS: b})
		r.start = b
	}
	if c.count(&x, int(o.n), r, &c.nOcc) {
		c.dirtyO = c.markDirty(c.dirtyO, kr, o, r)
	}
	return out
}

func (c *Compactor) addIdle(out []schemas.IdleRun, kr *keyRuns, start, end int64, class uint8, util float64) []schemas.IdleRun {
	k, o := kr.key, kr.idle
	lo, hi := 0.0, 0.0
	if class != IdleClassNull {
		lo, hi = UtilRange(util)
	}
	x := o.extend(start, end, class, lo, hi, &c.closed)
	if ev := &x.last; x.evicted && ev.dirty {
		out = append(out, schemas.IdleRun{Run: schemas.Run{Key: k, StartMS: ev.start, EndMS: ev.end}, Class: ev.class, MinUtil: ev.min, MaxUtil: ev.max})
	}
	if len(c.closed) > 0 {
		for _, r := range c.closed {
			out = append(out, schemas.IdleRun{Run: schemas.Run{Key: k, StartMS: r.start, EndMS: r.end}, Class: r.class, MinUtil: r.min, MaxUtil: r.max})
		}
		c.closed = c.closed[:0]
	}
	r := &o.front
	for b := c.nextMonth(r.start); r.end > b; b = c.nextMonth(r.start) {
		out = append(out, schemas.IdleRun{Run: schemas.Run{Key: k, StartMS: r.start, EndMS: b}, Class: r.class, MinUtil: r.min, MaxUtil: r.max})
		r.start = b
	}
	if c.count(&x, int(o.n), r, &c.nIdle) {
		c.dirtyI = c.markDirty(c.dirtyI, kr, o, r)
	}
	return out
}

// count updates the open-run count *open and the stats after extend x and the
// month cut, and reports whether the front run r changed (it must be emitted
// again). n is the key's open runs.
func (c *Compactor) count(x *extended, n int, r *openRun, open *int) bool {
	*open -= x.joined
	c.stats.Joined += int64(x.joined)
	switch {
	case x.opened:
		if x.evicted {
			c.stats.Evicted++
		} else {
			*open++
		}
		if n > 1 {
			c.stats.Opened++
		}
		return true
	case x.joined > 0:
		return true
	case r.start < x.prev.start:
		c.stats.ExtendedBack++
		return true
	}
	p := &x.prev
	return r.start != p.start || r.end != p.end || r.min != p.min || r.max != p.max
}

func (c *Compactor) markDirty(list []*keyRuns, kr *keyRuns, o *openRuns, r *openRun) []*keyRuns {
	r.dirty = true
	if !o.dirty {
		o.dirty = true
		list = append(list, kr)
	}
	return list
}

func (c *Compactor) appendIdle(out []schemas.IdleRun, k schemas.Key, start, end int64, class uint8, lo, hi float64) []schemas.IdleRun {
	for b := c.nextMonth(start); end > b; b = c.nextMonth(start) {
		out = append(out, schemas.IdleRun{Run: schemas.Run{Key: k, StartMS: start, EndMS: b}, Class: class, MinUtil: lo, MaxUtil: hi})
		start = b
	}
	return append(out, schemas.IdleRun{Run: schemas.Run{Key: k, StartMS: start, EndMS: end}, Class: class, MinUtil: lo, MaxUtil: hi})
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
