//go:build !collector

package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
)

// effTexts are the efficiency page's column headers in one language.
var effTexts = map[string]struct {
	occ, cells []string
	total      string
	unmeasured string
}{
	"en": {[]string{"GPU model", "Available instance-hours", "Held instance-hours", "Occupancy (%)"},
		[]string{"Node", "Hour", "Held instance-hours", "Measured instance-hours", "Utilisation (%)"}, "Total", "held, not measured"},
	"zh-CN": {[]string{"GPU 型号", "可用实例小时", "占用实例小时", "占用率（%）"},
		[]string{"节点", "小时", "占用实例小时", "已测量实例小时", "利用率（%）"}, "合计", "占用但未测量"},
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
	require.NotEmpty(t, hm.Cells)
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

			header, cells = tableCells(tb, "heatmap-table")
			require.Equal(t, x.cells, header)
			require.Len(t, cells, len(hm.Cells))
			var measured, unmeasured int
			for i, c := range hm.Cells {
				util := c.Util
				switch {
				case util != "":
					measured++
				case c.HeldSeconds > 0:
					util = x.unmeasured
					unmeasured++
				default:
					util = "—"
				}
				require.Equal(t, []string{c.Node, pageHours(c.HeldSeconds), billing.FormatHours(c.MeasuredSeconds), util},
					[]string{cells[i][0], cells[i][2], cells[i][3], cells[i][4]}, "cell %d", i)
			}
			// The chart: the API's nodes and hours, its measured cells' values.
			chartJS := `echarts.getInstanceByDom(document.getElementById('chart-heatmap')).getOption()`
			require.Equal(t, hm.Nodes, eval[[]string](tb, chartJS+`.yAxis[0].data`))
			require.Len(t, eval[[]string](tb, chartJS+`.xAxis[0].data`), len(hm.Hours))
			require.Equal(t, [2]int{measured, unmeasured}, eval[[2]int](tb, `(() => { const s = `+chartJS+`.series; return [s[0].data.length, s[1].data.length]; })()`))
			var utils []float64
			for _, c := range hm.Cells {
				if c.Util != "" {
					utils = append(utils, mustFloat(t, c.Util))
				}
			}
			require.Equal(t, utils, eval[[]float64](tb, chartJS+`.series[0].data.map(d => d[2])`))
			tb.screenshot(lang + "-01-efficiency")

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

func mustFloat(tb testing.TB, s string) float64 {
	tb.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(tb, err)
	return f
}
