package api_test

import (
	"encoding/json"
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

// A period's summary: each revision with its total and funding, totals by
// funding source and of the period (void revisions in none); a lead sees
// its project's. Finalizing several drafts: each with its own if_sha256,
// each finalized or refused on its own, in the order given.
func TestPeriodSummaryAndBatchFinalize(t *testing.T) {
	f := newFixture(t)
	r := f.do("finance", "GET", "/api/v1/periods/2026-11/summary", "", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	var sum struct {
		Invoices []struct {
			ID             int64
			Project        string
			Status, SHA256 string
			Total          string
		}
		Totals []struct {
			Drafts, Finalized int
			Total             string
			DraftTotal        string `json:"draft_total"`
		}
	}
	require.NoError(t, json.Unmarshal(r.Body, &sum))
	require.Len(t, sum.Invoices, 2, "November: the ai101 and nlp-lab drafts")
	require.Len(t, sum.Totals, 1)
	require.Equal(t, 2, sum.Totals[0].Drafts)
	require.Equal(t, sum.Totals[0].Total, sum.Totals[0].DraftTotal)
	lead := f.do("lead", "GET", "/api/v1/periods/2026-11/summary", "", "")
	require.Equal(t, 200, lead.Status)
	require.NotContains(t, string(lead.Body), "nlp-lab", "a lead sees its own project's")

	var ai, nlp int64
	var aiSHA, nlpSHA string
	for _, it := range sum.Invoices {
		if it.Project == "ai101" {
			ai, aiSHA = it.ID, it.SHA256
		} else {
			nlp, nlpSHA = it.ID, it.SHA256
		}
	}
	stale := strings.Repeat("0", 64)
	body := fmt.Sprintf(`{"items":[{"id":%d,"if_sha256":%q},{"id":%d,"if_sha256":%q},{"id":%d,"if_sha256":%q},{"id":999,"if_sha256":%q}]}`,
		nlp, stale, ai, aiSHA, f.ids["inv-oct-ai101"], aiSHA, stale)
	r = f.do("finance", "POST", "/api/v1/periods/2026-11/finalize", body, "application/json")
	require.Equal(t, 200, r.Status, string(r.Body))
	var res struct {
		Finalized, Refused int
		Results            []struct {
			ID      int64
			OK      bool
			Invoice *struct{ Status, Number string }
			Problem *struct{ Type, Detail string }
		}
	}
	require.NoError(t, json.Unmarshal(r.Body, &res))
	require.Equal(t, 1, res.Finalized)
	require.Equal(t, 3, res.Refused)
	require.Len(t, res.Results, 4)
	require.Equal(t, nlp, res.Results[0].ID)
	require.False(t, res.Results[0].OK)
	require.Equal(t, "https://cardhour.dev/problems/conflict", res.Results[0].Problem.Type, "a draft recomputed since it was reviewed")
	require.True(t, res.Results[1].OK)
	require.Equal(t, "finalized", res.Results[1].Invoice.Status)
	require.NotEmpty(t, res.Results[1].Invoice.Number)
	require.Equal(t, "https://cardhour.dev/problems/validation", res.Results[2].Problem.Type)
	require.Contains(t, res.Results[2].Problem.Detail, "is of 2026-10, not 2026-11")
	require.Equal(t, "https://cardhour.dev/problems/not-found", res.Results[3].Problem.Type)

	// The nlp-lab draft, with the right digest, finalizes on its own.
	r = f.do("finance", "POST", "/api/v1/periods/2026-11/finalize", fmt.Sprintf(`{"items":[{"id":%d,"if_sha256":%q}]}`, nlp, nlpSHA), "application/json")
	require.Equal(t, 200, r.Status)
	require.Contains(t, string(r.Body), `"finalized":1`)
	r = f.do("finance", "GET", "/api/v1/periods/2026-11/summary", "", "")
	require.NoError(t, json.Unmarshal(r.Body, &sum))
	require.Equal(t, 2, sum.Totals[0].Finalized)
	require.Zero(t, sum.Totals[0].Drafts)
	require.Equal(t, 422, f.do("finance", "POST", "/api/v1/periods/2026-11/finalize", `{"items":[]}`, "application/json").Status)
}
