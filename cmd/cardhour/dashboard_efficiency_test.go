//go:build !collector

package main

import (
	"fmt"
	"math"
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
			// From its row in the table (English) or in the chart (Chinese).
			open := `document.querySelector('#heatmap-table tbody a').click()`
			if lang != "en" {
				open = `(() => { const c = document.getElementById('heatmap-canvas'), d = c.dataset, r = c.getBoundingClientRect();
  c.dispatchEvent(new MouseEvent('click', { clientX: r.left + +d.left + 0.5 * +d.cellW, clientY: r.top + +d.top + 0.5 * +d.cellH })); })()`
			}
			tb.do(chromedp.Evaluate[chromedp.Void](open),
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
	requireHeatCells(t, tb, hm)
	// The pointer over a row's first hour names the row and the hour.
	for y, l := range labels {
		require.Contains(t, heatTip(tb, y, 0), l+" · ")
	}
	tb.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('heatmap-canvas').dispatchEvent(new MouseEvent('mouseleave'))`))
	require.True(t, eval[bool](tb, `document.querySelector('#chart-heatmap .heat-tip').hidden`))
}

// heatCellsJS reads the heat map canvas's pixel at each cell's top-left
// (its first whole pixel) and middle row: [r, g, b, a] per cell, rows × hours.
const heatCellsJS = `(() => {
  const c = document.getElementById('heatmap-canvas'), d = c.dataset, s = c.width / parseFloat(c.style.width);
  const img = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, out = [];
  for (let y = 0; y < %d; y++) for (let x = 0; x < %d; x++) {
    const px = Math.round(Math.round(+d.left + x * +d.cellW) * s), py = Math.round((+d.top + y * +d.cellH + Math.floor(+d.cellH / 2)) * s);
    const i = (py * c.width + px) * 4;
    out.push([img[i], img[i + 1], img[i + 2], img[i + 3]]);
  }
  return out; })()`

// requireHeatCells checks the heat map as drawn: every measured cell in
// its utilisation's colour on the scale (yellow 0 %, salmon 50 %, red
// 100 %), every held but unmeasured one grey, every other one the row's pale band.
func requireHeatCells(t *testing.T, tb *tab, hm reads.HeatmapReport) {
	t.Helper()
	px := eval[[][4]int](tb, fmt.Sprintf(heatCellsJS, len(hm.Rows), len(hm.Hours)))
	require.Len(t, px, len(hm.Rows)*len(hm.Hours))
	stops := [3][3]float64{{0xf6, 0xef, 0xa6}, {0xd8, 0x82, 0x73}, {0xbf, 0x44, 0x4c}}
	for y, r := range hm.Rows {
		for x, u := range r.Util {
			got, want := px[y*len(hm.Hours)+x], [4]int{0xf1, 0xf3, 0xf4, 255}
			switch {
			case u != "":
				v := math.Min(100, math.Max(0, mustFloat(t, u))) / 50
				i := min(1, int(v))
				for k := range 3 {
					want[k] = int(math.Round(stops[i][k] + (stops[i+1][k]-stops[i][k])*(v-float64(i))))
				}
				want[3] = 255
			case r.HeldUnmeasuredSeconds[x] > 0:
				want = [4]int{0x9a, 0xa0, 0xa6, 255}
			}
			require.Equal(t, want, got, "row %d (%s), hour %s, util %q", y, r.First, hm.Hours[x], u)
		}
	}
}

// heatTip is the heat map's tooltip with the pointer over cell (y, x).
func heatTip(tb *tab, y, x int) string {
	tb.tb.Helper()
	return eval[string](tb, fmt.Sprintf(`(() => {
  const c = document.getElementById('heatmap-canvas'), d = c.dataset, r = c.getBoundingClientRect();
  c.dispatchEvent(new MouseEvent('mousemove', { clientX: r.left + +d.left + (%d + 0.5) * +d.cellW, clientY: r.top + +d.top + (%d + 0.5) * +d.cellH }));
  return document.querySelector('#chart-heatmap .heat-tip').textContent; })()`, x, y))
}

func mustFloat(tb testing.TB, s string) float64 {
	tb.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(tb, err)
	return f
}
