package api

import (
	"context"

	"github.com/cardhour/cardhour/internal/ledger"
)

// Ledger is what the API reads from and writes to the state store, by
// concern; any ledger.Store is one, and a test may give a fake of just the
// concerns it exercises (embedding Ledger for the rest). The invoice flow's
// writes (runs, finalize, void) go through Invoicing, not here.
type Ledger interface {
	CatalogStore
	InvoiceReader
	TokenStore
	AuditReader
	AlertStore
	ExemptionStore
	ExemptionRequestStore
	BudgetStore
}

// CatalogStore is the catalog routes' part: versions, the current one, a
// new one.
type CatalogStore interface {
	PutCatalog(ctx context.Context, actor string, content []byte) (v ledger.CatalogVersion, created bool, err error)
	Catalog(ctx context.Context, version int64) (ledger.CatalogVersion, error)
	CurrentCatalog(ctx context.Context) (ledger.CatalogVersion, error)
	CatalogVersions(ctx context.Context) ([]ledger.CatalogVersion, error)
}

// InvoiceReader is what the invoice and statement routes read.
type InvoiceReader interface {
	Invoice(ctx context.Context, id int64) (ledger.Invoice, error)
	Invoices(ctx context.Context, f ledger.InvoiceFilter) (page []ledger.Invoice, next string, err error)
	CreditNotes(ctx context.Context, invoiceID int64) ([]ledger.CreditNote, error)
}

// TokenStore is authentication (LookupToken) and the token routes.
type TokenStore interface {
	CreateToken(ctx context.Context, actor string, t ledger.NewToken) (secret string, tok ledger.Token, err error)
	LookupToken(ctx context.Context, secret string) (ledger.Token, error)
	RevokeToken(ctx context.Context, actor string, id int64) (ledger.Token, error)
	Tokens(ctx context.Context) ([]ledger.Token, error)
}

// AuditReader is the audit log's route.
type AuditReader interface {
	Audit(ctx context.Context, f ledger.AuditFilter) (page []ledger.AuditEntry, next string, err error)
}

// AlertStore is what the watcher recorded, as the alert, delivery and
// release routes read it (and acknowledge, resend).
type AlertStore interface {
	Alert(ctx context.Context, id int64) (ledger.Alert, error)
	Alerts(ctx context.Context, f ledger.AlertFilter) (page []ledger.Alert, next string, err error)
	AckAlert(ctx context.Context, actor string, id int64) (ledger.Alert, error)
	Deliveries(ctx context.Context, f ledger.DeliveryFilter) (page []ledger.Delivery, next string, err error)
	ResendDelivery(ctx context.Context, actor string, id int64) (ledger.Delivery, error)
	DeliveryBacklog(ctx context.Context) (ledger.DeliveryCounts, error)
	Releases(ctx context.Context, f ledger.ReleaseFilter) (page []ledger.Release, next string, err error)
}

// ExemptionStore is the exemption routes'.
type ExemptionStore interface {
	Exemption(ctx context.Context, id int64) (ledger.Exemption, error)
	GrantExemption(ctx context.Context, actor string, e ledger.NewExemption) (ledger.Exemption, error)
	RevokeExemption(ctx context.Context, actor string, id int64) (ledger.Exemption, error)
	Exemptions(ctx context.Context, f ledger.ExemptionFilter) (page []ledger.Exemption, next string, err error)
}

// ExemptionRequestStore is the exemption request routes'.
type ExemptionRequestStore interface {
	RequestExemption(ctx context.Context, actor string, r ledger.NewExemptionRequest) (ledger.ExemptionRequest, error)
	ExemptionRequest(ctx context.Context, id int64) (ledger.ExemptionRequest, error)
	ExemptionRequests(ctx context.Context, f ledger.ExemptionRequestFilter) (page []ledger.ExemptionRequest, next string, err error)
	GrantExemptionRequest(ctx context.Context, actor string, id int64, answer string) (ledger.ExemptionRequest, ledger.Exemption, error)
	RefuseExemptionRequest(ctx context.Context, actor string, id int64, answer string) (ledger.ExemptionRequest, error)
}

// BudgetStore is the budget routes'.
type BudgetStore interface {
	PutBudget(ctx context.Context, actor string, b ledger.Budget) (ledger.Budget, error)
	DeleteBudget(ctx context.Context, actor string, id int64) error
	Budget(ctx context.Context, id int64) (ledger.Budget, error)
	Budgets(ctx context.Context, f ledger.BudgetFilter) (page []ledger.Budget, next string, err error)
}

var _ Ledger = ledger.Store(nil)
