package ingest

import (
	"encoding/binary"
	"hash/maphash"
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
// Its state is shaped for fleets of 10^5 keys and more: a key is interned
// once to a small integer id, and everything else it keeps per key is in
// slices of plain structs indexed by id, without pointers, so the garbage
// collector does not scan them; the map from a key to its id is keyed by a
// hash of the key's bytes (no pointers either). A fleet reports in much the
// same order at every step, so the key that followed a key last time is
// tried first, before the map: a comparison of each field (of pointers, for
// the decoder's interned strings) instead of a hash and a probe, and the
// keys' state, allocated in the order keys first appear, is then read in
// order.
//
// A Compactor is not safe for concurrent use.
type Compactor struct {
	maxOpen int
	// keys finds a key's id by keyHash; a key whose hash another key holds
	// (a collision: about one in 10^7 fleets of 10^6 keys) is in spill.
	// len(keys) + len(spill) is the number of keys.
	keys  map[uint64]int32
	spill map[schemas.Key]int32
	seed  maphash.Seed
	mask  uint64 // ANDed with every hash (tests force collisions with it)
	hbuf  []byte
	// keyOf and st are indexed by id (from 1). st[0] is the sentinel of the
	// keys' list by the round they were last seen in, most recent first
	// (st[0].older is the newest, st[0].newer the oldest).
	keyOf []schemas.Key
	st    []keyState
	free  []int32 // ids of forgotten keys, reused
	// more holds the runs after the front of the keys with more than one
	// open run of a kind (openRuns.more is an index into it, plus one).
	more     [][RunsPerKey - 1]openRun
	freeMore []int32
	prev     int32 // the id of the last held sample added

	nOcc, nIdle int // open occupancy and idle runs
	dirtyO      []int32
	dirtyI      []int32
	round       uint32 // EmitOpen calls so far
	stats       CompactorStats

	// closed receives the runs whose identity a sample ended (extend).
	closed []openRun

	// The latest samples that changed since the last EmitOpen, one per key
	// (latest[i] is dirtyL[i]'s, without the key's fields).
	latest []latestSample
	dirtyL []int32

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

// keyState is what the Compactor keeps of a key besides its strings: its open
// runs of both kinds, its place in the list by round, and its latest sample.
// It holds no pointer (ids and indexes instead).
type keyState struct {
	older, newer int32  // ids in the list by round (0: the sentinel)
	next         int32  // the id of the held sample added after this key's last time
	seen         uint32 // round of the last sample

	// The key's latest sample is the one with the greatest start added (ties:
	// the one added last), latestMS; while latestDirty (until EmitOpen) it is
	// in Compactor.latest at latestSlot. Each new latest is copied there at
	// once, while the sample is in the CPU's caches, writing only what
	// changed (a key's strings rarely do): copying the latest of each key
	// once per Add, at its end, read every sample a second time, out of the
	// caches at 10^5 keys.
	latestMS    int64
	latestSlot  int32
	latestDirty bool

	occ, idle openRuns
}

// openRuns are the open runs of a key of one kind, most recently extended
// first. Occupancy runs have class 0 and no utilisation range. The front run
// is kept inline with the header and the hull of the others, so that a sample
// extending the front run, with no other run within its reach (samples in time
// order), reads one cache line; the other runs are in Compactor.more once a
// key has two.
type openRuns struct {
	n      uint8
	dirty  bool  // some run is dirty: the key is listed for EmitOpen
	more   int32 // index into Compactor.more plus one (0: none yet)
	front  openRun
	lo, hi int64 // hull of the runs after the front (n > 1)
}

// latestSample is a key's latest sample but for the fields of its key (the
// copies of the keys' latest samples are most of the bytes a Compactor moves
// at 10^5 keys).
type latestSample struct {
	startMS, intervalMS        int64
	node, gpuUUID              string
	util                       float64
	utilKnown                  bool
	memUsed, memTotal, procs   int64
	utilSource, schema, holder string
	shareKind                  string
	shareMem, shareCores       float64
}

// latestOf returns s without its key's fields.
func latestOf(s *schemas.Sample) latestSample {
	return latestSample{startMS: s.StartMS, intervalMS: s.IntervalMS, node: s.Node, gpuUUID: s.GPUUUID,
		util: s.Util, utilKnown: s.UtilKnown, memUsed: s.MemUsed, memTotal: s.MemTotal, procs: s.Processes,
		utilSource: s.UtilSource, schema: s.SchemaField, holder: s.HolderRef,
		shareKind: s.ShareKind, shareMem: s.ShareMem, shareCores: s.ShareCores}
}

// set makes l latestOf(s), writing only the strings that changed: a key's
// strings are the same from sample to sample.
func (l *latestSample) set(s *schemas.Sample) {
	l.startMS, l.intervalMS, l.util, l.utilKnown = s.StartMS, s.IntervalMS, s.Util, s.UtilKnown
	l.memUsed, l.memTotal, l.procs = s.MemUsed, s.MemTotal, s.Processes
	setString(&l.node, s.Node)
	setString(&l.gpuUUID, s.GPUUUID)
	setString(&l.utilSource, s.UtilSource)
	setString(&l.schema, s.SchemaField)
	setString(&l.holder, s.HolderRef)
	setString(&l.shareKind, s.ShareKind)
	l.shareMem, l.shareCores = s.ShareMem, s.ShareCores
}

func setString(dst *string, s string) {
	if *dst != s {
		*dst = s
	}
}

// sample returns the sample l of key k.
func (l *latestSample) sample(k *schemas.Key) schemas.Sample {
	return schemas.Sample{StartMS: l.startMS, IntervalMS: l.intervalMS, Node: l.node, GPUUUID: l.gpuUUID,
		GPUModel: k.GPUModel, InstanceID: k.InstanceID, Profile: k.Profile, Project: k.Project, User: k.User,
		Util: l.util, UtilKnown: l.utilKnown, MemUsed: l.memUsed, MemTotal: l.memTotal, Processes: l.procs,
		UtilSource: l.utilSource, SchemaField: l.schema, HolderRef: l.holder,
		ShareKind: l.shareKind, ShareMem: l.shareMem, ShareCores: l.shareCores}
}

type openRun struct {
	start, end int64
	min, max   float64
	class      uint8
	dirty      bool // grew since it was last emitted
}

// at returns the i-th open run of o (0: the front one).
func (c *Compactor) at(o *openRuns, i int) *openRun {
	if i == 0 {
		return &o.front
	}
	return &c.more[o.more-1][i-1]
}

// rehull recomputes the hull of the runs after the front.
func (c *Compactor) rehull(o *openRuns) {
	o.lo, o.hi = math.MaxInt64, math.MinInt64
	if o.n > 1 {
		m := &c.more[o.more-1]
		for i := 1; i < int(o.n); i++ {
			r := &m[i-1]
			o.lo, o.hi = min(o.lo, r.start), max(o.hi, r.end)
		}
	}
}

// extended is what Compactor.extend did.
type extended struct {
	prev    openRun // the front run before the sample (zero when opened)
	opened  bool    // the sample opened a run
	joined  int     // runs joined into the front run
	evicted bool    // a run was evicted to open one: last
	last    openRun
}

// extend folds the sample [start, end) of class with util into the runs of o
// of the same class it touches or overlaps (joining them) and moves the result
// to the front, or opens a run for it at the front, evicting the last run when
// the key has RunsPerKey. It appends to c.closed, as they were before the
// sample, the runs that grew since they were last written and whose identity
// the sample ended: a run joined into another, and the extended run when its
// start or utilisation range changed.
func (c *Compactor) extend(o *openRuns, start, end int64, class uint8, lo, hi float64) (x extended) {
	n := int(o.n)
	h, i := -1, 0
	if f := &o.front; n > 0 && f.class == class && start <= f.end && end >= f.start {
		h, i, x.prev = 0, 1, *f
		f.start, f.end, f.min, f.max = min(f.start, start), max(f.end, end), min(f.min, lo), max(f.max, hi)
		if n == 1 || start > o.hi || end < o.lo {
			x.closePrev(f, &c.closed)
			return x // no other run within reach
		}
	}
	for ; i < n; i++ {
		r := c.at(o, i)
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
			c.closed = append(c.closed, *r)
		}
		f := c.at(o, h)
		f.start, f.end, f.min, f.max = min(f.start, r.start), max(f.end, r.end), min(f.min, r.min), max(f.max, r.max)
		for j := i; j < n-1; j++ {
			*c.at(o, j) = *c.at(o, j+1)
		}
		n--
		i--
		x.joined++
	}
	o.n = uint8(n)
	if h >= 0 {
		if h > 0 {
			f := *c.at(o, h)
			for j := h; j > 0; j-- {
				*c.at(o, j) = *c.at(o, j-1)
			}
			o.front = f
		}
		x.closePrev(&o.front, &c.closed)
		c.rehull(o)
		return x
	}
	if n == RunsPerKey {
		x.evicted, x.last = true, *c.at(o, n-1)
		n--
	}
	if n > 0 && o.more == 0 {
		o.more = c.newMore()
	}
	for j := n; j > 0; j-- {
		*c.at(o, j) = *c.at(o, j-1)
	}
	o.front = openRun{start: start, end: end, min: lo, max: hi, class: class}
	o.n = uint8(n + 1)
	c.rehull(o)
	x.opened = true
	return x
}

// newMore returns a zeroed entry of c.more (its index plus one).
func (c *Compactor) newMore() int32 {
	if n := len(c.freeMore); n > 0 {
		m := c.freeMore[n-1]
		c.freeMore = c.freeMore[:n-1]
		c.more[m-1] = [RunsPerKey - 1]openRun{}
		return m
	}
	c.more = append(c.more, [RunsPerKey - 1]openRun{})
	return int32(len(c.more))
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
	return &Compactor{maxOpen: maxOpen, keys: map[uint64]int32{}, spill: map[schemas.Key]int32{},
		seed: maphash.MakeSeed(), mask: math.MaxUint64, keyOf: make([]schemas.Key, 1), st: make([]keyState, 1)}
}

// Stats returns what the Compactor counted so far.
func (c *Compactor) Stats() CompactorStats {
	s := c.stats
	s.OpenOcc, s.OpenIdle = c.nOcc, c.nIdle
	return s
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

// keyHash hashes a key's fields, each with its length.
func (c *Compactor) keyHash(project, user, instance, model, profile string) uint64 {
	b := c.hbuf[:0]
	for _, f := range [...]string{project, user, instance, model, profile} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	c.hbuf = b
	return maphash.Bytes(c.seed, b) & c.mask
}

// hashOf is keyHash of k.
func (c *Compactor) hashOf(k *schemas.Key) uint64 {
	return c.keyHash(k.Project, k.User, k.InstanceID, k.GPUModel, k.Profile)
}

// is reports whether id is the key of s.
func (c *Compactor) is(id int32, s *schemas.Sample) bool {
	k := &c.keyOf[id]
	return k.InstanceID == s.InstanceID && k.User == s.User && k.Project == s.Project &&
		k.Profile == s.Profile && k.GPUModel == s.GPUModel
}

// idOf returns the id of the held sample's key, a new one when the key is new.
// It tries the key that followed the previous sample's last time first.
func (c *Compactor) idOf(s *schemas.Sample) int32 {
	p := &c.st[c.prev]
	id := p.next
	if id == 0 || !c.is(id, s) {
		id = c.lookup(s)
		p.next = id // p is still valid: lookup adds no state
		if id == 0 {
			id = c.newKey(s)
			c.st[c.prev].next = id
		}
	}
	c.prev = id
	return id
}

// lookup returns the id of the key of s, or 0.
func (c *Compactor) lookup(s *schemas.Sample) int32 {
	if id, ok := c.keys[c.keyHash(s.Project, s.User, s.InstanceID, s.GPUModel, s.Profile)]; ok && c.is(id, s) {
		return id
	}
	if len(c.spill) > 0 {
		return c.spill[schemas.KeyOf(s)]
	}
	return 0
}

// newKey adds the key of s (not known). It keeps the sample's strings: the
// decoder interns them (schemas.Decoder), so the samples of a key share them
// and telling a key by them is mostly comparing pointers.
func (c *Compactor) newKey(s *schemas.Sample) int32 {
	var id int32
	if n := len(c.free); n > 0 {
		id, c.free = c.free[n-1], c.free[:n-1]
	} else {
		id = int32(len(c.st))
		c.st = append(c.st, keyState{})
		c.keyOf = append(c.keyOf, schemas.Key{})
	}
	k := schemas.KeyOf(s)
	c.keyOf[id] = k
	c.st[id] = keyState{latestMS: math.MinInt64, seen: c.round}
	if h := c.hashOf(&k); c.hasHash(h) {
		c.spill[k] = id
	} else {
		c.keys[h] = id
	}
	c.link(id)
	return id
}

func (c *Compactor) hasHash(h uint64) bool {
	_, ok := c.keys[h]
	return ok
}

// link puts id at the front of the list by round (seen in this one).
func (c *Compactor) link(id int32) {
	st := c.st
	f := st[0].older
	st[id].older, st[id].newer = f, 0
	st[f].newer, st[0].older = id, id
	st[id].seen = c.round
}

// unlink takes id out of the list by round.
func (c *Compactor) unlink(id int32) {
	st := c.st
	o, n := st[id].older, st[id].newer
	st[o].newer, st[n].older = n, o
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
	for i := range samples {
		s := &samples[i]
		if s.Project == "" {
			continue // unheld: raw row only, it bills nobody
		}
		id := c.idOf(s)
		ks := &c.st[id]
		if ks.seen != c.round {
			c.unlink(id)
			c.link(id)
		}
		if s.StartMS >= ks.latestMS {
			ks.latestMS = s.StartMS
			c.noteLatest(ks, id, s)
		}
		start, end := s.StartMS, s.EndMS()
		b.Occupancy = c.addOcc(b.Occupancy, id, start, end)
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
				b.Idle = c.appendIdle(b.Idle, c.keyOf[id], m, end, class, util, util)
				e = m
			}
			b.Idle = c.addIdle(b.Idle, id, start, e, class, util)
		}
	}
}

// noteLatest copies s, the latest sample of key id (ks), into c.latest.
func (c *Compactor) noteLatest(ks *keyState, id int32, s *schemas.Sample) {
	if ks.latestDirty {
		c.latest[ks.latestSlot].set(s)
		return
	}
	ks.latestDirty, ks.latestSlot = true, int32(len(c.dirtyL))
	c.dirtyL = append(c.dirtyL, id)
	c.latest = append(c.latest, latestOf(s))
}

// EmitOpen appends to b every open run that grew since it was last emitted,
// and to b.Latest the latest sample of each key whose latest changed since the
// last EmitOpen: the held sample with the greatest start the Compactor saw of
// the key (so a replay of older samples changes none). Afterwards the rows
// emitted so far cover every sample added so far.
func (c *Compactor) EmitOpen(b *Batch) {
	b.Occupancy = slices.Grow(b.Occupancy, len(c.dirtyO)) // at least one run each
	for _, id := range c.dirtyO {
		if o := &c.st[id].occ; o.dirty {
			for i := range int(o.n) {
				if r := c.at(o, i); r.dirty {
					b.Occupancy = append(b.Occupancy, schemas.Run{Key: c.keyOf[id], StartMS: r.start, EndMS: r.end})
					r.dirty = false
				}
			}
			o.dirty = false
		}
	}
	b.Idle = slices.Grow(b.Idle, len(c.dirtyI))
	for _, id := range c.dirtyI {
		if o := &c.st[id].idle; o.dirty {
			for i := range int(o.n) {
				if r := c.at(o, i); r.dirty {
					b.Idle = append(b.Idle, schemas.IdleRun{Run: schemas.Run{Key: c.keyOf[id], StartMS: r.start, EndMS: r.end}, Class: r.class, MinUtil: r.min, MaxUtil: r.max})
					r.dirty = false
				}
			}
			o.dirty = false
		}
	}
	b.Latest = slices.Grow(b.Latest, len(c.dirtyL))
	for i, id := range c.dirtyL {
		c.st[id].latestDirty = false
		b.Latest = append(b.Latest, c.latest[i].sample(&c.keyOf[id]))
	}
	clear(c.latest) // drop the strings
	c.latest = c.latest[:0]
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
		c.forget(c.st[0].newer) // the oldest
	}
}

// forget drops the key id and its open runs; its id is reused.
func (c *Compactor) forget(id int32) {
	c.unlink(id)
	ks := &c.st[id]
	c.nOcc -= int(ks.occ.n)
	c.nIdle -= int(ks.idle.n)
	c.stats.Forgotten += int64(ks.occ.n) + int64(ks.idle.n)
	for _, m := range [...]int32{ks.occ.more, ks.idle.more} {
		if m != 0 {
			c.freeMore = append(c.freeMore, m)
		}
	}
	k := &c.keyOf[id]
	if h := c.hashOf(k); c.keys[h] == id {
		delete(c.keys, h)
	} else {
		delete(c.spill, *k)
	}
	*k, *ks = schemas.Key{}, keyState{}
	c.free = append(c.free, id)
	if c.prev == id {
		c.prev = 0
	}
}

func (c *Compactor) addOcc(out []schemas.Run, id int32, start, end int64) []schemas.Run {
	o := &c.st[id].occ
	x := c.extend(o, start, end, 0, 0, 0)
	if x.evicted && x.last.dirty {
		out = append(out, schemas.Run{Key: c.keyOf[id], StartMS: x.last.start, EndMS: x.last.end})
	}
	if len(c.closed) > 0 {
		for _, r := range c.closed {
			out = append(out, schemas.Run{Key: c.keyOf[id], StartMS: r.start, EndMS: r.end})
		}
		c.closed = c.closed[:0]
	}
	r := &o.front
	// Cut at UTC month boundaries: the finished months are final rows.
	for b := c.nextMonth(r.start); r.end > b; b = c.nextMonth(r.start) {
		out = append(out, schemas.Run{Key: c.keyOf[id], StartMS: r.start, EndMS: b})
		r.start = b
	}
	if c.count(&x, int(o.n), r, &c.nOcc) {
		c.dirtyO = markDirty(c.dirtyO, id, o, r)
	}
	return out
}

func (c *Compactor) addIdle(out []schemas.IdleRun, id int32, start, end int64, class uint8, util float64) []schemas.IdleRun {
	o := &c.st[id].idle
	lo, hi := 0.0, 0.0
	if class != IdleClassNull {
		lo, hi = UtilRange(util)
	}
	x := c.extend(o, start, end, class, lo, hi)
	if ev := &x.last; x.evicted && ev.dirty {
		out = append(out, schemas.IdleRun{Run: schemas.Run{Key: c.keyOf[id], StartMS: ev.start, EndMS: ev.end}, Class: ev.class, MinUtil: ev.min, MaxUtil: ev.max})
	}
	if len(c.closed) > 0 {
		for _, r := range c.closed {
			out = append(out, schemas.IdleRun{Run: schemas.Run{Key: c.keyOf[id], StartMS: r.start, EndMS: r.end}, Class: r.class, MinUtil: r.min, MaxUtil: r.max})
		}
		c.closed = c.closed[:0]
	}
	r := &o.front
	for b := c.nextMonth(r.start); r.end > b; b = c.nextMonth(r.start) {
		out = append(out, schemas.IdleRun{Run: schemas.Run{Key: c.keyOf[id], StartMS: r.start, EndMS: b}, Class: r.class, MinUtil: r.min, MaxUtil: r.max})
		r.start = b
	}
	if c.count(&x, int(o.n), r, &c.nIdle) {
		c.dirtyI = markDirty(c.dirtyI, id, o, r)
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

func markDirty(list []int32, id int32, o *openRuns, r *openRun) []int32 {
	r.dirty = true
	if !o.dirty {
		o.dirty = true
		list = append(list, id)
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
