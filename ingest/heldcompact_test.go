package ingest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

const heldCatalog = `
currency: CNY
timezone: Asia/Shanghai
defaults:
  gap_tolerance_s: 30
  idle: {threshold: 0.05, warn_after: 30m, release_after: 60m}
skus:
  - {id: a100-1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "1.80", monthly_price: "900"}
projects:
  - {id: pa, name: A}
  - {id: pb, name: B, idle: {threshold: 0.07}}
`

// heldTrace is a random history of a few instances: holdings by changing
// keys, gaps within and over the tolerance, utilisation in every idle class
// and on both sides of a threshold between class bounds (0.07), unknown
// utilisation with and without processes. It ends at now, some instances
// still held, some released.
func heldTrace(rng *rand.Rand, now int64) []schemas.Sample {
	utils := []struct {
		u     float64
		known bool
		procs int64
	}{{0, false, 0}, {0, false, 1}, {0, true, 1}, {0.03, true, 1}, {0.06, true, 1}, {0.08, true, 1}, {0.3, true, 1}, {0.9, true, 1}}
	var out []schemas.Sample
	for inst := range 4 {
		end := now - int64(rng.IntN(4))*20_000 // some end within the tolerance, some before
		if inst == 3 {
			end = now - 10*60_000 // released ten minutes ago
		}
		var seg []schemas.Sample
		t := end
		for t > now-6*3600_000 {
			project := []string{"pa", "pb"}[rng.IntN(2)]
			user := []string{"u1", "u2"}[rng.IntN(2)]
			n := 1 + rng.IntN([]int{3, 30}[rng.IntN(2)])
			busyRun := rng.IntN(3) == 0 // a run of one utilisation, or mixed
			k := rng.IntN(len(utils))
			iv := []int64{60_000, 60_000, 10_000}[rng.IntN(3)] // a short run of another holder fits in the tolerance
			for range n {
				if !busyRun {
					k = rng.IntN(len(utils))
				}
				u := utils[k]
				t -= iv
				seg = append(seg, schemas.Sample{StartMS: t, IntervalMS: iv, Node: fmt.Sprintf("node-%d", inst/2), GPUUUID: fmt.Sprintf("GPU-%d", inst/2),
					GPUModel: "A100", InstanceID: fmt.Sprintf("mig-%d", inst), Profile: "1g.10gb", Project: project, User: user,
					Util: u.u, UtilKnown: u.known, Processes: u.procs, HolderRef: fmt.Sprintf("pid:%d", t/1000)})
			}
			t -= []int64{0, 0, 10_000, 25_000, 45_000, 600_000}[rng.IntN(6)]
		}
		out = append(out, seg...)
	}
	return out
}

// HeldNowFrom (latest rows, occupancy and idle runs) says what
// HeldNowWithin (raw samples) says, for any history written in any
// batches, replays included.
func TestHeldNowFromMatchesRawSamples(t *testing.T) {
	ctx := context.Background()
	cat, err := schemas.ParseCatalog([]byte(heldCatalog), "held.yaml")
	require.NoError(t, err)
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	var held, idle, streakAfterHolding, clipped int
	for seed := range 200 {
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		samples := heldTrace(rng, now.UnixMilli())
		rng.Shuffle(len(samples), func(i, j int) { samples[i], samples[j] = samples[j], samples[i] })
		m := ingest.NewMemStore()
		c := ingest.NewCompactor(0)
		for len(samples) > 0 {
			n := min(len(samples), 1+rng.IntN(200))
			b := c.Build(samples[:n])
			require.NoError(t, m.Write(ctx, b))
			if rng.IntN(5) == 0 { // a replay
				require.NoError(t, m.Write(ctx, ingest.NewCompactor(0).Build(samples[:n])))
			}
			samples = samples[n:]
		}
		var src reads.CompactHeld = m
		for _, lookback := range []time.Duration{24 * time.Hour, 2 * time.Hour, 20 * time.Minute} {
			want, err := reads.HeldNowWithin(ctx, m, cat, now, lookback)
			require.NoError(t, err)
			got, err := reads.HeldNowFrom(ctx, src, cat, now, lookback)
			require.NoError(t, err)
			lo := now.Add(-lookback)
			require.Len(t, got, len(want), "seed %d lookback %s", seed, lookback)
			for i := range want {
				w, g := want[i], got[i]
				msg := fmt.Sprintf("seed %d lookback %s %s: raw %+v\ncompact %+v", seed, lookback, w.InstanceID, w, g)
				// A holding (or streak) that reaches the look-back's start is
				// clipped, its start within the tolerance of it: the compact rows see
				// the run that crosses it, the raw
				// samples only when their first one starts within the tolerance
				// of it (a minute's sample may start 59 s after it); and a holding that
				// begins right at it is not clipped when the runs show what ended it.
				if g.SinceClipped {
					require.True(t, !g.Since.Before(lo) && g.Since.Sub(lo) <= 30*time.Second, msg)
					require.True(t, w.SinceClipped || w.Since.Sub(lo) <= 90*time.Second, msg)
					w.Since, w.SinceClipped = g.Since, true
				} else if w.SinceClipped { // the raw samples cannot tell what came just before
					require.Equal(t, w.Since, g.Since, msg)
					w.SinceClipped = false
				}
				if g.IdleSinceClipped {
					require.True(t, !g.IdleSince.Before(lo) && g.IdleSince.Sub(lo) <= 30*time.Second, msg)
					require.True(t, w.IdleSinceClipped || w.IdleSince.Sub(lo) <= 90*time.Second, msg)
					w.IdleSince, w.IdleSinceClipped = g.IdleSince, true
				} else if w.IdleSinceClipped {
					require.Equal(t, w.IdleSince, g.IdleSince, msg)
					w.IdleSinceClipped = false
				}
				require.Equal(t, w, g, msg)
				held++
				if g.Idle {
					idle++
					if g.IdleSince.After(g.Since) {
						streakAfterHolding++
					}
				}
				if g.SinceClipped {
					clipped++
				}
			}
		}
	}
	// The traces reach every case: held, idle, a streak younger than its
	// holding, holdings clipped by the look-back.
	t.Logf("held %d, idle %d, streak after holding %d, clipped %d", held, idle, streakAfterHolding, clipped)
	require.True(t, held > 500 && idle > 100 && streakAfterHolding > 50 && clipped > 25, "held %d, idle %d, streak after holding %d, clipped %d", held, idle, streakAfterHolding, clipped)
}

// Asked about a moment in the store's past, HeldNowFrom answers from raw
// samples: the latest rows describe only the present.
func TestHeldNowFromInThePast(t *testing.T) {
	ctx := context.Background()
	cat, err := schemas.ParseCatalog([]byte(heldCatalog), "held.yaml")
	require.NoError(t, err)
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	samples := heldTrace(rand.New(rand.NewPCG(3, 11)), now.UnixMilli())
	m := ingest.NewMemStore()
	require.NoError(t, m.Write(ctx, ingest.NewCompactor(0).Build(samples)))
	past := now.Add(-90 * time.Minute)
	want, err := reads.HeldNowWithin(ctx, m, cat, past, 2*time.Hour)
	require.NoError(t, err)
	require.NotEmpty(t, want)
	got, err := reads.HeldNowFrom(ctx, m, cat, past, 2*time.Hour)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// An instance whose node's clock runs ahead (its latest sample starts
// after now) is answered from its own raw samples; the others still from
// the compact rows, and together they say what the raw samples say.
func TestHeldNowFromNodeAhead(t *testing.T) {
	ctx := context.Background()
	cat, err := schemas.ParseCatalog([]byte(heldCatalog), "held.yaml")
	require.NoError(t, err)
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	ahead := 0
	for seed := range 20 {
		samples := heldTrace(rand.New(rand.NewPCG(uint64(seed), 5)), now.UnixMilli())
		var last schemas.Sample
		for _, s := range samples {
			if s.InstanceID == "mig-0" && s.StartMS > last.StartMS {
				last = s
			}
		}
		for i := range 3 { // two minutes ahead
			s := last
			s.StartMS, s.IntervalMS = now.Add(2*time.Minute+time.Duration(i)*time.Minute).UnixMilli(), 60_000
			samples = append(samples, s)
		}
		m := ingest.NewMemStore()
		require.NoError(t, m.Write(ctx, ingest.NewCompactor(0).Build(samples)))
		want, err := reads.HeldNowWithin(ctx, m, cat, now, 24*time.Hour)
		require.NoError(t, err)
		got, err := reads.HeldNowFrom(ctx, m, cat, now, 24*time.Hour)
		require.NoError(t, err)
		require.Equal(t, want, got, "seed %d", seed)
		for _, h := range want {
			if h.InstanceID == "mig-0" {
				ahead++
			}
		}
	}
	require.Greater(t, ahead, 5, "the instance ahead is held in many traces")
}
