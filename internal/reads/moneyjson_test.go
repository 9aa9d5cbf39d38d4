package reads_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/reads"
)

// A usage group's JSON has its cost with the minor digits, in its place,
// and escapes <, > and & exactly when the enclosing encoder does (the
// API's does not), as a struct without a MarshalJSON would.
func TestUsageGroupJSON(t *testing.T) {
	g := reads.UsageGroup{User: "a<b>&c", HeldSeconds: 3600, BusySeconds: 3600, Efficiency: "100.0", Cost: billing.Money{Decimal: decimal.RequireFromString("5.1")}}
	var api bytes.Buffer
	enc := json.NewEncoder(&api)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(g); err != nil {
		t.Fatal(err)
	}
	if want := `{"user":"a<b>&c","held_seconds":3600,"idle_seconds":0,"busy_seconds":3600,"efficiency":"100.0","cost":"5.10","idle_cost":"0.00","saved_seconds":0,"saved_cost":"0.00"}` + "\n"; api.String() != want {
		t.Errorf("as the API writes it:\n%s\nwant\n%s", api.String(), want)
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"user":"a\u003cb\u003e\u0026c","held_seconds":3600,"idle_seconds":0,"busy_seconds":3600,"efficiency":"100.0","cost":"5.10","idle_cost":"0.00","saved_seconds":0,"saved_cost":"0.00"}`; string(b) != want {
		t.Errorf("json.Marshal:\n%s\nwant\n%s", b, want)
	}
}
