package reads

import (
	"cmp"
	"fmt"
	"slices"
)

// Measures a usage report's rows can be ordered by, largest first: the JSON
// names of UsageGroup's fields.
const (
	OrderCost        = "cost"
	OrderIdleCost    = "idle_cost"
	OrderHeldSeconds = "held_seconds"
	OrderIdleSeconds = "idle_seconds"
	OrderSavedCost   = "saved_cost"
)

// UsageOrders lists every measure OrderedRows orders by.
var UsageOrders = []string{OrderCost, OrderIdleCost, OrderHeldSeconds, OrderIdleSeconds, OrderSavedCost}

// OrderedRows returns rep's rows ordered by measure, largest first, rows of
// equal measure in the report's order (by their groups): the first n are the
// top n. An empty measure keeps the report's order. The report is not
// changed (reports may be shared, UsageCache).
func OrderedRows(rep *UsageReport, measure string) ([]UsageGroup, error) {
	var key func(a, b *UsageGroup) int
	switch measure {
	case "":
		return rep.Rows, nil
	case OrderCost:
		key = func(a, b *UsageGroup) int { return a.Cost.Cmp(b.Cost.Decimal) }
	case OrderIdleCost:
		key = func(a, b *UsageGroup) int { return a.IdleCost.Cmp(b.IdleCost.Decimal) }
	case OrderHeldSeconds:
		key = func(a, b *UsageGroup) int { return cmp.Compare(a.HeldSeconds, b.HeldSeconds) }
	case OrderIdleSeconds:
		key = func(a, b *UsageGroup) int { return cmp.Compare(a.IdleSeconds, b.IdleSeconds) }
	case OrderSavedCost:
		key = func(a, b *UsageGroup) int { return a.SavedCost.Cmp(b.SavedCost.Decimal) }
	default:
		return nil, fmt.Errorf("usage: order_by: unknown measure %q (want one of %v)", measure, UsageOrders)
	}
	rows := slices.Clone(rep.Rows)
	slices.SortStableFunc(rows, func(a, b UsageGroup) int { return key(&b, &a) })
	return rows, nil
}
