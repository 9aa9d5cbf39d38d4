package advice

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// Schema names the JSON document of a report.
const Schema = "cardhour.advice.v1"

// Report is the advice over a window of whole months. Money is a decimal
// string with two decimals, as the engine billed it.
type Report struct {
	Schema      string      `json:"schema"`
	Currency    string      `json:"currency"`
	Timezone    string      `json:"timezone"`
	Months      int         `json:"months"`
	From        string      `json:"from" doc:"first month of the window, YYYY-MM"`
	To          string      `json:"to" doc:"last month of the window, YYYY-MM"`
	Days        string      `json:"days" doc:"length of the window in days"`
	MinCoverage string      `json:"min_coverage" doc:"share of its hours under which a reservation is reported"`
	Assumption  Text        `json:"assumption"`
	Billed      string      `json:"billed" doc:"what the invoices of the window charged for the SKUs advised on"`
	BilledBasis string      `json:"billed_monthly_equivalent" doc:"the same with every reservation counted by its monthly share (the basis of the savings)"`
	Advised     string      `json:"advised" doc:"what the advised reservations and hourly use would have cost"`
	Saving      string      `json:"saving"`
	Advice      []SKUAdvice `json:"advice"`
	Underused   []Underused `json:"underused"`
	// Warnings are those of the months' bills: usage no SKU prices (never
	// advised on), projects not in the catalog, holder conflicts, months
	// without usage.
	Warnings []string `json:"warnings"`
}

// Text is a sentence in English and Chinese.
type Text struct {
	En string `json:"en"`
	Zh string `json:"zh-CN"`
}

// Level is one step of a concurrency profile: at least AtLeast instances held
// at once for Seconds in the window.
type Level struct {
	AtLeast int64  `json:"at_least"`
	Seconds int64  `json:"seconds"`
	Days    string `json:"days"`
}

// DayPeak is the most instances held at once on one local day.
type DayPeak struct {
	Day  string `json:"day" doc:"YYYY-MM-DD in the catalog's zone"`
	Peak int64  `json:"peak"`
}

// TermPrice is one term the catalog offers for a SKU: the price of one
// reserved instance and the utilisation above which it costs less than
// hourly use.
type TermPrice struct {
	Term     string `json:"term" enum:"month,quarter,year"`
	Months   int    `json:"months"`
	Discount string `json:"discount" doc:"fraction off the monthly price"`
	Monthly  string `json:"monthly" doc:"one instance, billed monthly: what each month costs"`
	Upfront  string `json:"upfront" doc:"one instance, billed upfront: the whole term at its start"`
	// BreakEven is the share of the window's hours one instance must be
	// held for this term to cost no more than hourly use.
	BreakEven string `json:"break_even_utilisation"`
}

// Reserved is a reservation as the advice shows it.
type Reserved struct {
	Term     string `json:"term" enum:"month,quarter,year"`
	Quantity int64  `json:"quantity"`
	Start    string `json:"start" doc:"first month, YYYY-MM"`
	Billing  string `json:"billing,omitempty" enum:"upfront,monthly"`
	Monthly  string `json:"monthly,omitempty" doc:"billed monthly: each month"`
	Upfront  string `json:"upfront,omitempty" doc:"billed upfront: the whole term"`
}

// Halved is the risk of a recommendation: the cost if every session of the
// window had lasted half as long.
type Halved struct {
	Advised    string `json:"advised" doc:"the advised reservations and hourly use for the rest"`
	HourlyOnly string `json:"hourly_only"`
}

// SKUAdvice is the advice for one project and SKU.
type SKUAdvice struct {
	Project    string      `json:"project"`
	SKU        string      `json:"sku"`
	Reservable bool        `json:"reservable" doc:"false when the SKU has no monthly price"`
	Peak       int64       `json:"peak" doc:"most instances held at once"`
	Profile    []Level     `json:"profile"`
	DailyPeak  []DayPeak   `json:"daily_peak" doc:"the most instances held at once on each day of the window"`
	Terms      []TermPrice `json:"terms"`
	Current    []Reserved  `json:"current" doc:"the project's reservations of the SKU active in the window"`
	Mix        Mix         `json:"mix"`
	Advice     []Reserved  `json:"reservations" doc:"the advised reservations"`
	Billed     string      `json:"billed"`
	BilledBase string      `json:"billed_monthly_equivalent"`
	Advised    string      `json:"advised"`
	Saving     string      `json:"saving"`
	IfHalved   Halved      `json:"if_use_halves"`
	Text       Text        `json:"text"`

	billed, basis, advised decimal.Decimal
	underused              []Underused
}

// Underused is an active reservation that covered less than the minimum share
// of its hours.
type Underused struct {
	Project string `json:"project"`
	SKU     string `json:"sku"`
	Index   int    `json:"index" doc:"position of the reservation in the project's catalog entry"`
	Reserved
	ReservedSeconds int64  `json:"reserved_seconds" doc:"reserved instance-seconds inside the window"`
	CoveredSeconds  int64  `json:"covered_seconds"`
	Coverage        string `json:"coverage" doc:"covered share of the reserved time"`
	Cost            string `json:"cost" doc:"its monthly shares inside the window"`
	Unused          string `json:"unused" doc:"the part of its cost for time it covered nothing"`
	// WindowCost is what the SKU cost the project in the window (usage and
	// reservations, monthly shares); the alternatives are priced the same way.
	WindowCost string `json:"window_cost"`
	Smaller    *Alt   `json:"smaller,omitempty" doc:"a smaller quantity of the same term that would have cost less"`
	Shorter    *Alt   `json:"shorter,omitempty" doc:"month-term reservations, month by month, that would have cost less"`
	Text       Text   `json:"text"`
}

// Alt is an alternative to an under-used reservation, priced by the engine.
type Alt struct {
	Quantity int64   `json:"quantity,omitempty"`
	Months   []int64 `json:"months,omitempty" doc:"month-term quantity per month of the window"`
	Cost     string  `json:"cost" doc:"what the SKU would have cost the project in the window"`
}

const msPerDay = 86_400_000

func days(ms int64) string {
	return decimal.NewFromInt(ms).Div(decimal.NewFromInt(msPerDay)).StringFixed(1)
}

func share(num, den decimal.Decimal) decimal.Decimal {
	if den.IsZero() {
		return decimal.Zero
	}
	return num.Div(den)
}

func pct(d decimal.Decimal) string { return d.Shift(2).StringFixed(1) + " %" }

func monthOf(r schemas.Reservation) string {
	return fmt.Sprintf("%04d-%02d", r.StartYear, int(r.StartMonth))
}

// advise prices one project and SKU.
func (a *adviser) advise(g *group) (SKUAdvice, error) {
	n := len(a.periods)
	out := SKUAdvice{Project: g.project, SKU: g.sku.ID, Reservable: g.sku.HasMonthly}
	curves := make([]*usageCurve, n)
	var prof []int64
	for i := range n {
		ss := g.sessions[i]
		curves[i] = &usageCurve{a: a, g: g, i: i, sessions: ss, peak: int64(len(sessionLevels(ss))), memo: map[int64]decimal.Decimal{}}
		prof = addLevels(prof, instanceLevels(ss))
	}
	out.Peak = int64(len(prof))
	for k, ms := range prof {
		out.Profile = append(out.Profile, Level{AtLeast: int64(k + 1), Seconds: ms / 1000, Days: days(ms)})
	}
	out.Profile = nonNil(out.Profile)
	out.DailyPeak = a.dailyPeak(g)
	out.Terms = a.terms(g.sku)

	mix, estimate := a.search(g, curves)
	out.Mix = mix
	rs := mix.Reservations(g.sku.ID, a.periods)
	adv := a.priceWindow(g, g.sessions, rs)
	if !adv.total().Equal(estimate) {
		return out, fmt.Errorf("BUG: advice for %s/%s: the mix priced %s in the search and %s billed", g.project, g.sku.ID, estimate, adv.total())
	}
	out.advised = adv.total()
	for _, r := range rs {
		out.Advice = append(out.Advice, a.reserved(g.sku, r))
	}
	out.Advice = nonNil(out.Advice)

	current, idx := a.reservationsOf(g.project, g.sku.ID)
	var active []schemas.Reservation
	var activeIdx []int
	for j, r := range current {
		for _, p := range a.periods {
			if r.ActiveIn(p.MonthIndex()) {
				active = append(active, r)
				activeIdx = append(activeIdx, idx[j])
				break
			}
		}
	}
	for _, r := range active {
		out.Current = append(out.Current, a.reserved(g.sku, r))
	}
	out.Current = nonNil(out.Current)
	out.billed = sum(g.billedUsage).Add(sum(g.billedReserved))
	out.basis = out.billed // the invoices are the monthly-equivalent bill unless a term was paid upfront
	for _, r := range current {
		if r.Billing != schemas.BillingMonthly {
			out.basis = a.priceWindow(g, g.sessions, monthlyEquivalent(current)).total()
			break
		}
	}
	out.Billed, out.BilledBase, out.Advised = billing.FormatMoney(out.billed), billing.FormatMoney(out.basis), billing.FormatMoney(out.advised)
	out.Saving = billing.FormatMoney(out.basis.Sub(out.advised))

	halved := make([][]billing.Session, n)
	for i, ss := range g.sessions {
		halved[i] = make([]billing.Session, len(ss))
		for j, s := range ss {
			s.End = s.Start + (s.End-s.Start)/2
			halved[i][j] = s
		}
	}
	hourly := a.priceWindow(g, halved, nil).total()
	withMix := hourly
	if len(rs) > 0 {
		withMix = a.priceWindow(g, halved, rs).total()
	}
	out.IfHalved = Halved{Advised: billing.FormatMoney(withMix), HourlyOnly: billing.FormatMoney(hourly)}
	out.underused = a.underused(g, current, idx, out.basis)
	out.Text = a.adviceText(g, &out, prof)
	g.accs = nil // priced: let the accumulators go
	return out, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// reserved shows a reservation with what one month of it and its whole term
// cost (billing.ReservationAmount, the engine's).
func (a *adviser) reserved(sku *schemas.SKU, r schemas.Reservation) Reserved {
	d := a.cat.Discount(sku, r.Term)
	return Reserved{Term: string(r.Term), Quantity: r.Quantity, Start: monthOf(r), Billing: r.Billing,
		Monthly: billing.FormatMoney(billing.ReservationAmount(sku.MonthlyPrice, 1, d, r.Quantity)),
		Upfront: billing.FormatMoney(billing.ReservationAmount(sku.MonthlyPrice, r.Term.Months(), d, r.Quantity))}
}

// terms prices one instance of each term and its break-even utilisation: the
// window's monthly shares of one reservation over what holding one instance
// the whole window would cost hourly (billing.UsageAmount).
func (a *adviser) terms(sku *schemas.SKU) []TermPrice {
	if !sku.HasMonthly {
		return []TermPrice{}
	}
	hourly := decimal.Zero
	for _, p := range a.periods {
		hourly = hourly.Add(billing.UsageAmount((p.EndMS()-p.StartMS())/1000, sku.HourlyPrice))
	}
	var out []TermPrice
	for _, t := range []schemas.Term{schemas.TermMonth, schemas.TermQuarter, schemas.TermYear} {
		d := a.cat.Discount(sku, t)
		month := billing.ReservationAmount(sku.MonthlyPrice, 1, d, 1)
		window := month.Mul(decimal.NewFromInt(int64(len(a.periods))))
		be := "—"
		if hourly.Sign() > 0 {
			be = share(window, hourly).StringFixed(4)
		}
		out = append(out, TermPrice{Term: string(t), Months: t.Months(), Discount: d.String(),
			Monthly: billing.FormatMoney(month), Upfront: billing.FormatMoney(billing.ReservationAmount(sku.MonthlyPrice, t.Months(), d, 1)),
			BreakEven: be})
	}
	return out
}

// report puts the pairs together, largest saving first within a project.
func (a *adviser) report(advice []SKUAdvice) *Report {
	first, last := a.periods[0], a.periods[len(a.periods)-1]
	r := &Report{Schema: Schema, Currency: a.cat.Currency, Timezone: a.cat.Timezone, Months: len(a.periods),
		From: first.String(), To: last.String(), Days: days(last.EndMS() - first.StartMS()),
		MinCoverage: a.opt.MinCoverage.String(), Advice: nonNil(advice), Underused: []Underused{}, Warnings: []string{}}
	r.Assumption = Text{
		En: fmt.Sprintf("Assumes the use of %s to %s repeats: reservations of a quarter or a year are priced by their monthly shares over these %d months; paying a term upfront costs the same in all.", r.From, r.To, r.Months),
		Zh: fmt.Sprintf("假设 %s 至 %s 的用量今后重复：季付、年付预留按这 %d 个月内每月应摊的金额计价；一次性预付与按月支付总额相同。", r.From, r.To, r.Months),
	}
	billed, basis, adv := decimal.Zero, decimal.Zero, decimal.Zero
	for i := range r.Advice {
		s := &r.Advice[i]
		billed, basis, adv = billed.Add(s.billed), basis.Add(s.basis), adv.Add(s.advised)
		r.Underused = append(r.Underused, s.underused...)
	}
	r.Billed, r.BilledBasis, r.Advised = billing.FormatMoney(billed), billing.FormatMoney(basis), billing.FormatMoney(adv)
	r.Saving = billing.FormatMoney(basis.Sub(adv))
	slices.SortStableFunc(r.Advice, func(x, y SKUAdvice) int {
		return cmp.Or(cmp.Compare(x.Project, y.Project), y.basis.Sub(y.advised).Cmp(x.basis.Sub(x.advised)), cmp.Compare(x.SKU, y.SKU))
	})
	return r
}

// windowMS is the length of month i of the window.
func (a *adviser) windowMS(i int) int64 { return a.periods[i].EndMS() - a.periods[i].StartMS() }

// dailyPeak is the most instances of the group held at once on each local day
// of the window.
func (a *adviser) dailyPeak(g *group) []DayPeak {
	out := []DayPeak{}
	for i, p := range a.periods {
		var bounds []int64
		var names []string
		for d := p.Start; d.Before(p.End); d = d.AddDate(0, 0, 1) {
			bounds = append(bounds, d.UnixMilli())
			names = append(names, d.Format("2006-01-02"))
		}
		bounds = append(bounds, p.EndMS())
		for k, pk := range dailyPeaks(instanceIntervals(g.sessions[i]), bounds) {
			out = append(out, DayPeak{Day: names[k], Peak: pk})
		}
	}
	return out
}
