package alert

import (
	"encoding/json"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// Alert facts, as stored and served by the alerts API, write amounts with
// the currency's minor digits; card-hours stay hours.
func TestFactsWriteAmountsWithMinorDigits(t *testing.T) {
	f := Facts{Project: "ai101", Cost: decimal.RequireFromString("957.6"), Currency: "CNY",
		Budget: &BudgetFacts{Scope: "project", Period: "2026-11", Unit: "money", Limit: decimal.RequireFromString("880"), Used: decimal.RequireFromString("10"), Percent: 80}}
	b, err := json.Marshal(f)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, "957.60", got["cost"])
	require.Equal(t, "880.00", got["budget"].(map[string]any)["limit"])
	require.Equal(t, "10.00", got["budget"].(map[string]any)["used"])
	var back Facts
	require.NoError(t, json.Unmarshal(b, &back))
	require.True(t, back.Cost.Equal(f.Cost))
	require.True(t, back.Budget.Limit.Equal(f.Budget.Limit))

	hours := BudgetFacts{Unit: "card_hours", Limit: decimal.RequireFromString("40"), Used: decimal.RequireFromString("12.5")}
	b, err = json.Marshal(hours)
	require.NoError(t, err)
	require.JSONEq(t, `{"scope":"","period":"","unit":"card_hours","limit":"40","used":"12.5","percent":0}`, string(b))
}
