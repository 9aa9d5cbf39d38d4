package invoicing

import (
	"io"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/ledger"
)

// Meta is what a billing run knows about the documents it builds: the
// catalog version it priced with, the newest usage it saw, when it ran.
type Meta struct {
	CatalogVersion int64
	DataCutoff     time.Time
	GeneratedAt    time.Time
}

// ProjectDocument is one project's invoice document, marshalled.
type ProjectDocument struct {
	Project  string
	Document []byte
}

// DocSummary is what the flow reads back from a stored document: its total
// and lines, for the difference between a finalized revision and a run.
type DocSummary struct {
	Project string
	Period  string
	Number  string
	Total   decimal.Decimal
	Lines   []DocLine
	// Name, Funding and Currency are the project's name and funding code
	// and the currency, as the document states them.
	Name, Funding, Currency string
}

// DocLine is one invoice line as the difference sees it.
type DocLine struct {
	Kind, User, SKU string
	Amount          decimal.Decimal
}

// Format is an export file format.
type Format string

// The export formats.
const (
	FormatCSV  Format = "csv"
	FormatXLSX Format = "xlsx"
	FormatJSON Format = "json"
	FormatPDF  Format = "pdf" // one document per file
)

// Documents is what the flow needs of the invoice document (billing/export):
// build the documents of a result, read one back, stamp a number into it,
// derive a student's statement and render the export files. Every method
// works on the canonical bytes the ledger stores, so that what is exported
// is rendered from the stored document only.
type Documents interface {
	// Build builds the documents of res, one per project sorted by
	// project, with the students' names from names (project → user →
	// name, the roster).
	Build(res *billing.Result, m Meta, names map[string]map[string]string) ([]ProjectDocument, error)
	Summary(doc []byte) (DocSummary, error)
	Stamp(doc []byte, number string, issuedAt time.Time) ([]byte, error)
	// Statement is user's statement derived from a project document, with
	// the students' names from the roster (user → name).
	Statement(doc []byte, user string, names map[string]string) ([]byte, error)
	Render(w io.Writer, f Format, docs ...[]byte) error
	// RenderVoided writes a voided invoice's stored document in format f,
	// marked 已作废 / VOID with what mark says of the voiding (the stored
	// bytes are not changed).
	RenderVoided(w io.Writer, f Format, doc []byte, mark export.VoidMark) error
	// Reissue is the starting document of the revision that replaces a
	// voided invoice: the voided one without its number and issue date.
	Reissue(voided []byte) ([]byte, error)
	// CreditNote is the document of the credit note number that cancels a
	// voided invoice, issued at.
	CreditNote(voided []byte, number string, at time.Time) ([]byte, error)
	// SameContent reports whether two documents differ at most in when
	// they were generated and the data cut-off.
	SameContent(a, b []byte) (bool, error)
}

// VoidMarkOf is what the exports of voided invoice inv say of its voiding
// (export.VoidMark, the document's own): its latest credit note of
// creditNotes (the ledger's, oldest first), when and why it was voided.
func VoidMarkOf(inv ledger.Invoice, creditNotes []ledger.CreditNote) export.VoidMark {
	m := export.VoidMark{VoidedAt: inv.VoidedAt, Reason: inv.VoidReason}
	if len(creditNotes) > 0 {
		m.CreditNote = creditNotes[len(creditNotes)-1].Number
	}
	return m
}
