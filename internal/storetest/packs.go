package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// groupBy is a store's GROUP BY over raw samples, embedded under another
// name than its method's.
type groupBy = reads.UsageRows

// runRows is a store read through its run rows only (reads.KeyedRuns): the
// usage path without run packs and without a store's own compact query.
type runRows struct {
	groupBy
	reads.UsageSource
	reads.KeyedRuns
}

// runPacks is a store read through its run packs (reads.PackedRuns), which
// counts the packs it hands over.
type runPacks struct {
	groupBy
	reads.UsageSource
	packs reads.PackedRuns
	read  *atomic.Int64
}

func (p runPacks) RunPacks(ctx context.Context, projects []string, lo, hi int64, fn func([]byte) error) (bool, error) {
	ok, err := p.packs.RunPacks(ctx, projects, lo, hi, func(b []byte) error { p.read.Add(1); return fn(b) })
	if !ok && err == nil {
		return false, nil
	}
	return ok, err
}

// RequirePackedUsage writes a trace into st (a store with run packs, empty)
// and into an ingest.MemStore in random batches, with random replays of
// stretches already written (duplicated and overlapping runs), and checks
// that reads.Usage from st's run packs answers exactly as from its run rows
// and as the in-memory store, for random groupings, filters (project, user,
// SKU, node), time ranges not aligned to days or hours, under every catalog
// variant (thresholds inside idle classes included, which read raw samples).
func RequirePackedUsage(t *testing.T, st ingest.Backend, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	samples := Samples(t, Trace(t, 12_000, seed))
	mem := ingest.NewMemStore()
	writePackTrace(t, rng, samples, st, mem)
	RequirePacksAsRuns(t, st, mem, samples, seed)
}

// RequirePacksAsRuns checks that reads.Usage from st's run packs answers
// exactly as from its run rows and as ref (a store holding the same
// samples), for random queries over the samples written (see
// RequirePackedUsage).
func RequirePacksAsRuns(t *testing.T, st ingest.Backend, ref reads.UsageRows, samples []schemas.Sample, seed uint64) {
	ctx := context.Background()
	pr, ok := st.(reads.PackedRuns)
	require.True(t, ok, "the store keeps run packs (reads.PackedRuns)")
	rng := rand.New(rand.NewPCG(seed, 11))
	var read atomic.Int64
	packed := runPacks{groupBy: st, UsageSource: st, packs: pr, read: &read}
	rows := runRows{groupBy: st, UsageSource: st, KeyedRuns: st.(reads.KeyedRuns)}
	dims := packDims(samples)
	first, last := samples[0].StartMS, samples[0].StartMS
	for i := range samples {
		first, last = min(first, samples[i].StartMS), max(last, samples[i].StartMS)
	}
	cats := Catalogs(t)
	type asked struct {
		cat  *schemas.Catalog
		q    reads.UsageQuery
		want *reads.UsageReport
	}
	var all []asked
	for name, cat := range cats {
		for i := range 12 {
			q := randomUsageQuery(rng, dims, cat, first, last)
			want, err := reads.Usage(ctx, ref, cat, q)
			require.NoError(t, err)
			all = append(all, asked{cat, q, want})
			fromRows, err := reads.Usage(ctx, rows, cat, q)
			require.NoError(t, err)
			before := read.Load()
			fromPacks, err := reads.Usage(ctx, packed, cat, q)
			require.NoError(t, err)
			require.Equal(t, want, fromRows, "catalog %s, query %d %+v: run rows", name, i, q)
			require.Equal(t, want, fromPacks, "catalog %s, query %d %+v: run packs", name, i, q)
			if len(q.Nodes) == 0 && !slicesHas(q.GroupBy, reads.ByNode) && want.Total.HeldSeconds > 0 {
				require.Greater(t, read.Load(), before, "catalog %s, query %d: read from packs", name, i)
			}
		}
	}
	// The same questions at once, each reader in its own order: reads share
	// their scratch memory through a pool, and none may see another's.
	var wg sync.WaitGroup
	wrong := make(chan string, len(all)*4)
	for r := range 4 {
		wg.Go(func() {
			for j := range all {
				a := all[(j*(r+1)+r)%len(all)]
				got, err := reads.Usage(ctx, packed, a.cat, a.q)
				if err != nil || !reflect.DeepEqual(a.want, got) {
					wrong <- fmt.Sprintf("reader %d, query %+v: %v", r, a.q, err)
				}
			}
		})
	}
	wg.Wait()
	close(wrong)
	for w := range wrong {
		t.Error("concurrent read differs:", w)
	}
}

func slicesHas(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// writePackTrace writes samples to both stores in random batches and
// streamed pieces, then replays random stretches (alone, or overlapping
// the stretch before, through a fresh writer, so that runs are written
// again with the same or other starts and ends).
func writePackTrace(t *testing.T, rng *rand.Rand, samples []schemas.Sample, stores ...ingest.Store) {
	type replay struct{ from, to, batch int }
	var replays []replay
	for range 4 {
		a := rng.IntN(len(samples))
		replays = append(replays, replay{a, min(len(samples), a+500+rng.IntN(3_000)), 200 + rng.IntN(2_000)})
	}
	batch, piece := 500+rng.IntN(4_000), 100+rng.IntN(900)
	for _, s := range stores {
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: s, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		WriteStreamed(t, w, samples, batch, piece)
		for _, r := range replays {
			w, err := ingest.NewWriter(ingest.WriterConfig{Store: s, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			WriteStreamed(t, w, samples[r.from:r.to], r.batch, piece)
		}
	}
}

// usageDims are the values a random usage query filters on.
type usageDims struct {
	projects, users, nodes []string
}

func packDims(samples []schemas.Sample) usageDims {
	p, u, n := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i := range samples {
		if s := &samples[i]; s.Project != "" {
			p[s.Project], u[s.User], n[s.Node] = true, true, true
		}
	}
	return usageDims{projects: sortedKeys(p), users: sortedKeys(u), nodes: sortedKeys(n)}
}

// randomUsageQuery groups by a random subset of the dimensions, filters
// by random projects (most often one, as the API's per-project reads),
// users, SKUs and, rarely, a node, over a range that starts and ends at
// random minutes around the trace.
func randomUsageQuery(rng *rand.Rand, d usageDims, cat *schemas.Catalog, first, last int64) reads.UsageQuery {
	var q reads.UsageQuery
	for _, dim := range reads.UsageDimensions {
		if dim == reads.ByNode && rng.IntN(6) != 0 {
			continue
		}
		if rng.IntN(3) == 0 {
			q.GroupBy = append(q.GroupBy, dim)
		}
	}
	pick := func(vals []string, n int) []string {
		var out []string
		for _, i := range rng.Perm(len(vals))[:min(n, len(vals))] {
			out = append(out, vals[i])
		}
		return out
	}
	switch rng.IntN(5) {
	case 0: // every project
	case 1:
		q.Projects = pick(d.projects, 2)
	default:
		q.Projects = pick(d.projects, 1)
	}
	if rng.IntN(4) == 0 {
		q.Users = pick(d.users, 1+rng.IntN(2))
	}
	if rng.IntN(5) == 0 {
		q.SKUs = []string{cat.SKUs[rng.IntN(len(cat.SKUs))].ID}
	}
	if rng.IntN(10) == 0 {
		q.Nodes = pick(d.nodes, 1)
	}
	span := last - first
	from := first - 3_600_000 + rng.Int64N(span/2+1)
	to := from + 60_000 + rng.Int64N(span+7_200_000)
	if rng.IntN(4) == 0 { // the whole trace
		from, to = first-86_400_000, last+86_400_000
	}
	q.From, q.To = time.UnixMilli(from/60_000*60_000+int64(rng.IntN(60))*1000), time.UnixMilli(to/60_000*60_000)
	if !q.From.Before(q.To) {
		q.To = q.From.Add(time.Hour)
	}
	return q
}

// PackingStore is an ingest.MemStore that also keeps the run packs of every
// batch written (schemas.PackRuns), as the databases do, so that the
// in-memory store runs RequirePackedUsage.
type PackingStore struct {
	*ingest.MemStore
	mu    sync.Mutex
	packs []schemas.RunPack
}

// NewPackingStore returns an empty PackingStore.
func NewPackingStore() *PackingStore { return &PackingStore{MemStore: ingest.NewMemStore()} }

// Write implements ingest.Store.
func (p *PackingStore) Write(ctx context.Context, b *ingest.Batch) error {
	if err := p.MemStore.Write(ctx, b); err != nil {
		return err
	}
	p.mu.Lock()
	p.packs = append(p.packs, schemas.PackRuns(b.Occupancy, b.Idle)...)
	p.mu.Unlock()
	return nil
}

// RunPacks implements reads.PackedRuns.
func (p *PackingStore) RunPacks(ctx context.Context, projects []string, lo, hi int64, fn func([]byte) error) (bool, error) {
	p.mu.Lock()
	packs := append([]schemas.RunPack(nil), p.packs...)
	p.mu.Unlock()
	for _, x := range packs {
		if x.MaxMS >= lo && x.MinMS <= hi && (len(projects) == 0 || slicesHas(projects, x.Project)) {
			if err := fn(x.Data); err != nil {
				return true, err
			}
		}
	}
	return true, ctx.Err()
}
