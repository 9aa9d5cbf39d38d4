package alert

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
)

// Alert facts, as stored and served by the alerts API, write amounts with
// the currency's minor digits; card-hours stay hours.
func TestFactsWriteAmountsWithMinorDigits(t *testing.T) {
	f := Facts{Project: "ai101", Cost: billing.Money{Decimal: decimal.RequireFromString("957.6")}, Currency: "CNY",
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
	require.True(t, back.Cost.Equal(f.Cost.Decimal))
	require.True(t, back.Budget.Limit.Equal(f.Budget.Limit))

	hours := BudgetFacts{Unit: "card_hours", Limit: decimal.RequireFromString("40"), Used: decimal.RequireFromString("12.5")}
	b, err = json.Marshal(hours)
	require.NoError(t, err)
	require.JSONEq(t, `{"scope":"","period":"","unit":"card_hours","limit":"40","used":"12.5","percent":0}`, string(b))
}

// A delivery's envelope is stored as JSON in the ledger and read back by
// the delivery loop: the stored form is pinned, so that envelopes written
// by an earlier release still read.
func TestStoredEnvelopeJSON(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	at := time.Date(2026, 11, 30, 8, 40, 0, 0, loc)
	e := Envelope{Channel: "mail", Lang: "zh-CN", Subject: "s", Body: "b\n",
		To: Person{Role: "holder", Project: "nlp-lab", User: "alice", Name: "Alice", Email: "alice@example.edu", IM: "dingtalk:0412", Lang: "zh-CN"},
		Message: Message{Kind: billing.AlertBudgetThreshold, Key: "k|1", Facts: Facts{Project: "nlp-lab", User: "alice", Node: "n1",
			GPUUUID: "GPU-1", GPUModel: "A100", Profile: "1g.5gb", InstanceID: "MIG-1", HeldSince: at.Add(-time.Hour), IdleSince: at.Add(-time.Minute),
			At: at, NextAction: "release", NextAt: at.Add(time.Hour), Cost: billing.Money{Decimal: decimal.RequireFromString("12.3")}, Currency: "CNY", TZ: loc,
			Budget:        &BudgetFacts{Scope: "project", Period: "2026-11", Unit: "money", Limit: decimal.NewFromInt(100), Used: decimal.RequireFromString("80.5"), Percent: 80},
			ExemptionHint: "ask", Outcome: "deleted pod a/b"}}}
	got, err := json.MarshalIndent(e, "", "  ")
	require.NoError(t, err)
	const path = "testdata/envelope.json"
	if os.Getenv("UPDATE_GOLDEN") != "" {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got)+"\n")
	var back Envelope
	require.NoError(t, json.Unmarshal(want, &back))
	require.Equal(t, e.To, back.To)
	require.True(t, back.Message.Facts.Cost.Equal(e.Message.Facts.Cost.Decimal))
	require.True(t, back.Message.Facts.At.Equal(at))
}
