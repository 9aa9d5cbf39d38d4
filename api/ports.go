package api

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// The API's dependencies besides the state store are declared here, by their
// user: the usage reads (Usage), the invoice flow (Invoicing) and the roster
// (Roster). cmd/cardhour wires the billing packages behind them.

// Errors an implementation wraps so that the API answers with the right
// problem type (see problems.go, the one place that maps errors to HTTP).
var (
	// ErrGracePeriod: the period's grace period for late samples is not
	// over, so it may not be finalized yet.
	ErrGracePeriod = errors.New("grace period not over")
	// ErrUnavailable: a dependency is not configured or not reachable.
	ErrUnavailable = errors.New("unavailable")
)

// UsageQuery selects and groups usage.
type UsageQuery struct {
	From, To time.Time // [From, To)
	GroupBy  []string  // any of UsageDimensions
	// Filters; empty: all. Several values of one filter are alternatives.
	Projects, Users, SKUs, Nodes []string
}

// UsageDimensions are the group_by values.
var UsageDimensions = []string{"project", "user", "sku", "instance", "node", "day", "hour"}

// UsageReport is card-hours and list-price cost, grouped.
type UsageReport struct {
	From     time.Time    `json:"from"`
	To       time.Time    `json:"to"`
	Timezone string       `json:"timezone"`
	Currency string       `json:"currency"`
	GroupBy  []string     `json:"group_by"`
	Rows     []UsageGroup `json:"rows"`
	Total    UsageGroup   `json:"total"`
	// UnpricedSeconds is held time no catalog SKU prices.
	UnpricedSeconds int64 `json:"unpriced_seconds"`
}

// UsageGroup is one group; the fields not grouped by are empty.
type UsageGroup struct {
	Project     string `json:"project,omitempty"`
	User        string `json:"user,omitempty"`
	SKU         string `json:"sku,omitempty"`
	Instance    string `json:"instance,omitempty"`
	Node        string `json:"node,omitempty"`
	Day         string `json:"day,omitempty" doc:"local calendar day YYYY-MM-DD in the catalog time zone"`
	Hour        string `json:"hour,omitempty" doc:"local start hour, RFC 3339 with offset"`
	HeldSeconds int64  `json:"held_seconds" doc:"card-seconds held (card-hours × 3600)"`
	IdleSeconds int64  `json:"idle_seconds"`
	Cost        string `json:"cost" doc:"list price of the usage, decimal string"`
}

// Held is an instance held right now.
type Held struct {
	Instance   string    `json:"instance"`
	Node       string    `json:"node"`
	Project    string    `json:"project"`
	User       string    `json:"user"`
	SKU        string    `json:"sku,omitempty"`
	GPUModel   string    `json:"gpu_model"`
	Profile    string    `json:"profile,omitempty"`
	Since      time.Time `json:"since"`
	LastSample time.Time `json:"last_sample"`
	Idle       bool      `json:"idle"`
	IdleSince  time.Time `json:"idle_since,omitzero"`
}

// Usage answers the usage routes from the usage store.
type Usage interface {
	Usage(ctx context.Context, q UsageQuery) (*UsageReport, error)
	HeldNow(ctx context.Context) ([]Held, error)
}

// RunReport is what a billing run did: drafts saved, finalized revisions
// kept, unpriced usage, warnings, data quality and the difference from
// finalized revisions.
type RunReport struct {
	ID             int64          `json:"id"`
	Period         string         `json:"period"`
	MonthToDate    bool           `json:"month_to_date"`
	CatalogVersion int64          `json:"catalog_version"`
	DataCutoff     time.Time      `json:"data_cutoff"`
	GeneratedAt    time.Time      `json:"generated_at"`
	Drafts         []RunDraft     `json:"drafts"`
	Kept           []RunKept      `json:"kept"`
	Unpriced       []RunUnpriced  `json:"unpriced"`
	Warnings       []string       `json:"warnings"`
	DataQuality    map[string]any `json:"data_quality,omitempty"`
	Diffs          []RunDiff      `json:"diffs"`
}

// RunDraft is one draft a run saved.
type RunDraft struct {
	Project   string `json:"project"`
	InvoiceID int64  `json:"invoice_id"`
	Revision  int    `json:"revision"`
	SHA256    string `json:"sha256"`
	Total     string `json:"total"`
	Outcome   string `json:"outcome" enum:"created,updated,unchanged" doc:"created (no open draft), updated (the open draft replaced) or unchanged (the open draft kept with its SHA-256: its content is what the run computed, apart from generated_at and data_cutoff)"`
}

// RunKept is a finalized invoice a run left as it is.
type RunKept struct {
	Project   string `json:"project"`
	InvoiceID int64  `json:"invoice_id"`
	Number    string `json:"number"`
	Revision  int    `json:"revision"`
	SHA256    string `json:"sha256"`
}

// RunUnpriced is usage no SKU prices.
type RunUnpriced struct {
	Project     string `json:"project"`
	User        string `json:"user"`
	GPUModel    string `json:"gpu_model"`
	Profile     string `json:"profile"`
	UsedSeconds int64  `json:"used_seconds"`
}

// RunDiff is the difference between a finalized invoice and what the run
// recomputed for its project and period.
type RunDiff struct {
	Project   string        `json:"project"`
	InvoiceID int64         `json:"invoice_id"`
	Number    string        `json:"number"`
	Revision  int           `json:"revision"`
	OldTotal  string        `json:"old_total"`
	NewTotal  string        `json:"new_total"`
	Delta     string        `json:"delta"`
	Lines     []RunDiffLine `json:"lines"`
	Action    string        `json:"action"`
}

// RunDiffLine is one invoice line whose amount differs.
type RunDiffLine struct {
	Kind  string `json:"kind"`
	User  string `json:"user"`
	SKU   string `json:"sku"`
	Old   string `json:"old"`
	New   string `json:"new"`
	Delta string `json:"delta"`
}

// RosterResult counts what a roster import changed.
type RosterResult struct {
	Rows      int      `json:"rows"`
	Projects  []string `json:"projects"`
	Added     int      `json:"added"`
	Updated   int      `json:"updated"`
	Removed   int      `json:"removed"`
	Unchanged int      `json:"unchanged"`
}

// Student is one roster row.
type Student struct {
	Project string `json:"project"`
	User    string `json:"user"`
	Name    string `json:"name"`
	Email   string `json:"email,omitempty"`
	IM      string `json:"im,omitempty"`
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
	Run(ctx context.Context, actor, period string) (*RunReport, error)
	// Finalize enforces the grace period (ErrGracePeriod) and ifSHA256.
	Finalize(ctx context.Context, actor string, id int64, ifSHA256 string) (ledger.Invoice, error)
	Void(ctx context.Context, actor string, id int64, reason string) (ledger.Voided, error)
	// Statement derives user's statement from the stored document of
	// invoice id: only that user's lines and warnings.
	Statement(ctx context.Context, InvoiceRef int64, user string) ([]byte, error)
	// ImportRoster imports a roster CSV for project; errors name line and
	// field (see RosterProblems).
	ImportRoster(ctx context.Context, actor string, r io.Reader, project string) (RosterResult, error)
	Students(ctx context.Context, project, user, cursor string, limit int) ([]Student, string, error)
	// Render writes documents (stored bytes) in format (FormatCSV, …; PDF:
	// exactly one document).
	Render(ctx context.Context, w io.Writer, format string, docs ...[]byte) error
	// RenderVoid writes a voided invoice's stored document in format,
	// marked 已作废 / VOID with its credit note's number (the stored bytes are
	// not changed).
	RenderVoid(ctx context.Context, w io.Writer, format string, mark VoidMark, doc []byte) error
	// CreditNote reads credit note id with its document (one derived from
	// the voided invoice for a credit note the ledger stored without one).
	CreditNote(ctx context.Context, id int64) (ledger.CreditNote, error)
}

// LineProblem is one problem of an uploaded file, by line and field.
type LineProblem struct {
	Line    int    `json:"line,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// LineProblems is implemented by errors that list problems by line
// (a roster import's); the problem details carry them.
type LineProblems interface {
	LineProblems() []LineProblem
}
