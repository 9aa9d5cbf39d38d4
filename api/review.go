package api

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
)

// The monthly review (每月复盘): for a closed month, per project, what it
// cost (invoiced and at list price), what its idle time cost, how busy its
// held time was, its project budgets' state at the month's end and the
// reservation advice over the three months up to it. Every number is the
// engine's: the usage report, the stored invoice documents, the budgets'
// projection and billing/advice.

func (s *Server) routesReview() {
	register(s, huma.Operation{OperationID: "get-review", Method: http.MethodGet, Path: "/api/v1/review", Summary: "the monthly review",
		Description: "For a month (default: the last closed one in the catalog's time zone), per project: the invoiced total (drafts and finalized, void revisions left out) and " +
			"the list price of the held hours, the idle cost, held, idle and busy card-seconds and the efficiency (busy ÷ held, percent), what the month's releases saved " +
			"(saved_seconds, saved_cost, estimated as savings_assumption says), the project's monthly budgets " +
			"(used: the invoiced total for money, the held hours for card-hours; percent; reached) and the reservation advice over the three months up to the month. " +
			"A lead sees its project's.",
		Tags: []string{"usage"}},
		rolesStaff, s.getReview)
	register(s, huma.Operation{OperationID: "export-review", Method: http.MethodGet, Path: "/api/v1/review/export", Summary: "export the monthly review (CSV, XLSX or PDF)",
		Description: "The review get-review answers in lang. CSV and XLSX: one row per project and a total row, money and hours as decimal text. " +
			"PDF: a report to forward (A4 landscape): the table with what releases saved, the savings assumption, each project's budgets, the advice and when it was generated.",
		Tags: []string{"usage"}, Responses: fileResponses(FormatCSV, FormatXLSX, FormatPDF)},
		rolesStaff, s.exportReview)
}

type reviewInput struct {
	Period string `query:"period" pattern:"^2[0-9]{3}-(0[1-9]|1[0-2])$" doc:"YYYY-MM; default the last closed month"`
}

// ReviewBody is the monthly review.
type ReviewBody struct {
	Period     string          `json:"period"`
	From       time.Time       `json:"from"`
	To         time.Time       `json:"to"`
	Currency   string          `json:"currency"`
	Projects   []ReviewProject `json:"projects"`
	Total      ReviewProject   `json:"total" doc:"the sum of the projects (project empty, no budgets or advice)"`
	Assumption advice.Text     `json:"advice_assumption" doc:"what the advice assumes"`
	AdviceFrom string          `json:"advice_from" doc:"the advice window's first month"`
	// SavingsAssumption and SavingsHorizonSeconds are the usage report's:
	// how saved_seconds and saved_cost are estimated.
	SavingsAssumption     string `json:"savings_assumption" doc:"how saved_seconds and saved_cost are estimated, in words (the usage report's)"`
	SavingsHorizonSeconds int64  `json:"savings_horizon_seconds" doc:"the longest one release is taken to have saved"`
}

// ReviewProject is one project's month.
type ReviewProject struct {
	Project     string         `json:"project,omitempty"`
	Name        string         `json:"name,omitempty"`
	Funding     string         `json:"funding,omitempty"`
	Invoiced    *billing.Money `json:"invoiced,omitempty" doc:"the month's invoices (void left out); absent when it has none"`
	Drafts      int            `json:"drafts" doc:"of them drafts"`
	ListCost    billing.Money  `json:"list_cost"`
	IdleCost    billing.Money  `json:"idle_cost"`
	HeldSeconds int64          `json:"held_seconds"`
	IdleSeconds int64          `json:"idle_seconds"`
	BusySeconds int64          `json:"busy_seconds"`
	Efficiency  string         `json:"efficiency,omitempty" doc:"busy ÷ held in percent, one decimal"`
	// SavedSeconds and SavedCost are what the month's releases saved, as
	// on usage rows (reads.AddSavings).
	SavedSeconds int64          `json:"saved_seconds" doc:"held time the releases ended, estimated as on usage rows (saved_seconds)"`
	SavedCost    billing.Money  `json:"saved_cost" doc:"its list price, as on usage rows (saved_cost)"`
	Budgets      []ReviewBudget `json:"budgets,omitempty"`
	Advice       []ReviewAdvice `json:"advice,omitempty"`
	// AdviceSaving adds up the advice's savings over its SKUs.
	AdviceSaving billing.Money     `json:"advice_saving" doc:"what the advised reservations would have saved over the advice window, all SKUs"`
	Underused    []ReviewUnderused `json:"underused,omitempty"`
}

// ReviewBudget is a monthly project budget at the month's end.
type ReviewBudget struct {
	ID      int64  `json:"id"`
	Unit    string `json:"unit" enum:"money,card_hours"`
	Limit   string `json:"limit"`
	Used    string `json:"used,omitempty" doc:"absent for a money budget of a month without invoices"`
	Percent int64  `json:"percent"`
	Reached bool   `json:"reached"`
}

// ReviewAdvice is the advice for one SKU of the project.
type ReviewAdvice struct {
	SKU    string      `json:"sku"`
	Saving string      `json:"saving"`
	Text   advice.Text `json:"text"`
}

// ReviewUnderused is a reservation that covered little of its hours.
type ReviewUnderused struct {
	SKU      string `json:"sku"`
	Coverage string `json:"coverage"`
	Unused   string `json:"unused"`
}

func (s *Server) getReview(ctx context.Context, in *reviewInput) (*body[ReviewBody], error) {
	r, err := s.review(ctx, in.Period)
	if err != nil {
		return nil, err
	}
	return &body[ReviewBody]{*r}, nil
}

// review assembles the review of period ("" the last closed month).
func (s *Server) review(ctx context.Context, period string) (*ReviewBody, error) {
	project, err := projectScope(ctx, "")
	if err != nil {
		return nil, err
	}
	u, err := s.usage()
	if err != nil {
		return nil, err
	}
	fl, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	_, cat, err := s.currentCatalog(ctx)
	if err != nil {
		return nil, err
	}
	p, err := reviewPeriod(period, s.now(), cat.Location)
	if err != nil {
		return nil, invalid(ctx, "query.period", "%v", err)
	}
	q := reads.UsageQuery{From: p.Start, To: p.End, GroupBy: []string{reads.ByProject}}
	if project != "" {
		q.Projects = []string{project}
	}
	// The advice (a search over months of billing) is read while the month's
	// usage, invoices and budgets are.
	var adv *advice.Report
	var advErr error
	var wg sync.WaitGroup
	if s.cfg.Advice != nil {
		wg.Go(func() {
			adv, advErr = s.cfg.Advice.Advise(ctx, cat, advice.Options{Months: 3, Now: p.End, Project: project, MinCoverage: advice.DefaultMinCoverage})
		})
	}
	defer wg.Wait()
	rep, err := s.usageWithSavings(ctx, u, q)
	if err != nil {
		return nil, err
	}
	sum, err := fl.PeriodSummary(ctx, p.String(), project)
	if err != nil {
		return nil, err
	}
	out := &ReviewBody{Period: p.String(), From: p.Start, To: p.End, Currency: rep.Currency, Projects: []ReviewProject{},
		SavingsAssumption: rep.SavingsAssumption, SavingsHorizonSeconds: rep.SavingsHorizonSeconds}
	byProject := reviewProjects(rep, sum)
	if err := s.reviewBudgets(ctx, project, p, byProject); err != nil {
		return nil, err
	}
	if wg.Wait(); advErr != nil {
		return nil, advErr
	}
	reviewAdvice(adv, byProject, out)
	for _, k := range slices.Sorted(maps.Keys(byProject)) {
		out.Projects = append(out.Projects, *byProject[k])
	}
	out.Total = reviewTotal(out.Projects)
	return out, nil
}

// reviewPeriod is period, or the month before now's in loc.
func reviewPeriod(period string, now time.Time, loc *time.Location) (billing.Period, error) {
	if loc == nil {
		loc = time.UTC
	}
	if period == "" {
		lt := now.In(loc)
		first := time.Date(lt.Year(), lt.Month(), 1, 0, 0, 0, 0, loc).AddDate(0, -1, 0)
		return billing.NewPeriod(first.Year(), first.Month(), loc), nil
	}
	t, err := time.ParseInLocation("2006-01", period, loc)
	if err != nil {
		return billing.Period{}, fmt.Errorf("period %q: want YYYY-MM", period)
	}
	return billing.NewPeriod(t.Year(), t.Month(), loc), nil
}

// reviewProjects are the usage rows and the invoices, by project.
func reviewProjects(rep *reads.UsageReport, sum *invoicing.PeriodSummary) map[string]*ReviewProject {
	out := map[string]*ReviewProject{}
	get := func(p string) *ReviewProject {
		if out[p] == nil {
			out[p] = &ReviewProject{Project: p}
		}
		return out[p]
	}
	for _, r := range rep.Rows {
		x := get(r.Project)
		x.ListCost, x.IdleCost = billing.Money{Decimal: x.ListCost.Add(r.Cost.Decimal)}, billing.Money{Decimal: x.IdleCost.Add(r.IdleCost.Decimal)}
		x.HeldSeconds += r.HeldSeconds
		x.IdleSeconds += r.IdleSeconds
		x.SavedSeconds += r.SavedSeconds
		x.SavedCost.Decimal = x.SavedCost.Add(r.SavedCost.Decimal)
	}
	for _, it := range sum.Invoices {
		if it.Status == ledger.StatusVoid {
			continue
		}
		x := get(it.Project)
		x.Name, x.Funding = it.Name, it.Funding
		total := it.Total
		if x.Invoiced != nil {
			total = total.Add(x.Invoiced.Decimal)
		}
		x.Invoiced = &billing.Money{Decimal: total}
		if it.Status == ledger.StatusDraft {
			x.Drafts++
		}
	}
	for _, x := range out {
		x.BusySeconds = x.HeldSeconds - x.IdleSeconds
		x.Efficiency = reads.Percent(x.BusySeconds, x.HeldSeconds)
	}
	return out
}

// reviewBudgets adds each project's monthly project budgets at p's end.
func (s *Server) reviewBudgets(ctx context.Context, project string, p billing.Period, by map[string]*ReviewProject) error {
	f := ledger.BudgetFilter{Scope: billing.BudgetProject, Project: project, Limit: ledger.MaxLimit}
	for {
		page, next, err := s.cfg.Ledger.Budgets(ctx, f)
		if err != nil {
			return err
		}
		for _, b := range page {
			x := by[b.Project]
			if b.Period != billing.BudgetMonth || x == nil {
				continue
			}
			rb := ReviewBudget{ID: b.ID, Unit: string(b.Unit), Limit: b.LimitText()}
			money := decimal.Zero
			if x.Invoiced != nil {
				money = x.Invoiced.Decimal
			}
			if b.Unit == billing.BudgetMoney && x.Invoiced == nil {
				x.Budgets = append(x.Budgets, rb) // not billed yet: nothing to compare
				continue
			}
			pr := billing.ProjectBudget(b.Unit, b.LimitDecimal(), money, x.HeldSeconds*1000, p.Start, p.End, p.End)
			rb.Used, rb.Percent, rb.Reached = b.Unit.Format(pr.Used), pr.Percent, pr.Reached
			x.Budgets = append(x.Budgets, rb)
		}
		if next == "" {
			return nil
		}
		f.Cursor = next
	}
}

// reviewAdvice adds the reservation advice (over the three months up to
// the period) to the projects reviewed.
func reviewAdvice(rep *advice.Report, by map[string]*ReviewProject, out *ReviewBody) {
	if rep == nil {
		return
	}
	out.Assumption, out.AdviceFrom = rep.Assumption, rep.From
	for _, a := range rep.Advice {
		if x := by[a.Project]; x != nil {
			x.Advice = append(x.Advice, ReviewAdvice{SKU: a.SKU, Saving: a.Saving, Text: a.Text})
			if d, err := decimal.NewFromString(a.Saving); err == nil {
				x.AdviceSaving.Decimal = x.AdviceSaving.Add(d)
			}
		}
	}
	for _, u := range rep.Underused {
		if x := by[u.Project]; x != nil {
			x.Underused = append(x.Underused, ReviewUnderused{SKU: u.SKU, Coverage: u.Coverage, Unused: u.Unused})
		}
	}
}

// reviewTotal adds up the projects.
func reviewTotal(ps []ReviewProject) ReviewProject {
	var t ReviewProject
	var invoiced decimal.Decimal
	billed := false
	for _, x := range ps {
		t.ListCost.Decimal = t.ListCost.Add(x.ListCost.Decimal)
		t.IdleCost.Decimal = t.IdleCost.Add(x.IdleCost.Decimal)
		t.HeldSeconds += x.HeldSeconds
		t.IdleSeconds += x.IdleSeconds
		t.BusySeconds += x.BusySeconds
		t.SavedSeconds += x.SavedSeconds
		t.SavedCost.Decimal = t.SavedCost.Add(x.SavedCost.Decimal)
		t.Drafts += x.Drafts
		t.AdviceSaving.Decimal = t.AdviceSaving.Add(x.AdviceSaving.Decimal)
		if x.Invoiced != nil {
			invoiced, billed = invoiced.Add(x.Invoiced.Decimal), true
		}
	}
	if billed {
		t.Invoiced = &billing.Money{Decimal: invoiced}
	}
	t.Efficiency = reads.Percent(t.BusySeconds, t.HeldSeconds)
	return t
}

// reviewExportInput names its period itself: huma reads no parameter of an
// embedded unexported struct, and the export answered the default month
// whatever period asked for.
type reviewExportInput struct {
	Period string `query:"period" pattern:"^2[0-9]{3}-(0[1-9]|1[0-2])$" doc:"YYYY-MM; default the last closed month"`
	Format string `query:"format" enum:"csv,xlsx,pdf" default:"xlsx"`
	Lang   string `query:"lang" enum:"en,zh-CN" default:"en"`
}

// reviewColumns are the CSV/XLSX columns, in order, and whether each is a
// number.
var reviewColumns = []struct {
	key     string
	numeric bool
}{{"project", false}, {"name", false}, {"funding", false}, {"invoiced", true}, {"list", true}, {"idle_cost", true},
	{"held", true}, {"idle", true}, {"efficiency", true}, {"saved", true}, {"saved_cost", true}, {"budgets", false},
	{"advice_saving", true}, {"advice", false}}

// reviewLabels are the export's texts, by language: the review page's
// (api/web/static/i18n.js, rev.* and col.*).
var reviewLabels = map[string]map[string]string{
	"en": {"project": "Project", "name": "Name", "funding": "Funding code", "invoiced": "Invoiced ({cur})", "list": "List price ({cur})",
		"idle_cost": "Idle cost ({cur})", "held": "Card-hours", "idle": "Idle hours", "efficiency": "Efficiency (%)",
		"saved": "Hours saved by releases", "saved_cost": "Saved by releases ({cur})", "budgets": "Budgets",
		"advice_saving": "Advised saving ({cur})", "advice": "Advice", "total": "Total", "sheet": "Review", "not_billed": "not billed yet"},
	"zh-CN": {"project": "项目", "name": "名称", "funding": "经费代码", "invoiced": "账单金额（{cur}）", "list": "目录价（{cur}）",
		"idle_cost": "空闲费用（{cur}）", "held": "卡时", "idle": "空闲小时", "efficiency": "利用率（%）",
		"saved": "释放节省小时", "saved_cost": "释放节省（{cur}）", "budgets": "配额",
		"advice_saving": "建议可节省（{cur}）", "advice": "建议", "total": "合计", "sheet": "月度复盘", "not_billed": "尚未出账"},
}

func (s *Server) exportReview(ctx context.Context, in *reviewExportInput) (*fileOutput, error) {
	r, err := s.review(ctx, in.Period)
	if err != nil {
		return nil, err
	}
	if in.Format == FormatPDF {
		return s.reviewPDF(r, in.Lang)
	}
	lab := reviewLabels[in.Lang]
	cur := func(x string) string { return strings.ReplaceAll(x, "{cur}", r.Currency) }
	t := &export.Table{Sheet: lab["sheet"], At: s.now()}
	for _, c := range reviewColumns {
		t.Header, t.Numeric = append(t.Header, cur(lab[c.key])), append(t.Numeric, c.numeric)
	}
	row := func(x ReviewProject, name string) []string {
		inv := lab["not_billed"]
		if x.Invoiced != nil {
			inv = billing.FormatMoney(x.Invoiced.Decimal)
		}
		var buds, texts []string
		for _, b := range x.Budgets {
			if b.Used == "" {
				buds = append(buds, b.Limit+" · "+lab["not_billed"])
				continue
			}
			buds = append(buds, fmt.Sprintf("%s / %s · %d %%", b.Used, b.Limit, b.Percent))
		}
		for _, a := range x.Advice {
			texts = append(texts, textIn(a.Text, in.Lang))
		}
		return []string{name, x.Name, x.Funding, inv, billing.FormatMoney(x.ListCost.Decimal), billing.FormatMoney(x.IdleCost.Decimal),
			billing.FormatHours(x.HeldSeconds), billing.FormatHours(x.IdleSeconds), x.Efficiency,
			billing.FormatHours(x.SavedSeconds), billing.FormatMoney(x.SavedCost.Decimal), strings.Join(buds, "; "),
			billing.FormatMoney(x.AdviceSaving.Decimal), strings.Join(texts, " ")}
	}
	for _, x := range r.Projects {
		t.Rows, t.Bold = append(t.Rows, row(x, x.Project)), append(t.Bold, false)
	}
	t.Rows, t.Bold = append(t.Rows, row(r.Total, lab["total"])), append(t.Bold, true)
	return tableFile(in.Format, "review-"+r.Period, t)
}

// reviewPDF is the review as the PDF a lead forwards, in lang.
func (s *Server) reviewPDF(r *ReviewBody, lang string) (*fileOutput, error) {
	v := &export.Review{Lang: lang, Period: r.Period, From: r.From, To: r.To, Currency: r.Currency, AdviceFrom: r.AdviceFrom,
		AdviceAssumption: textIn(r.Assumption, lang), SavingsAssumption: r.SavingsAssumption, GeneratedAt: s.now().In(r.From.Location())}
	if lang == "zh-CN" && r.SavingsAssumption == reads.SavingsAssumption {
		v.SavingsAssumption = reads.SavingsAssumptionZh
	}
	for _, x := range r.Projects {
		v.Projects = append(v.Projects, reviewRow(x, lang))
	}
	v.Total = reviewRow(r.Total, lang)
	var buf bytes.Buffer
	if err := export.WritePDFReview(&buf, v, s.cfg.PDF); err != nil {
		return nil, err
	}
	return &fileOutput{ContentType: formatTypes[FormatPDF], ContentDisposition: fmt.Sprintf(`attachment; filename="review-%s.pdf"`, r.Period),
		Body: buf.Bytes()}, nil
}

// reviewRow is a project's month as the PDF draws it, its texts in lang.
func reviewRow(x ReviewProject, lang string) export.ReviewRow {
	out := export.ReviewRow{Project: x.Project, Name: x.Name, Funding: x.Funding, Drafts: x.Drafts, ListCost: x.ListCost.Decimal,
		IdleCost: x.IdleCost.Decimal, HeldSeconds: x.HeldSeconds, IdleSeconds: x.IdleSeconds, Efficiency: x.Efficiency,
		SavedSeconds: x.SavedSeconds, SavedCost: x.SavedCost.Decimal, AdviceSaving: x.AdviceSaving.Decimal}
	if x.Invoiced != nil {
		out.Invoiced = &x.Invoiced.Decimal
	}
	for _, b := range x.Budgets {
		out.Budgets = append(out.Budgets, export.ReviewBudget{Unit: b.Unit, Limit: b.Limit, Used: b.Used, Percent: b.Percent, Reached: b.Reached})
	}
	for _, a := range x.Advice {
		out.Advice = append(out.Advice, export.ReviewAdvice{SKU: a.SKU, Saving: a.Saving, Text: textIn(a.Text, lang)})
	}
	for _, u := range x.Underused {
		out.Underused = append(out.Underused, export.ReviewUnderused{SKU: u.SKU, Coverage: u.Coverage, Unused: u.Unused})
	}
	return out
}

// textIn is t in lang ("en" or "zh-CN").
func textIn(t advice.Text, lang string) string {
	if lang == "zh-CN" {
		return t.Zh
	}
	return t.En
}
