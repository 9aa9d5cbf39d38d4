package billing

import (
	"slices"
	"time"

	"github.com/shopspring/decimal"
)

// A budget's (配额's) enums, each with its one list: the state store keeps
// them, the watcher compares them, its alerts carry the scope and the unit,
// the notifier renders them and the API's document is tested against the
// lists.
type (
	// BudgetScope is what a budget limits: a project, or one student in
	// a project.
	BudgetScope string
	// BudgetPeriodKind is the stretch a budget counts over.
	BudgetPeriodKind string
	// BudgetUnit is what a budget counts.
	BudgetUnit string
	// BudgetAction is what happens at 100 %.
	BudgetAction string
)

const (
	BudgetProject BudgetScope = "project"
	BudgetStudent BudgetScope = "student"

	// The calendar month, or the academic term of the catalog, in the
	// catalog's time zone.
	BudgetMonth BudgetPeriodKind = "month"
	BudgetTerm  BudgetPeriodKind = "term"

	// Money (what the invoice charges, in the catalog's currency) or
	// card-hours (held hours).
	BudgetMoney     BudgetUnit = "money"
	BudgetCardHours BudgetUnit = "card_hours"

	// Warn only, or warn and release the held instances of the budget's
	// student (a project budget releases those of the project).
	BudgetWarn    BudgetAction = "warn"
	BudgetRelease BudgetAction = "release"
)

// The lists, each in a fixed order.
var (
	BudgetScopes      = []BudgetScope{BudgetProject, BudgetStudent}
	BudgetPeriodKinds = []BudgetPeriodKind{BudgetMonth, BudgetTerm}
	BudgetUnits       = []BudgetUnit{BudgetMoney, BudgetCardHours}
	BudgetActions     = []BudgetAction{BudgetWarn, BudgetRelease}
)

// Valid reports whether s is one of BudgetScopes.
func (s BudgetScope) Valid() bool { return slices.Contains(BudgetScopes, s) }

// Valid reports whether k is one of BudgetPeriodKinds.
func (k BudgetPeriodKind) Valid() bool { return slices.Contains(BudgetPeriodKinds, k) }

// Valid reports whether u is one of BudgetUnits.
func (u BudgetUnit) Valid() bool { return slices.Contains(BudgetUnits, u) }

// Valid reports whether a is one of BudgetActions.
func (a BudgetAction) Valid() bool { return slices.Contains(BudgetActions, a) }

// Format writes an amount of the unit as the API, the alerts and the
// evidence do: money with the currency's minor digits (FormatMoney,
// "880.00"), card-hours as they are ("12.5").
func (u BudgetUnit) Format(d decimal.Decimal) string {
	if u == BudgetMoney {
		return FormatMoney(d)
	}
	return d.String()
}

// BudgetProjection is a budget's state when its use was measured, and
// where the period's average rate so far takes it by the period's end.
// Amounts are in the budget's unit: money in the currency (Used exact as
// billed, Forecast rounded to the cent by ShareAmount), card-hours to 0.01
// (CardHours).
type BudgetProjection struct {
	Used, Left decimal.Decimal
	// Percent is Used ÷ limit × 100, rounded down (161 for 161.13 %): a
	// threshold of p % is reached exactly when Percent ≥ p.
	Percent int64
	// Reached is Used ≥ limit.
	Reached bool
	// Forecast is Used × period ÷ elapsed: the use at the period's end
	// when it goes on at the average rate of the period so far.
	Forecast decimal.Decimal
	// ReachesAt is when that rate reaches the limit, when it does so
	// before the period ends and has not yet (zero otherwise).
	ReachesAt time.Time
}

// CardHours writes card-milliseconds as card-hours to 0.01 (half away
// from zero), as budgets show them.
func CardHours(ms int64) decimal.Decimal {
	return decimal.NewFromInt(ms).DivRound(decimal.NewFromInt(3_600_000), 2)
}

// ProjectBudget is a budget's projection: limit in unit, the use measured
// at asOf (money, or card-milliseconds for BudgetCardHours) in the period
// [start, end).
func ProjectBudget(unit BudgetUnit, limit, usedMoney decimal.Decimal, usedMS int64, start, end, asOf time.Time) BudgetProjection {
	exact := usedMoney // the use in the limit's terms, exactly
	lim := limit
	if unit == BudgetCardHours {
		exact, lim = decimal.NewFromInt(usedMS), limit.Mul(decimal.NewFromInt(3_600_000))
	}
	var p BudgetProjection
	if lim.IsPositive() {
		q, _ := exact.Mul(decimal.NewFromInt(100)).QuoRem(lim, 0)
		p.Percent = q.IntPart()
	}
	p.Reached = exact.GreaterThanOrEqual(lim)
	total, elapsed := end.Sub(start).Milliseconds(), asOf.Sub(start).Milliseconds()
	if elapsed > total {
		elapsed = total
	}
	forecastMS := usedMS
	p.Forecast = usedMoney
	if elapsed > 0 && total > 0 {
		p.Forecast = ShareAmount(usedMoney, total, elapsed)
		q, _ := decimal.NewFromInt(usedMS).Mul(decimal.NewFromInt(total)).QuoRem(decimal.NewFromInt(elapsed), 0)
		forecastMS = q.IntPart()
		if !p.Reached && exact.IsPositive() {
			q, _ := decimal.NewFromInt(elapsed).Mul(lim).QuoRem(exact, 0) // ms after start at which the rate reaches the limit
			if at := start.Add(time.Duration(q.IntPart()) * time.Millisecond); at.Before(end) {
				p.ReachesAt = at
			}
		}
	}
	p.Used = usedMoney
	if unit == BudgetCardHours {
		p.Used, p.Forecast = CardHours(usedMS), CardHours(forecastMS)
	}
	p.Left = limit.Sub(p.Used)
	return p
}
