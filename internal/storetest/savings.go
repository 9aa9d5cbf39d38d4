package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// RequireSavings checks reads.AddSavings on st, an empty store, against
// hand-computed answers: a holder's concurrent holding is no return, a new
// holding after the release is; a holder who never returns saves until now;
// a release before the range saves inside it; a project's holding without a
// user is ended by the project's next such holding only; releases outside
// the horizon or the filters save nothing; grouped by local day (America/
// New_York, EST on 2026-11-02) the time splits at local midnight.
func RequireSavings(t *testing.T, st ingest.Backend) {
	ctx := context.Background()
	cat := ReadsCatalog(t)
	const a100, h100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
	idle := func(int) (float64, bool) { return 0, true }
	busy := func(int) (float64, bool) { return 0.9, true }
	var samples []schemas.Sample
	add := func(inst, node, model, project, user, from string, n int, util func(int) (float64, bool)) {
		samples = append(samples, minutes(inst, node, model, "1g.10gb", project, user, utc(from), n, util, 1)...)
	}
	add("mig-a", "n1", a100, "nlp-lab", "alice", "2026-11-02T10:00:00Z", 60, idle)  // released 11:00
	add("mig-c", "n1", a100, "nlp-lab", "alice", "2026-11-02T09:00:00Z", 300, busy) // held meanwhile: no return
	add("mig-d", "n1", a100, "nlp-lab", "alice", "2026-11-02T13:00:00Z", 30, busy)  // alice is back at 13:00
	add("gpu-h", "n2", h100, "ai101", "bob", "2026-11-02T10:00:00Z", 30, idle)      // released 10:30, never back
	add("mig-e", "n1", a100, "cv-lab", "dave", "2026-11-01T21:00:00Z", 60, idle)    // released 22:00 the day before
	add("mig-f", "n1", a100, "cv-lab", "dave", "2026-11-02T02:00:00Z", 10, busy)    // dave is back at 02:00
	add("mig-p", "n2", h100, "ai101", "", "2026-11-02T10:00:00Z", 60, idle)         // the project's, released 11:00
	add("mig-q", "n2", h100, "ai101", "", "2026-11-02T11:30:00Z", 10, busy)         // the project's next, 11:30
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(samples)))
	rels := []reads.Released{
		{InstanceID: "mig-a", Node: "n1", Project: "nlp-lab", User: "alice", At: utc("2026-11-02T11:00:00Z")},
		{InstanceID: "gpu-h", Node: "n2", Project: "ai101", User: "bob", At: utc("2026-11-02T10:30:00Z")},
		{InstanceID: "mig-e", Node: "n1", Project: "cv-lab", User: "dave", At: utc("2026-11-01T22:00:00Z")},
		{InstanceID: "mig-p", Node: "n2", Project: "ai101", At: utc("2026-11-02T11:00:00Z")},
		{InstanceID: "mig-z", Node: "n3", Project: "cv-lab", User: "erin", At: utc("2026-10-01T10:00:00Z")}, // beyond the horizon
		{InstanceID: "mig-y", Node: "n3", Project: "cv-lab", User: "erin", At: utc("2026-11-02T21:00:00Z")}, // after now
	}
	src, ok := st.(reads.KeyedRuns)
	require.True(t, ok, "every usage store reads runs by key (reads.KeyedRuns)")
	rows, ok := st.(reads.UsageRows)
	require.True(t, ok)
	now := utc("2026-11-02T20:00:00Z")
	savings := func(q reads.UsageQuery) *reads.UsageReport {
		t.Helper()
		q.From, q.To = utc("2026-11-02T00:00:00Z"), utc("2026-11-03T00:00:00Z")
		rep, err := reads.Usage(ctx, rows, cat, q)
		require.NoError(t, err)
		before := *rep
		out, err := reads.AddSavings(ctx, src, cat, q, rep, rels, now)
		require.NoError(t, err)
		require.Equal(t, before, *rep, "the report given is not changed")
		return out
	}
	type saved struct {
		key     string
		seconds int64
		cost    string
	}
	of := func(rep *reads.UsageReport, key func(reads.UsageGroup) string) []saved {
		var out []saved
		for _, g := range rep.Rows {
			if g.SavedSeconds != 0 {
				out = append(out, saved{key(g), g.SavedSeconds, g.SavedCost.StringFixed(2)})
			}
		}
		return append(out, saved{"total", rep.Total.SavedSeconds, rep.Total.SavedCost.StringFixed(2)})
	}
	byUser := savings(reads.UsageQuery{GroupBy: []string{reads.ByProject, reads.ByUser}})
	require.Equal(t, []saved{
		{"ai101/", 1800, "1.50"}, {"ai101/bob", 34200, "28.50"}, {"cv-lab/dave", 7200, "3.60"}, {"nlp-lab/alice", 7200, "3.60"},
		{"total", 50400, "37.20"},
	}, of(byUser, func(g reads.UsageGroup) string { return g.Project + "/" + g.User }))
	require.Equal(t, int64(SavingsHorizonSeconds), byUser.SavingsHorizonSeconds)
	require.Equal(t, reads.SavingsAssumption, byUser.SavingsAssumption)

	byDay := savings(reads.UsageQuery{GroupBy: []string{reads.ByDay, reads.BySKU}})
	require.Equal(t, []saved{
		{"2026-11-01 a100-80g-1g.10gb", 7200, "3.60"},
		{"2026-11-02 a100-80g-1g.10gb", 7200, "3.60"}, {"2026-11-02 h100-1g.10gb", 36000, "30.00"},
		{"total", 50400, "37.20"},
	}, of(byDay, func(g reads.UsageGroup) string { return g.Day + " " + g.SKU }))
	byInstance := savings(reads.UsageQuery{GroupBy: []string{reads.ByInstance}, Users: []string{"dave"}})
	var got []string
	for _, g := range byInstance.Rows {
		got = append(got, fmt.Sprintf("%s held %d cost %s saved %d %s", g.InstanceID, g.HeldSeconds,
			g.Cost.StringFixed(2), g.SavedSeconds, g.SavedCost.StringFixed(2)))
	}
	require.Equal(t, []string{"mig-e held 0 cost 0.00 saved 7200 3.60", "mig-f held 600 cost 0.30 saved 0 0.00"}, got,
		"a group of savings alone has no held time")

	h100only := savings(reads.UsageQuery{GroupBy: []string{reads.ByNode}, SKUs: []string{"h100-1g.10gb"}, Projects: []string{"ai101"}})
	require.Equal(t, []saved{{"n2", 36000, "30.00"}, {"total", 36000, "30.00"}}, of(h100only, func(g reads.UsageGroup) string { return g.Node }))
	none := savings(reads.UsageQuery{Users: []string{"erin"}})
	require.Equal(t, []saved{{"total", 0, "0.00"}}, of(none, nil))
}

// SavingsHorizonSeconds is reads.SavingsHorizon in seconds.
const SavingsHorizonSeconds = 30 * 24 * 3600
