//go:build !collector

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing/export"
)

// The invoice lifecycle through the HTTP API of a real server: a billing run
// over the same usage keeps its drafts (unchanged, same SHA-256); void →
// finalize gives the reissue the next number (the reissue draft has none
// before); the credit note is a document with the four exports, listed by
// the period export; the voided invoice's stored document keeps its bytes.
func TestServeInvoiceLifecycle(t *testing.T) {
	store := "sqlite://" + t.TempDir() + "/usage.db"
	code, out, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)
	code, out, errOut = runCLI(t, "", "token", "create", "--state", store, "--role", "finance")
	require.Zero(t, code, errOut)
	fin := strings.TrimSpace(out)
	sv := startServe(t, "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--grace", "1s")
	defer sv.stop()

	type runDraft struct {
		Project   string `json:"project"`
		InvoiceID int64  `json:"invoice_id"`
		SHA256    string `json:"sha256"`
		Outcome   string `json:"outcome"`
	}
	billingRun := func() map[string]runDraft {
		st, body := sv.request("POST", "/api/v1/billing-runs", fin, "application/json", `{"period":"2026-11"}`)
		require.Equal(t, 200, st, body)
		var run struct {
			Drafts []runDraft `json:"drafts"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &run))
		out := map[string]runDraft{}
		for _, d := range run.Drafts {
			out[d.Project] = d
		}
		return out
	}
	first := billingRun()
	require.NotEmpty(t, first)
	second := billingRun()
	for p, d := range first {
		require.Equal(t, "created", d.Outcome, p)
		require.Equal(t, "unchanged", second[p].Outcome, "%s: a run over the same usage", p)
		require.Equal(t, d.SHA256, second[p].SHA256, "%s: a run over the same usage changed the hash", p)
	}
	nlp := first["nlp-lab"]
	require.NotZero(t, nlp.InvoiceID)
	type invoice struct {
		ID       int64           `json:"id"`
		Status   string          `json:"status"`
		Number   string          `json:"number"`
		SHA256   string          `json:"sha256"`
		Document json.RawMessage `json:"document"`
	}
	getInvoice := func(id int64) invoice {
		st, body := sv.get(fmt.Sprintf("/api/v1/invoices/%d", id), fin)
		require.Equal(t, 200, st, body)
		var inv invoice
		require.NoError(t, json.Unmarshal([]byte(body), &inv))
		return inv
	}
	finalize := func(id int64, sha string) invoice {
		st, body := sv.request("POST", fmt.Sprintf("/api/v1/invoices/%d/finalize", id), fin, "application/json", fmt.Sprintf(`{"if_sha256":%q}`, sha))
		require.Equal(t, 200, st, body)
		var inv invoice
		require.NoError(t, json.Unmarshal([]byte(body), &inv))
		return inv
	}
	// The SHA-256 reviewed before the second run still finalizes.
	inv := finalize(nlp.InvoiceID, first["nlp-lab"].SHA256)
	require.Equal(t, "finalized", inv.Status)
	frozen := getInvoice(inv.ID)

	st, finalPDF := sv.get(fmt.Sprintf("/api/v1/invoices/%d/export?format=pdf", inv.ID), fin)
	require.Equal(t, 200, st)
	st, body := sv.request("POST", fmt.Sprintf("/api/v1/invoices/%d/void", inv.ID), fin, "application/json", `{"reason":"wrong rate"}`)
	require.Equal(t, 200, st, body)
	var voided struct {
		Invoice    invoice `json:"invoice"`
		CreditNote struct {
			ID       int64           `json:"id"`
			Number   string          `json:"number"`
			SHA256   string          `json:"sha256"`
			Document json.RawMessage `json:"document"`
		} `json:"credit_note"`
		Draft invoice `json:"draft"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &voided))
	require.Equal(t, inv.Number+"-CN1", voided.CreditNote.Number)

	// The reissue draft has no number and no issue date until finalized.
	draft := getInvoice(voided.Draft.ID)
	require.Equal(t, "draft", draft.Status)
	require.Empty(t, draft.Number)
	require.NotContains(t, string(draft.Document), `"number"`)
	require.NotContains(t, string(draft.Document), `"issued_at"`)
	next := finalize(draft.ID, draft.SHA256)
	require.Equal(t, "finalized", next.Status)
	require.NotEqual(t, inv.Number, next.Number)
	require.Greater(t, next.Number, inv.Number, "the reissue gets the next number")
	require.Contains(t, string(getInvoice(next.ID).Document), fmt.Sprintf(`"number":%q`, next.Number))

	// The voided invoice keeps its bytes and hash.
	after := getInvoice(inv.ID)
	require.Equal(t, "void", after.Status)
	require.Equal(t, string(frozen.Document), string(after.Document))
	require.Equal(t, frozen.SHA256, after.SHA256)
	st, body = sv.get(fmt.Sprintf("/api/v1/invoices/%d/export?format=json", inv.ID), fin)
	require.Equal(t, 200, st, body)
	sum := sha256.Sum256([]byte(body))
	require.Equal(t, frozen.SHA256, hex.EncodeToString(sum[:]), "the voided invoice's JSON export is its stored bytes")
	for _, f := range []string{"csv", "xlsx", "pdf"} {
		st, body = sv.get(fmt.Sprintf("/api/v1/invoices/%d/export?format=%s", inv.ID, f), fin)
		require.Equal(t, 200, st, "%s of a voided invoice: %s", f, body)
		switch f {
		case "csv": // the mark row names the credit note
			require.Contains(t, body, export.MarkVoid)
			require.Contains(t, body, "已作废 VOID — voided by credit note 由红字发票 "+voided.CreditNote.Number)
		case "pdf": // served after the void: not the cached finalized rendering
			require.NotEqual(t, finalPDF, body, "the voided invoice's PDF is the finalized one")
		}
	}

	// The credit note: a document with its four exports.
	var cn struct {
		Number    string `json:"number"`
		CreditFor string `json:"credit_for"`
		Currency  string `json:"currency"`
		Total     string `json:"total"`
		Lines     []struct {
			Amount string `json:"amount"`
		} `json:"lines"`
	}
	require.NoError(t, json.Unmarshal(voided.CreditNote.Document, &cn))
	var orig struct {
		Total string `json:"total"`
	}
	require.NoError(t, json.Unmarshal(frozen.Document, &orig))
	require.Equal(t, inv.Number, cn.CreditFor)
	require.Equal(t, voided.CreditNote.Number, cn.Number)
	require.Equal(t, "CNY", cn.Currency)
	require.Equal(t, "-"+orig.Total, cn.Total)
	require.NotEmpty(t, cn.Lines)
	for _, l := range cn.Lines {
		require.True(t, strings.HasPrefix(l.Amount, "-") || l.Amount == "0.00", l.Amount)
	}
	for _, f := range []string{"csv", "xlsx", "pdf", "json"} {
		res, err := http.Get(sv.base + fmt.Sprintf("/api/v1/credit-notes/%d/export?format=%s", voided.CreditNote.ID, f))
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, 401, res.StatusCode, "an anonymous credit note export")
		st, body = sv.get(fmt.Sprintf("/api/v1/credit-notes/%d/export?format=%s", voided.CreditNote.ID, f), fin)
		require.Equal(t, 200, st, "%s: %s", f, body)
		require.NotEmpty(t, body)
		switch f {
		case "json":
			sum := sha256.Sum256([]byte(body))
			require.Equal(t, voided.CreditNote.SHA256, hex.EncodeToString(sum[:]), "the JSON export is the stored credit note")
		case "csv":
			require.Contains(t, body, voided.CreditNote.Number)
			require.Contains(t, body, "-"+orig.Total)
			require.Contains(t, body, export.MarkCredit)
			require.Contains(t, body, "voids invoice 冲销发票 "+inv.Number)
		case "pdf":
			require.True(t, strings.HasPrefix(body, "%PDF-"))
		}
	}
	st, body = sv.get("/api/v1/credit-notes/999999/export?format=csv", fin)
	require.Equal(t, 404, st, body)

	// The period export lists the credit note after the invoices.
	st, body = sv.get("/api/v1/periods/2026-11/export?format=json", fin)
	require.Equal(t, 200, st, body)
	var docs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &docs))
	found := false
	for _, d := range docs {
		if d["credit_for"] == inv.Number {
			found = true
			require.Equal(t, voided.CreditNote.Number, d["number"])
			require.Equal(t, "-"+orig.Total, d["total"])
		}
	}
	require.True(t, found, "the period export has no credit note: %s", body)
	st, body = sv.get("/api/v1/periods/2026-11/export?format=csv", fin)
	require.Equal(t, 200, st, body)
	require.Contains(t, body, voided.CreditNote.Number)
}
