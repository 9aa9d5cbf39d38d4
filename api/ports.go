package api

import (
	"context"
	"errors"
	"io"

	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
)

// The API's dependencies besides the state store are declared here, by their
// user: the usage reads (Usage), the invoice flow (Invoicing) and the roster
// (Roster). cmd/cardhour wires the billing packages behind them. What they
// return is served as it is: the usage report and what is held are
// internal/reads' types, a billing run's report internal/invoicing's.

// Errors an implementation wraps so that the API answers with the right
// problem type (see problems.go, the one place that maps errors to HTTP).
var (
	// ErrGracePeriod: the period's grace period for late samples is not
	// over, so it may not be finalized yet.
	ErrGracePeriod = errors.New("grace period not over")
	// ErrUnavailable: a dependency is not configured or not reachable.
	ErrUnavailable = errors.New("unavailable")
	// ErrNotReleased: a release asked for released nothing (no releaser
	// is configured, or the releaser refused or failed).
	ErrNotReleased = errors.New("not released")
)

// Releases carries out a release a person asks for (POST
// /api/v1/held/release) with the releasers the watcher uses, recorded in
// the ledger with actor as who asked. repeated: the holding's release was
// asked for (or done) before and nothing was done this time. No releaser
// configured is (wraps) ErrNotReleased.
type Releases interface {
	ReleaseHeld(ctx context.Context, actor string, h reads.Held) (rel ledger.Release, repeated bool, err error)
}

// Usage answers the usage routes from the usage store.
type Usage interface {
	Usage(ctx context.Context, q reads.UsageQuery) (*reads.UsageReport, error)
	// Savings is rep, Usage's report for q, with what the releases rels
	// saved (reads.AddSavings); rep itself is not changed.
	Savings(ctx context.Context, q reads.UsageQuery, rep *reads.UsageReport, rels []reads.Released) (*reads.UsageReport, error)
	HeldNow(ctx context.Context) ([]reads.Held, error)
	// Nodes is how fresh each node's data is (reads.NodesNow), at the same
	// clock as HeldNow; q is the token's scope.
	Nodes(ctx context.Context, q reads.NodeQuery) (*reads.NodeReport, error)
}

// Export formats.
const (
	FormatCSV  = "csv"
	FormatXLSX = "xlsx"
	FormatPDF  = "pdf"
	FormatJSON = "json"
)

// Invoicing is the invoice flow: billing runs, finalize and void, student
// statements, the roster and the renderers of stored documents.
type Invoicing interface {
	Run(ctx context.Context, actor, period string) (*invoicing.RunReport, error)
	// Finalize enforces the grace period (ErrGracePeriod) and ifSHA256.
	Finalize(ctx context.Context, actor string, id int64, ifSHA256 string) (ledger.Invoice, error)
	Void(ctx context.Context, actor string, id int64, reason string) (ledger.Voided, error)
	// PeriodSummary is the invoices of period (of project, when not "")
	// with their totals by funding source, from the stored documents.
	PeriodSummary(ctx context.Context, period, project string) (*invoicing.PeriodSummary, error)
	// Statement derives user's statement from the stored document of
	// invoice id: only that user's lines and warnings.
	Statement(ctx context.Context, InvoiceRef int64, user string) ([]byte, error)
	// ImportRoster imports a roster CSV for project; a refused file's
	// error is (or wraps) an *invoicing.RosterError, whose problems by line
	// and field the problem details carry.
	ImportRoster(ctx context.Context, actor string, r io.Reader, project string) (invoicing.RosterResult, error)
	Students(ctx context.Context, project, user, cursor string, limit int) ([]ledger.Student, string, error)
	// Render writes documents (stored bytes) in format (FormatCSV, …; PDF:
	// exactly one document).
	Render(ctx context.Context, w io.Writer, format string, docs ...[]byte) error
	// RenderVoid writes a voided invoice's stored document in format,
	// marked 已作废 / VOID with its credit note's number (the stored bytes are
	// not changed).
	RenderVoid(ctx context.Context, w io.Writer, format string, mark export.VoidMark, doc []byte) error
	// CreditNote reads credit note id with its document (one derived from
	// the voided invoice for a credit note the ledger stored without one).
	CreditNote(ctx context.Context, id int64) (ledger.CreditNote, error)
}
