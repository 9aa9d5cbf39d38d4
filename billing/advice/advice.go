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
package advice

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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
	// Now fixes "the last whole months" (zero: the current time).
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
	// Workers prices that many (project, SKU) pairs at once; 0: one per CPU.
	Workers int
	// Progress, when set, receives a line about each step of a long run.
	Progress func(msg string)
}

// Biller bills one month: the engine's invoices, with every session of
// usage (billing.Result.Invoices[].Sessions).
type Biller func(ctx context.Context, p billing.Period) (*billing.Result, error)

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
}

// Advise bills the window's months with bill and advises every project (or
// opt.Project) of the catalog and of the usage.
func Advise(ctx context.Context, cat *schemas.Catalog, bill Biller, opt Options) (*Report, error) {
	if err := opt.normalize(); err != nil {
		return nil, err
	}
	periods := Window(cat, opt.Now, opt.Months)
	a := &adviser{cat: cat, opt: opt, periods: periods}
	// The months are billed at once (a store answers each on its own).
	results := make([]*billing.Result, len(periods))
	berrs := make([]error, len(periods))
	var bw sync.WaitGroup
	sem := make(chan struct{}, opt.Workers)
	for i, p := range periods {
		bw.Add(1)
		go func() {
			defer bw.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t0 := time.Now()
			res, err := bill(ctx, p)
			if err != nil {
				berrs[i] = fmt.Errorf("cannot bill %s: %w", p, err)
				return
			}
			results[i] = res
			opt.progress("billed %s (%d invoices) in %v", p, len(res.Invoices), time.Since(t0).Round(time.Millisecond))
		}()
	}
	bw.Wait()
	if err := errors.Join(berrs...); err != nil {
		return nil, err
	}
	warnings := a.warnings(results)
	groups := a.groups(results)
	opt.progress("pricing %d project and SKU pairs with the billing engine", len(groups))
	t0 := time.Now()
	out := make([]SKUAdvice, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	next := make(chan int)
	for range opt.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil {
					errs[i] = ctx.Err()
					continue
				}
				out[i], errs[i] = a.advise(groups[i])
			}
		}()
	}
	for i := range groups {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	opt.progress("priced %d pairs in %v (%d bills of one month by the engine)", len(groups), time.Since(t0).Round(time.Millisecond), a.bills.Load())
	rep := a.report(out)
	rep.Warnings = warnings
	return rep, nil
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
		o.Now = time.Now()
	}
	if o.MinCoverage.Sign() < 0 || o.MinCoverage.GreaterThan(decimal.NewFromInt(1)) {
		return fmt.Errorf("min coverage: %s is out of range: want a share in [0, 1], e.g. 0.5", o.MinCoverage)
	}
	if o.ExhaustiveUpTo <= 0 {
		o.ExhaustiveUpTo = DefaultExhaustiveUpTo
	}
	if o.Workers <= 0 {
		o.Workers = max(1, runtime.GOMAXPROCS(0))
	}
	return nil
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

type adviser struct {
	cat     *schemas.Catalog
	opt     Options
	periods []billing.Period
	bills   atomic.Int64 // engine bills made, for the progress line
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
