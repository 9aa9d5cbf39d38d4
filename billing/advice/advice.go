// Package advice tells each project which reservations would have cost least
// over the last whole months, and which of its reservations covered little.
//
// Every amount it reports is priced by the billing engine itself: the usage of
// a project and SKU is billed again under a copy of the catalog that differs
// only by the candidate reservations (schemas.Catalog.WithReservations), with
// the project's own rounding, gap tolerance, minimum billed time and coverage
// rules. There is no second price formula here; the search only adds the
// amounts of the engine's invoice lines.
//
// The assumption behind every recommendation is that the past months repeat;
// each recommendation also states what its reservations would cost if use
// halved.
//
// It is pure: the caller bills the months and says when "now" is; it reads no
// clock and starts no goroutine (internal/advicerun runs it concurrently, and
// internal/archtest checks).
package advice

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// Defaults of Options.
const (
	DefaultMonths         = 3
	MaxMonths             = 24
	DefaultExhaustiveUpTo = 64
)

// DefaultMinCoverage is the share of its hours under which a reservation is
// reported as covering little.
var DefaultMinCoverage = decimal.RequireFromString("0.5")

// Options select what is advised.
type Options struct {
	// Months is how many whole calendar months (in the catalog's zone) before
	// Now's month are looked at; 0: DefaultMonths.
	Months int
	// Now fixes "the last whole months"; required (this package reads no
	// clock: internal/advicerun takes the current time when it is zero).
	Now time.Time
	// Project limits the advice to one project ("": every project).
	Project string
	// MinCoverage: an active reservation whose covered hours are below this
	// share of its reserved hours is reported. In [0, 1].
	MinCoverage decimal.Decimal
	// ExhaustiveUpTo: where a project held at most this many instances of a
	// SKU at once, every reserved quantity from 0 to the peak is priced; above
	// it the search starts from a guess made from the concurrency profile and
	// follows the engine's prices downhill (exact when the cost falls and then
	// rises with the quantity, as with per-second rounding).
	// 0: DefaultExhaustiveUpTo.
	ExhaustiveUpTo int
}

// Window returns the n whole months before now's month in the catalog's zone.
func Window(cat *schemas.Catalog, now time.Time, n int) []billing.Period {
	t := now.In(cat.Location)
	first := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, cat.Location).AddDate(0, -n, 0)
	out := make([]billing.Period, n)
	for i := range out {
		m := first.AddDate(0, i, 0)
		out[i] = billing.NewPeriod(m.Year(), m.Month(), cat.Location)
	}
	return out
}

// group is the usage of one project and SKU over the window.
type group struct {
	project string
	sku     *schemas.SKU
	// sessions per month of the window: the engine's sessions of the actual
	// bill (bridged, clipped to the month).
	sessions [][]billing.Session
	// billed per month: the amounts the actual invoices have for this SKU.
	billedUsage, billedReserved []decimal.Decimal
	accs                        map[accKey]*billing.Accumulator // see accumulate
	bills                       int                             // engine bills made pricing it
}

// Plan is one advice: the months to bill (Periods), then, from their bills,
// the project and SKU pairs to price (Pairs). The caller bills the months and
// may price the pairs at once (internal/advicerun does both); Advise does it
// all in turn. Nothing here reads a clock or starts a goroutine.
type Plan struct {
	a *adviser
}

// NewPlan checks opt and plans the advice of its window.
func NewPlan(cat *schemas.Catalog, opt Options) (*Plan, error) {
	if err := opt.normalize(); err != nil {
		return nil, err
	}
	return &Plan{a: &adviser{cat: cat, opt: opt, periods: Window(cat, opt.Now, opt.Months)}}, nil
}

// Periods are the window's months, oldest first: the bills Pairs takes.
func (p *Plan) Periods() []billing.Period { return p.a.periods }

// Pairs is the usage of every project and SKU to price, from the months' bills.
type Pairs struct {
	a        *adviser
	groups   []*group
	warnings []string
}

// Pairs groups the bills of the window: results[i] is the engine's bill of
// Periods()[i], with every session of usage (billing.Result.Invoices[].Sessions).
func (p *Plan) Pairs(results []*billing.Result) (*Pairs, error) {
	if len(results) != len(p.a.periods) {
		return nil, fmt.Errorf("advice: %d bills for a window of %d months", len(results), len(p.a.periods))
	}
	for i, r := range results {
		if per := p.a.periods[i]; r == nil || r.Period.Year != per.Year || r.Period.Month != per.Month {
			return nil, fmt.Errorf("advice: no bill of %s", per)
		}
	}
	return &Pairs{a: p.a, groups: p.a.groups(results), warnings: p.a.warnings(results)}, nil
}

// Len is the number of pairs.
func (ps *Pairs) Len() int { return len(ps.groups) }

// Price advises on pair i by billing its usage with the engine under candidate
// reservations; bills is how many one-month bills that took. Each pair is
// priced once; distinct pairs may be priced at once.
func (ps *Pairs) Price(i int) (adv SKUAdvice, bills int, err error) {
	g := ps.groups[i]
	adv, err = ps.a.advise(g)
	return adv, g.bills, err
}

// Report puts the priced pairs (priced[i] of pair i) together with the bills'
// warnings.
func (ps *Pairs) Report(priced []SKUAdvice) *Report {
	rep := ps.a.report(priced)
	rep.Warnings = ps.warnings
	return rep
}

// Advise advises every project (or opt.Project) of the catalog and of the
// window's bills (results, as Plan.Pairs takes them), one pair after the
// other.
func Advise(cat *schemas.Catalog, opt Options, results []*billing.Result) (*Report, error) {
	plan, err := NewPlan(cat, opt)
	if err != nil {
		return nil, err
	}
	pairs, err := plan.Pairs(results)
	if err != nil {
		return nil, err
	}
	out := make([]SKUAdvice, pairs.Len())
	for i := range out {
		if out[i], _, err = pairs.Price(i); err != nil {
			return nil, err
		}
	}
	return pairs.Report(out), nil
}

// warnings are the bills' warnings (unpriced usage, projects not in the
// catalog, holder conflicts, months without usage), each once. With a project
// chosen, only those about that project or about the whole input and naming
// no user are kept: a lead's advice names no other project's students.
func (a *adviser) warnings(results []*billing.Result) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, res := range results {
		for _, msg := range res.Warnings {
			w := res.WarningFor(msg)
			if a.opt.Project != "" && w.Project != a.opt.Project && (w.Project != "" || len(w.Users) > 0) {
				continue
			}
			if !seen[msg] {
				seen[msg] = true
				out = append(out, msg)
			}
		}
	}
	return out
}

func (o *Options) normalize() error {
	if o.Months == 0 {
		o.Months = DefaultMonths
	}
	if o.Months < 1 || o.Months > MaxMonths {
		return fmt.Errorf("months: %d is out of range: want 1 to %d whole months", o.Months, MaxMonths)
	}
	if o.Now.IsZero() {
		return fmt.Errorf("now: the moment of the advice is required")
	}
	if o.MinCoverage.Sign() < 0 || o.MinCoverage.GreaterThan(decimal.NewFromInt(1)) {
		return fmt.Errorf("min coverage: %s is out of range: want a share in [0, 1], e.g. 0.5", o.MinCoverage)
	}
	if o.ExhaustiveUpTo <= 0 {
		o.ExhaustiveUpTo = DefaultExhaustiveUpTo
	}
	return nil
}

type adviser struct {
	cat     *schemas.Catalog
	opt     Options
	periods []billing.Period
}

// groups collects the sessions and billed amounts of every (project, SKU)
// with usage in the window or a reservation active in it.
func (a *adviser) groups(results []*billing.Result) []*group {
	n := len(a.periods)
	byKey := map[[2]string]*group{}
	get := func(project, skuID string) *group {
		k := [2]string{project, skuID}
		g, ok := byKey[k]
		if !ok {
			sku, _ := a.cat.SKUByID(skuID)
			g = &group{project: project, sku: sku, sessions: make([][]billing.Session, n),
				billedUsage: zeros(n), billedReserved: zeros(n)}
			byKey[k] = g
		}
		return g
	}
	for i, res := range results {
		for _, inv := range res.Invoices {
			if a.opt.Project != "" && inv.Project != a.opt.Project {
				continue
			}
			for _, s := range inv.Sessions {
				if s.SKU == "" {
					continue // unpriced: nothing to reserve
				}
				g := get(inv.Project, s.SKU)
				g.sessions[i] = append(g.sessions[i], s)
			}
			for _, l := range inv.Lines {
				g := get(inv.Project, l.SKU)
				if l.Kind == billing.KindReservation {
					g.billedReserved[i] = g.billedReserved[i].Add(l.Amount)
				} else {
					g.billedUsage[i] = g.billedUsage[i].Add(l.Amount)
				}
			}
		}
	}
	// The engine writes a line for every active reservation, so the
	// projects' reservations have their groups already; this makes sure of
	// it whatever the biller did.
	for _, p := range a.cat.Projects {
		if a.opt.Project != "" && p.ID != a.opt.Project {
			continue
		}
		for _, r := range p.Reservations {
			for _, per := range a.periods {
				if r.ActiveIn(per.MonthIndex()) {
					get(p.ID, r.SKU)
					break
				}
			}
		}
	}
	out := make([]*group, 0, len(byKey))
	for _, g := range byKey {
		if g.sku != nil {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(x, y *group) int {
		return cmp.Or(cmp.Compare(x.project, y.project), cmp.Compare(x.sku.ID, y.sku.ID))
	})
	return out
}

func zeros(n int) []decimal.Decimal {
	out := make([]decimal.Decimal, n)
	for i := range out {
		out[i] = decimal.Zero
	}
	return out
}

func sum(ds []decimal.Decimal) decimal.Decimal {
	t := decimal.Zero
	for _, d := range ds {
		t = t.Add(d)
	}
	return t
}
