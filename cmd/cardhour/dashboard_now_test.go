//go:build !collector

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/ledger"
)

// fleetSamples writes half an hour of one-minute samples up to at of
// nodes × 3 MIG slices, every slice held (users 2023110001…), the first
// slice of every third node idle (no utilisation, no process).
func fleetSamples(tb testing.TB, nodes int, at time.Time) string {
	tb.Helper()
	var sb strings.Builder
	for n := 1; n <= nodes; n++ {
		for i := range 3 {
			util, procs := "0.6", 1
			if n%3 == 0 && i == 0 {
				util, procs = "0", 0
			}
			project := []string{"nlp-lab", "ai101", "cv-lab"}[i]
			for ts := at.Add(-30 * time.Minute); ts.Before(at); ts = ts.Add(time.Minute) {
				fmt.Fprintf(&sb, `{"ts":%q,"interval_s":60,"node":"fleet-%02d","gpu_uuid":"GPU-fleet-%02d","gpu_model":"NVIDIA A100-SXM4-80GB",`+
					`"instance_id":"MIG-fleet-%02d-%d","profile":"1g.10gb","project":%q,"user":"20231%05d","util":%s,`+
					`"mem_used_bytes":1073741824,"mem_total_bytes":10737418240,"processes":%d}`+"\n",
					ts.Format(time.RFC3339), n, n, n, i, project, n*3+i, util, procs)
			}
		}
	}
	return writeSamples(tb.(*testing.T), strings.TrimSuffix(sb.String(), "\n"))
}

// TestDashboardNowPagesAFleet: in English and Chinese, the Now page of a
// fleet larger than a page shows the server's totals (held, nodes, idle,
// cost so far: GET /api/v1/held's), the first page of held instances and a
// "show more" that loads the next; a node picked in the nodes table shows
// only that node's instances (a linkable #/now?node=…), and "idle only"
// only the idle ones, each as the API answers the same filter.
func TestDashboardNowPagesAFleet(t *testing.T) {
	chromium := needChromium(t)
	at := time.Date(2026, 11, 20, 10, 0, 30, 0, shanghai)
	samples := fleetSamples(t, 12, at)
	shots := artifactDir(t, "dashboard-now")
	for _, lang := range []string{"en", "zh-CN"} {
		more, summary, onNode := "Show more (10 of 36 shown)", "Instances held: 36 · nodes: 12 · idle: 4 · cost so far: ", "Held on fleet-05 only."
		if lang == "zh-CN" {
			more, summary, onNode = "显示更多（已显示 10 / 36）", "12 个节点上共占用 36 个实例，其中 4 个空闲。截至目前的费用：", "只显示 fleet-05 上的占用。"
		}
		t.Run(lang, func(t *testing.T) {
			ds := startDashboard(t, samples, at, afterNovember, map[string]ledger.NewToken{
				"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
			})
			fin := ds.tokens["finance"]
			var all api.HeldPage
			ds.apiGet(t, fin, "/api/v1/held", &all)
			require.Equal(t, [3]int{36, 4, 12}, [3]int{all.Total, all.Idle, all.Nodes})
			require.NotNil(t, all.Cost)
			tb := langTab(t, chromium, shots, lang)
			tb.login(ds.base, fin)
			rows := func() int { return eval[int](tb, `document.querySelectorAll('#held-nodes tbody tr').length`) }
			text := func(id string) string { return eval[string](tb, `document.getElementById('`+id+`').innerText`) }

			tb.route("#/now?limit=10", "now")
			require.Equal(t, 10, rows())
			require.Contains(t, text("held-summary"), summary)
			require.Contains(t, text("held-summary"), all.Cost.StringFixed(2), "the server's sum")
			require.Equal(t, more, text("held-more"))
			tb.screenshot(lang + "-01-first-page")
			tb.do(chromedp.Click(chromedp.CSS("#held-more")))
			waitFor(tb, `document.querySelectorAll('#held-nodes tbody tr').length === 20`, 10*time.Second)
			var page api.HeldPage
			ds.apiGet(t, fin, "/api/v1/held?limit=20", &page)
			for _, h := range page.Items {
				require.Contains(t, text("held-"+h.Node), h.User, "the first 20 in the API's order")
			}

			// A node from the nodes table: its instances only.
			tb.do(chromedp.Click(chromedp.CSS(`#node-freshness button[data-node="fleet-05"]`)), ready("now"))
			ds.apiGet(t, fin, "/api/v1/held?node=fleet-05", &page)
			require.Len(t, page.Items, 3)
			waitFor(tb, fmt.Sprintf(`location.hash.includes('node=fleet-05') && document.querySelectorAll('#held-nodes tbody tr').length === %d`, len(page.Items)), 5*time.Second)
			require.Contains(t, text("now-filter"), onNode)
			require.True(t, eval[bool](tb, `document.getElementById('held-more').hidden`))
			tb.screenshot(lang + "-02-one-node")

			// Idle only, every node.
			tb.do(chromedp.Click(chromedp.CSS("#now-all-nodes")), ready("now"))
			waitFor(tb, `!location.hash.includes('node=') && document.querySelectorAll('#held-nodes tbody tr').length === 36`, 5*time.Second)
			tb.do(chromedp.Click(chromedp.CSS("#now-idle-only")), ready("now"))
			waitFor(tb, `location.hash.includes('state=idle') && document.querySelectorAll('#held-nodes tbody tr').length === 4`, 5*time.Second)
			ds.apiGet(t, fin, "/api/v1/held?state=idle", &page)
			require.Equal(t, 4, page.Total)
			for _, h := range page.Items {
				require.Contains(t, text("held-"+h.Node), h.User)
			}
			require.True(t, eval[bool](tb, `document.getElementById('now-idle-only').checked`))
			tb.screenshot(lang + "-03-idle-only")
		})
	}
}
