package invoicing_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
)

func TestLeadApprovalSQLite(t *testing.T)   { leadApproval(t, sqliteLedger(t)) }
func TestLeadApprovalPostgres(t *testing.T) { leadApproval(t, postgresLedger(t)) }

// With the lead's sign-off on, a draft is finalized (by a person or
// automatically) only once its lead approved that very document; a draft
// recomputed since waits for a new approval; an approval is audited once.
func leadApproval(t *testing.T, open openLedger) {
	ctx := ctxT(t)
	f := newFixture(t, open, func(c *invoicing.Config) { c.LeadApproval = true })
	must[ledger.CatalogVersion](t)(firstOf(f.led.PutCatalog(ctx, "admin", exampleCatalog(t))))
	write(t, f.usage, occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-03 09:00"), at("2026-11-03 19:00")))
	f.clock.Set(at("2026-12-04 09:00"))
	run := must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11"))
	d := draftOf(t, run, "nlp-lab")

	_, err := f.svc.Finalize(ctx, "finance", d.InvoiceID, d.SHA256)
	require.ErrorIs(t, err, invoicing.ErrAwaitingApproval)
	require.ErrorIs(t, err, ledger.ErrConflict)
	auto := must[[]ledger.Invoice](t)(f.svc.AutoFinalize(ctx))
	require.Empty(t, auto, "nothing is finalized automatically before the approval")

	_, err = f.svc.Approve(ctx, "lead:nlp", d.InvoiceID, "0000000000000000000000000000000000000000000000000000000000000000")
	require.ErrorIs(t, err, ledger.ErrConflict, "approving a document that is not the draft")
	a := must[invoicing.Approval](t)(f.svc.Approve(ctx, "lead:nlp", d.InvoiceID, d.SHA256))
	require.Equal(t, "lead:nlp", a.By)
	again := must[invoicing.Approval](t)(f.svc.Approve(ctx, "lead:nlp", d.InvoiceID, d.SHA256))
	require.Equal(t, a.At, again.At, "approving twice records one approval")
	entries, _, err := f.led.Audit(ctx, ledger.AuditFilter{Action: invoicing.ActionApprove})
	require.NoError(t, err)
	require.Len(t, entries, 1)

	// A late sample changes the draft: the approval was of the old one.
	write(t, f.usage, occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-04 09:00"), at("2026-11-04 10:00")))
	run = must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11"))
	d2 := draftOf(t, run, "nlp-lab")
	require.NotEqual(t, d.SHA256, d2.SHA256)
	_, err = f.svc.Finalize(ctx, "finance", d2.InvoiceID, d2.SHA256)
	require.True(t, errors.Is(err, invoicing.ErrAwaitingApproval), "the recomputed draft waits for a new approval: %v", err)
	must[invoicing.Approval](t)(f.svc.Approve(ctx, "lead:nlp", d2.InvoiceID, d2.SHA256))
	inv := must[ledger.Invoice](t)(f.svc.Finalize(ctx, "finance", d2.InvoiceID, d2.SHA256))
	require.Equal(t, ledger.StatusFinalized, inv.Status)
	_, err = f.svc.Approve(ctx, "lead:nlp", d2.InvoiceID, d2.SHA256)
	require.ErrorIs(t, err, ledger.ErrInvalidTransition, "a finalized invoice is not approved")
}
