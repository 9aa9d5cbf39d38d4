// Package billing turns usage into invoices. It is pure: it takes samples (or
// occupancy intervals) and a catalog and returns invoices; it opens no file or
// socket, starts no goroutine and reads no clock, so the file path, the
// embedded store and ClickHouse all bill through exactly this code
// (internal/reads feeds it from a store).
//
// The rules are those of billing-semantics v1, restated in docs/billing.md.
package billing

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
	"unsafe"

	"github.com/cardhour/cardhour/schemas"
)

// Period is a calendar month in the catalog's time zone: [Start, End).
type Period struct {
	Year  int
	Month time.Month
	Start time.Time
	End   time.Time
}

var periodPattern = regexp.MustCompile(`^(\d{4})-(\d{2})$`)

// ParsePeriod parses "YYYY-MM" as a month in loc.
func ParsePeriod(s string, loc *time.Location) (Period, error) {
	m := periodPattern.FindStringSubmatch(s)
	if m == nil {
		return Period{}, fmt.Errorf("period %q: want YYYY-MM, e.g. 2026-11", s)
	}
	y, _ := strconv.Atoi(m[1])
	mo, _ := strconv.Atoi(m[2])
	if mo < 1 || mo > 12 || y < 1970 || y > 9998 {
		return Period{}, fmt.Errorf("period %q: month out of range", s)
	}
	return NewPeriod(y, time.Month(mo), loc), nil
}

// NewPeriod returns the calendar month y-m in loc.
func NewPeriod(y int, m time.Month, loc *time.Location) Period {
	start := time.Date(y, m, 1, 0, 0, 0, 0, loc)
	return Period{Year: y, Month: m, Start: start, End: start.AddDate(0, 1, 0)}
}

// String is the period as YYYY-MM.
func (p Period) String() string { return fmt.Sprintf("%04d-%02d", p.Year, int(p.Month)) }

// StartMS and EndMS are the period bounds in Unix milliseconds.
func (p Period) StartMS() int64 { return p.Start.UnixMilli() }

// EndMS is the exclusive end of the period in Unix milliseconds.
func (p Period) EndMS() int64 { return p.End.UnixMilli() }

// MonthIndex is year*12 + month - 1, the index reservations are compared with.
func (p Period) MonthIndex() int { return p.Year*12 + int(p.Month) - 1 }

// keyState is what the accumulator keeps per key: the union of its occupancy as
// sampled (no gap bridged: sessions are that union with small gaps bridged, which
// Invoices derives, and holder conflicts are measured on it) and the union of its
// idle time inside the period. Memory is proportional to occupancy runs and idle
// runs, not to samples.
type keyState struct {
	occ  IntervalSet
	idle IntervalSet
}

// Accumulator collects usage of one billing period. Feed it samples in any order,
// any number of times; then call Invoices. It is not safe for concurrent use; for
// parallel input, use one Accumulator per goroutine and Merge them.
type Accumulator struct {
	cat    *schemas.Catalog
	period Period
	p0, p1 int64 // period bounds, ms
	lo, hi int64 // samples entirely outside [lo, hi] cannot affect the period
	tol    int64
	keys   map[schemas.Key]*keyState
	recent *[recentKeys]recentKey // see Add
}

// recentKeys is the size of an Accumulator's cache of recent keys: a slot per
// instance of a large node's samples, so that Add finds the state of a key it
// has just seen without hashing five strings.
const recentKeys = 256

// recentKey is a key Add has seen, its state and its project's idle
// threshold.
type recentKey struct {
	k         schemas.Key
	st        *keyState
	threshold float64
}

// NewAccumulator prepares to bill period p under catalog cat.
func NewAccumulator(cat *schemas.Catalog, p Period) *Accumulator {
	lo, hi := ScanWindow(cat, p)
	return &Accumulator{
		cat: cat, period: p, p0: p.StartMS(), p1: p.EndMS(), tol: cat.Defaults.GapToleranceMS,
		lo: lo, hi: hi, keys: make(map[schemas.Key]*keyState),
	}
}

// Period is the period being billed.
func (a *Accumulator) Period() Period { return a.period }

// Add feeds one validated sample. It is AddOccupancy with the sample's key and
// IsIdle, but finds the key's state in a small cache first: the slot of the
// instance's ID (its bytes' address: the decoder hands out one string per
// distinct ID), checked by comparing the whole key.
func (a *Accumulator) Add(s *schemas.Sample) {
	if s.Project == "" {
		return // an instance nobody holds bills nobody
	}
	start, end := s.StartMS, s.EndMS()
	if end <= start || end < a.lo || start > a.hi {
		return
	}
	k := schemas.Key{Project: s.Project, User: s.User, InstanceID: s.InstanceID, GPUModel: s.GPUModel, Profile: s.Profile}
	if a.recent == nil {
		a.recent = new([recentKeys]recentKey)
	}
	r := &a.recent[(uintptr(unsafe.Pointer(unsafe.StringData(s.InstanceID)))>>4)%recentKeys] //nolint:gosec // G103: the address only picks a slot
	if r.st == nil || r.k != k {
		*r = recentKey{k: k, st: a.state(k), threshold: a.cat.IdlePolicyFor(k.Project).Threshold}
	}
	idle := s.Processes == 0
	if s.UtilKnown {
		idle = s.Util < r.threshold
	}
	r.st.occ.Add(start, end)
	if idle {
		r.st.idle.Add(max(start, a.p0), min(end, a.p1))
	}
}

// AddOccupancy feeds an occupancy interval of a key: one sample's, or an
// already-aggregated one from a store's rollups. idle marks the interval as idle
// time as well. Intervals outside the period's scan window cannot change it and
// are dropped.
func (a *Accumulator) AddOccupancy(k schemas.Key, start, end int64, idle bool) {
	if k.Project == "" || end <= start || end < a.lo || start > a.hi {
		return
	}
	st := a.state(k)
	st.occ.Add(start, end)
	if idle {
		st.idle.Add(max(start, a.p0), min(end, a.p1))
	}
}

func (a *Accumulator) state(k schemas.Key) *keyState {
	st, ok := a.keys[k]
	if !ok {
		st = &keyState{occ: IntervalSet{Tol: 0}, idle: IntervalSet{Tol: 0}}
		a.keys[k] = st
	}
	return st
}

// IsIdle applies billing-semantics §6 to a held sample: util known and below the
// project's threshold, or util unknown and no compute process on the instance.
func IsIdle(cat *schemas.Catalog, s *schemas.Sample) bool {
	return IsIdleUtil(cat, s.Project, s.UtilKnown, s.Util, s.Processes == 0)
}

// Merge adds everything b has seen into a. Both must bill the same period under
// the same catalog.
func (a *Accumulator) Merge(b *Accumulator) {
	for k, bs := range b.keys {
		as := a.state(k)
		as.occ.AddSet(&bs.occ)
		as.idle.AddSet(&bs.idle)
	}
}

// Keys is the number of distinct usage keys seen.
func (a *Accumulator) Keys() int { return len(a.keys) }

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
