package ingest

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/cardhour/cardhour/schemas"
)

// MemStore is an in-memory Backend for tests: it keeps every row written, as a
// database would, and returns them to billing's reads like the real stores. FailNext makes the
// next writes fail, to exercise retries.
type MemStore struct {
	mu        sync.Mutex
	samples   []schemas.Sample
	occupancy []schemas.Run
	idle      []schemas.IdleRun
	latest    map[string]schemas.Sample // by instance: the held sample with the greatest start
	writes    int
	failNext  int
	rejects   map[string]Reject // by source
	// The data-quality rollup (Activity): node minutes, and the busy
	// unheld samples by identity (the last written kept).
	nodeMinutes map[NodeMinute]struct{}
	unheld      map[sampleKey]schemas.Sample
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{} }

// ErrInjected is returned by a MemStore write made to fail.
var ErrInjected = errors.New("memstore: injected failure")

// FailNext makes the next n writes fail with ErrInjected.
func (m *MemStore) FailNext(n int) {
	m.mu.Lock()
	m.failNext = n
	m.mu.Unlock()
}

// Write implements Store.
func (m *MemStore) Write(ctx context.Context, b *Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failNext > 0 {
		m.failNext--
		return ErrInjected
	}
	m.writes++
	m.samples = append(m.samples, b.Samples...)
	m.occupancy = append(m.occupancy, b.Occupancy...)
	m.idle = append(m.idle, b.Idle...)
	m.addActivity(ActivityOf(b.Samples))
	if m.latest == nil {
		m.latest = map[string]schemas.Sample{}
	}
	for _, s := range b.Latest {
		if cur, ok := m.latest[s.InstanceID]; s.Project != "" && (!ok || s.StartMS >= cur.StartMS) {
			m.latest[s.InstanceID] = s
		}
	}
	return nil
}

// addActivity stores the rollup of a batch's samples. m.mu must be held.
func (m *MemStore) addActivity(a *Activity) {
	if m.nodeMinutes == nil {
		m.nodeMinutes, m.unheld = map[NodeMinute]struct{}{}, map[sampleKey]schemas.Sample{}
	}
	for _, n := range a.Nodes {
		m.nodeMinutes[n] = struct{}{}
	}
	for _, s := range a.Unheld {
		m.unheld[sampleKey{s.InstanceID, s.Project, s.User, s.StartMS}] = s
	}
}

// DataVersion implements reads.DataVersioner: the number of writes, so it
// changes with every batch (rejects are not usage).
func (m *MemStore) DataVersion(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strconv.Itoa(m.writes), nil
}

// Counts returns the rows stored: samples, occupancy runs, idle runs, writes.
func (m *MemStore) Counts() (samples, occupancy, idle, writes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.samples), len(m.occupancy), len(m.idle), m.writes
}

// Samples returns a copy of the raw samples stored.
func (m *MemStore) Samples() []schemas.Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]schemas.Sample(nil), m.samples...)
}

// WriteRejects implements Rejects: one reject per source, the first kept.
func (m *MemStore) WriteRejects(ctx context.Context, rs []Reject) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failNext > 0 {
		m.failNext--
		return ErrInjected
	}
	if m.rejects == nil {
		m.rejects = map[string]Reject{}
	}
	for _, r := range rs {
		if _, ok := m.rejects[r.Source]; !ok {
			m.rejects[r.Source] = r
		}
	}
	return nil
}

// RejectSummary implements Rejects.
func (m *MemStore) RejectSummary(ctx context.Context, fromMS, toMS int64, first int) (RejectSummary, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum RejectSummary
	for _, r := range m.rejects {
		if r.TimeMS >= fromMS && r.TimeMS < toMS {
			sum.Count++
			sum.First = append(sum.First, r)
		}
	}
	slices.SortFunc(sum.First, func(a, b Reject) int {
		return cmp.Or(cmp.Compare(a.TimeMS, b.TimeMS), cmp.Compare(a.Source, b.Source))
	})
	sum.First = sum.First[:min(len(sum.First), first)]
	return sum, ctx.Err()
}

// Close implements Store.
func (m *MemStore) Close() error { return nil }

// Occupancy implements reads.UsageSource from the stored runs.
func (m *MemStore) Occupancy(ctx context.Context, lo, hi int64, fn func([]schemas.Run) error) error {
	var out []schemas.Run
	m.mu.Lock()
	for _, r := range m.occupancy {
		if r.EndMS >= lo && r.StartMS <= hi {
			out = append(out, r)
		}
	}
	m.mu.Unlock()
	if len(out) > 0 {
		if err := fn(out); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// IdleRuns implements reads.UsageSource from the stored runs.
func (m *MemStore) IdleRuns(ctx context.Context, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error {
	var out []schemas.IdleRun
	m.mu.Lock()
	for _, r := range m.idle {
		if r.EndMS > from && r.StartMS < to && (r.Class == IdleClassNull || r.MinUtil < maxUtil) {
			out = append(out, r)
		}
	}
	m.mu.Unlock()
	if len(out) > 0 {
		if err := fn(out); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// RawIdle implements reads.UsageSource from the stored samples.
func (m *MemStore) RawIdle(ctx context.Context, instances []string, from, to int64, utilBelow float64, fn func([]schemas.RawPoint) error) error {
	var out []schemas.RawPoint
	m.mu.Lock()
	for i := range m.samples {
		s := &m.samples[i]
		if s.Project == "" || !s.UtilKnown || s.Util >= utilBelow || s.StartMS < from || s.StartMS >= to || !slices.Contains(instances, s.InstanceID) {
			continue
		}
		out = append(out, schemas.RawPoint{Key: schemas.KeyOf(s), StartMS: s.StartMS, EndMS: s.EndMS(), Util: s.Util})
	}
	m.mu.Unlock()
	if len(out) > 0 {
		if err := fn(out); err != nil {
			return err
		}
	}
	return ctx.Err()
}
