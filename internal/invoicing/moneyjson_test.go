package invoicing_test

import (
	"encoding/json"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/invoicing"
)

// A run's amounts are written with the minor digits, each in its field's
// place (the API serves the report as it marshals), and read back.
func TestRunAmountsJSON(t *testing.T) {
	m := func(s string) billing.Money { return billing.Money{Decimal: decimal.RequireFromString(s)} }
	d := invoicing.RunDiff{Project: "ai101", InvoiceID: 7, Number: "2026-000001", Revision: 1,
		OldTotal: m("957.6"), NewTotal: m("1000"), Delta: m("42.4"), Action: invoicing.ActionVoidAndReissue,
		Lines: []invoicing.RunDiffLine{{Kind: "usage", User: "s-bob", SKU: "t4", Old: m("0"), New: m("42.4"), Delta: m("42.4")}}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"project":"ai101","invoice_id":7,"number":"2026-000001","revision":1,"old_total":"957.60","new_total":"1000.00","delta":"42.40",` +
		`"lines":[{"kind":"usage","user":"s-bob","sku":"t4","old":"0.00","new":"42.40","delta":"42.40"}],"action":"void_and_reissue"}`
	if string(b) != want {
		t.Fatalf("diff JSON:\n%s\nwant\n%s", b, want)
	}
	var back invoicing.RunDiff
	if err := json.Unmarshal(b, &back); err != nil || !back.OldTotal.Equal(d.OldTotal.Decimal) || !back.Lines[0].New.Equal(d.Lines[0].New.Decimal) {
		t.Fatalf("read back: %+v %v", back, err)
	}
	dr, err := json.Marshal(invoicing.RunDraft{Project: "ai101", InvoiceID: 7, Revision: 2, SHA256: "ab", Total: m("12.5"), Outcome: invoicing.OutcomeUpdated})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"project":"ai101","invoice_id":7,"revision":2,"sha256":"ab","total":"12.50","outcome":"updated"}`; string(dr) != want {
		t.Fatalf("draft JSON:\n%s\nwant\n%s", dr, want)
	}
}
