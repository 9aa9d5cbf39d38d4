//go:build !collector

package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
)

// trendSamples are the example samples with the idle slice (withIdleInstance)
// and, so that months differ, copies a month and two months back: every
// project but ai101 30 days earlier (October), nlp-lab 61 days earlier
// (September).
func trendSamples(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(withIdleInstance(tb, heldAt))
	require.NoError(tb, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	out := slices.Clone(lines)
	shift := func(l string, d time.Duration) string {
		i := strings.Index(l, `"ts":"`) + len(`"ts":"`)
		j := i + strings.IndexByte(l[i:], '"')
		ts, err := time.Parse(time.RFC3339, l[i:j])
		require.NoError(tb, err)
		return l[:i] + ts.Add(d).Format(time.RFC3339) + l[j:]
	}
	for _, l := range lines {
		if !strings.Contains(l, `"project":"ai101"`) {
			out = append(out, shift(l, -30*24*time.Hour))
		}
		if strings.Contains(l, `"project":"nlp-lab"`) {
			out = append(out, shift(l, -61*24*time.Hour))
		}
	}
	path := filepath.Join(tb.TempDir(), "trends.jsonl")
	require.NoError(tb, os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644))
	return path
}

// trendTexts are what the usage page says in one language: the export's
// headers and labels (api usageLabels, i18n.js col.*).
type trendTexts struct {
	project, student, sku, month, held, idle, busy, efficiency, cost, idleCost, total, unpriced, xlsxSheet string
	savedHours, savedCost                                                                                  string
}

var trendLang = map[string]trendTexts{
	"en": {"Project", "Student", "SKU", "Month", "Card-hours", "Idle hours", "Busy hours", "Efficiency (%)", "Cost (CNY)", "Idle cost (CNY)", "Total", "(unpriced)", "Usage",
		"Hours saved by releases", "Saved by releases (CNY)"},
	"zh-CN": {"项目", "学生", "SKU", "月份", "卡时", "空闲小时", "忙碌小时", "效率（%）", "费用（CNY）", "空闲费用（CNY）", "合计", "（未定价）", "用量",
		"释放节省小时", "释放节省（CNY）"},
}

func (x trendTexts) dim(d string) string {
	return map[string]string{"project": x.project, "user": x.student, "sku": x.sku, "month": x.month}[d]
}

// header is the header row of a usage table grouped by dims, as the page
// shows it; fileHeader as its export has it (the saved hours too).
func (x trendTexts) header(dims ...string) []string {
	var out []string
	for _, d := range dims {
		out = append(out, x.dim(d))
	}
	return append(out, x.held, x.idle, x.busy, x.efficiency, x.cost, x.idleCost, x.savedCost)
}

func (x trendTexts) fileHeader(dims ...string) []string {
	out := x.header(dims...)
	return append(out[:len(out)-1], x.savedHours, x.savedCost)
}

// pageMoney and pageHours are how the page writes money and hours.
func pageMoney(m billing.Money) string { return "¥\u00a0" + groupThousands(m.StringFixed(2)) }
func pageHours(s int64) string         { return groupThousands(billing.FormatHours(s)) }

// pagePct is how the page writes a percent of the API ("—" when absent).
func pagePct(p string) string {
	if p == "" {
		return "—"
	}
	return p
}

// groupKey is a row's value of dimension d, as the page and the export
// write it.
func (x trendTexts) groupKey(r api.UsagePage, i int, d string) string {
	g := r.Rows[i]
	v := map[string]string{"project": g.Project, "user": g.User, "sku": g.SKU, "month": g.Month}[d]
	if v == "" && d == "sku" {
		return x.unpriced
	}
	return v
}

// pageCells are the cells the page shows for rep grouped by dims; with
// total, its footer row last.
func (x trendTexts) pageCells(rep api.UsagePage, dims []string, total bool) [][]string {
	var out [][]string
	for i, g := range rep.Rows {
		var row []string
		for _, d := range dims {
			row = append(row, x.groupKey(rep, i, d))
		}
		out = append(out, append(row, pageHours(g.HeldSeconds), pageHours(g.IdleSeconds), pageHours(g.BusySeconds), pagePct(g.Efficiency), pageMoney(g.Cost), pageMoney(g.IdleCost),
			pageMoney(g.SavedCost)))
	}
	if total {
		row := make([]string, len(dims))
		row[0] = x.total
		out = append(out, append(row, pageHours(rep.Total.HeldSeconds), pageHours(rep.Total.IdleSeconds), pageHours(rep.Total.BusySeconds), pagePct(rep.Total.Efficiency),
			pageMoney(rep.Total.Cost), pageMoney(rep.Total.IdleCost), pageMoney(rep.Total.SavedCost)))
	}
	return out
}

// fileCells are the cells an export has for rep: hours and money as
// decimal text, ungrouped.
func (x trendTexts) fileCells(rep api.UsagePage, dims []string, total bool) [][]string {
	out := [][]string{x.fileHeader(dims...)}
	for i, g := range rep.Rows {
		var row []string
		for _, d := range dims {
			row = append(row, x.groupKey(rep, i, d))
		}
		out = append(out, append(row, billing.FormatHours(g.HeldSeconds), billing.FormatHours(g.IdleSeconds), billing.FormatHours(g.BusySeconds), g.Efficiency,
			g.Cost.StringFixed(2), g.IdleCost.StringFixed(2), billing.FormatHours(g.SavedSeconds), g.SavedCost.StringFixed(2)))
	}
	if total {
		row := make([]string, len(dims))
		row[0] = x.total
		out = append(out, append(row, billing.FormatHours(rep.Total.HeldSeconds), billing.FormatHours(rep.Total.IdleSeconds),
			billing.FormatHours(rep.Total.BusySeconds), rep.Total.Efficiency, rep.Total.Cost.StringFixed(2), rep.Total.IdleCost.StringFixed(2),
			billing.FormatHours(rep.Total.SavedSeconds), rep.Total.SavedCost.StringFixed(2)))
	}
	return out
}

// tableCells are a table's header and its body and footer rows, each cell's text.
func tableCells(tb *tab, id string) (header []string, rows [][]string) {
	tb.tb.Helper()
	header = eval[[]string](tb, fmt.Sprintf(`[...document.querySelectorAll('#%s thead th')].map(c => c.textContent.trim())`, id))
	rows = eval[[][]string](tb, fmt.Sprintf(`[...document.querySelectorAll('#%s tbody tr, #%s tfoot tr')].map(tr => [...tr.children].map(c => c.textContent.trim()))`, id, id))
	return header, rows
}

// usageRequests are the queries of the usage reads the page made since the
// last reset whose group_by is groupBy.
func (t *tab) usageRequests(groupBy string) []url.Values {
	t.tb.Helper()
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []url.Values
	for _, r := range t.apiResps {
		u, err := url.Parse(r.url)
		require.NoError(t.tb, err)
		if u.Path == "/api/v1/usage" && u.Query().Get("group_by") == groupBy {
			require.EqualValues(t.tb, 200, r.status, r.url)
			out = append(out, u.Query())
		}
	}
	return out
}

func (t *tab) resetRequests() {
	t.mu.Lock()
	t.apiResps = nil
	t.mu.Unlock()
}

// freshRoute runs act (a click, a form) and waits until the usage page has
// rendered again.
func (t *tab) freshRoute(act chromedp.Action[chromedp.Void]) {
	t.tb.Helper()
	t.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('page-usage').dataset.old = '1'`), act,
		chromedp.WaitVisible(chromedp.CSS(`#page-usage[data-ready="true"]:not([data-old])`)))
}

// csvCells reads a downloaded CSV: its byte-order mark off, IDs without their text mark.
func csvCells(tb testing.TB, path string) [][]string {
	tb.Helper()
	b, err := os.ReadFile(path)
	require.NoError(tb, err)
	s, ok := strings.CutPrefix(string(b), "\uFEFF")
	require.True(tb, ok, "a byte-order mark")
	rows, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	require.NoError(tb, err)
	for _, r := range rows {
		for i, c := range r {
			r[i] = strings.TrimPrefix(c, "'")
		}
	}
	return rows
}

func xlsxCells(tb testing.TB, path, sheet string) [][]string {
	tb.Helper()
	x, err := excelize.OpenFile(path)
	require.NoError(tb, err)
	defer x.Close() //nolint:errcheck // read only
	require.Equal(tb, []string{sheet}, x.GetSheetList())
	rows, err := x.GetRows(sheet, excelize.Options{RawCellValue: true})
	require.NoError(tb, err)
	return rows
}

// apiUsage reads the report of q (every row) as token.
func (d *dashServer) apiUsage(tb testing.TB, token string, q url.Values) api.UsagePage {
	tb.Helper()
	q = cloneValues(q)
	if q.Get("limit") == "" {
		q.Set("limit", "1000")
	}
	q.Del("cursor")
	var p api.UsagePage
	d.apiGet(tb, token, "/api/v1/usage?"+q.Encode(), &p)
	return p
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	return out
}

func TestDashboardTrends(t *testing.T) {
	chromium := needChromium(t)
	ds := startDashboard(t, trendSamples(t), heldAt, afterNovember, map[string]ledger.NewToken{
		"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
		"lead":    {Role: ledger.RoleLead, Project: "nlp-lab", TTL: time.Hour},
		"student": {Role: ledger.RoleStudent, Project: "ai101", User: "2026010203", TTL: time.Hour},
	})
	releaseAt(t, ds, releasedSlice, time.Date(2026, 11, 18, 15, 0, 0, 0, shanghai))
	shots := artifactDir(t, "dashboard-trends")
	for _, lang := range []string{"en", "zh-CN"} {
		t.Run(lang, func(t *testing.T) {
			x := trendLang[lang]
			tb := langTab(t, chromium, shots, lang)
			tb.login(ds.base, ds.tokens["finance"])
			tb.resetRequests()
			tb.route("#/usage?period=2026-11", "usage")
			trendsMonthOverMonth(t, ds, tb, x, lang)
			trendsTopLists(t, ds, tb, x, lang)
			trendsRange(t, ds, tb, x, lang)
			trendsSavings(t, ds, tb, x, lang)
			trendsScopes(t, ds, chromium, shots, x, lang)
		})
	}
}

// The month over month table shows the API's report of the twelve months
// to November (local months: from 1 December 2025 00:00 in Shanghai), per
// project and per SKU, and downloads as a CSV of the same numbers.
func trendsMonthOverMonth(t *testing.T, ds *dashServer, tb *tab, x trendTexts, lang string) {
	fin := ds.tokens["finance"]
	for _, dim := range []string{"project", "sku"} {
		if dim == "sku" {
			tb.resetRequests()
			tb.freshRoute(chromedp.Click(chromedp.CSS(`#mom-by a[data-value="sku"]`)))
		}
		reqs := tb.usageRequests(dim + ",month")
		require.Len(t, reqs, 1, "one month-over-month read by %s", dim)
		q := reqs[0]
		require.Equal(t, "2025-11-30T16:00:00Z", q.Get("from"), "1 December 2025 in Shanghai")
		require.Equal(t, "2026-11-30T16:00:00Z", q.Get("to"), "1 December 2026 in Shanghai")
		rep := ds.apiUsage(t, fin, q)
		months := map[string]bool{}
		for _, r := range rep.Rows {
			months[r.Month] = true
		}
		require.Equal(t, map[string]bool{"2026-09": true, "2026-10": true, "2026-11": true}, months, "the months with usage")
		header, cells := tableCells(tb, "mom-table")
		require.Equal(t, x.header(dim, "month"), header)
		require.Equal(t, x.pageCells(rep, []string{dim, "month"}, true), cells)
		// The chart's months are the twelve, its bars the table's numbers.
		require.Equal(t, 12, eval[int](tb, `echarts.getInstanceByDom(document.getElementById('chart-mom')).getOption().xAxis[0].data.length`))
		sums := eval[[]float64](tb, `echarts.getInstanceByDom(document.getElementById('chart-mom')).getOption().series.map(s => s.data.reduce((a, b) => a + b, 0))`)
		var sum float64
		for _, s := range sums {
			sum += s
		}
		require.InDelta(t, rep.Total.Cost.InexactFloat64(), sum, 0.01*float64(len(sums)*12))
		if dim == "project" {
			tb.screenshot(lang + "-01-usage-month")
			tb.do(chromedp.ScrollIntoView(chromedp.CSS("#usage-mom")))
			tb.screenshot(lang + "-02-month-over-month")
		}
		tb.do(chromedp.Click(chromedp.CSS("#mom-table-csv")))
		name, path := tb.download()
		require.Equal(t, "usage-2025-12-01-2026-11-30-"+dim+"-month.csv", name)
		require.Equal(t, x.fileCells(rep, []string{dim, "month"}, true), csvCells(t, path))
	}
}

// The top lists show the API's top ten of the same range by each measure,
// largest first, and download as an XLSX of the same numbers.
func trendsTopLists(t *testing.T, ds *dashServer, tb *tab, x trendTexts, lang string) {
	fin := ds.tokens["finance"]
	for _, m := range []string{"cost", "idle_cost", "held_seconds"} {
		if m != "cost" { // cost: the page as it opened (its last render, by SKU)
			tb.resetRequests()
			tb.freshRoute(chromedp.Click(chromedp.CSS(`#top-by a[data-value="` + m + `"]`)))
			require.Contains(t, eval[string](tb, `location.hash`), "top="+m)
		}
		for _, d := range []string{"user", "project"} {
			reqs := tb.usageRequests(d)
			var q url.Values
			for _, r := range reqs {
				if r.Get("order_by") == m && r.Get("limit") == "10" { // not the project table's pages
					q = r
				}
			}
			require.NotNil(t, q, "the top %s by %s: %v", d, m, reqs)
			require.Equal(t, "2026-11", q.Get("period"))
			require.Equal(t, "10", q.Get("limit"))
			rep := ds.apiUsage(t, fin, q)
			require.NotEmpty(t, rep.Rows)
			require.LessOrEqual(t, len(rep.Rows), 10)
			for i := 1; i < len(rep.Rows); i++ {
				a, b := rep.Rows[i-1], rep.Rows[i]
				switch m {
				case "cost":
					require.True(t, a.Cost.GreaterThanOrEqual(b.Cost.Decimal))
				case "idle_cost":
					require.True(t, a.IdleCost.GreaterThanOrEqual(b.IdleCost.Decimal))
				default:
					require.GreaterOrEqual(t, a.HeldSeconds, b.HeldSeconds)
				}
			}
			header, cells := tableCells(tb, "top-"+d)
			require.Equal(t, x.header(d), header)
			require.Equal(t, x.pageCells(rep, []string{d}, false), cells, "top %s by %s", d, m)
			if m == "idle_cost" && d == "user" {
				require.True(t, rep.Rows[0].IdleCost.IsPositive(), "someone was idle")
				tb.do(chromedp.Click(chromedp.CSS("#top-user-xlsx")))
				name, path := tb.download()
				require.Equal(t, "usage-2026-11-user-top-10-idle_cost.xlsx", name)
				require.Equal(t, x.fileCells(rep, []string{"user"}, false), xlsxCells(t, path, x.xlsxSheet))
			}
		}
		if m == "idle_cost" {
			tb.do(chromedp.ScrollIntoView(chromedp.CSS("#usage-top")))
			tb.screenshot(lang + "-03-top-idle-cost")
		}
	}
}

// The date inputs change the request: 3 to 17 November (local days, both
// included) are read from 3 November 00:00 to 18 November 00:00 in
// Shanghai; the tables show the API's report of that range and download it.
func trendsRange(t *testing.T, ds *dashServer, tb *tab, x trendTexts, lang string) {
	fin := ds.tokens["finance"]
	tb.resetRequests()
	tb.freshRoute(chromedp.Steps(chromedp.SetValue(chromedp.CSS("#range-from"), "2026-11-03"), chromedp.SetValue(chromedp.CSS("#range-to"), "2026-11-17"),
		chromedp.Click(chromedp.CSS("#range-apply"))))
	hash := eval[string](tb, `location.hash`)
	require.Contains(t, hash, "from=2026-11-03")
	require.Contains(t, hash, "to=2026-11-17")
	require.NotContains(t, hash, "period=")
	reqs := tb.usageRequests("project")
	require.NotEmpty(t, reqs)
	var split url.Values
	for _, q := range reqs {
		require.Equal(t, "2026-11-02T16:00:00Z", q.Get("from"), "3 November in Shanghai")
		require.Equal(t, "2026-11-17T16:00:00Z", q.Get("to"), "18 November in Shanghai, the 17th included")
		require.Empty(t, q.Get("period"))
		if q.Get("limit") == "" || q.Get("limit") == "1000" {
			split = q
		}
	}
	require.NotNil(t, split, "the range's table: %v", reqs)
	rep := ds.apiUsage(t, fin, split)
	month := ds.apiUsage(t, fin, url.Values{"period": {"2026-11"}, "group_by": {"project"}})
	require.True(t, rep.Total.Cost.LessThan(month.Total.Cost.Decimal), "the range is part of the month")
	header, cells := tableCells(tb, "usage-table")
	require.Equal(t, x.header("project"), header, "the table's columns (and no Invoiced column for a range of days): %s",
		eval[string](tb, `document.querySelector('#usage-table thead').outerHTML`))
	require.Equal(t, x.pageCells(rep, []string{"project"}, true), cells)
	require.Contains(t, eval[string](tb, `document.getElementById('usage-total').innerText`), pageMoney(rep.Total.Cost))
	require.Zero(t, eval[int](tb, `document.querySelectorAll('#usage-invoiced').length`))
	tb.do(chromedp.Click(chromedp.CSS("#usage-table-xlsx")))
	name, path := tb.download()
	require.Equal(t, "usage-2026-11-03-2026-11-17-project.xlsx", name)
	require.Equal(t, x.fileCells(rep, []string{"project"}, true), xlsxCells(t, path, x.xlsxSheet))
	// Its top students read the same range.
	top := tb.usageRequests("user")
	require.Len(t, top, 1)
	require.Equal(t, "2026-11-02T16:00:00Z", top[0].Get("from"))
	_, cells = tableCells(tb, "top-user")
	require.Equal(t, x.pageCells(ds.apiUsage(t, fin, top[0]), []string{"user"}, false), cells)
	tb.do(chromedp.ScrollIntoView(chromedp.CSS("#page-usage")))
	tb.screenshot(lang + "-04-usage-range")
	// A first day after the last is refused before any request.
	tb.resetRequests()
	tb.do(chromedp.SetValue(chromedp.CSS("#range-from"), "2026-11-20"), chromedp.Click(chromedp.CSS("#range-apply")),
		chromedp.WaitVisible(chromedp.CSS("#range-error")))
	require.NotEmpty(t, eval[string](tb, `document.getElementById('range-error').textContent`))
	require.Empty(t, tb.usageRequests("project"))
}

// A lead's trends and top students are their project's; a student's top
// list is their own usage by project (no top students), as the API scopes
// them.
func trendsScopes(t *testing.T, ds *dashServer, chromium, shots string, x trendTexts, lang string) {
	lt := langTab(t, chromium, shots, lang)
	lt.login(ds.base, ds.tokens["lead"])
	lt.resetRequests()
	lt.route("#/usage?period=2026-11", "usage")
	q := lt.usageRequests("project,month")
	require.Len(t, q, 1)
	rep := ds.apiUsage(t, ds.tokens["lead"], q[0])
	for _, r := range rep.Rows {
		require.Equal(t, "nlp-lab", r.Project)
	}
	_, cells := tableCells(lt, "mom-table")
	require.Equal(t, x.pageCells(rep, []string{"project", "month"}, true), cells)
	require.Zero(t, eval[int](lt, `document.querySelectorAll('#top-project').length`), "a lead's one project needs no top list")
	top := lt.usageRequests("user")
	require.Len(t, top, 1)
	_, cells = tableCells(lt, "top-user")
	require.Equal(t, x.pageCells(ds.apiUsage(t, ds.tokens["lead"], top[0]), []string{"user"}, false), cells)
	for _, c := range cells {
		require.Contains(t, []string{"2023110042", "2023110077", "2024210015"}, c[0], "nlp-lab's students only")
	}
	lt.screenshot(lang + "-05-lead-usage")

	st := langTab(t, chromium, shots, lang)
	st.login(ds.base, ds.tokens["student"])
	st.resetRequests()
	st.route("#/usage?period=2026-11", "usage")
	require.Zero(t, eval[int](st, `document.querySelectorAll('#top-user').length`))
	top = st.usageRequests("project")
	var own url.Values
	for _, r := range top {
		if r.Get("limit") == "10" {
			own = r
		}
	}
	require.NotNil(t, own)
	mine := ds.apiUsage(t, ds.tokens["student"], own)
	_, cells = tableCells(st, "top-project")
	require.Equal(t, x.pageCells(mine, []string{"project"}, false), cells)
	total := decimal.Zero
	for _, r := range mine.Rows {
		total = total.Add(r.Cost.Decimal)
	}
	require.True(t, total.Equal(mine.Total.Cost.Decimal), "only the student's own usage")
	for u, b := range st.bodies() {
		require.NotContains(t, b, "2026010204", "another student in %s", u)
	}
	st.screenshot(lang + "-06-student-usage")
}

// releasedSlice is the example's ai101 slice of student 2026010203 (held
// 14:00 to 15:00 on 18 November, Shanghai; the student holds nothing after).
var releasedSlice = ledger.NewRelease{Key: "MIG-55555555-eeee-4000-8000-000000000001|test", InstanceID: "MIG-55555555-eeee-4000-8000-000000000001",
	Node: "gpu-node-05", Project: "ai101", User: "2026010203", StreakStart: time.Date(2026, 11, 18, 14, 0, 0, 0, shanghai)}

// releaseAt records r as released (done) at at, through a second handle
// on the dashboard's state store whose clock reads at.
func releaseAt(tb testing.TB, ds *dashServer, r ledger.NewRelease, at time.Time) {
	tb.Helper()
	ctx := context.Background()
	led, err := ledgerdsn.Open(ctx, ds.store, ledgerdsn.Options{Clock: func() time.Time { return at }})
	require.NoError(tb, err)
	defer led.Close() //nolint:errcheck // the test's second handle
	rel, started, err := led.BeginRelease(ctx, "watch", r)
	require.NoError(tb, err)
	require.True(tb, started)
	_, err = led.FinishRelease(ctx, "watch", rel.ID, ledger.ReleaseResult{Status: billing.ReleaseDone, Action: "deleted pod ai101/nb-0"})
	require.NoError(tb, err)
}

// The release saved the time from 15:00 until the usage reads' now (heldAt,
// 16:29:30; the student did not come back) at the slice's list price: the
// page's sentence, its column and the download show the API's numbers, by
// project and by student, and rank the top list by them.
func trendsSavings(t *testing.T, ds *dashServer, tb *tab, x trendTexts, lang string) {
	fin := ds.tokens["finance"]
	tb.resetRequests()
	tb.route("#/usage?period=2026-11&top=saved_cost", "usage")
	var split url.Values
	for _, q := range tb.usageRequests("project") {
		if q.Get("limit") != "10" {
			split = q
		}
	}
	require.NotNil(t, split, "the month's table by project")
	rep := ds.apiUsage(t, fin, split)
	require.Equal(t, int64(5370), rep.Total.SavedSeconds, "15:00 to 16:29:30")
	require.Equal(t, "2.69", rep.Total.SavedCost.StringFixed(2), "1.49 h at 1.80 an hour")
	require.NotEmpty(t, rep.SavingsAssumption)
	require.Equal(t, int64(30*24*3600), rep.SavingsHorizonSeconds)
	_, cells := tableCells(tb, "usage-table")
	for i := range cells { // less the Invoiced column, the month's drafts (none here)
		cells[i] = cells[i][:len(cells[i])-1]
	}
	require.Equal(t, x.pageCells(rep, []string{"project"}, true), cells)
	text := eval[string](tb, `document.getElementById('usage-savings').innerText`)
	require.Contains(t, text, pageMoney(rep.Total.SavedCost))
	require.Contains(t, text, pageHours(rep.Total.SavedSeconds))
	require.Contains(t, text, "30", "the horizon in days")
	var top url.Values
	for _, q := range tb.usageRequests("user") {
		if q.Get("order_by") == "saved_cost" {
			top = q
		}
	}
	require.NotNil(t, top, "the top students by saved cost")
	users := ds.apiUsage(t, fin, top)
	require.Equal(t, "2026010203", users.Rows[0].User)
	_, cells = tableCells(tb, "top-user")
	require.Equal(t, x.pageCells(users, []string{"user"}, false), cells)
	tb.do(chromedp.Click(chromedp.CSS("#top-user-csv")))
	name, path := tb.download()
	require.Equal(t, "usage-2026-11-user-top-10-saved_cost.csv", name)
	require.Equal(t, x.fileCells(users, []string{"user"}, false), csvCells(t, path))
	tb.do(chromedp.ScrollIntoView(chromedp.CSS("#usage-savings")))
	tb.screenshot(lang + "-05-savings")
}
