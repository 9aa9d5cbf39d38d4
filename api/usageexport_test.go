package api_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/reads"
)

// October and November in the catalog's zone (Asia/Shanghai).
const octNov = "from=2026-10-01T00:00:00%2B08:00&to=2026-12-01T00:00:00%2B08:00"

func (f *fixture) usagePage(t *testing.T, role, query string) api.UsagePage {
	t.Helper()
	r := f.do(role, http.MethodGet, "/api/v1/usage?"+query, "", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	var p api.UsagePage
	require.NoError(t, json.Unmarshal(r.Body, &p))
	return p
}

// Grouped by month, the rows name the month; ordered by a measure, largest
// first, and paged: the first page is the top list.
func TestUsageByMonthAndOrderBy(t *testing.T) {
	f := newFixture(t)
	p := f.usagePage(t, "finance", octNov+"&group_by=month,project")
	var got [][2]string
	for _, r := range p.Rows {
		got = append(got, [2]string{r.Project, r.Month})
	}
	require.Equal(t, [][2]string{{"ai101", "2026-10"}, {"ai101", "2026-11"}, {"nlp-lab", "2026-11"}}, got)

	top := f.usagePage(t, "finance", octNov+"&group_by=user&order_by=cost&limit=2")
	require.Len(t, top.Rows, 2)
	require.Equal(t, []string{"s-carol", "s-alice"}, []string{top.Rows[0].User, top.Rows[1].User})
	require.NotEmpty(t, top.NextCursor)
	idle := f.usagePage(t, "finance", octNov+"&group_by=user&order_by=idle_seconds")
	require.Equal(t, []string{"s-alice", "s-bob", "s-carol"}, []string{idle.Rows[0].User, idle.Rows[1].User, idle.Rows[2].User})
	require.Equal(t, "0.52", idle.Rows[1].IdleCost.StringFixed(2), "1,854 s at 1/h")

	r := f.do("finance", http.MethodGet, "/api/v1/usage?"+octNov+"&order_by=price", "", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
	r = f.do("finance", http.MethodGet, "/api/v1/usage?"+octNov+"&group_by=week", "", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
}

// export is a usage export's status, file name and cells (a CSV's, or an
// XLSX's only sheet's), IDs as they are (the CSV's text mark taken off).
func (f *fixture) export(t *testing.T, role, query string) (int, string, [][]string) {
	t.Helper()
	r := f.do(role, http.MethodGet, "/api/v1/usage/export?"+query, "", "")
	if r.Status != http.StatusOK {
		return r.Status, string(r.Body), nil
	}
	name := strings.TrimSuffix(strings.TrimPrefix(r.Header.Get("Content-Disposition"), `attachment; filename="`), `"`)
	if strings.HasSuffix(name, ".xlsx") {
		require.Equal(t, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", r.Header.Get("Content-Type"))
		x, err := excelize.OpenReader(bytes.NewReader(r.Body))
		require.NoError(t, err)
		defer x.Close() //nolint:errcheck // read only
		sheets := x.GetSheetList()
		require.Len(t, sheets, 1)
		rows, err := x.GetRows(sheets[0], excelize.Options{RawCellValue: true})
		require.NoError(t, err)
		return r.Status, name + " " + sheets[0], rows
	}
	require.Equal(t, "text/csv; charset=utf-8", r.Header.Get("Content-Type"))
	require.True(t, bytes.HasPrefix(r.Body, []byte("\uFEFF")), "a byte-order mark")
	require.Contains(t, string(r.Body), "\r\n")
	rows, err := csv.NewReader(bytes.NewReader(r.Body[3:])).ReadAll()
	require.NoError(t, err)
	for _, row := range rows {
		for i, c := range row {
			row[i] = strings.TrimPrefix(c, "'")
		}
	}
	return r.Status, name, rows
}

// reportCells are the cells an export of p has: its rows, then, with
// total, its total row.
func reportCells(p api.UsagePage, total bool) [][]string {
	var out [][]string
	cells := func(g reads.UsageGroup, dims []string) []string {
		return append(dims, billing.FormatHours(g.HeldSeconds), billing.FormatHours(g.IdleSeconds),
			billing.FormatHours(g.BusySeconds), g.Efficiency, billing.FormatMoney(g.Cost.Decimal), billing.FormatMoney(g.IdleCost.Decimal),
			billing.FormatHours(g.SavedSeconds), billing.FormatMoney(g.SavedCost.Decimal))
	}
	for _, g := range p.Rows {
		var dims []string
		for _, d := range p.GroupBy {
			dims = append(dims, map[string]string{"month": g.Month, "project": g.Project, "user": g.User, "sku": g.SKU}[d])
		}
		out = append(out, cells(g, dims))
	}
	if total {
		dims := make([]string, len(p.GroupBy))
		dims[0] = "Total"
		out = append(out, cells(p.Total, dims))
	}
	return out
}

// An export is the report of the same request: a column per dimension in
// the order asked, hours and money as decimal text, a total row; headers in
// English or Chinese; CSV and XLSX alike.
func TestUsageExportIsTheReport(t *testing.T) {
	f := newFixture(t)
	q := octNov + "&group_by=month,user"
	p := f.usagePage(t, "finance", q)
	st, name, rows := f.export(t, "finance", q+"&format=csv")
	require.Equal(t, http.StatusOK, st, name)
	require.Equal(t, "usage-2026-10-01-2026-11-30-month-user.csv", name)
	require.Equal(t, []string{"Month", "Student", "Card-hours", "Idle hours", "Busy hours", "Efficiency (%)", "Cost (CNY)", "Idle cost (CNY)",
		"Hours saved by releases", "Saved by releases (CNY)"}, rows[0])
	require.Equal(t, reportCells(p, true), rows[1:])
	require.Contains(t, rows, []string{"2026-11", "s-bob", "1.00", "0.52", "0.49", "48.5", "1.00", "0.52", "0.00", "0.00"}, "1,854 s idle: 0.515 h, half up; 1,746 s busy: 48.5 %")

	st, name, rows = f.export(t, "finance", q+"&format=xlsx&lang=zh-CN")
	require.Equal(t, http.StatusOK, st, name)
	require.Equal(t, "usage-2026-10-01-2026-11-30-month-user.xlsx 用量", name)
	require.Equal(t, []string{"月份", "学生", "卡时", "空闲小时", "忙碌小时", "效率（%）", "费用（CNY）", "空闲费用（CNY）", "释放节省小时", "释放节省（CNY）"}, rows[0])
	want := reportCells(p, true)
	want[len(want)-1][0] = "合计"
	require.Equal(t, want, rows[1:])

	// A period, ordered, and the top one only: no total row.
	q = "period=2026-11&group_by=project&order_by=cost"
	p = f.usagePage(t, "finance", q+"&limit=1")
	st, name, rows = f.export(t, "finance", q+"&limit=1&format=xlsx")
	require.Equal(t, http.StatusOK, st, name)
	require.Equal(t, "usage-2026-11-project-top-1-cost.xlsx Usage", name)
	require.Equal(t, reportCells(p, false), rows[1:])
	require.Equal(t, "nlp-lab", rows[1][0])

	st, body, _ := f.export(t, "finance", q+"&format=pdf")
	require.Equal(t, http.StatusUnprocessableEntity, st, body)
	st, body, _ = f.export(t, "finance", q+"&lang=fr")
	require.Equal(t, http.StatusUnprocessableEntity, st, body)
}

// An export is scoped as the report is: a student's rows are its own, a
// lead's its project's; another student's are refused.
func TestUsageExportScopes(t *testing.T) {
	f := newFixture(t)
	q := octNov + "&group_by=project,user&format=csv"
	_, _, rows := f.export(t, "student", q)
	require.Equal(t, []string{"ai101", "s-alice"}, rows[1][:2])
	require.Equal(t, "Total", rows[2][0])
	require.Len(t, rows, 3)
	require.Equal(t, reportCells(f.usagePage(t, "student", octNov+"&group_by=project,user"), true), rows[1:])
	_, _, rows = f.export(t, "lead", q)
	for _, r := range rows[1 : len(rows)-1] {
		require.Equal(t, "ai101", r[0])
	}
	require.Len(t, rows, 4)
	st, body, _ := f.export(t, "student", q+"&user=s-bob")
	require.Equal(t, http.StatusForbidden, st, body)
	st, body, _ = f.export(t, "lead", q+"&project=nlp-lab")
	require.Equal(t, http.StatusForbidden, st, body)
	st, body, _ = f.export(t, "", q)
	require.Equal(t, http.StatusUnauthorized, st, body)
}

// A cell that looks like a formula or a number is text in both files.
func TestUsageExportKeepsIDsAsText(t *testing.T) {
	f := newFixture(t)
	f.usage.rows = append(f.usage.rows, reads.UsageGroup{Project: "ai101", User: "=HYPERLINK(\"x\")", SKU: "a100-1g.10gb", Day: "2026-11-05", HeldSeconds: 3600},
		reads.UsageGroup{Project: "ai101", User: "0042", SKU: "a100-1g.10gb", Day: "2026-11-05", HeldSeconds: 3600})
	r := f.do("finance", http.MethodGet, "/api/v1/usage/export?period=2026-11&group_by=user&format=csv", "", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), "'0042,")
	require.Contains(t, string(r.Body), `"'=HYPERLINK(""x"")"`)
	_, _, rows := f.export(t, "finance", "period=2026-11&group_by=user&format=xlsx&"+url.Values{"user": {"0042"}}.Encode())
	require.Equal(t, "0042", rows[1][0])
}
