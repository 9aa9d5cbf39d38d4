package reads

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// DataVersioner is a usage store that can tell, cheaply, whether its data
// changed: DataVersion returns a value that differs after every write that
// could change a usage report (an ingest batch, a replay) and stays the same
// otherwise. Implemented by ingest.MemStore, ingest/sqlite (a counter bumped
// in each batch's transaction) and ingest/clickhouse (the block numbers of
// the active parts, from system.parts).
type DataVersioner interface {
	DataVersion(ctx context.Context) (string, error)
}

// UsageCacheConfig tunes a UsageCache; the zero value takes the defaults.
type UsageCacheConfig struct {
	// Poll is how often, at most, the store's data version is read
	// (default 1 s): a report can lag a write by up to Poll plus the time
	// one report takes to compute.
	Poll time.Duration
	// MaxStale is how long after it was computed a report that a write has
	// superseded may still be served while a fresh one is computed in the
	// background (stale-while-revalidate; default 10 s). Older than that, a
	// request waits for the fresh report. Negative: never serve a
	// superseded report.
	MaxStale time.Duration
	// MaxRows bounds the rows kept over all cached reports (default
	// 200 000); the least recently used reports go first, and a report
	// larger than a quarter of it is not kept at all.
	MaxRows int
	// Refreshers bounds the background recomputations running at once
	// (default 1): after a write, superseded reports are recomputed one
	// after another instead of all at once, so the requests served
	// meanwhile do not compete with a burst of them for the CPU.
	Refreshers int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// UsageCacheStats counts what a UsageCache did.
type UsageCacheStats struct {
	Hits, Stale, Misses, Bypassed uint64 // reports served fresh, stale, computed for the caller, computed uncached
	Refreshes                     uint64 // background recomputations
	Entries, Rows                 int    // kept now
}

// UsageCache answers Usage from reports already computed while the store's
// data has not changed. A usage report is a pure function of the stored
// rows, the catalog and the query, so a report computed at data version v is
// exactly the report for any later request at v. Concurrent requests for one
// report share one computation; a report that a write superseded is
// recomputed once, in the background, while the superseded one is served
// for at most MaxStale.
//
// Reports returned are shared between callers and must not be modified.
type UsageCache struct {
	src UsageRows
	ver DataVersioner
	cfg UsageCacheConfig

	vmu      sync.Mutex
	version  string
	versAt   time.Time
	versWait chan struct{}
	versErr  error

	refresh chan struct{} // a slot per background recomputation running

	mu      sync.Mutex
	entries map[usageKey]*usageEntry
	lru     *list.List // of *usageEntry, most recently used first
	rows    int
	stats   UsageCacheStats
}

type usageKey struct {
	cat *schemas.Catalog
	q   string
}

type usageEntry struct {
	key        usageKey
	rep        *UsageReport // nil until first computed
	version    string       // data version rep was computed at
	computedAt time.Time    // when the computation that made rep started
	rows       int
	busy       chan struct{} // non-nil while a computation runs; closed when it ends
	err        error         // of the last computation callers waited for
	elem       *list.Element
}

// NewUsageCache returns a cache over src; ver tells when src's data changed.
func NewUsageCache(src UsageRows, ver DataVersioner, cfg UsageCacheConfig) *UsageCache {
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.MaxStale == 0 {
		cfg.MaxStale = 10 * time.Second
	}
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = 200_000
	}
	if cfg.Refreshers <= 0 {
		cfg.Refreshers = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &UsageCache{src: src, ver: ver, cfg: cfg, entries: map[usageKey]*usageEntry{}, lru: list.New(),
		refresh: make(chan struct{}, cfg.Refreshers)}
}

// Stats returns the counters so far.
func (c *UsageCache) Stats() UsageCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Rows = len(c.entries), c.rows
	return s
}

// Usage is reads.Usage through the cache. cat must be the same pointer
// for the same catalog (a new catalog version is a new pointer and never
// shares reports with the old one).
func (c *UsageCache) Usage(ctx context.Context, cat *schemas.Catalog, q UsageQuery) (*UsageReport, error) {
	v, err := c.dataVersion(ctx)
	if err != nil {
		// Without a version nothing can be known to be current: compute.
		c.count(func(s *UsageCacheStats) { s.Bypassed++ })
		return Usage(ctx, c.src, cat, q)
	}
	key := usageKey{cat: cat, q: queryKey(q)}
	for {
		c.mu.Lock()
		e := c.entries[key]
		if e == nil {
			e = &usageEntry{key: key}
			c.entries[key] = e
			e.elem = c.lru.PushFront(e)
		} else {
			c.lru.MoveToFront(e.elem)
		}
		now := c.cfg.Now()
		if e.rep != nil && e.version == v {
			c.stats.Hits++
			rep := e.rep
			c.mu.Unlock()
			return rep, nil
		}
		if e.rep != nil && c.cfg.MaxStale >= 0 && now.Sub(e.computedAt) <= c.cfg.MaxStale {
			c.stats.Stale++
			rep := e.rep
			if e.busy == nil {
				c.stats.Refreshes++
				e.busy = make(chan struct{})
				go func() {
					c.refresh <- struct{}{}
					defer func() { <-c.refresh }()
					c.compute(context.WithoutCancel(ctx), e, cat, q, v)
				}()
			}
			c.mu.Unlock()
			return rep, nil
		}
		if busy := e.busy; busy != nil {
			c.mu.Unlock()
			select {
			case <-busy:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			c.mu.Lock()
			rep, err, ver := e.rep, e.err, e.version
			c.mu.Unlock()
			if err != nil {
				return nil, err
			}
			if rep != nil && ver == v {
				c.count(func(s *UsageCacheStats) { s.Hits++ })
				return rep, nil
			}
			continue // computed at an older version than this caller saw, or evicted: look again
		}
		c.stats.Misses++
		e.busy = make(chan struct{})
		c.mu.Unlock()
		c.compute(ctx, e, cat, q, v)
		c.mu.Lock()
		rep, err := e.rep, e.err
		if rep != nil && e.version != v {
			rep = nil
		}
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if rep == nil {
			continue
		}
		return rep, nil
	}
}

// compute runs Usage for e at data version v and publishes the result. The
// version is read before the rows, so a write during the computation makes
// the report look older than it is (it is recomputed), never newer.
func (c *UsageCache) compute(ctx context.Context, e *usageEntry, cat *schemas.Catalog, q UsageQuery, v string) {
	started := c.cfg.Now()
	rep, err := Usage(ctx, c.src, cat, q)
	c.mu.Lock()
	defer c.mu.Unlock()
	e.err = err
	if err == nil {
		if e.rep != nil {
			c.rows -= e.rows
		}
		e.rep, e.version, e.computedAt, e.rows = rep, v, started, len(rep.Rows)+1
		c.rows += e.rows
	}
	close(e.busy)
	e.busy = nil
	if err != nil && e.rep == nil || e.rows > c.cfg.MaxRows/4 {
		c.drop(e)
	}
	for c.rows > c.cfg.MaxRows && c.lru.Len() > 0 {
		c.drop(c.lru.Back().Value.(*usageEntry))
	}
}

// drop forgets e (callers waiting on it still get its result).
func (c *UsageCache) drop(e *usageEntry) {
	if c.entries[e.key] != e {
		return
	}
	delete(c.entries, e.key)
	c.lru.Remove(e.elem)
	if e.rep != nil {
		c.rows -= e.rows
	}
}

func (c *UsageCache) count(f func(*UsageCacheStats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// dataVersion reads the store's data version at most once per Poll;
// concurrent callers share one read, and while it runs those that come
// after the first read take the last version known instead of waiting.
func (c *UsageCache) dataVersion(ctx context.Context) (string, error) {
	for {
		c.vmu.Lock()
		if !c.versAt.IsZero() && c.cfg.Now().Sub(c.versAt) < c.cfg.Poll {
			v := c.version
			c.vmu.Unlock()
			return v, nil
		}
		if w := c.versWait; w != nil {
			if !c.versAt.IsZero() {
				// A read is under way (it may queue behind a long query on a
				// store with one connection): the last version answers.
				v := c.version
				c.vmu.Unlock()
				return v, nil
			}
			c.vmu.Unlock()
			select {
			case <-w:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			c.vmu.Lock()
			err := c.versErr
			c.vmu.Unlock()
			if err != nil {
				return "", err
			}
			continue
		}
		w := make(chan struct{})
		c.versWait = w
		c.vmu.Unlock()
		v, err := c.ver.DataVersion(ctx)
		c.vmu.Lock()
		c.versErr = err
		if err == nil {
			c.version, c.versAt = v, c.cfg.Now()
		}
		c.versWait = nil
		close(w)
		c.vmu.Unlock()
		if err != nil {
			return "", fmt.Errorf("usage store data version: %w", err)
		}
		return v, nil
	}
}

// queryKey is q in a canonical form: filters sorted and deduplicated (their
// order does not change a report); the dimensions kept in their order, which
// the report echoes.
func queryKey(q UsageQuery) string {
	var b strings.Builder
	set := func(name string, vals []string) {
		s := slices.Clone(vals)
		slices.Sort(s)
		s = slices.Compact(s)
		b.WriteString(name)
		b.WriteByte('=')
		for i, v := range s {
			if i > 0 {
				b.WriteByte(0)
			}
			b.WriteString(v)
		}
		b.WriteByte(1)
	}
	fmt.Fprintf(&b, "%d\x01%d\x01", q.From.UnixNano(), q.To.UnixNano())
	b.WriteString("g=" + strings.Join(q.GroupBy, "\x00") + "\x01")
	set("p", q.Projects)
	set("u", q.Users)
	set("s", q.SKUs)
	set("n", q.Nodes)
	return b.String()
}
