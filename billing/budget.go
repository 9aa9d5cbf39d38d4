package billing

import (
	"slices"

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
