package ingest

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// The Compactor's state stays within its bounds whatever the samples: at most
// RunsPerKey open runs per key, at most MaxOpenRuns in all after EmitOpen (the
// counts it keeps match the maps), runs of a key and class never touch each
// other, never cross a UTC month boundary, and none is dirty after EmitOpen.
func TestCompactorStateInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const t0 = 1_793_404_800_000 - 3*3600_000 // three hours before 2026-11-01 UTC
	for _, maxOpen := range []int{3, 40, 0} {
		c := NewCompactor(maxOpen)
		for range 300 {
			batch := make([]schemas.Sample, 1+rng.IntN(200))
			for i := range batch {
				s := &batch[i]
				s.StartMS = t0 + rng.Int64N(6*3600)*1000
				s.IntervalMS = (1 + rng.Int64N(600)) * 1000
				s.InstanceID = string(rune('a' + rng.IntN(12)))
				s.Project, s.User = "p", string(rune('u'+rng.IntN(2)))
				switch rng.IntN(3) {
				case 0:
					s.UtilKnown, s.Util = true, float64(rng.IntN(110))/100
				case 1:
					s.Processes = 1
				}
			}
			c.EmitOpen(&Batch{}) // also a round without samples
			b := c.Build(batch)
			// The batch's latest samples: one per key, its latest (unless
			// the key was forgotten since).
			require.Empty(t, c.latest)
			require.Empty(t, c.dirtyL)
			require.Empty(t, c.addL)
			seen := map[schemas.Key]bool{}
			for _, l := range b.Latest {
				k := schemas.KeyOf(&l)
				require.False(t, seen[k], "key %v twice in Latest", k)
				seen[k] = true
				if kr := c.keys[k]; kr != nil {
					require.Equal(t, l.StartMS, kr.latestMS)
				}
			}
			for _, kr := range c.keys {
				require.False(t, kr.inAdd || kr.latestDirty)
			}
			// The list by round holds every key once, most recently seen
			// first: bound forgets from its end.
			listed := 0
			for kr, prev := c.lru.older, &c.lru; kr != &c.lru; prev, kr = kr, kr.older {
				require.Same(t, prev, kr.newer)
				require.Same(t, kr, c.keys[kr.key])
				if prev != &c.lru {
					require.GreaterOrEqual(t, prev.seen, kr.seen, "the list is by round")
				}
				listed++
			}
			require.Equal(t, len(c.keys), listed)
			for kind, want := range []int{c.nOcc, c.nIdle} {
				n := 0
				for _, kr := range c.keys {
					o := &kr.occ
					if kind == 1 {
						if o = kr.idle; o == nil {
							continue
						}
					}
					require.LessOrEqual(t, int(o.n), RunsPerKey)
					require.False(t, o.dirty)
					n += int(o.n)
					for i := range int(o.n) {
						a := o.at(i)
						if i > 0 {
							require.True(t, o.lo <= a.start && a.end <= o.hi, "the hull of the runs after the front")
						}
						require.False(t, a.dirty)
						require.Less(t, a.start, a.end)
						require.LessOrEqual(t, a.end, nextMonthMS(a.start), "a run crosses a UTC month")
						for j := range i {
							b := o.at(j)
							require.False(t, a.class == b.class && a.start <= b.end && b.start <= a.end, "open runs %+v and %+v touch", *a, *b)
						}
					}
				}
				require.Equal(t, n, want)
				if maxOpen > 0 {
					require.LessOrEqual(t, n, maxOpen)
				}
			}
		}
		t.Logf("maxOpen %d: %+v", maxOpen, c.Stats())
	}
}
