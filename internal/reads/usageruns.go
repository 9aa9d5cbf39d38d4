package reads

import (
	"cmp"
	"context"
	"slices"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// runUsage answers a UsageRowQuery from a store's compact rows (occupancy and
// idle runs, UsageSource) instead of its raw samples: per key the union of its
// runs, clipped to [FromMS, ToMS) and split at bucket boundaries, and the union
// of its idle time, decided per run with the project's threshold like BillFrom
// (runs the threshold cuts through are resolved from their raw samples).
// Occupancy carries no node: a query grouped or filtered by node goes to the
// store's GROUP BY over raw samples instead (usageSourceFor).
type runUsage struct {
	src UsageSource
	cat *schemas.Catalog
}

// usageSourceFor returns the reader Usage uses for rq: the compact rows of src
// when it has them and rq needs no node, else src's own GROUP BY.
func usageSourceFor(src UsageRows, cat *schemas.Catalog, rq schemas.UsageRowQuery) UsageRows {
	us, ok := src.(UsageSource)
	if !ok || rq.ByNode || len(rq.Nodes) > 0 {
		return src
	}
	return runUsage{src: us, cat: cat}
}

// KeyedRuns is a UsageSource that filters its runs by key in the database:
// the held keys of the projects, users and (GPU model, profile) pairs a
// UsageRowQuery selects (ingest.KeyFilter), so that a read of one project or
// one user fetches that project's or user's runs only, through an index.
// Implemented by ingest.MemStore, ingest/sqlite and ingest/clickhouse; Usage
// filters the runs of a store without it in Go.
type KeyedRuns interface {
	// OccupancyOf is Occupancy, only the runs of the keys q selects.
	OccupancyOf(ctx context.Context, q schemas.UsageRowQuery, lo, hi int64, fn func([]schemas.Run) error) error
	// IdleRunsOf is IdleRuns, only the runs of the keys q selects.
	IdleRunsOf(ctx context.Context, q schemas.UsageRowQuery, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error
}

// keyedSource is a KeyedRuns store read as the UsageSource of q's keys.
type keyedSource struct {
	UsageSource
	runs KeyedRuns
	q    schemas.UsageRowQuery
}

func (s keyedSource) Occupancy(ctx context.Context, lo, hi int64, fn func([]schemas.Run) error) error {
	return s.runs.OccupancyOf(ctx, s.q, lo, hi, fn)
}

func (s keyedSource) IdleRuns(ctx context.Context, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error {
	return s.runs.IdleRunsOf(ctx, s.q, from, to, maxUtil, fn)
}

// spans are a key's occupancy runs and idle time.
type spans struct {
	key        schemas.Key
	held, idle []ival
}

// ival is a half-open interval [s, e) of a key's time.
type ival struct{ s, e int64 }

// keySpans are the spans of each key, in the order the keys came: a table
// kept between reads (spanFree) so that reads at a high rate reuse their
// memory rather than hand it to the collector.
type keySpans struct {
	m      map[schemas.Key]*spans
	chunks [][]spans // the spans, spanChunk to a chunk; the first n are in use
	n      int
	// seen and pack are readPacks': each project's keys by their encoded
	// bytes (nil where the query keeps the key), and the pack decoder.
	seen   map[string]map[string]*spans
	pack   schemas.DecodedPack
	packOf []*spans
}

const spanChunk = 256

func (m *keySpans) of(k schemas.Key) *spans {
	if s := m.m[k]; s != nil {
		return s
	}
	c := m.n / spanChunk
	if c == len(m.chunks) {
		m.chunks = append(m.chunks, make([]spans, spanChunk))
	}
	s := &m.chunks[c][m.n%spanChunk]
	m.n++
	s.key = k
	m.m[k] = s
	return s
}

// each calls fn with the spans of every key, in the order they came.
func (m *keySpans) each(fn func(*spans)) {
	for i := range m.n {
		fn(&m.chunks[i/spanChunk][i%spanChunk])
	}
}

// spanFree holds the tables of finished reads for the next ones. A channel,
// not a sync.Pool: at a high read rate the collector runs every few reads
// and a sync.Pool hands its tables to it, so that each read would build its
// table (and grow its slices) again; spanFree keeps up to as many tables as
// reads usually run at once, however often the collector runs.
var spanFree = make(chan *keySpans, 16)

// getSpans returns an empty table: a finished read's, or a new one.
func getSpans() *keySpans {
	select {
	case m := <-spanFree:
		return m
	default:
		return &keySpans{m: map[schemas.Key]*spans{}, seen: map[string]map[string]*spans{}}
	}
}

// putSpans empties m and keeps it for the next read, unless one read made it so
// large that keeping it would hold that read's memory for every later one.
func putSpans(m *keySpans) {
	kept := 0
	m.each(func(x *spans) {
		kept += cap(x.held) + cap(x.idle)
		*x = spans{held: x.held[:0], idle: x.idle[:0]}
	})
	if kept > 1<<20 || m.n > 1<<16 {
		return
	}
	clear(m.m)
	for _, byRaw := range m.seen {
		clear(byRaw)
	}
	m.n = 0
	m.packOf = m.packOf[:0]
	select {
	case spanFree <- m:
	default: // as many kept as reads usually run at once
	}
}

// UsageRows implements UsageRows over compact rows.
func (u runUsage) UsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) error {
	byKey := getSpans()
	defer putSpans(byKey)
	if err := u.readSpans(ctx, q, byKey); err != nil {
		return err
	}
	return emitSpans(byKey, q, fn)
}

// readSpans reads the occupancy runs and the idle runs of [q.FromMS, q.ToMS)
// at once and returns, for each key q selects, its runs within the range and
// its idle time. A KeyedRuns store returns the runs of those keys only;
// another store's runs are filtered here.
func (u runUsage) readSpans(ctx context.Context, q schemas.UsageRowQuery, byKey *keySpans) error {
	if pr, ok := u.src.(PackedRuns); ok {
		if ok, err := u.readPacks(ctx, pr, q, byKey); ok || err != nil {
			return err
		}
	}
	src := u.src
	keep := func(k schemas.Key) bool {
		return k.Project != "" && inList(q.Projects, k.Project) && inList(q.Users, k.User) &&
			(q.Models == nil || slices.Contains(q.Models, [2]string{k.GPUModel, k.Profile}))
	}
	if kr, ok := u.src.(KeyedRuns); ok {
		src = keyedSource{UsageSource: u.src, runs: kr, q: q}
		keep = func(schemas.Key) bool { return true }
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feed := billing.NewIdleSink(u.cat, q.FromMS, q.ToMS, func(k schemas.Key, s, e int64) {
		x := byKey.of(k)
		x.idle = append(x.idle, ival{s, e})
	})
	err := readRuns(ctx, src, runRange{occFrom: q.FromMS, occTo: q.ToMS, idleFrom: q.FromMS, idleTo: q.ToMS, maxUtil: billing.MaxIdleThreshold(u.cat) + 1e-9},
		func(rows []schemas.Run) {
			for i := range rows {
				if keep(rows[i].Key) && rows[i].EndMS > q.FromMS && rows[i].StartMS < q.ToMS {
					x := byKey.of(rows[i].Key)
					x.held = append(x.held, ival{rows[i].StartMS, rows[i].EndMS})
				}
			}
		},
		func(runs []schemas.IdleRun) {
			for i := range runs {
				if keep(runs[i].Key) {
					feed.Add(&runs[i])
				}
			}
		})
	if err != nil {
		return err
	}
	return ResolveIdle(ctx, feed, u.src)
}

// emitSpans sums each key's union of runs (held) and of idle time into q's
// groups and buckets, and calls fn with each sum.
func emitSpans(byKey *keySpans, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) error {
	sums := schemas.NewBucketSums(q)
	byKey.each(func(x *spans) {
		g := sums.Group(q.GroupOf(x.key, "")) // the runs have no node: a query by node reads samples
		for _, r := range unionIvals(x.held) {
			g.Span(r.s, r.e, false)
		}
		for _, r := range unionIvals(x.idle) {
			g.Span(r.s, r.e, true)
		}
	})
	return sums.Emit(fn)
}

// unionIvals returns the disjoint union of a key's intervals, sorted by
// start (union, on intervals).
func unionIvals(rs []ival) []ival {
	slices.SortFunc(rs, func(a, b ival) int { return cmp.Compare(a.s, b.s) })
	out := rs[:0]
	for _, r := range rs {
		if r.e <= r.s {
			continue
		}
		if n := len(out); n > 0 && r.s <= out[n-1].e {
			out[n-1].e = max(out[n-1].e, r.e)
			continue
		}
		out = append(out, r)
	}
	return out
}

// union returns the disjoint union of runs (of one key), sorted by start.
func union(rs []schemas.Run) []schemas.Run {
	slices.SortFunc(rs, func(a, b schemas.Run) int { return cmp.Compare(a.StartMS, b.StartMS) })
	out := rs[:0]
	for _, r := range rs {
		if r.EndMS <= r.StartMS {
			continue
		}
		if n := len(out); n > 0 && r.StartMS <= out[n-1].EndMS {
			out[n-1].EndMS = max(out[n-1].EndMS, r.EndMS)
			continue
		}
		out = append(out, r)
	}
	return out
}

func mod(a, b int64) int64 {
	if m := a % b; m < 0 {
		return m + b
	}
	return a % b
}

func inList(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
