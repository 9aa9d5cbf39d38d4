package billing

import (
	"slices"

	"github.com/shopspring/decimal"
)

// BudgetUnit is what a budget counts: the one list the state store keeps,
// the watcher compares, its alerts carry, the notifier renders and the API
// takes.
type BudgetUnit string

// Budget units: money (what the invoice charges, in the catalog's
// currency) or card-hours (held hours).
const (
	BudgetMoney     BudgetUnit = "money"
	BudgetCardHours BudgetUnit = "card_hours"
)

// BudgetUnits lists every unit, in a fixed order.
var BudgetUnits = []BudgetUnit{BudgetMoney, BudgetCardHours}

// Valid reports whether u is one of BudgetUnits.
func (u BudgetUnit) Valid() bool { return slices.Contains(BudgetUnits, u) }

// Format writes an amount of the unit as the API, the alerts and the
// evidence do: money with the currency's minor digits (FormatMoney,
// "880.00"), card-hours as they are ("12.5").
func (u BudgetUnit) Format(d decimal.Decimal) string {
	if u == BudgetMoney {
		return FormatMoney(d)
	}
	return d.String()
}

// BudgetScope is what a budget limits: a project, or one student in a
// project (the one list, as BudgetUnits).
type BudgetScope string

// Budget scopes.
const (
	BudgetProject BudgetScope = "project"
	BudgetStudent BudgetScope = "student"
)

// BudgetScopes lists every scope, in a fixed order.
var BudgetScopes = []BudgetScope{BudgetProject, BudgetStudent}

// Valid reports whether s is one of BudgetScopes.
func (s BudgetScope) Valid() bool { return slices.Contains(BudgetScopes, s) }
