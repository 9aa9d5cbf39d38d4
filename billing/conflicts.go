package billing

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// Holder is who held an instance: a project and a user.
type Holder struct {
	Project string
	User    string
}

// String is the holder as project/user.
func (h Holder) String() string { return h.Project + "/" + h.User }

// Kind is what an instance was reported as: a GPU model and a MIG profile.
type Kind struct {
	GPUModel string
	Profile  string
}

// String is the kind as "model / profile".
func (k Kind) String() string { return k.GPUModel + " / " + k.Profile }

// Conflict is an instance that, inside the period, was held by two or more
// holders at once, or by one holder under two GPU models or profiles at once. A MIG
// slice or a card has one holder at a time, so this is an attribution fault or
// corrupt input. Billing is unchanged by it: each key is billed for its own
// sessions, so the overlapping time is billed once per key.
type Conflict struct {
	InstanceID string
	// Holders are the distinct holders that took part in the overlap, sorted.
	Holders []Holder
	// OtherHolders counts holders left out of Holders: in a user's statement, the
	// other holders are counted, never named.
	OtherHolders int
	// Kinds are the distinct (GPU model, profile) that took part, sorted.
	Kinds []Kind
	// OverlapMS is the time inside the period during which two or more keys (holder
	// and kind) held the instance at once, measured on the occupancy as sampled,
	// before any gap is bridged.
	OverlapMS int64
	// First and Last bound the overlapping time: the start of its first and the
	// end of its last stretch, Unix ms.
	First, Last int64

	// What the overlap was computed from (the occupancy of the keys that took part),
	// so that a statement can recompute it for one user.
	keys   []schemas.Key
	pieces []keyPiece
}

// keyPiece is one piece of a key's occupancy; key indexes a slice of keys.
type keyPiece struct {
	key        int
	start, end int64
}

// occupancy collects, for holder conflicts, the occupancy inside the period of
// every key whose instance has two or more keys (count every key first, then add).
// It keeps one flat slice of pieces, so the common case costs one sort and one
// scan of the pieces and no allocation per instance.
type occupancy struct {
	inst   map[string][2]int32 // instance → {keys counted, ordinal + 1}
	next   int32
	total  int // pieces counted, a bound for pieces
	keys   []schemas.Key
	pieces []instPiece
}

type instPiece struct {
	inst, key  int32 // ordinal of the instance, index in keys
	start, end int64
}

func newOccupancy() *occupancy { return &occupancy{inst: map[string][2]int32{}} }

// count counts a key of instance that has n pieces.
func (o *occupancy) count(instance string, n int) {
	v := o.inst[instance]
	v[0]++
	o.inst[instance] = v
	o.total += n
}

// add adds key k's occupancy pieces (sorted, disjoint) clipped to [lo, hi).
func (o *occupancy) add(k schemas.Key, pieces []Interval, lo, hi int64) {
	v := o.inst[k.InstanceID]
	if v[0] < 2 {
		return
	}
	if o.pieces == nil {
		o.pieces = make([]instPiece, 0, o.total)
	}
	if v[1] == 0 {
		o.next++
		v[1] = o.next
		o.inst[k.InstanceID] = v
	}
	key := int32(len(o.keys))
	n := len(o.pieces)
	for _, p := range pieces {
		if p.End > lo && p.Start < hi {
			o.pieces = append(o.pieces, instPiece{v[1], key, max(p.Start, lo), min(p.End, hi)})
		}
	}
	if len(o.pieces) > n {
		o.keys = append(o.keys, k)
	}
}

// conflicts detects the conflicts of every instance, sorted by instance id. An
// instance whose pieces, in order of start, never start before an earlier one
// ends has none; only one that has overlapping pieces is swept to measure them.
func (o *occupancy) conflicts() []Conflict {
	slices.SortFunc(o.pieces, func(x, y instPiece) int {
		if x.inst != y.inst {
			return int(x.inst - y.inst)
		}
		return cmp.Compare(x.start, y.start)
	})
	var out []Conflict
	for i := 0; i < len(o.pieces); {
		j, overlapping := i+1, false
		maxEnd := o.pieces[i].end
		for ; j < len(o.pieces) && o.pieces[j].inst == o.pieces[i].inst; j++ {
			overlapping = overlapping || o.pieces[j].start < maxEnd
			maxEnd = max(maxEnd, o.pieces[j].end)
		}
		if overlapping {
			if c, ok := o.sweep(o.pieces[i:j]); ok {
				out = append(out, c)
			}
		}
		i = j
	}
	slices.SortFunc(out, func(x, y Conflict) int { return cmp.Compare(x.InstanceID, y.InstanceID) })
	return out
}

// sweep measures the conflict of one instance's pieces.
func (o *occupancy) sweep(ps []instPiece) (Conflict, bool) {
	local := map[int32]int{}
	var keys []schemas.Key
	pieces := make([]keyPiece, 0, len(ps))
	for _, p := range ps {
		k, ok := local[p.key]
		if !ok {
			k = len(keys)
			local[p.key] = k
			keys = append(keys, o.keys[p.key])
		}
		pieces = append(pieces, keyPiece{k, p.start, p.end})
	}
	return sweepConflict(keys[0].InstanceID, keys, pieces, nil)
}

// sweepConflict measures the time during which two or more keys held the instance
// at once and at least one of them satisfies focus (every key when focus is nil),
// and which keys took part in it. Keys take part when they held the instance during
// such time. The sweep is O(n log n) in the number of pieces: a key's participation
// is decided from the number of times the condition became true during its piece.
func sweepConflict(id string, keys []schemas.Key, pieces []keyPiece, focus func(schemas.Key) bool) (Conflict, bool) {
	inFocus := make([]bool, len(keys))
	for i, k := range keys {
		inFocus[i] = focus == nil || focus(k)
	}
	c := Conflict{InstanceID: id}
	involved := make([]bool, len(keys))
	sweepOverlap(&c, sortedEvents(pieces), inFocus, involved)
	if c.OverlapMS == 0 {
		return Conflict{}, false
	}
	c.addInvolved(keys, pieces, involved)
	return c, true
}

// sweepEvent is a piece of keyPiece.key starting or ending at t.
type sweepEvent struct {
	t     int64
	key   int
	start bool
}

// sortedEvents is the starts and ends of pieces in time order. Half-open
// pieces: at one instant, ends come before starts.
func sortedEvents(pieces []keyPiece) []sweepEvent {
	events := make([]sweepEvent, 0, 2*len(pieces))
	for _, p := range pieces {
		events = append(events, sweepEvent{p.start, p.key, true}, sweepEvent{p.end, p.key, false})
	}
	slices.SortFunc(events, func(x, y sweepEvent) int {
		if c := cmp.Compare(x.t, y.t); c != 0 {
			return c
		}
		if x.start != y.start {
			if x.start {
				return 1
			}
			return -1
		}
		return cmp.Compare(x.key, y.key)
	})
	return events
}

// sweepOverlap walks events, setting c's overlap (OverlapMS, First, Last):
// the time during which two or more keys held the instance and at least one
// of them is in focus, and marks in involved the keys that held the instance
// during it.
func sweepOverlap(c *Conflict, events []sweepEvent, inFocus, involved []bool) {
	startTrans := make([]int, len(inFocus))
	var (
		count, focused, trans int
		cond                  bool
		prevT                 int64
		started               []int
	)
	for i := 0; i < len(events); {
		t := events[i].t
		if cond {
			c.OverlapMS += t - prevT
			c.Last = t
		}
		for ; i < len(events) && events[i].t == t && !events[i].start; i++ {
			k := events[i].key
			count--
			if inFocus[k] {
				focused--
			}
			if trans > startTrans[k] {
				involved[k] = true // the condition became true while it held the instance
			}
		}
		started = started[:0]
		for ; i < len(events) && events[i].t == t && events[i].start; i++ {
			k := events[i].key
			count++
			if inFocus[k] {
				focused++
			}
			started = append(started, k)
		}
		now := count >= 2 && focused >= 1
		if now && !cond {
			trans++
			if c.OverlapMS == 0 {
				c.First = t
			}
		}
		for _, k := range started {
			involved[k] = involved[k] || now
			startTrans[k] = trans
		}
		cond, prevT = now, t
	}
}

// addInvolved records the keys involved in c, with their pieces (renumbered
// to c's keys), holders and kinds (sorted, without repeats).
func (c *Conflict) addInvolved(keys []schemas.Key, pieces []keyPiece, involved []bool) {
	remap := make([]int, len(keys))
	for i, k := range keys {
		if !involved[i] {
			continue
		}
		remap[i] = len(c.keys)
		c.keys = append(c.keys, k)
		c.Holders = append(c.Holders, Holder{k.Project, k.User})
		c.Kinds = append(c.Kinds, Kind{k.GPUModel, k.Profile})
	}
	for _, p := range pieces {
		if involved[p.key] {
			c.pieces = append(c.pieces, keyPiece{remap[p.key], p.start, p.end})
		}
	}
	c.Holders = sortedUnique(c.Holders, func(x, y Holder) int {
		return cmp.Or(cmp.Compare(x.Project, y.Project), cmp.Compare(x.User, y.User))
	})
	c.Kinds = sortedUnique(c.Kinds, func(x, y Kind) int {
		return cmp.Or(cmp.Compare(x.GPUModel, y.GPUModel), cmp.Compare(x.Profile, y.Profile))
	})
}

func sortedUnique[T comparable](s []T, compare func(T, T) int) []T {
	slices.SortFunc(s, compare)
	return slices.Compact(s)
}

// ForUser is the conflict as user's statement shows it: the overlap during which
// one of user's keys held the instance together with another key, user's own
// holders named and the others only counted.
func (c *Conflict) ForUser(user string) (Conflict, bool) {
	if !slices.ContainsFunc(c.keys, func(k schemas.Key) bool { return k.User == user }) {
		return Conflict{}, false
	}
	uc, ok := sweepConflict(c.InstanceID, c.keys, c.pieces, func(k schemas.Key) bool { return k.User == user })
	if !ok {
		return Conflict{}, false
	}
	own := uc.Holders[:0:0]
	for _, h := range uc.Holders {
		if h.User == user {
			own = append(own, h)
		}
	}
	uc.OtherHolders = len(uc.Holders) - len(own)
	uc.Holders = own
	uc.keys, uc.pieces = nil, nil
	return uc, true
}

// Message is the conflict's warning text. Times are shown in loc.
func (c *Conflict) Message(loc *time.Location) string {
	holders := make([]string, 0, len(c.Holders))
	for _, h := range c.Holders {
		holders = append(holders, h.String())
	}
	who := strings.Join(holders, ", ")
	if c.OtherHolders > 0 {
		who += fmt.Sprintf(" and %d other %s", c.OtherHolders, plural(c.OtherHolders, "holder", "holders"))
	}
	n := len(c.Holders) + c.OtherHolders
	kinds := make([]string, len(c.Kinds))
	for i, k := range c.Kinds {
		kinds[i] = k.String()
	}
	as := strings.Join(kinds, ", ")
	if len(kinds) > 1 {
		as = fmt.Sprintf("%d kinds (%s)", len(kinds), as)
	}
	return fmt.Sprintf("instance %q was held by %d %s (%s) as %s at the same time for %s s, first at %s, last until %s (%s): "+
		"each is billed for that time, check the attribution (同一 GPU 实例同时被多个占用者或以多种规格占用，各自计费，请核查归属)",
		c.InstanceID, n, plural(n, "holder", "holders"), who, as,
		FormatSeconds(c.OverlapMS), formatLocal(c.First, loc), formatLocal(c.Last, loc), loc)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// formatLocal renders Unix ms as a wall-clock time in loc, with milliseconds only
// when there are any.
func formatLocal(ms int64, loc *time.Location) string {
	return time.UnixMilli(ms).In(loc).Format("2006-01-02 15:04:05.999")
}
