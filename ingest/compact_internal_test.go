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
			seen := map[schemas.Key]bool{}
			for _, l := range b.Latest {
				k := schemas.KeyOf(&l)
				require.False(t, seen[k], "key %v twice in Latest", k)
				seen[k] = true
				if id := c.lookup(&l); id != 0 {
					require.Equal(t, l.StartMS, c.st[id].latestMS)
				}
			}
			requireStateInvariants(t, c, maxOpen)
		}
		t.Logf("maxOpen %d: %+v", maxOpen, c.Stats())
	}
}

// requireStateInvariants checks the Compactor's state after an EmitOpen.
func requireStateInvariants(t *testing.T, c *Compactor, maxOpen int) {
	t.Helper()
	// Every key is found by its hash (or in spill) under its id, once; the
	// ids not in use are free and empty.
	live := map[int32]bool{}
	for id := int32(1); id < int32(len(c.st)); id++ {
		k := c.keyOf[id]
		if k == (schemas.Key{}) {
			require.Contains(t, c.free, id)
			require.Zero(t, c.st[id])
			continue
		}
		h := c.hashOf(&k)
		if c.keys[h] != id {
			require.Equal(t, id, c.spill[k], "key %v is neither in keys nor in spill", k)
			require.True(t, c.hasHash(h), "a key is spilled only when another holds its hash")
		}
		live[id] = true
	}
	require.Len(t, live, len(c.keys)+len(c.spill))
	require.Len(t, c.free, len(c.st)-1-len(live))
	// The list by round holds every key once, most recently seen first:
	// bound forgets from its end.
	listed := 0
	for id, prev := c.st[0].older, int32(0); id != 0; prev, id = id, c.st[id].older {
		require.Equal(t, prev, c.st[id].newer)
		require.True(t, live[id])
		if prev != 0 {
			require.GreaterOrEqual(t, c.st[prev].seen, c.st[id].seen, "the list is by round")
		}
		listed++
	}
	require.Equal(t, len(live), listed)
	inMore := map[int32]bool{}
	for kind, want := range []int{c.nOcc, c.nIdle} {
		n := 0
		for id := range live {
			ks := &c.st[id]
			require.False(t, ks.latestDirty)
			o := &ks.occ
			if kind == 1 {
				o = &ks.idle
			}
			require.LessOrEqual(t, int(o.n), RunsPerKey)
			require.False(t, o.dirty)
			if o.more != 0 {
				require.False(t, inMore[o.more], "two keys share runs")
				inMore[o.more] = true
			}
			n += int(o.n)
			for i := range int(o.n) {
				a := c.at(o, i)
				if i > 0 {
					require.True(t, o.lo <= a.start && a.end <= o.hi, "the hull of the runs after the front")
				}
				require.False(t, a.dirty)
				require.Less(t, a.start, a.end)
				require.LessOrEqual(t, a.end, nextMonthMS(a.start), "a run crosses a UTC month")
				for j := range i {
					b := c.at(o, j)
					require.False(t, a.class == b.class && a.start <= b.end && b.start <= a.end, "open runs %+v and %+v touch", *a, *b)
				}
			}
		}
		require.Equal(t, n, want)
		if maxOpen > 0 {
			require.LessOrEqual(t, n, maxOpen)
		}
	}
	for _, m := range c.freeMore {
		require.False(t, inMore[m], "a free entry of more is in use")
	}
	require.Len(t, c.more, len(inMore)+len(c.freeMore))
}
