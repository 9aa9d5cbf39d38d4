package billing

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/schemas"
)

const conflictCatalog = `
currency: CNY
timezone: Asia/Shanghai
defaults: {rounding: second, gap_tolerance_s: 30}
skus:
  - {id: a1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "1.80", monthly_price: "900"}
  - {id: a3g, gpu_model: A100, profile: 3g.40gb, hourly_price: "3.60", monthly_price: "1800"}
projects:
  - id: p
  - id: q
`

// held is one sample of an instance held by project/user as model/profile.
type held struct {
	project, user, inst, profile string
	start, end                   int64
}

func heldSamples(t *testing.T, hs ...held) []schemas.Sample {
	t.Helper()
	var out []schemas.Sample
	for _, h := range hs {
		profile := h.profile
		if profile == "" {
			profile = "1g.10gb"
		}
		s := schemas.Sample{StartMS: h.start, IntervalMS: h.end - h.start, Node: "n", GPUUUID: "GPU-1", GPUModel: "A100",
			InstanceID: h.inst, Profile: profile, Project: h.project, User: h.user, Processes: 1}
		require.NoError(t, s.Validate())
		out = append(out, s)
	}
	return out
}

func conflictCat(t *testing.T) *schemas.Catalog {
	t.Helper()
	cat, err := schemas.ParseCatalog([]byte(conflictCatalog), "conflicts")
	require.NoError(t, err)
	return cat
}

func TestConflictTwoHoldersAtOnce(t *testing.T) {
	cat := conflictCat(t)
	t0 := at(3, 10, 0, 0)
	r := billSamples(cat, nov, heldSamples(t,
		held{project: "p", user: "alice", inst: "MIG-1", start: t0, end: t0 + 3_600_000},
		// bob is attributed the same slice for 20 min inside alice's hour.
		held{project: "q", user: "bob", inst: "MIG-1", start: t0 + 600_000, end: t0 + 1_800_000},
		// Another slice, one holder after the other: no conflict.
		held{project: "p", user: "alice", inst: "MIG-2", start: t0, end: t0 + 60_000},
		held{project: "q", user: "bob", inst: "MIG-2", start: t0 + 60_000, end: t0 + 120_000},
	))
	require.Equal(t, []Conflict{{
		InstanceID: "MIG-1",
		Holders:    []Holder{{"p", "alice"}, {"q", "bob"}},
		Kinds:      []Kind{{"A100", "1g.10gb"}},
		OverlapMS:  1_200_000,
		First:      t0 + 600_000,
		Last:       t0 + 1_800_000,
	}}, stripConflicts(r.Conflicts))

	// Each holder is still billed for all of its own time: detection changes no amount.
	require.EqualValues(t, 3600+60, usageLine(t, r, "p", "alice", "a1g").BilledSeconds)
	require.EqualValues(t, 1200+60, usageLine(t, r, "q", "bob", "a1g").BilledSeconds)

	require.Contains(t, r.Warnings, `instance "MIG-1" was held by 2 holders (p/alice, q/bob) as A100 / 1g.10gb `+
		`at the same time for 1200 s, first at 2026-11-03 10:10:00, last until 2026-11-03 10:30:00 (Asia/Shanghai): `+
		`each is billed for that time, check the attribution (同一 GPU 实例同时被多个占用者或以多种规格占用，各自计费，请核查归属)`)
	w := r.WarningFor(r.Warnings[0])
	require.Equal(t, WarnConflict, w.Code)
	require.Equal(t, []string{"alice", "bob"}, w.Users)
}

func TestConflictOneHolderTwoProfiles(t *testing.T) {
	cat := conflictCat(t)
	t0 := at(3, 10, 0, 0)
	r := billSamples(cat, nov, heldSamples(t,
		held{project: "p", user: "alice", inst: "MIG-1", profile: "1g.10gb", start: t0, end: t0 + 60_000},
		held{project: "p", user: "alice", inst: "MIG-1", profile: "3g.40gb", start: t0 + 30_000, end: t0 + 90_000},
	))
	require.Equal(t, []Conflict{{
		InstanceID: "MIG-1", Holders: []Holder{{"p", "alice"}}, Kinds: []Kind{{"A100", "1g.10gb"}, {"A100", "3g.40gb"}},
		OverlapMS: 30_000, First: t0 + 30_000, Last: t0 + 60_000,
	}}, stripConflicts(r.Conflicts))
	require.EqualValues(t, 60, usageLine(t, r, "p", "alice", "a1g").BilledSeconds)
	require.EqualValues(t, 60, usageLine(t, r, "p", "alice", "a3g").BilledSeconds)
	require.Contains(t, r.Warnings[0], `was held by 1 holder (p/alice) as 2 kinds (A100 / 1g.10gb, A100 / 3g.40gb) at the same time for 30 s`)
}

// The overlap is measured on the occupancy as sampled: a gap the billing bridges
// (rule 3) is not held time, so a short job of another holder in it is no conflict.
func TestConflictIgnoresBridgedGaps(t *testing.T) {
	cat := conflictCat(t)
	t0 := at(3, 10, 0, 0)
	r := billSamples(cat, nov, heldSamples(t,
		held{project: "p", user: "alice", inst: "MIG-1", start: t0, end: t0 + 60_000},
		held{project: "q", user: "bob", inst: "MIG-1", start: t0 + 60_000, end: t0 + 80_000},
		held{project: "p", user: "alice", inst: "MIG-1", start: t0 + 80_000, end: t0 + 140_000},
	))
	require.Empty(t, r.Conflicts)
	require.EqualValues(t, 140, usageLine(t, r, "p", "alice", "a1g").BilledSeconds, "the 20 s gap is bridged and billed")
}

func TestConflictChainsAndTheMonth(t *testing.T) {
	cat := conflictCat(t)
	p0 := nov.StartMS()
	s := 1000 * int64(1)
	r := billSamples(cat, nov, heldSamples(t,
		// Before the month: alice and bob overlap from -20 s; only the part from P0 counts.
		held{project: "p", user: "alice", inst: "MIG-1", start: p0 - 60*s, end: p0 + 10*s},
		held{project: "q", user: "bob", inst: "MIG-1", start: p0 - 20*s, end: p0 + 15*s},
		// carol overlaps bob: bob took part in both stretches.
		held{project: "q", user: "carol", inst: "MIG-1", start: p0 + 12*s, end: p0 + 20*s},
		// dave alone later, and erin overlapping nobody: not involved.
		held{project: "p", user: "dave", inst: "MIG-1", start: p0 + 100*s, end: p0 + 200*s},
		held{project: "p", user: "erin", inst: "MIG-1", start: p0 + 300*s, end: p0 + 400*s},
		// Duplicates of a key never conflict with themselves.
		held{project: "p", user: "dave", inst: "MIG-1", start: p0 + 150*s, end: p0 + 250*s},
	))
	require.Equal(t, []Conflict{{
		InstanceID: "MIG-1",
		Holders:    []Holder{{"p", "alice"}, {"q", "bob"}, {"q", "carol"}},
		Kinds:      []Kind{{"A100", "1g.10gb"}},
		OverlapMS:  10*s + 3*s,
		First:      p0,
		Last:       p0 + 15*s,
	}}, stripConflicts(r.Conflicts))
}

// The file path and the stores give the same conflicts: a store feeds merged
// occupancy intervals through AddOccupancy, in any order and split across readers.
func TestConflictsSameFromSamplesAndOccupancy(t *testing.T) {
	cat := conflictCat(t)
	t0 := at(3, 10, 0, 0)
	var samples []schemas.Sample
	for i := int64(0); i < 60; i++ { // alice: an hour in 1-minute samples
		samples = append(samples, heldSamples(t, held{project: "p", user: "alice", inst: "MIG-1",
			start: t0 + i*60_000, end: t0 + (i+1)*60_000})...)
	}
	for i := int64(10); i < 25; i++ { // bob: 15 of them
		samples = append(samples, heldSamples(t, held{project: "q", user: "bob", inst: "MIG-1",
			start: t0 + i*60_000, end: t0 + (i+1)*60_000})...)
	}
	want := billSamples(cat, nov, samples)
	require.Len(t, want.Conflicts, 1)
	require.EqualValues(t, 15*60_000, want.Conflicts[0].OverlapMS)

	a, b := NewAccumulator(cat, nov), NewAccumulator(cat, nov)
	ka := schemas.Key{Project: "p", User: "alice", InstanceID: "MIG-1", GPUModel: "A100", Profile: "1g.10gb"}
	kb := schemas.Key{Project: "q", User: "bob", InstanceID: "MIG-1", GPUModel: "A100", Profile: "1g.10gb"}
	b.AddOccupancy(kb, t0+10*60_000, t0+25*60_000, false)
	a.AddOccupancy(ka, t0+30*60_000, t0+60*60_000, false)
	b.AddOccupancy(ka, t0, t0+31*60_000, false)
	a.Merge(b)
	require.Equal(t, render(t, want), render(t, a.Invoices()))
}

// A generated trace holds each instance by one holder at a time: no conflict.
func TestNoConflictsInGeneratedTrace(t *testing.T) {
	cat, err := schemas.LoadCatalog("../schemas/examples/catalog.yaml")
	require.NoError(t, err)
	p := NewPeriod(2026, time.November, cat.Location)
	var buf bytes.Buffer
	_, err = gen.Write(&buf, gen.Config{Samples: 50_000, StartMS: p.StartMS(), Seed: 3, DuplicateEvery: 7})
	require.NoError(t, err)
	r, _, err := BillStream(&buf, cat, p, schemas.ReadOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, r.Invoices)
	require.Empty(t, r.Conflicts)
}

// The sweep against a brute force over elementary time segments, on the random
// traces of the reference test (several users and kinds on few instances), for the
// whole result and for every user's statement.
func TestConflictsAgreeWithBruteForce(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	p := NewPeriod(2026, time.November, loc)
	found := 0
	for seed := 0; seed < 400; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		cat := randomCatalog(t, rng)
		samples := randomTrace(rng, p, cat.Defaults.GapToleranceMS)
		r := billSamples(cat, p, samples)
		require.Equal(t, bruteConflicts(samples, p, ""), stripConflicts(r.Conflicts), "seed %d", seed)
		found += len(r.Conflicts)
		for _, user := range []string{"u1", "u2"} {
			st := r.StatementFor(user)
			require.Equal(t, bruteConflicts(samples, p, user), stripConflicts(st.Conflicts), "seed %d, statement of %q", seed, user)
		}
	}
	require.Greater(t, found, 50, "the traces must exercise conflicts")
}

// bruteConflicts cuts each instance's time at every sample boundary and looks at
// each elementary segment on its own. With focus set it is the statement's view:
// segments where one of focus's keys is among two or more, own holders named and
// the others counted.
func bruteConflicts(samples []schemas.Sample, p Period, focus string) []Conflict {
	byInst := map[string][]schemas.Sample{}
	for _, s := range samples {
		if s.Project != "" {
			byInst[s.InstanceID] = append(byInst[s.InstanceID], s)
		}
	}
	var out []Conflict
	for id, ss := range byInst {
		var cuts []int64
		for _, s := range ss {
			cuts = append(cuts, max(p.StartMS(), min(s.StartMS, p.EndMS())), max(p.StartMS(), min(s.EndMS(), p.EndMS())))
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		c := Conflict{InstanceID: id}
		holders, kinds := map[Holder]bool{}, map[Kind]bool{}
		for i := 0; i+1 < len(cuts); i++ {
			lo, hi := cuts[i], cuts[i+1]
			active := map[schemas.Key]bool{}
			for _, s := range ss {
				if s.StartMS <= lo && s.EndMS() >= hi {
					active[schemas.KeyOf(&s)] = true
				}
			}
			focused := false
			for k := range active {
				focused = focused || focus == "" || k.User == focus
			}
			if len(active) < 2 || !focused {
				continue
			}
			if c.OverlapMS == 0 {
				c.First = lo
			}
			c.OverlapMS += hi - lo
			c.Last = hi
			for k := range active {
				holders[Holder{k.Project, k.User}] = true
				kinds[Kind{k.GPUModel, k.Profile}] = true
			}
		}
		if c.OverlapMS == 0 {
			continue
		}
		for h := range holders {
			if focus == "" || h.User == focus {
				c.Holders = append(c.Holders, h)
			} else {
				c.OtherHolders++
			}
		}
		for k := range kinds {
			c.Kinds = append(c.Kinds, k)
		}
		slices.SortFunc(c.Holders, func(x, y Holder) int {
			return cmp.Or(cmp.Compare(x.Project, y.Project), cmp.Compare(x.User, y.User))
		})
		slices.SortFunc(c.Kinds, func(x, y Kind) int {
			return cmp.Or(cmp.Compare(x.GPUModel, y.GPUModel), cmp.Compare(x.Profile, y.Profile))
		})
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y Conflict) int { return cmp.Compare(x.InstanceID, y.InstanceID) })
	return out
}

// stripConflicts drops what a conflict keeps for recomputation, to compare the
// reported fields only.
func stripConflicts(cs []Conflict) []Conflict {
	var out []Conflict
	for _, c := range cs {
		c.keys, c.pieces = nil, nil
		out = append(out, c)
	}
	return out
}
