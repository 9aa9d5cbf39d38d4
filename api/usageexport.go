package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/reads"
)

// maxUsageExportRows bounds the rows of a usage export (a sheet holds about
// a million; a report this large is a query to narrow).
const maxUsageExportRows = 100_000

type usageExportInput struct {
	UsageParams
	Format string `query:"format" enum:"csv,xlsx" default:"csv"`
	Lang   string `query:"lang" enum:"en,zh-CN" default:"en" doc:"the language of the header row and labels"`
	Limit  int    `query:"limit" minimum:"0" maximum:"100000" doc:"only the first limit rows (with order_by: a top list); 0: every row, then a total row"`
}

func (s *Server) routesUsageExport() {
	register(s, huma.Operation{OperationID: "export-usage", Method: http.MethodGet, Path: "/api/v1/usage/export", Summary: "export usage grouped (CSV or XLSX)",
		Description: "The report get-usage answers for the same parameters (period or from/to, group_by, filters, order_by; the same role scopes), as a file: " +
			"a column per group_by dimension in the order given, then card-hours, idle hours, busy hours, efficiency (percent), cost and idle cost (list price, the currency in the header), " +
			"hours and money saved by releases (saved_seconds, saved_cost), " +
			"hours with two decimals and money as decimal text (never a float), headers in lang; every row, then a total row, or with limit only the first limit rows. " +
			"The dashboard's usage tables download through it.",
		Tags: []string{"usage"}, Responses: fileResponses(FormatCSV, FormatXLSX)},
		rolesAll, s.exportUsage)
}

func (s *Server) exportUsage(ctx context.Context, in *usageExportInput) (*fileOutput, error) {
	u, err := s.usage()
	if err != nil {
		return nil, err
	}
	q, err := s.usageQuery(ctx, &in.UsageParams)
	if err != nil {
		return nil, err
	}
	rep, rows, err := s.orderedUsage(ctx, u, q, in.OrderBy)
	if err != nil {
		return nil, err
	}
	if in.Limit > 0 && len(rows) > in.Limit {
		rows = rows[:in.Limit]
	}
	if len(rows) > maxUsageExportRows {
		return nil, invalid(ctx, "query.group_by", "the report has %d rows, more than an export holds (%d): narrow the range, filter, group by fewer dimensions or give a limit",
			len(rows), maxUsageExportRows)
	}
	_, cat, err := s.currentCatalog(ctx)
	if err != nil {
		return nil, err
	}
	t := usageTable(rep, rows, in.Lang, in.Limit == 0)
	t.At = s.now()
	return tableFile(in.Format, usageFileName(in, q, cat.Location), t)
}

// tableFile is t as a CSV or XLSX download named name.format.
func tableFile(format, name string, t *export.Table) (*fileOutput, error) {
	var buf bytes.Buffer
	var err error
	if format == FormatXLSX {
		err = export.WriteTableXLSX(&buf, t)
	} else {
		err = export.WriteTableCSV(&buf, t)
	}
	if err != nil {
		return nil, err
	}
	return &fileOutput{ContentType: formatTypes[format], ContentDisposition: fmt.Sprintf(`attachment; filename="%s.%s"`, name, format), Body: buf.Bytes()}, nil
}

// usageFileName names a usage export: its period or local dates (the last
// day included), its grouping and, for a top list, its measure.
func usageFileName(in *usageExportInput, q reads.UsageQuery, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	parts := []string{"usage"}
	if in.Period != "" {
		parts = append(parts, in.Period)
	} else {
		parts = append(parts, q.From.In(loc).Format(time.DateOnly), q.To.Add(-time.Nanosecond).In(loc).Format(time.DateOnly))
	}
	parts = append(parts, q.GroupBy...)
	if in.Limit > 0 && in.OrderBy != "" {
		parts = append(parts, "top", fmt.Sprint(in.Limit), in.OrderBy)
	}
	return strings.Join(parts, "-")
}

// usageLabels are the texts of a usage export, by language: the same as the
// dashboard's (api/web/static/i18n.js, col.*).
var usageLabels = map[string]map[string]string{
	"en": {
		reads.ByProject: "Project", reads.ByUser: "Student", reads.BySKU: "SKU", reads.ByInstance: "Instance", reads.ByNode: "Node",
		reads.ByMonth: "Month", reads.ByDay: "Day", reads.ByHour: "Hour",
		"held": "Card-hours", "idle": "Idle hours", "busy": "Busy hours", "efficiency": "Efficiency (%)", "cost": "Cost ({cur})", "idle_cost": "Idle cost ({cur})",
		"saved": "Hours saved by releases", "saved_cost": "Saved by releases ({cur})",
		"total": "Total", "unpriced": "(unpriced)", "sheet": "Usage",
	},
	"zh-CN": {
		reads.ByProject: "项目", reads.ByUser: "学生", reads.BySKU: "SKU", reads.ByInstance: "实例", reads.ByNode: "节点",
		reads.ByMonth: "月份", reads.ByDay: "日期", reads.ByHour: "小时",
		"held": "卡时", "idle": "空闲小时", "busy": "忙碌小时", "efficiency": "效率（%）", "cost": "费用（{cur}）", "idle_cost": "空闲费用（{cur}）",
		"saved": "释放节省小时", "saved_cost": "释放节省（{cur}）",
		"total": "合计", "unpriced": "（未定价）", "sheet": "用量",
	},
}

// usageTable is the table of rows of rep: a column per dimension grouped
// by, in the order asked, then held, idle and busy hours, efficiency (a
// percent, reads.SetEfficiency), cost, idle cost, and the hours and money
// the releases saved (reads.AddSavings);
// with total, the report's total row last.
func usageTable(rep *reads.UsageReport, rows []reads.UsageGroup, lang string, total bool) *export.Table {
	l := usageLabels[lang]
	if l == nil {
		l = usageLabels["en"]
	}
	t := &export.Table{Sheet: l["sheet"]}
	for _, d := range rep.GroupBy {
		t.Header = append(t.Header, l[d])
		t.Numeric = append(t.Numeric, false)
	}
	for _, k := range []string{"held", "idle", "busy", "efficiency", "cost", "idle_cost", "saved", "saved_cost"} {
		t.Header = append(t.Header, strings.ReplaceAll(l[k], "{cur}", rep.Currency))
		t.Numeric = append(t.Numeric, true)
	}
	measures := func(g *reads.UsageGroup) []string {
		return []string{billing.FormatHours(g.HeldSeconds), billing.FormatHours(g.IdleSeconds),
			billing.FormatHours(g.BusySeconds), g.Efficiency, billing.FormatMoney(g.Cost.Decimal), billing.FormatMoney(g.IdleCost.Decimal),
			billing.FormatHours(g.SavedSeconds), billing.FormatMoney(g.SavedCost.Decimal)}
	}
	for i := range rows {
		g := &rows[i]
		row := make([]string, 0, len(t.Header))
		for _, d := range rep.GroupBy {
			v := groupValue(g, d)
			if v == "" && d == reads.BySKU {
				v = l["unpriced"]
			}
			row = append(row, v)
		}
		t.Rows = append(t.Rows, append(row, measures(g)...))
		t.Bold = append(t.Bold, false)
	}
	if total && len(rep.GroupBy) > 0 {
		row := make([]string, len(rep.GroupBy))
		row[0] = l["total"]
		t.Rows = append(t.Rows, append(row, measures(&rep.Total)...))
		t.Bold = append(t.Bold, true)
	}
	return t
}

// groupValue is a group's value of dimension d.
func groupValue(g *reads.UsageGroup, d string) string {
	switch d {
	case reads.ByProject:
		return g.Project
	case reads.ByUser:
		return g.User
	case reads.BySKU:
		return g.SKU
	case reads.ByInstance:
		return g.InstanceID
	case reads.ByNode:
		return g.Node
	case reads.ByMonth:
		return g.Month
	case reads.ByDay:
		return g.Day
	case reads.ByHour:
		return g.Hour
	}
	return ""
}

// orderedUsage is the usage report of q, with what the releases saved, and
// its rows in orderBy's order.
func (s *Server) orderedUsage(ctx context.Context, u Usage, q reads.UsageQuery, orderBy string) (*reads.UsageReport, []reads.UsageGroup, error) {
	rep, err := s.usageWithSavings(ctx, u, q)
	if err != nil {
		return nil, nil, err
	}
	rows, err := reads.OrderedRows(rep, orderBy)
	if err != nil {
		return nil, nil, invalid(ctx, "query.order_by", "%v", err)
	}
	return rep, rows, nil
}
