package storetest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// RequireFilteredUsage writes a trace (replays included) into st, an empty
// store, and into an ingest.MemStore, and checks that reads.Usage filtered by
// project, user, SKU, node and time answers on st exactly as on the
// in-memory store, under every catalog variant (thresholds on and inside the
// idle classes, so both the database's and billing's paths run). It also
// checks that st's runs are filtered in the database (reads.KeyedRuns): the
// rows it returns for a project or a user are exactly those of that key.
func RequireFilteredUsage(t *testing.T, st ingest.Backend) {
	ctx := context.Background()
	data := Trace(t, 40_000, 29)
	samples := Samples(t, data)
	mem := ingest.NewMemStore()
	for _, s := range []ingest.Store{st, mem} {
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: s, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		WriteStreamed(t, w, samples, 7_000, 1_000)
	}
	keys := map[string]map[string]bool{} // project → its users
	nodes := map[string]bool{}
	first, last := samples[0].StartMS, samples[0].StartMS
	for i := range samples {
		s := &samples[i]
		first, last = min(first, s.StartMS), max(last, s.StartMS)
		if s.Project == "" {
			continue
		}
		if keys[s.Project] == nil {
			keys[s.Project] = map[string]bool{}
		}
		keys[s.Project][s.User] = true
		nodes[s.Node] = true
	}
	projects := sortedKeys(keys)
	require.GreaterOrEqual(t, len(projects), 3, "the trace holds several projects")
	users := sortedKeys(keys[projects[0]])
	require.GreaterOrEqual(t, len(users), 2)
	node := sortedKeys(nodes)[0]

	requireKeyedRuns(t, st, mem, projects[0], users[0], first, last+3_600_000)

	from := time.UnixMilli(first).Truncate(time.Hour)
	to := time.UnixMilli(last).Add(2 * time.Hour).Truncate(time.Hour)
	mid := from.Add(83 * time.Minute) // inside the generated sessions (the edge cases run hours later)
	cats := Catalogs(t)
	sku := cats["example"].SKUs[0].ID
	queries := []reads.UsageQuery{
		{GroupBy: []string{reads.ByProject, reads.ByUser, reads.BySKU, reads.ByDay}}, // unfiltered: the reference
		{GroupBy: []string{reads.ByUser, reads.ByDay}, Projects: projects[:1]},
		{GroupBy: []string{reads.ByUser, reads.ByHour}, Projects: projects[1:2]},
		{GroupBy: []string{reads.ByUser, reads.BySKU, reads.ByDay}, Projects: projects[:2]},
		{GroupBy: []string{reads.ByInstance}, Projects: projects[:1], Users: users[:1]},
		{GroupBy: []string{reads.ByProject, reads.ByDay}, Users: users[1:2]},
		{GroupBy: []string{reads.ByUser}, Projects: projects[:1], SKUs: []string{sku}},
		{GroupBy: []string{reads.ByProject, reads.ByHour}, SKUs: []string{sku}},
		{GroupBy: []string{reads.ByUser, reads.ByNode}, Projects: projects[:1]},
		{GroupBy: []string{reads.ByProject, reads.ByHour}, Nodes: []string{node}},
		{GroupBy: []string{reads.ByUser, reads.ByHour}, Projects: projects[:1], From: mid, To: to},
		{GroupBy: []string{reads.ByInstance}, Projects: projects[2:3], From: from, To: mid},
		{GroupBy: []string{reads.ByProject}, Projects: []string{"no-such-project"}},
		// Months (the trace crosses a month in the catalog's zone): by the
		// runs, by raw samples (node), filtered, from the middle of a day.
		{GroupBy: []string{reads.ByMonth, reads.ByProject}},
		{GroupBy: []string{reads.BySKU, reads.ByMonth}, Projects: projects[:2]},
		{GroupBy: []string{reads.ByMonth, reads.ByUser}, Projects: projects[:1], From: mid, To: to},
		{GroupBy: []string{reads.ByMonth, reads.ByNode}, SKUs: []string{sku}},
		{GroupBy: []string{reads.ByMonth, reads.ByDay, reads.ByProject}},
	}
	for name, cat := range cats {
		var ref *reads.UsageReport
		for i, q := range queries {
			if q.From.IsZero() {
				q.From, q.To = from, to
			}
			want, err := reads.Usage(ctx, mem, cat, q)
			require.NoError(t, err)
			got, err := reads.Usage(ctx, st, cat, q)
			require.NoError(t, err)
			require.Equal(t, want, got, "catalog %s, query %d %+v", name, i, q)
			switch {
			case i == 0:
				ref = want
			case len(q.Projects) == 1 && q.Projects[0] == "no-such-project":
				require.Empty(t, got.Rows)
			default:
				require.NotEmpty(t, got.Rows, "catalog %s, query %d selects usage", name, i)
			}
		}
		// The per-project reads add up to the unfiltered one.
		var held, idle int64
		for _, p := range projects {
			r, err := reads.Usage(ctx, st, cat, reads.UsageQuery{From: from, To: to, Projects: []string{p}})
			require.NoError(t, err)
			held, idle = held+r.Total.HeldSeconds, idle+r.Total.IdleSeconds
		}
		require.Equal(t, [2]int64{ref.Total.HeldSeconds, ref.Total.IdleSeconds}, [2]int64{held, idle}, "catalog %s", name)
		require.Positive(t, idle, "catalog %s: the trace has idle time", name)
		requireMonthsOfDays(t, st, cat, from, to)
	}
}

// requireMonthsOfDays checks that usage grouped by month is usage grouped by
// day added up per month (held and idle seconds; each cost is rounded once
// per group, so only the costs of days sum to within a cent a day), that the
// range covers at least two months, and that the idle cost never exceeds the
// cost.
func requireMonthsOfDays(t *testing.T, st ingest.Backend, cat *schemas.Catalog, from, to time.Time) {
	ctx := context.Background()
	months, err := reads.Usage(ctx, st, cat, reads.UsageQuery{From: from, To: to, GroupBy: []string{reads.ByProject, reads.ByMonth}})
	require.NoError(t, err)
	days, err := reads.Usage(ctx, st, cat, reads.UsageQuery{From: from, To: to, GroupBy: []string{reads.ByProject, reads.ByDay}})
	require.NoError(t, err)
	type key struct{ project, month string }
	sum := map[key][2]int64{}
	for _, r := range days.Rows {
		k := key{r.Project, r.Day[:7]}
		sum[k] = [2]int64{sum[k][0] + r.HeldSeconds, sum[k][1] + r.IdleSeconds}
	}
	got := map[key][2]int64{}
	seen := map[string]bool{}
	for _, r := range months.Rows {
		got[key{r.Project, r.Month}] = [2]int64{r.HeldSeconds, r.IdleSeconds}
		seen[r.Month] = true
		require.True(t, r.IdleCost.LessThanOrEqual(r.Cost.Decimal), "%+v", r)
	}
	require.Equal(t, sum, got, "catalog %s: months are their days", cat.Timezone)
	require.GreaterOrEqual(t, len(seen), 2, "the trace crosses a month")
	require.Equal(t, days.Total, months.Total)
}

// requireKeyedRuns checks that st filters its runs by key in the database:
// the runs OccupancyOf and IdleRunsOf return for a project, a user, both,
// and an SKU's (model, profile) are exactly the unfiltered runs of those
// keys, and the same keys as the in-memory store's.
func requireKeyedRuns(t *testing.T, st ingest.Backend, mem *ingest.MemStore, project, user string, lo, hi int64) {
	ctx := context.Background()
	_, ok := st.(reads.KeyedRuns)
	require.True(t, ok, "every usage store filters its runs by key (reads.KeyedRuns)")
	occKeys := func(src reads.UsageSource, q *schemas.UsageRowQuery) map[string]bool {
		t.Helper()
		out := map[string]bool{}
		add := func(rs []schemas.Run) error {
			for _, r := range rs {
				out[fmt.Sprint(r.Key, r.StartMS, r.EndMS)] = true
			}
			return nil
		}
		if q == nil {
			require.NoError(t, src.Occupancy(ctx, lo, hi, add))
		} else {
			require.NoError(t, src.(reads.KeyedRuns).OccupancyOf(ctx, *q, lo, hi, add))
		}
		return out
	}
	idleKeys := func(src reads.UsageSource, q *schemas.UsageRowQuery) map[string]bool {
		t.Helper()
		out := map[string]bool{}
		add := func(rs []schemas.IdleRun) error {
			for _, r := range rs {
				out[fmt.Sprint(r.Key, r.Class, r.StartMS, r.EndMS, r.MinUtil, r.MaxUtil)] = true
			}
			return nil
		}
		if q == nil {
			require.NoError(t, src.IdleRuns(ctx, lo, hi, 1, add))
		} else {
			require.NoError(t, src.(reads.KeyedRuns).IdleRunsOf(ctx, *q, lo, hi, 1, add))
		}
		return out
	}
	allOcc, allIdle := occKeys(st, nil), idleKeys(st, nil)
	cat := Catalogs(t)["example"]
	a100 := [2]string{cat.SKUs[0].GPUModel, cat.SKUs[0].Profile}
	for _, q := range []schemas.UsageRowQuery{
		{Projects: []string{project}},
		{Users: []string{user}},
		{Projects: []string{project}, Users: []string{user}},
		{Models: [][2]string{a100}},
		{Projects: []string{"no-such-project"}},
	} {
		sel := func(k schemas.Key) bool { return ingest.KeySelected(q, k) }
		wantOcc, wantIdle := map[string]bool{}, map[string]bool{}
		require.NoError(t, st.Occupancy(ctx, lo, hi, func(rs []schemas.Run) error {
			for _, r := range rs {
				if sel(r.Key) {
					wantOcc[fmt.Sprint(r.Key, r.StartMS, r.EndMS)] = true
				}
			}
			return nil
		}))
		require.NoError(t, st.IdleRuns(ctx, lo, hi, 1, func(rs []schemas.IdleRun) error {
			for _, r := range rs {
				if sel(r.Key) {
					wantIdle[fmt.Sprint(r.Key, r.Class, r.StartMS, r.EndMS, r.MinUtil, r.MaxUtil)] = true
				}
			}
			return nil
		}))
		gotOcc, gotIdle := occKeys(st, &q), idleKeys(st, &q)
		require.Equal(t, wantOcc, gotOcc, "occupancy of %+v", q)
		require.Equal(t, wantIdle, gotIdle, "idle runs of %+v", q)
		if q.Projects == nil || q.Projects[0] != "no-such-project" {
			require.NotEmpty(t, gotOcc, "%+v selects runs", q)
			require.Less(t, len(gotOcc), len(allOcc), "%+v selects some runs, not all", q)
			require.Less(t, len(gotIdle), len(allIdle), "%+v selects some idle runs, not all", q)
		}
		// The in-memory store's filter selects the same keys.
		require.Equal(t, runKeys(t, mem, q, lo, hi), runKeys(t, st, q, lo, hi), "keys of %+v", q)
	}
}

// runKeys returns the sorted distinct keys of the occupancy runs of
// [lo, hi] that src returns for q.
func runKeys(t *testing.T, src reads.UsageSource, q schemas.UsageRowQuery, lo, hi int64) []schemas.Key {
	t.Helper()
	seen := map[schemas.Key]bool{}
	require.NoError(t, src.(reads.KeyedRuns).OccupancyOf(context.Background(), q, lo, hi, func(rs []schemas.Run) error {
		for _, r := range rs {
			seen[r.Key] = true
		}
		return nil
	}))
	out := make([]schemas.Key, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b schemas.Key) int {
		return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(a.User, b.User), cmp.Compare(a.InstanceID, b.InstanceID),
			cmp.Compare(a.GPUModel, b.GPUModel), cmp.Compare(a.Profile, b.Profile))
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
