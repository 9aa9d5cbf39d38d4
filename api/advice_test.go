package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/schemas"
)

// fakeAdvisor advises on fixed usage with the real advice and billing engine:
// ai101 holds a T4 card the whole of September to November, nlp-lab an A100
// 1g slice for ten days of October.
type fakeAdvisor struct{}

func (fakeAdvisor) Advise(ctx context.Context, cat *schemas.Catalog, opt advice.Options) (*advice.Report, error) {
	loc := cat.Location
	ms := func(y int, m time.Month, d int) int64 { return time.Date(y, m, d, 0, 0, 0, 0, loc).UnixMilli() }
	usage := []struct {
		k          schemas.Key
		start, end int64
	}{
		{schemas.Key{Project: "ai101", User: "s-alice", InstanceID: "GPU-t4", GPUModel: "Tesla T4", Profile: "full"}, ms(2026, 9, 1), ms(2026, 12, 1)},
		{schemas.Key{Project: "nlp-lab", User: "s-carol", InstanceID: "MIG-1", GPUModel: "NVIDIA A100-SXM4-80GB", Profile: "1g.10gb"}, ms(2026, 10, 1), ms(2026, 10, 11)},
	}
	months := opt.Months
	if months == 0 {
		months = advice.DefaultMonths
	}
	var results []*billing.Result
	for _, p := range advice.Window(cat, opt.Now, months) {
		acc := billing.NewAccumulator(cat, p)
		for _, u := range usage {
			acc.AddOccupancy(u.k, u.start, u.end, false)
		}
		results = append(results, acc.Invoices())
	}
	return advice.Advise(cat, opt, results)
}

func TestAdviceScope(t *testing.T) {
	f := newFixture(t)
	projects := func(role, url string) (int, []string, map[string]any) {
		r := f.do(role, "GET", url, "", "")
		var rep struct {
			From      string
			Advice    []struct{ Project string }
			Underused []struct{ Project string }
		}
		if r.Status != 200 {
			return r.Status, nil, r.json(t)
		}
		require.NoError(t, json.Unmarshal(r.Body, &rep), string(r.Body))
		require.Equal(t, "2026-09", rep.From)
		seen := map[string]bool{}
		var out []string
		for _, a := range rep.Advice {
			if !seen[a.Project] {
				seen[a.Project] = true
				out = append(out, a.Project)
			}
		}
		for _, u := range rep.Underused {
			require.True(t, seen[u.Project], "an under-used reservation of %s without its advice", u.Project)
		}
		return 200, out, nil
	}
	st, ps, _ := projects("finance", "/api/v1/advice")
	require.Equal(t, 200, st)
	require.Equal(t, []string{"ai101", "cv-lab", "nlp-lab"}, ps)
	st, ps, _ = projects("admin", "/api/v1/advice?project=nlp-lab&months=3&min_coverage=0.9")
	require.Equal(t, 200, st)
	require.Equal(t, []string{"nlp-lab"}, ps)
	// The lead of ai101 sees ai101, asked or not, and no other project.
	st, ps, _ = projects("lead", "/api/v1/advice")
	require.Equal(t, 200, st)
	require.Equal(t, []string{"ai101"}, ps)
	st, _, p := projects("lead", "/api/v1/advice?project=nlp-lab")
	require.Equal(t, 403, st)
	require.Equal(t, "https://cardhour.dev/problems/forbidden", p["type"])
	st, _, _ = projects("student", "/api/v1/advice?project=ai101")
	require.Equal(t, 403, st)
	st, _, p = projects("finance", "/api/v1/advice?min_coverage=2")
	require.Equal(t, 422, st)
	require.Equal(t, "query.min_coverage", p["errors"].([]any)[0].(map[string]any)["location"])
	st, _, _ = projects("finance", "/api/v1/advice?months=30")
	require.Equal(t, 422, st)

	r := f.do("lead", "GET", "/api/v1/advice", "", "")
	var rep advice.Report
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	require.Len(t, rep.Advice, 1)
	require.Equal(t, int64(1), rep.Advice[0].Mix.Year)
	require.Contains(t, rep.Advice[0].Text.Zh, "1 个年付预留")
}
