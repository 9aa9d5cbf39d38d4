package reads

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// versionedRows is a usage store of one project whose held hours equal its
// data version, so a report shows which version it was computed at. gate,
// when set, holds every read until it is closed.
type versionedRows struct {
	mu      sync.Mutex
	version int
	verErr  error
	reads   atomic.Int64
	started chan struct{} // receives once per read that started, if set
	gate    chan struct{}
}

func (v *versionedRows) set(n int) { v.mu.Lock(); v.version = n; v.mu.Unlock() }

func (v *versionedRows) DataVersion(context.Context) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return fmt.Sprint(v.version), v.verErr
}

func (v *versionedRows) UsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) error {
	v.reads.Add(1)
	v.mu.Lock()
	n, gate, started := v.version, v.gate, v.started
	v.mu.Unlock()
	if started != nil {
		started <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if n < 0 {
		return errors.New("store down")
	}
	return fn(schemas.UsageRow{Project: "nlp-lab", GPUModel: "Tesla T4", Profile: "full", HeldMS: int64(n) * 3_600_000})
}

func cacheFixture(t *testing.T) (*schemas.Catalog, UsageQuery) {
	t.Helper()
	cat, err := schemas.LoadCatalog("../../schemas/examples/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, cat.Location)
	return cat, UsageQuery{From: from, To: from.AddDate(0, 1, 0), GroupBy: []string{ByProject}}
}

func heldHours(t *testing.T, r *UsageReport) int64 {
	t.Helper()
	if len(r.Rows) != 1 {
		t.Fatalf("rows: %+v", r.Rows)
	}
	return r.Rows[0].HeldSeconds / 3600
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestUsageCacheServesUntilTheDataChanges(t *testing.T) {
	ctx := context.Background()
	cat, q := cacheFixture(t)
	src := &versionedRows{version: 1}
	clk := &fakeClock{t: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)}
	c := NewUsageCache(src, src, UsageCacheConfig{Poll: time.Second, MaxStale: -1, Now: clk.now})

	for range 3 {
		r, err := c.Usage(ctx, cat, q)
		if err != nil || heldHours(t, r) != 1 {
			t.Fatalf("got %v, %v", r, err)
		}
	}
	if n := src.reads.Load(); n != 1 {
		t.Fatalf("three requests at one version read the store %d times, want 1", n)
	}
	// Order of filters is not part of the question; order of dimensions is
	// (the report echoes it), and other filters are another question.
	q2 := q
	q2.Projects = []string{"b", "a", "a"}
	q3 := q
	q3.Projects = []string{"a", "b"}
	if queryKey(q2) != queryKey(q3) || queryKey(q) == queryKey(q2) {
		t.Fatal("query keys: filters must be canonical and distinct")
	}
	q4 := q
	q4.GroupBy = []string{ByDay, ByProject}
	q5 := q
	q5.GroupBy = []string{ByProject, ByDay}
	if queryKey(q4) == queryKey(q5) {
		t.Fatal("query keys: dimension order must be kept")
	}

	// A write: within Poll the old version still holds; after it, the
	// report is recomputed (MaxStale < 0: never served superseded).
	src.set(2)
	if r, _ := c.Usage(ctx, cat, q); heldHours(t, r) != 1 {
		t.Fatal("the version is read at most once per Poll")
	}
	clk.add(time.Second)
	if r, _ := c.Usage(ctx, cat, q); heldHours(t, r) != 2 {
		t.Fatalf("after a write and Poll: got %d h, want 2", heldHours(t, r))
	}
	// Another catalog (a new version uploaded) never shares reports.
	cat2 := *cat
	if r, _ := c.Usage(ctx, &cat2, q); heldHours(t, r) != 2 || src.reads.Load() != 3 {
		t.Fatalf("another catalog: reads %d, want 3", src.reads.Load())
	}
	s := c.Stats()
	if s.Misses != 3 || s.Hits != 3 || s.Stale != 0 || s.Entries != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestUsageCacheSharesOneComputation(t *testing.T) {
	ctx := context.Background()
	cat, q := cacheFixture(t)
	src := &versionedRows{version: 5, gate: make(chan struct{}), started: make(chan struct{}, 100)}
	c := NewUsageCache(src, src, UsageCacheConfig{})
	const n = 20
	var wg sync.WaitGroup
	got := make([]int64, n)
	for i := range n {
		wg.Go(func() {
			r, err := c.Usage(ctx, cat, q)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = heldHours(t, r)
		})
	}
	<-src.started
	time.Sleep(20 * time.Millisecond) // let the others arrive and wait
	close(src.gate)
	wg.Wait()
	for i, h := range got {
		if h != 5 {
			t.Fatalf("request %d: %d h", i, h)
		}
	}
	if r := src.reads.Load(); r != 1 {
		t.Fatalf("%d concurrent requests read the store %d times, want 1", n, r)
	}
}

func TestUsageCacheStaleWhileRevalidate(t *testing.T) {
	ctx := context.Background()
	cat, q := cacheFixture(t)
	src := &versionedRows{version: 1}
	clk := &fakeClock{t: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)}
	c := NewUsageCache(src, src, UsageCacheConfig{Poll: time.Millisecond, MaxStale: 10 * time.Second, Now: clk.now})
	if r, _ := c.Usage(ctx, cat, q); heldHours(t, r) != 1 {
		t.Fatal("first report")
	}
	// A write, and a slow recomputation: the superseded report is served
	// at once while one refresh runs in the background.
	src.mu.Lock()
	src.version, src.gate, src.started = 2, make(chan struct{}), make(chan struct{}, 10)
	src.mu.Unlock()
	clk.add(5 * time.Second)
	for range 3 {
		if r, _ := c.Usage(ctx, cat, q); heldHours(t, r) != 1 {
			t.Fatal("a superseded report younger than MaxStale is served while the refresh runs")
		}
	}
	<-src.started
	close(src.gate)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, _ := c.Usage(ctx, cat, q)
		if heldHours(t, r) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background refresh never landed")
		}
		time.Sleep(time.Millisecond)
	}
	if s := c.Stats(); s.Refreshes != 1 || src.reads.Load() != 2 {
		t.Fatalf("one refresh for many stale requests: %+v, reads %d", s, src.reads.Load())
	}
	// Older than MaxStale, a request waits for the fresh report.
	src.set(3)
	clk.add(11 * time.Second)
	if r, _ := c.Usage(ctx, cat, q); heldHours(t, r) != 3 {
		t.Fatalf("older than MaxStale: got %d h, want the fresh 3", heldHours(t, r))
	}
}

func TestUsageCacheErrorsAndBounds(t *testing.T) {
	ctx := context.Background()
	cat, q := cacheFixture(t)
	src := &versionedRows{version: -1}
	c := NewUsageCache(src, src, UsageCacheConfig{Poll: time.Nanosecond, MaxStale: -1})
	if _, err := c.Usage(ctx, cat, q); err == nil {
		t.Fatal("a store error must reach the caller")
	}
	if _, err := c.Usage(ctx, cat, q); err == nil {
		t.Fatal("errors are not cached as reports, nor reports as errors")
	}
	src.set(4)
	if r, err := c.Usage(ctx, cat, q); err != nil || heldHours(t, r) != 4 {
		t.Fatalf("after an error the next request computes: %v", err)
	}
	// No data version: every request computes (nothing can be known current).
	src.mu.Lock()
	src.verErr = errors.New("system.parts unreadable")
	src.mu.Unlock()
	before := src.reads.Load()
	for range 2 {
		if r, err := c.Usage(ctx, cat, q); err != nil || heldHours(t, r) != 4 {
			t.Fatalf("bypass: %v", err)
		}
	}
	if src.reads.Load() != before+2 || c.Stats().Bypassed != 2 {
		t.Fatalf("without a version each request reads the store: %+v", c.Stats())
	}

	// MaxRows: a report of one row counts 2 (its total too), so a cache of
	// 8 rows keeps four; the least recently used go first.
	src2 := &versionedRows{version: 1}
	c2 := NewUsageCache(src2, src2, UsageCacheConfig{MaxRows: 8, MaxStale: -1})
	for _, p := range []string{"a", "b", "c", "d"} {
		qq := q
		qq.Projects = []string{p, "nlp-lab"}
		if _, err := c2.Usage(ctx, cat, qq); err != nil {
			t.Fatal(err)
		}
	}
	if s := c2.Stats(); s.Entries != 4 || s.Rows != 8 {
		t.Fatalf("within MaxRows: %+v", s)
	}
	qq := q
	qq.Projects = []string{"e", "nlp-lab"}
	if _, err := c2.Usage(ctx, cat, qq); err != nil {
		t.Fatal(err)
	}
	if s := c2.Stats(); s.Entries != 4 || s.Rows != 8 {
		t.Fatalf("over MaxRows the oldest goes: %+v", s)
	}
	qa := q
	qa.Projects = []string{"a", "nlp-lab"}
	before = src2.reads.Load()
	if _, err := c2.Usage(ctx, cat, qa); err != nil || src2.reads.Load() != before+1 {
		t.Fatal("the evicted report is computed again")
	}
}
