package billing

import (
	"encoding/json"
	"testing"

	"github.com/shopspring/decimal"
)

// A budget's amounts are written in its unit's way: money with the minor
// digits, card-hours as they are; an unknown unit or scope is not valid.
func TestBudgetUnitFormatsAndLists(t *testing.T) {
	d := decimal.RequireFromString("880")
	if got := BudgetMoney.Format(d); got != "880.00" {
		t.Errorf("money %q, want 880.00", got)
	}
	if got := BudgetCardHours.Format(decimal.RequireFromString("12.5")); got != "12.5" {
		t.Errorf("card-hours %q, want 12.5", got)
	}
	if !BudgetCardHours.Valid() || BudgetUnit("hours").Valid() || !BudgetStudent.Valid() || BudgetScope("site").Valid() {
		t.Error("Valid does not follow the lists")
	}
}

// Money's JSON is FormatMoney's, in the field's place, and reads back.
func TestMoneyJSON(t *testing.T) {
	v := struct {
		A Money `json:"a"`
		B int   `json:"b"`
	}{Money{decimal.RequireFromString("957.6")}, 1}
	b, err := json.Marshal(v)
	if err != nil || string(b) != `{"a":"957.60","b":1}` {
		t.Fatalf("%s %v", b, err)
	}
	v.A = Money{}
	if err := json.Unmarshal(b, &v); err != nil || !v.A.Equal(decimal.RequireFromString("957.6")) {
		t.Fatalf("read back %v %v", v.A, err)
	}
}
