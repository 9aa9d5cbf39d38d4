package reads_test

import (
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/reads"
)

// OrderedRows orders by a measure, largest first, equal ones in the
// report's order, and leaves the report as it was.
func TestOrderedRowsLargestFirstStable(t *testing.T) {
	m := func(s string) billing.Money { return billing.Money{Decimal: decimal.RequireFromString(s)} }
	rep := &reads.UsageReport{Rows: []reads.UsageGroup{
		{User: "a", HeldSeconds: 10, IdleSeconds: 5, Cost: m("1.00"), IdleCost: m("0.50"), SavedCost: m("0.40")},
		{User: "b", HeldSeconds: 30, IdleSeconds: 0, Cost: m("1.00"), IdleCost: m("0"), SavedCost: m("2.00")},
		{User: "c", HeldSeconds: 20, IdleSeconds: 9, Cost: m("3.10"), IdleCost: m("0.50"), SavedCost: m("0.40")},
	}}
	users := func(rows []reads.UsageGroup) (out []string) {
		for _, r := range rows {
			out = append(out, r.User)
		}
		return out
	}
	for measure, want := range map[string][]string{
		"": {"a", "b", "c"}, reads.OrderCost: {"c", "a", "b"}, reads.OrderIdleCost: {"a", "c", "b"},
		reads.OrderHeldSeconds: {"b", "c", "a"}, reads.OrderIdleSeconds: {"c", "a", "b"},
		reads.OrderSavedCost: {"b", "a", "c"},
	} {
		rows, err := reads.OrderedRows(rep, measure)
		require.NoError(t, err)
		require.Equal(t, want, users(rows), measure)
	}
	require.Equal(t, []string{"a", "b", "c"}, users(rep.Rows), "the report is not changed")
	_, err := reads.OrderedRows(rep, "price")
	require.ErrorContains(t, err, `unknown measure "price"`)
}
