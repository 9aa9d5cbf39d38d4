package export

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
)

// Review is the monthly review (月度复盘) of a month as WritePDFReview draws
// it: the API's review (GET /api/v1/review) with its texts in one language.
// Every number is given; the PDF only formats them.
type Review struct {
	Lang     string    // "en" or "zh-CN"
	Period   string    // YYYY-MM
	From, To time.Time // the month, To excluded, in the catalog's zone
	Currency string
	Projects []ReviewRow
	Total    ReviewRow // the sum of the projects (Project empty)
	// SavingsAssumption says how the saved figures are estimated, and
	// AdviceAssumption what the advice assumes, both in Lang; AdviceFrom is
	// the advice window's first month.
	SavingsAssumption string
	AdviceAssumption  string
	AdviceFrom        string
	GeneratedAt       time.Time
}

// ReviewRow is one project's month (or the total).
type ReviewRow struct {
	Project, Name, Funding string
	Invoiced               *decimal.Decimal // nil: no invoice yet
	Drafts                 int
	ListCost, IdleCost     decimal.Decimal
	HeldSeconds            int64
	IdleSeconds            int64
	Efficiency             string // busy ÷ held, percent; "" when nothing was held
	SavedSeconds           int64
	SavedCost              decimal.Decimal
	AdviceSaving           decimal.Decimal
	Budgets                []ReviewBudget
	Advice                 []ReviewAdvice
	Underused              []ReviewUnderused
}

// ReviewBudget is a monthly project budget at the month's end.
type ReviewBudget struct {
	Unit    string // billing.BudgetMoney or billing.BudgetCardHours
	Limit   string
	Used    string // "": a money budget of a month not billed yet
	Percent int64
	Reached bool
}

// ReviewAdvice is the advice for one SKU, its text in the review's language.
type ReviewAdvice struct{ SKU, Saving, Text string }

// ReviewUnderused is a reservation that covered little of its hours.
type ReviewUnderused struct{ SKU, Coverage, Unused string }

// reviewText are the review PDF's texts, by language; the review page's
// (api/web/static/i18n.js, rev.* and col.*).
var reviewText = map[string]map[string]string{
	"en": {
		"title": "Monthly review {period}", "period": "{from} to {to} ({zone}) · currency {cur}",
		"project": "Project", "name": "Name", "funding": "Funding code", "invoiced": "Invoiced ({cur})", "list": "List price ({cur})", "idleCost": "Idle cost ({cur})",
		"held": "Card-hours", "idle": "Idle hours", "efficiency": "Efficiency (%)", "savedHours": "Hours saved by releases",
		"saved": "Saved by releases ({cur})", "total": "Total", "notBilled": "not billed yet", "drafts": "{n} draft(s)",
		"savings": "Saved by releases", "assumed": "Assumed: {text}.", "colon": ": ", "semi": "; ",
		"savedTotal": "Releases saved an estimated {cost} ({hours} card-hours) in {period}.",
		"budgets":    "Budgets at the month's end", "noBudgets": "No project has a monthly budget.",
		"budget": "{used} of {limit} · {percent} %", "budgetNotBilled": "limit {limit} · not billed yet", "reached": "limit reached",
		"hours": "{n} card-hours", "advice": "Reservation advice ({from} to {to})", "adviceSaving": "advised saving {saving}",
		"noAdvice":  "No advice: nothing ran steadily enough to reserve, and no reservation covered too little.",
		"underused": "{sku}: a reservation covered a share of {coverage} of its hours; {unused} paid for time it covered nothing.",
		"generated": "Generated at {at} by cardhour. Every figure is the API's (GET /api/v1/review?period={period}).",
		"footer":    "Monthly review {period} · {page}/{nb}",
	},
	"zh-CN": {
		"title": "{period} 月度复盘", "period": "{from} 至 {to}（{zone}）· 币种 {cur}",
		"project": "项目", "name": "名称", "funding": "经费代码", "invoiced": "账单金额（{cur}）", "list": "目录价（{cur}）", "idleCost": "空闲费用（{cur}）",
		"held": "卡时", "idle": "空闲小时", "efficiency": "利用率（%）", "savedHours": "释放节省小时",
		"saved": "释放节省（{cur}）", "total": "合计", "notBilled": "尚未出账", "drafts": "{n} 份草稿",
		"savings": "释放节省", "assumed": "估算假设：{text}。", "colon": "：", "semi": "；",
		"savedTotal": "{period} 内的释放估计节省了 {cost}（{hours} 卡时）。",
		"budgets":    "月末配额", "noBudgets": "没有项目设置月度配额。",
		"budget": "已用 {used} / 上限 {limit} · {percent}%", "budgetNotBilled": "上限 {limit} · 尚未出账", "reached": "已达上限",
		"hours": "{n} 卡时", "advice": "预留建议（{from} 至 {to}）", "adviceSaving": "建议可节省 {saving}",
		"noAdvice":  "暂无建议：没有足够稳定、值得预留的用量，也没有覆盖率过低的预留。",
		"underused": "{sku}：有一项预留的覆盖率仅为 {coverage}（按时长计）；其中 {unused} 为空置时段的费用。",
		"generated": "生成时间 {at}，由 cardhour 生成。所有数字均来自 API（GET /api/v1/review?period={period}）。",
		"footer":    "{period} 月度复盘 · {page}/{nb}",
	},
}

// pdfReview is a review being drawn.
type pdfReview struct {
	*pdfDraw
	v    *Review
	text map[string]string
}

// t is the review's text key with its {name} placeholders filled from kv
// (name, value, …); {cur} is the review's currency.
func (r *pdfReview) t(key string, kv ...string) string {
	s := strings.ReplaceAll(r.text[key], "{cur}", r.v.Currency)
	for i := 0; i+1 < len(kv); i += 2 {
		s = strings.ReplaceAll(s, "{"+kv[i]+"}", kv[i+1])
	}
	return s
}

// WritePDFReview renders the monthly review as an A4 landscape PDF in
// v.Lang: the title with the period and currency, a row per project and the
// total (invoiced, list price, idle cost, card-hours, idle hours,
// efficiency, what releases saved), the savings assumption, each project's
// budgets at the month's end, the reservation advice, and when it was
// generated. The font set and its drawing are the invoice's (WritePDF): every
// character in the first font that has it, long text wrapped (Chinese per
// character, Latin per word), tables continued on the next page under their
// header. The PDF is dated v.GeneratedAt, so the same review gives the same
// bytes.
func WritePDFReview(w io.Writer, v *Review, opt PDFOptions) error {
	if v == nil {
		return errors.New("export: the review is nil")
	}
	text, ok := reviewText[v.Lang]
	if !ok {
		return fmt.Errorf("export: review language %q: want en or zh-CN", v.Lang)
	}
	dr, err := newPDFDraw("L", opt, v.GeneratedAt)
	if err != nil {
		return err
	}
	r := &pdfReview{pdfDraw: dr, v: v, text: text}
	if err := r.prepare(r.allText()); err != nil {
		return err
	}
	r.render()
	if err := r.pdf.Error(); err != nil {
		return fmt.Errorf("pdf: %w", err)
	}
	return r.pdf.Output(w)
}

// allText is every text the review may draw, for prepare.
func (r *pdfReview) allText() string {
	var b strings.Builder
	for _, s := range r.text {
		b.WriteString(s)
	}
	v := r.v
	b.WriteString(v.Period + v.Currency + v.SavingsAssumption + v.AdviceAssumption + v.AdviceFrom + v.From.Location().String())
	for _, x := range append(append([]ReviewRow{}, v.Projects...), v.Total) {
		b.WriteString(x.Project + x.Name + x.Funding + x.Efficiency)
		for _, a := range x.Advice {
			b.WriteString(a.SKU + a.Saving + a.Text)
		}
		for _, u := range x.Underused {
			b.WriteString(u.SKU + u.Coverage + u.Unused)
		}
		for _, bu := range x.Budgets {
			b.WriteString(bu.Limit + bu.Used)
		}
	}
	b.WriteString("0123456789.,-–—·%/ ")
	return b.String()
}

// render draws the review: title, table, savings, budgets, advice and the
// generated-at line, with the footer on every page.
func (r *pdfReview) render() {
	v := r.v
	r.pdf.SetFooterFunc(func() {
		r.pdf.SetY(-12)
		r.cell(0, 5, r.t("footer", "period", v.Period, "page", strconv.Itoa(r.pdf.PageNo())), "", 0, "C", 8)
	})
	r.use(r.faces[0], 10) // fpdf wants a font before any cell
	r.pdf.AddPage()
	r.cell(0, 10, r.t("title", "period", v.Period), "", 1, "L", 18)
	last := v.To.Add(-time.Nanosecond)
	r.cell(0, 6, r.t("period", "from", v.From.Format(time.DateOnly), "to", last.Format(time.DateOnly), "zone", v.From.Location().String()), "", 1, "L", 10)
	r.pdf.Ln(2)
	r.projectsTable()
	r.section(r.t("savings"))
	r.para(r.t("savedTotal", "period", v.Period, "cost", billing.FormatMoney(v.Total.SavedCost)+" "+v.Currency,
		"hours", billing.FormatHours(v.Total.SavedSeconds)), 9)
	r.para(r.t("assumed", "text", strings.TrimSuffix(v.SavingsAssumption, ".")), 8.5)
	r.budgetList()
	r.adviceList()
	r.pdf.Ln(3)
	r.para(r.t("generated", "at", v.GeneratedAt.Format(time.RFC3339), "period", v.Period), 8)
	r.notShown()
}

// projectsTable is the row per project and the total row, on a grey ground
// under a rule.
func (r *pdfReview) projectsTable() {
	cols := []pdfCol{{r.t("project"), 30, "L", true}, {r.t("name"), 29, "L", false}, {r.t("funding"), 26, "L", false}, {r.t("invoiced"), 28, "R", false},
		{r.t("list"), 24, "R", false}, {r.t("idleCost"), 24, "R", false}, {r.t("held"), 20, "R", false},
		{r.t("idle"), 20, "R", false}, {r.t("efficiency"), 18, "R", false}, {r.t("savedHours"), 22, "R", false},
		{r.t("saved"), 26, "R", false}}
	r.begin(cols)
	for _, x := range r.v.Projects {
		r.row(cols, 8, r.cellsOf(x, x.Project)...)
	}
	total := r.cellsOf(r.v.Total, r.t("total"))
	h := r.rowHeight(cols, 8.5, total)
	r.need(h)
	x, y := r.pdf.GetXY()
	r.pdf.SetFillColor(245, 245, 245)
	r.pdf.Rect(x, y, r.pageW, h, "F")
	r.pdf.Line(x, y, x+r.pageW, y)
	r.rowAt(cols, 8.5, total, h)
	r.end()
}

// cellsOf are a row's cells, its first one first.
func (r *pdfReview) cellsOf(x ReviewRow, first string) []string {
	inv := r.t("notBilled")
	if x.Invoiced != nil {
		inv = billing.FormatMoney(*x.Invoiced)
		if x.Drafts > 0 {
			inv += "\n" + r.t("drafts", "n", strconv.Itoa(x.Drafts))
		}
	}
	eff := x.Efficiency
	if eff == "" {
		eff = "—"
	}
	return []string{first, x.Name, x.Funding, inv, billing.FormatMoney(x.ListCost), billing.FormatMoney(x.IdleCost),
		billing.FormatHours(x.HeldSeconds), billing.FormatHours(x.IdleSeconds), eff,
		billing.FormatHours(x.SavedSeconds), billing.FormatMoney(x.SavedCost)}
}

// budgetList is each project's budgets at the month's end, a line per
// project.
func (r *pdfReview) budgetList() {
	r.section(r.t("budgets"))
	n := 0
	for _, x := range r.v.Projects {
		if len(x.Budgets) == 0 {
			continue
		}
		var parts []string
		for _, b := range x.Budgets {
			parts = append(parts, r.budgetText(b))
		}
		r.para("• "+x.Project+r.t("colon")+strings.Join(parts, r.t("semi")), 8.5)
		n++
	}
	if n == 0 {
		r.para(r.t("noBudgets"), 8.5)
	}
}

// budgetText is one budget's state, as the review page says it.
func (r *pdfReview) budgetText(b ReviewBudget) string {
	amount := func(s string) string {
		if b.Unit == string(billing.BudgetMoney) {
			return s + " " + r.v.Currency
		}
		return r.t("hours", "n", s)
	}
	if b.Used == "" {
		return r.t("budgetNotBilled", "limit", amount(b.Limit))
	}
	s := r.t("budget", "used", amount(b.Used), "limit", amount(b.Limit), "percent", strconv.FormatInt(b.Percent, 10))
	if b.Reached {
		s += " — " + r.t("reached")
	}
	return s
}

// adviceList is the reservation advice, per project: what it assumes, then
// each SKU's sentence and the reservations that covered little.
func (r *pdfReview) adviceList() {
	v := r.v
	from := v.AdviceFrom
	if from == "" {
		from = "—"
	}
	r.section(r.t("advice", "from", from, "to", v.Period))
	if v.AdviceAssumption != "" {
		r.para(v.AdviceAssumption, 8.5)
	}
	n := 0
	for _, x := range v.Projects {
		if len(x.Advice) == 0 && len(x.Underused) == 0 {
			continue
		}
		n++
		r.pdf.Ln(1)
		r.para(x.Project+" — "+r.t("adviceSaving", "saving", billing.FormatMoney(x.AdviceSaving)+" "+v.Currency), 9.5)
		for _, a := range x.Advice {
			r.para("• "+a.SKU+r.t("colon")+a.Text, 8.5)
		}
		for _, u := range x.Underused {
			r.para("• "+r.t("underused", "sku", u.SKU, "coverage", u.Coverage, "unused", u.Unused+" "+v.Currency), 8.5)
		}
	}
	if n == 0 {
		r.para(r.t("noAdvice"), 8.5)
	}
}
