package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// After a void, the invoice's exports go to the flow's void rendering (with
// the credit note's number), its JSON stays the stored document, the credit
// note is exported and listed with its document, and the period export
// lists it after the invoices.
func TestVoidedExportsAndCreditNotes(t *testing.T) {
	f := newFixture(t)
	id := f.ids["inv-oct-ai101"]
	before := f.do("finance", "GET", fmt.Sprintf("/api/v1/invoices/%d/export?format=json", id), "", "")
	require.Equal(t, 200, before.Status)
	r := f.do("finance", "POST", fmt.Sprintf("/api/v1/invoices/%d/void", id), `{"reason":"wrong catalog"}`, "application/json")
	require.Equal(t, 200, r.Status, string(r.Body))
	v := r.json(t)
	cn := v["credit_note"].(map[string]any)
	number := cn["number"].(string)
	require.NotEmpty(t, cn["sha256"])
	require.NotEmpty(t, cn["document"], "the void response has no credit note document")

	csv := f.do("finance", "GET", fmt.Sprintf("/api/v1/invoices/%d/export?format=csv", id), "", "")
	require.Equal(t, 200, csv.Status, string(csv.Body))
	require.Contains(t, string(csv.Body), "VOID,"+number, "a voided invoice's export is not the void rendering")
	require.Contains(t, csv.Header.Get("Content-Disposition"), "-void.csv")
	after := f.do("finance", "GET", fmt.Sprintf("/api/v1/invoices/%d/export?format=json", id), "", "")
	require.Equal(t, 200, after.Status)
	require.Equal(t, string(before.Body), string(after.Body), "the JSON export is the stored document")

	list := f.do("lead", "GET", fmt.Sprintf("/api/v1/invoices/%d/credit-notes", id), "", "")
	require.Equal(t, 200, list.Status, string(list.Body))
	require.Contains(t, string(list.Body), `"document"`)
	cnID := int64(cn["id"].(float64))
	exp := f.do("lead", "GET", fmt.Sprintf("/api/v1/credit-notes/%d/export?format=csv", cnID), "", "")
	require.Equal(t, 200, exp.Status, string(exp.Body))
	require.Contains(t, string(exp.Body), "-12.50")
	require.Contains(t, exp.Header.Get("Content-Disposition"), "credit-note-"+number)
	js := f.do("finance", "GET", fmt.Sprintf("/api/v1/credit-notes/%d/export?format=json", cnID), "", "")
	require.Equal(t, 200, js.Status)
	require.Contains(t, string(js.Body), number)
	require.Equal(t, 404, f.do("finance", "GET", "/api/v1/credit-notes/999999/export?format=csv", "", "").Status)

	// The reissue draft of October is open, so October has no finalized
	// invoice left: finalize it, then the period export lists both.
	draft := v["draft"].(map[string]any)
	fin := f.do("finance", "POST", fmt.Sprintf("/api/v1/invoices/%d/finalize", int64(draft["id"].(float64))), fmt.Sprintf(`{"if_sha256":%q}`, draft["sha256"]), "application/json")
	require.Equal(t, 200, fin.Status, string(fin.Body))
	per := f.do("finance", "GET", "/api/v1/periods/2026-10/export?format=json", "", "")
	require.Equal(t, 200, per.Status, string(per.Body))
	require.Contains(t, string(per.Body), number)
	require.Less(t, strings.Index(string(per.Body), `"12.50"`), strings.Index(string(per.Body), number), "credit notes come after the invoices")
}
