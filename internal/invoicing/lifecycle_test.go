package invoicing_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// finalizedNLP bills November with alice's 10 H100 hours, past the grace
// period, and finalizes nlp-lab's invoice.
func finalizedNLP(t *testing.T, f *fixture) ledger.Invoice {
	t.Helper()
	ctx := ctxT(t)
	must[ledger.CatalogVersion](t)(firstOf(f.led.PutCatalog(ctx, "admin", exampleCatalog(t))))
	write(t, f.usage, occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-03 09:00"), at("2026-11-03 19:00")))
	f.clock.Set(at("2026-12-04 09:00"))
	run := must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11"))
	d := draftOf(t, run, "nlp-lab")
	return must[ledger.Invoice](t)(f.svc.Finalize(ctx, "finance", d.InvoiceID, d.SHA256))
}

func TestVoidReissueCreditNoteSQLite(t *testing.T)   { voidReissueCreditNote(t, sqliteLedger(t)) }
func TestVoidReissueCreditNotePostgres(t *testing.T) { voidReissueCreditNote(t, postgresLedger(t)) }

// Void → finalize: the reissue draft has no number until it is finalized,
// and then the next one; the credit note is a document stored with its
// SHA-256; the voided invoice keeps its bytes, and its later renderings get
// the void mark.
func voidReissueCreditNote(t *testing.T, open openLedger) {
	ctx := ctxT(t)
	f := newFixture(t, open, nil)
	inv := finalizedNLP(t, f)
	frozen, frozenSHA := bytes.Clone(inv.Document), inv.SHA256
	require.Equal(t, "2026-000001", inv.Number)

	f.clock.Set(at("2026-12-05 10:00"))
	v := must[ledger.Voided](t)(f.svc.Void(ctx, "finance", inv.ID, "wrong rate"))

	// The reissue draft: no number, no issue date, the voided content.
	re := must[*export.Document](t)(export.Parse(v.Draft.Document))
	require.Empty(t, re.Number, "the reissue draft carries the voided number")
	require.Nil(t, re.IssuedAt)
	stored := must[ledger.Invoice](t)(f.led.Invoice(ctx, v.Draft.ID))
	require.NotContains(t, string(stored.Document), `"number"`)
	require.NotContains(t, string(stored.Document), `"issued_at"`)
	require.Equal(t, ledger.SHA256Hex(stored.Document), stored.SHA256)
	// Finalizing it (as reviewed) gives it the next number.
	next := must[ledger.Invoice](t)(f.svc.Finalize(ctx, "finance", v.Draft.ID, stored.SHA256))
	require.Equal(t, "2026-000002", next.Number)
	nd := must[*export.Document](t)(export.Parse(next.Document))
	require.Equal(t, "2026-000002", nd.Number)
	require.True(t, nd.IssuedAt.Equal(at("2026-12-05 10:00")))
	require.True(t, nd.Total.Equal(re.Total))

	// The voided invoice's stored bytes and SHA-256 are those it was
	// finalized with.
	voided := must[ledger.Invoice](t)(f.led.Invoice(ctx, inv.ID))
	require.Equal(t, ledger.StatusVoid, voided.Status)
	require.Equal(t, frozen, voided.Document)
	require.Equal(t, frozenSHA, voided.SHA256)
	require.Equal(t, frozenSHA, ledger.SHA256Hex(voided.Document))

	// The credit note is a document: the invoice's lines negated.
	cn := must[ledger.CreditNote](t)(f.svc.CreditNote(ctx, v.CreditNote.ID))
	require.Equal(t, "2026-000001-CN1", cn.Number)
	require.Equal(t, ledger.SHA256Hex(cn.Document), cn.SHA256)
	require.Equal(t, v.CreditNote.SHA256, cn.SHA256)
	cd := must[*export.Document](t)(export.Parse(cn.Document))
	id := must[*export.Document](t)(export.Parse(frozen))
	require.Equal(t, "2026-000001", cd.CreditFor)
	require.Equal(t, "2026-000001-CN1", cd.Number)
	require.Equal(t, id.Currency, cd.Currency)
	require.Equal(t, "CNY", cd.Currency)
	require.True(t, id.Total.IsPositive())
	require.True(t, cd.Total.Equal(id.Total.Neg()), "credit note total %s, invoice %s", cd.Total, id.Total)
	require.Len(t, cd.Lines, len(id.Lines))
	for i := range cd.Lines {
		require.True(t, cd.Lines[i].Amount.Equal(id.Lines[i].Amount.Neg()))
	}

	// Renderings: the voided invoice's carry the void mark, the
	// finalized reissue's do not; the stored bytes stay.
	var seen []*export.Document
	defer invoicing.SetRenderHook(func(_ invoicing.Format, ds []*export.Document) { seen = append(seen, ds...) })()
	for _, format := range []invoicing.Format{invoicing.FormatPDF, invoicing.FormatCSV, invoicing.FormatXLSX} {
		seen = nil
		var out bytes.Buffer
		require.NoError(t, f.svc.RenderInvoice(ctx, &out, format, voided))
		require.NotZero(t, out.Len())
		require.Len(t, seen, 1)
		require.NotNil(t, seen[0].Void, "%s of a voided invoice without the void mark", format)
		require.Equal(t, "2026-000001-CN1", seen[0].Void.CreditNote)
		require.Equal(t, "wrong rate", seen[0].Void.Reason)
		require.True(t, seen[0].Void.VoidedAt.Equal(at("2026-12-05 10:00")))
		require.Equal(t, "2026-000001", seen[0].Number)

		seen = nil
		require.NoError(t, f.svc.RenderInvoice(ctx, &out, format, next))
		require.Len(t, seen, 1)
		require.Nil(t, seen[0].Void, "%s of a finalized invoice with a void mark", format)
	}
	after := must[ledger.Invoice](t)(f.led.Invoice(ctx, inv.ID))
	require.Equal(t, frozen, after.Document)
	require.Equal(t, frozenSHA, after.SHA256)

	// The period export lists the credit note: in the CSV, the JSON and
	// as a PDF of its own.
	others, _, err := f.led.Invoices(ctx, ledger.InvoiceFilter{Period: "2026-11", Status: ledger.StatusDraft})
	require.NoError(t, err)
	for _, o := range others { // cv-lab's reservation
		must[ledger.Invoice](t)(f.svc.Finalize(ctx, "finance", o.ID, ""))
	}
	dir := t.TempDir()
	paths := must[[]string](t)(f.svc.ExportPeriod(ctx, "finance", "2026-11", dir))
	require.Contains(t, paths, filepath.Join(dir, "credit-note-2026-000001-CN1.pdf"))
	csv := string(must[[]byte](t)(os.ReadFile(filepath.Join(dir, "cardhour-2026-11.csv"))))
	require.Contains(t, csv, "2026-000001-CN1")
	require.Contains(t, csv, "-"+id.Total.StringFixed(2))
	require.Contains(t, csv, next.Number)
	var all []map[string]any
	require.NoError(t, json.Unmarshal(must[[]byte](t)(os.ReadFile(filepath.Join(dir, "cardhour-2026-11.json"))), &all))
	var credit map[string]any
	for _, d := range all {
		if d["credit_for"] == "2026-000001" {
			credit = d
		}
	}
	require.NotNil(t, credit, "the period's JSON has no credit note")
	require.Equal(t, "-"+id.Total.StringFixed(2), credit["total"])
	require.Equal(t, "2026-000001-CN1", credit["number"])
}

// A reissue draft opened before reissues were unstamped (a copy of the
// voided document, number and issue date included) finalizes with the next
// number instead of failing.
func TestFinalizeOldReissueDraft(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t, sqliteLedger(t), nil)
	inv := finalizedNLP(t, f)
	v := must[ledger.Voided](t)(f.led.Void(ctx, "finance", inv.ID, "wrong rate", ledger.VoidOptions{}))
	require.Contains(t, string(v.Draft.Document), `"number": "2026-000001"`, "the old behaviour copied the number")
	next := must[ledger.Invoice](t)(f.svc.Finalize(ctx, "finance", v.Draft.ID, v.Draft.SHA256))
	require.Equal(t, "2026-000002", next.Number)
	nd := must[*export.Document](t)(export.Parse(next.Document))
	require.Equal(t, "2026-000002", nd.Number)
	// Its credit note has no stored document: one is derived, the same
	// bytes each time.
	cn1 := must[ledger.CreditNote](t)(f.svc.CreditNote(ctx, v.CreditNote.ID))
	cn2 := must[ledger.CreditNote](t)(f.svc.CreditNote(ctx, v.CreditNote.ID))
	require.Equal(t, cn1.Document, cn2.Document)
	require.Contains(t, string(cn1.Document), `"credit_for": "2026-000001"`)
	require.Empty(t, cn1.SHA256)
}

// Two runs over the same usage keep the draft and its SHA-256 (a reviewed
// if_sha256 stays valid) and say so; new usage replaces it.
func TestRunKeepsUnchangedDrafts(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t, sqliteLedger(t), nil)
	must[ledger.CatalogVersion](t)(firstOf(f.led.PutCatalog(ctx, "admin", exampleCatalog(t))))
	write(t, f.usage, occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-03 09:00"), at("2026-11-03 19:00")))
	f.clock.Set(at("2026-12-02 10:00"))
	first := draftOf(t, must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11")), "nlp-lab")
	require.Equal(t, invoicing.OutcomeCreated, first.Outcome)
	stored := must[ledger.Invoice](t)(f.led.Invoice(ctx, first.InvoiceID))

	f.clock.Set(at("2026-12-02 11:00")) // generated_at moves on
	second := draftOf(t, must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11")), "nlp-lab")
	require.Equal(t, invoicing.OutcomeUnchanged, second.Outcome)
	require.Equal(t, first.SHA256, second.SHA256)
	require.Equal(t, first.InvoiceID, second.InvoiceID)
	kept := must[ledger.Invoice](t)(f.led.Invoice(ctx, first.InvoiceID))
	require.Equal(t, stored.Document, kept.Document)
	require.True(t, stored.UpdatedAt.Equal(kept.UpdatedAt), "the draft was rewritten")
	audit, _, err := f.led.Audit(ctx, ledger.AuditFilter{Action: "invoice.draft.update"})
	require.NoError(t, err)
	require.Empty(t, audit, "an unchanged draft was updated")

	// New usage: a new document and hash, and the reviewed one is stale.
	write(t, f.usage, occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-20 09:00"), at("2026-11-20 10:00")))
	f.clock.Set(at("2026-12-02 12:00"))
	third := draftOf(t, must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11")), "nlp-lab")
	require.Equal(t, invoicing.OutcomeUpdated, third.Outcome)
	require.NotEqual(t, first.SHA256, third.SHA256)
	require.Equal(t, first.InvoiceID, third.InvoiceID)
	require.True(t, third.Total.GreaterThan(first.Total.Decimal))

	// A new roster name is content too.
	must[invoicing.RosterResult](t)(f.svc.ImportRoster(ctx, "lead", strings.NewReader("student_id,name,project\n"+alice+",张三,nlp-lab\n"), "nlp-lab"))
	fourth := draftOf(t, must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11")), "nlp-lab")
	require.Equal(t, invoicing.OutcomeUpdated, fourth.Outcome)
	require.NotEqual(t, third.SHA256, fourth.SHA256)
}
