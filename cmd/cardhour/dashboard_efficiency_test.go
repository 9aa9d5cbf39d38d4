//go:build !collector

package main

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
)

// effTexts are the efficiency page's column headers in one language.
var effTexts = map[string]struct {
	occ, rows  []string
	total      string
	unmeasured string
	perNode    string // the line above the chart, a row per node (%d: nodes)
	grouped    string // … in groups (nodes, rows, group size)
	group      string // a group's label (first, last, nodes)
}{
	"en": {[]string{"GPU model", "Available instance-hours", "Held instance-hours", "Occupancy (%)"},
		[]string{"Nodes", "Node count", "Held instance-hours", "Measured instance-hours", "Utilisation (%)"}, "Total", "held, not measured",
		"%d nodes, a row each.", "%d nodes in %d groups of up to %d consecutive nodes", "%s – %s (%d)"},
	"zh-CN": {[]string{"GPU 型号", "可用实例小时", "占用实例小时", "占用率（%）"},
		[]string{"节点", "节点数", "占用实例小时", "已测量实例小时", "利用率（%）"}, "合计", "占用但未测量",
		"%d 个节点，每个节点一行。", "%d 个节点，分为 %d 组，每组最多 %d 个相邻节点", "%s – %s（%d 个）"},
}

// The efficiency page shows, in English and in Chinese, the API's
// occupancy per GPU model (with its total) and its heat map's cells, in the
// table and in the chart (measured cells coloured by their utilisation, held
// ones without a measurement apart); a lead is not offered the page.
func TestDashboardEfficiency(t *testing.T) {
	chromium := needChromium(t)
	ds := startDashboard(t, withIdleInstance(t, heldAt), heldAt, afterNovember, map[string]ledger.NewToken{
		"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
		"lead":    {Role: ledger.RoleLead, Project: "nlp-lab", TTL: time.Hour},
	})
	shots := artifactDir(t, "dashboard-efficiency")
	var occ reads.OccupancyReport
	ds.apiGet(t, ds.tokens["finance"], "/api/v1/occupancy?period=2026-11", &occ)
	var hm reads.HeatmapReport
	ds.apiGet(t, ds.tokens["finance"], "/api/v1/utilization/heatmap?period=2026-11", &hm)
	require.NotEmpty(t, occ.Rows)
	require.NotEmpty(t, hm.Rows)
	for _, lang := range []string{"en", "zh-CN"} {
		t.Run(lang, func(t *testing.T) {
			x := effTexts[lang]
			tb := langTab(t, chromium, shots, lang)
			tb.login(ds.base, ds.tokens["finance"])
			tb.route("#/efficiency?period=2026-11", "efficiency")
			header, cells := tableCells(tb, "occupancy-table")
			require.Equal(t, x.occ, header)
			var want [][]string
			for _, r := range occ.Rows {
				want = append(want, []string{r.GPUModel, pageHours(r.AvailableSeconds), pageHours(r.HeldSeconds), pagePct(r.Occupancy)})
			}
			want = append(want, []string{x.total, pageHours(occ.Total.AvailableSeconds), pageHours(occ.Total.HeldSeconds), pagePct(occ.Total.Occupancy)})
			require.Equal(t, want, cells)

			requireHeatmap(t, tb, x.rows, hm, func(r reads.HeatmapRow) string { return r.First }, x.unmeasured)
			require.Contains(t, eval[string](tb, `document.getElementById('eff-groups').innerText`), fmt.Sprintf(x.perNode, hm.NodeCount))
			tb.screenshot(lang + "-01-efficiency")

			// At most two rows: the nodes in groups, each row the server's
			// sums; a group opened from its row shows its nodes.
			var grouped, opened reads.HeatmapReport
			ds.apiGet(t, ds.tokens["finance"], "/api/v1/utilization/heatmap?period=2026-11&rows=2", &grouped)
			require.Greater(t, grouped.GroupSize, 1, "the example fleet has more than two nodes")
			tb.route("#/efficiency?period=2026-11&rows=2", "efficiency")
			label := func(r reads.HeatmapRow) string {
				if r.Nodes == 1 {
					return r.First
				}
				return fmt.Sprintf(x.group, r.First, r.Last, r.Nodes)
			}
			requireHeatmap(t, tb, x.rows, grouped, label, x.unmeasured)
			require.Contains(t, eval[string](tb, `document.getElementById('eff-groups').innerText`),
				fmt.Sprintf(x.grouped, grouped.NodeCount, len(grouped.Rows), grouped.GroupSize))
			tb.screenshot(lang + "-01b-efficiency-groups")
			first := grouped.Rows[0]
			ds.apiGet(t, ds.tokens["finance"], "/api/v1/utilization/heatmap?period=2026-11&rows=2&node_from="+first.First+"&node_to="+first.Last, &opened)
			require.Equal(t, first.Nodes, opened.NodeCount, "the group's nodes (in rows of at most two again)")
			require.Equal(t, [2]string{first.First, first.Last}, [2]string{opened.Rows[0].First, opened.Rows[len(opened.Rows)-1].Last})
			tb.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('#heatmap-table tbody a').click()`),
				chromedp.WaitVisible(chromedp.CSS(`#eff-all-nodes`)), ready("efficiency"))
			requireHeatmap(t, tb, x.rows, opened, label, x.unmeasured)
			tb.screenshot(lang + "-01c-efficiency-group-opened")

			// The usage page's tables carry busy hours and efficiency (the
			// cells against the API: TestDashboardTrends).
			tb.route("#/usage?period=2026-11", "usage")
			header, _ = tableCells(tb, "usage-table")
			require.Contains(t, header, trendLang[lang].busy)
			require.Contains(t, header, trendLang[lang].efficiency)
			tb.screenshot(lang + "-02-usage-efficiency")

			lt := langTab(t, chromium, shots, lang)
			lt.login(ds.base, ds.tokens["lead"])
			require.Zero(t, eval[int](lt, `document.querySelectorAll('nav a[href="#/efficiency"]').length`), "staff only")
		})
	}
}

// requireHeatmap checks the page's heat map table and chart against the
// API's report: a table row per report row (its label, node count and
// sums over the range), the chart's rows and hours, its measured cells'
// values and its held but unmeasured cells.
func requireHeatmap(t *testing.T, tb *tab, header []string, hm reads.HeatmapReport, label func(reads.HeatmapRow) string, unmeasuredText string) {
	t.Helper()
	got, cells := tableCells(tb, "heatmap-table")
	require.Equal(t, header, got)
	var want [][]string
	var labels []string
	var utils []float64
	var unmeasured int
	for _, r := range hm.Rows {
		util := pagePct(r.Total.Util)
		if r.Total.Util == "" && r.Total.HeldUnmeasuredSeconds > 0 {
			util = unmeasuredText
		}
		want = append(want, []string{label(r), strconv.Itoa(r.Nodes), pageHours(r.Total.HeldSeconds), pageHours(r.Total.MeasuredSeconds), util})
		labels = append(labels, label(r))
		for h, u := range r.Util {
			if u != "" {
				utils = append(utils, mustFloat(t, u))
			} else if r.HeldUnmeasuredSeconds[h] > 0 {
				unmeasured++
			}
		}
	}
	require.Equal(t, want, cells)
	chartJS := `echarts.getInstanceByDom(document.getElementById('chart-heatmap')).getOption()`
	require.Equal(t, labels, eval[[]string](tb, chartJS+`.yAxis[0].data`))
	require.Len(t, eval[[]string](tb, chartJS+`.xAxis[0].data`), len(hm.Hours))
	require.Equal(t, utils, eval[[]float64](tb, chartJS+`.series[0].data.map(d => d[2])`))
	require.Equal(t, unmeasured, eval[int](tb, chartJS+`.series[1].data.length`))
}

func mustFloat(tb testing.TB, s string) float64 {
	tb.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(tb, err)
	return f
}
