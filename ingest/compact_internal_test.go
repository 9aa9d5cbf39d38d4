package ingest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// The Compactor's state stays within its bounds whatever the samples: at most
// RunsPerKey open runs per key, at most MaxOpenRuns in all after EmitOpen (the
// counts it keeps match the maps), runs of a key and class never touch each
// other, never cross a UTC month boundary, and none is dirty after EmitOpen.
// Likewise when keys' hashes collide (mask 1: half the keys spill, 0: all
// but one).
func TestCompactorStateInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, mask := range []uint64{^uint64(0), 1, 0} {
		for _, maxOpen := range []int{3, 40, 0} {
			c := NewCompactor(maxOpen)
			c.mask = mask
			requireInvariantsOnRandomBatches(t, c, rng, maxOpen)
		}
	}
}

// randomBatch returns up to 200 samples of 24 keys over six hours across a
// UTC month boundary, in no order, some unheld.
func randomBatch(rng *rand.Rand) []schemas.Sample {
	const t0 = 1_793_404_800_000 - 3*3600_000 // three hours before 2026-11-01 UTC
	batch := make([]schemas.Sample, 1+rng.IntN(200))
	for i := range batch {
		s := &batch[i]
		s.StartMS = t0 + rng.Int64N(6*3600)*1000
		s.IntervalMS = (1 + rng.Int64N(600)) * 1000
		s.InstanceID = string(rune('a' + rng.IntN(12)))
		s.Project, s.User = "p", string(rune('u'+rng.IntN(2)))
		if rng.IntN(20) == 0 {
			s.Project, s.User = "", ""
		}
		switch rng.IntN(3) {
		case 0:
			s.UtilKnown, s.Util = true, float64(rng.IntN(110))/100
		case 1:
			s.Processes = 1
		}
	}
	return batch
}

func requireInvariantsOnRandomBatches(t *testing.T, c *Compactor, rng *rand.Rand, maxOpen int) {
	t.Helper()
	{
		for range 300 {
			batch := randomBatch(rng)
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
		t.Logf("mask %x, maxOpen %d: %+v, %d keys, %d spilled", c.mask, maxOpen, c.Stats(), len(c.keys)+len(c.spill), len(c.spill))
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
			// (The key that held its hash may have been forgotten since.)
			require.Equal(t, id, c.spill[k], "key %v is neither in keys nor in spill", k)
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

// Keys whose hashes collide are told apart: a Compactor whose every key has
// the same hash (or one of two) emits exactly what one with the real hash
// does, whatever it forgets.
func TestCompactorHashCollisions(t *testing.T) {
	for _, maxOpen := range []int{3, 40, 0} {
		rng := rand.New(rand.NewPCG(9, uint64(maxOpen)))
		real, one, two := NewCompactor(maxOpen), NewCompactor(maxOpen), NewCompactor(maxOpen)
		one.mask, two.mask = 0, 1
		spilled := 0
		for round := range 300 {
			batch := randomBatch(rng)
			var want Batch
			for i, c := range []*Compactor{real, one, two} {
				b := &Batch{}
				if round%2 == 0 { // in two Adds
					c.Add(b, batch[:len(batch)/2])
					c.Add(b, batch[len(batch)/2:])
					c.EmitOpen(b)
				} else {
					b = c.Build(batch)
					b.Samples = nil
				}
				if i == 0 {
					want = *b
					continue
				}
				require.Equal(t, want, *b, "round %d, mask %x", round, c.mask)
				require.Equal(t, real.Stats(), c.Stats())
				spilled = max(spilled, len(c.spill))
			}
		}
		require.Positive(t, spilled, "keys spilled")
	}
}

// A key's latest sample comes out of the Compactor with every field of the
// sample it was (the Compactor keeps it without its key's fields and puts them
// back): a field added to schemas.Sample fails this test until latestSample
// keeps it.
func TestCompactorLatestKeepsEveryField(t *testing.T) {
	c := NewCompactor(0)
	for n := range int64(3) {
		var s schemas.Sample
		v := reflect.ValueOf(&s).Elem()
		for i := range v.NumField() {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.String:
				f.SetString(fmt.Sprintf("%s-%d", v.Type().Field(i).Name, n%2))
			case reflect.Int64:
				f.SetInt(int64(i+1) + 100*n)
			case reflect.Float64:
				f.SetFloat(float64(i+1)/100 + float64(n)/1000)
			case reflect.Bool:
				f.SetBool(true)
			default:
				t.Fatalf("schemas.Sample.%s: a %v, not set by this test", v.Type().Field(i).Name, f.Kind())
			}
		}
		s.Project, s.User, s.InstanceID = "p", "u", "i" // one key
		s.StartMS += 300_000 * n
		b := c.Build([]schemas.Sample{s})
		require.Equal(t, []schemas.Sample{s}, b.Latest)
	}
}

// The state the Compactor keeps per key, but for its strings (keyOf) and its
// latest sample until the next EmitOpen, holds no pointer: the garbage
// collector does not scan it.
func TestCompactorStateHasNoPointers(t *testing.T) {
	var walk func(reflect.Type) bool
	walk = func(ty reflect.Type) bool {
		switch ty.Kind() {
		case reflect.Struct:
			for i := range ty.NumField() {
				if walk(ty.Field(i).Type) {
					return true
				}
			}
			return false
		case reflect.Array:
			return walk(ty.Elem())
		case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int,
			reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			return false
		}
		return true
	}
	c := NewCompactor(0)
	for _, v := range []any{c.st, c.more, c.free, c.dirtyO, c.keys} {
		ty := reflect.TypeOf(v)
		if ty.Kind() == reflect.Map {
			require.False(t, walk(ty.Key()) || walk(ty.Elem()), "%v holds pointers", ty)
			continue
		}
		require.False(t, walk(ty.Elem()), "%v holds pointers", ty)
	}
}
