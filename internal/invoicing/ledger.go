package invoicing

import (
	"context"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// Ledger is what the invoice flow reads from and writes to the state store:
// catalog versions, billing runs, drafts and their lifecycle, credit notes,
// export runs, the roster, its leases, and the releases a bill warns about.
// Any ledger.Store is one; a test may give a fake of just these.
type Ledger interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error
	Catalog(ctx context.Context, version int64) (ledger.CatalogVersion, error)
	CurrentCatalog(ctx context.Context) (ledger.CatalogVersion, error)
	SaveBillingRun(ctx context.Context, actor string, r ledger.BillingRun) (ledger.BillingRun, error)
	SaveDraft(ctx context.Context, actor string, d ledger.Draft) (ledger.Invoice, error)
	Invoice(ctx context.Context, id int64) (ledger.Invoice, error)
	Invoices(ctx context.Context, f ledger.InvoiceFilter) (page []ledger.Invoice, next string, err error)
	Finalize(ctx context.Context, actor string, id int64, opt ledger.FinalizeOptions) (ledger.Invoice, error)
	Void(ctx context.Context, actor string, id int64, reason string, opt ledger.VoidOptions) (ledger.Voided, error)
	CreditNote(ctx context.Context, id int64) (ledger.CreditNote, error)
	CreditNotes(ctx context.Context, invoiceID int64) ([]ledger.CreditNote, error)
	BeginExport(ctx context.Context, actor string, k ledger.ExportKey) (run ledger.ExportRun, started bool, err error)
	FinishExport(ctx context.Context, actor string, id int64, files []ledger.ExportFile, failure string) (ledger.ExportRun, error)
	ExportRuns(ctx context.Context, f ledger.ExportRunFilter) (page []ledger.ExportRun, next string, err error)
	ImportRoster(ctx context.Context, actor string, r ledger.RosterImport) (ledger.RosterChange, error)
	Students(ctx context.Context, f ledger.StudentFilter) (page []ledger.Student, next string, err error)
	Releases(ctx context.Context, f ledger.ReleaseFilter) (page []ledger.Release, next string, err error)
	RecordAudit(ctx context.Context, r ledger.AuditRecord) (ledger.AuditEntry, error)
	Audit(ctx context.Context, f ledger.AuditFilter) (page []ledger.AuditEntry, next string, err error)
}

var _ Ledger = ledger.Store(nil)
