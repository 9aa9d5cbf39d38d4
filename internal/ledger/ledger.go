// Package ledger is the state store: what must not change or be done twice.
// Catalog versions, invoices with their revisions and credit notes, API
// tokens, the audit log and leader leases live here, in a database with
// transactions and unique constraints (SQLite on one machine, PostgreSQL in
// clusters; the sqlite and postgres packages beside this one implement
// Store, and ledgertest is the conformance suite both pass).
//
// Usage data (samples, occupancy, idle runs) is not here: it lives in the
// usage store (ingest), append-only and replay-proof by union. What lives
// here is decided once: every decision has a natural key written under a
// unique constraint, so that two replicas, a retry or a restart can never
// issue two invoices for the same project, period and revision.
//
// Invoices go draft → finalized → void and are never edited once finalized.
// Finalizing numbers the invoice inside the finalizing transaction (per
// calendar year of finalization, no gaps: a failed finalize rolls its
// number back) and keeps the exact document bytes with their SHA-256, the
// catalog version they were priced with and the data cut-off they saw.
// Voiding keeps the number, issues a credit note numbered after the
// invoice (2026-000007-CN1) and opens the next revision as a draft.
//
// Every change is written to the audit log in the same transaction.
package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Errors; test them with errors.Is. Every error a Store returns for a
// reason of this kind wraps one of them, with a message naming the object.
var (
	// ErrNotFound: no such invoice, catalog version, token, ….
	ErrNotFound = errors.New("not found")
	// ErrConflict: the change collides with what is stored (a natural key
	// taken by another writer, a document that changed since it was read,
	// a finalized invoice that a draft would replace).
	ErrConflict = errors.New("conflict")
	// ErrInvalidTransition: the lifecycle forbids it (finalizing a void
	// invoice, voiding a draft, revoking a revoked token).
	ErrInvalidTransition = errors.New("invalid transition")
	// ErrInvalidArgument: the request itself is wrong (bad period, empty
	// actor, document that is not JSON, unknown role, bad cursor).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrTokenExpired and ErrTokenRevoked: LookupToken found the token but
	// it may no longer be used.
	ErrTokenExpired = errors.New("token expired")
	ErrTokenRevoked = errors.New("token revoked")
)

// Store is what the API, the billing run and the watchers use. All methods
// are safe for concurrent use, also by several processes on one database.
// Methods that change something take the actor (who: "token:12",
// "cli:alice", "watch") and write an audit entry in the same transaction.
type Store interface {
	// PutCatalog stores content as the next catalog version and makes it
	// the current one. Uploading the current content again (a retry) makes
	// no new version: it returns the current one and created=false.
	PutCatalog(ctx context.Context, actor string, content []byte) (v CatalogVersion, created bool, err error)
	// Catalog returns one version with its content.
	Catalog(ctx context.Context, version int64) (CatalogVersion, error)
	// CurrentCatalog returns the newest version with its content, or
	// ErrNotFound when none was uploaded.
	CurrentCatalog(ctx context.Context) (CatalogVersion, error)
	// CatalogVersions lists every version, newest first, without content.
	CatalogVersions(ctx context.Context) ([]CatalogVersion, error)

	// SaveDraft creates or replaces the draft of d's project and period: it
	// replaces the open draft when there is one (drafts are recomputed at
	// will), else starts the next revision. A finalized invoice for the
	// same project and period is never replaced: ErrConflict (void it
	// first). Saving what is already stored changes nothing.
	SaveDraft(ctx context.Context, actor string, d Draft) (Invoice, error)
	// Finalize numbers a draft and freezes its document, in one
	// transaction; see FinalizeOptions.
	Finalize(ctx context.Context, actor string, id int64, opt FinalizeOptions) (Invoice, error)
	// Void voids a finalized invoice: it keeps its number, gets a credit
	// note numbered after it (with the document opt.CreditNote makes), and
	// the next revision opens as a draft starting from the voided document
	// (as opt.Reissue makes it). reason is required; see VoidOptions.
	Void(ctx context.Context, actor string, id int64, reason string, opt VoidOptions) (Voided, error)
	// Invoice returns one invoice with its document.
	Invoice(ctx context.Context, id int64) (Invoice, error)
	// InvoiceByKey returns the invoice with that natural key.
	InvoiceByKey(ctx context.Context, k InvoiceKey) (Invoice, error)
	// Invoices lists invoices, newest first, without documents; next is
	// the cursor of the following page ("" on the last page).
	Invoices(ctx context.Context, f InvoiceFilter) (page []Invoice, next string, err error)
	// CreditNotes lists the credit notes of one invoice, oldest first,
	// with their documents.
	CreditNotes(ctx context.Context, invoiceID int64) ([]CreditNote, error)
	// CreditNote returns one credit note with its document.
	CreditNote(ctx context.Context, id int64) (CreditNote, error)

	// CreateToken makes a new random token and returns its secret, which
	// is shown this once: only its SHA-256 is stored.
	CreateToken(ctx context.Context, actor string, t NewToken) (secret string, tok Token, err error)
	// LookupToken finds the token whose secret was presented; ErrNotFound
	// when there is none, ErrTokenExpired or ErrTokenRevoked when it may no
	// longer be used.
	LookupToken(ctx context.Context, secret string) (Token, error)
	// RevokeToken revokes a token; revoking twice is ErrInvalidTransition.
	RevokeToken(ctx context.Context, actor string, id int64) (Token, error)
	// Tokens lists every token (never a secret), newest first.
	Tokens(ctx context.Context) ([]Token, error)

	// RecordAudit appends an entry for a change made outside the store
	// (configuration, a release, an export).
	RecordAudit(ctx context.Context, r AuditRecord) (AuditEntry, error)
	// Audit reads the log, newest first, filtered and paginated.
	Audit(ctx context.Context, f AuditFilter) (page []AuditEntry, next string, err error)

	// ImportRoster applies a roster import, all or nothing, and audits
	// each project's roster before and after.
	ImportRoster(ctx context.Context, actor string, r RosterImport) (RosterChange, error)
	// Students lists roster rows, newest first, filtered and paginated.
	Students(ctx context.Context, f StudentFilter) (page []Student, next string, err error)

	// SaveBillingRun records a billing run; BillingRun reads one with its
	// report; BillingRuns lists them newest first, without reports.
	SaveBillingRun(ctx context.Context, actor string, r BillingRun) (BillingRun, error)
	BillingRun(ctx context.Context, id int64) (BillingRun, error)
	BillingRuns(ctx context.Context, f BillingRunFilter) (page []BillingRun, next string, err error)

	// BeginExport records an attempt at exporting k before it is made (an
	// outbox): the run is created pending, or a pending or failed run
	// counts one more attempt, and started is true. A done run is returned
	// as it is with started false: the export must not be made again.
	BeginExport(ctx context.Context, actor string, k ExportKey) (run ExportRun, started bool, err error)
	// FinishExport records the attempt's outcome: done with its files when
	// failure is "", else failed with failure as the last error. A done run
	// is never changed (ErrInvalidTransition).
	FinishExport(ctx context.Context, actor string, id int64, files []ExportFile, failure string) (ExportRun, error)
	// ExportRuns lists export runs, newest first.
	ExportRuns(ctx context.Context, f ExportRunFilter) (page []ExportRun, next string, err error)

	// AcquireLease takes or renews the lease name for holder until now+ttl.
	// It returns false when another holder has it and it has not expired.
	// Leases are not audited (they are renewed every few seconds).
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease gives the lease up when holder has it (a clean shutdown,
	// so the next leader need not wait for the expiry).
	ReleaseLease(ctx context.Context, name, holder string) error

	// WatchStore: alerts, deliveries, releases, exemptions and budgets.
	WatchStore

	// RequestStore: students' exemption requests and their decisions.
	RequestStore

	// SessionStore: sessions of people signed in, and login attempts.
	SessionStore

	Close() error
}

// CatalogVersion is one uploaded catalog.
type CatalogVersion struct {
	Version   int64
	Content   []byte // nil in lists
	SHA256    string // hex of Content
	CreatedBy string
	CreatedAt time.Time
}

// Status is an invoice's place in its lifecycle.
type Status string

// The lifecycle: draft → finalized → void.
const (
	StatusDraft     Status = "draft"
	StatusFinalized Status = "finalized"
	StatusVoid      Status = "void"
)

// Valid reports whether s is one of the three statuses.
func (s Status) Valid() bool {
	return s == StatusDraft || s == StatusFinalized || s == StatusVoid
}

// InvoiceKey is an invoice's natural key, unique in the store.
type InvoiceKey struct {
	Project  string
	Period   string // YYYY-MM
	Revision int
}

// Draft is what a billing run computed for one project and period.
type Draft struct {
	Project        string
	Period         string    // YYYY-MM
	Document       []byte    // the invoice document, JSON
	CatalogVersion int64     // the catalog version it was priced with
	DataCutoff     time.Time // the newest usage the run saw
}

// Invoice is one revision of the invoice of a project and period.
type Invoice struct {
	ID int64
	InvoiceKey
	Status         Status
	Number         string // "" until finalized, e.g. "2026-000007"
	Document       []byte // nil in lists
	SHA256         string // hex of Document
	CatalogVersion int64
	DataCutoff     time.Time
	CreatedBy      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	FinalizedBy    string
	FinalizedAt    time.Time // zero unless finalized or void
	VoidedBy       string
	VoidedAt       time.Time // zero unless void
	VoidReason     string
}

// FinalizeOptions tunes Finalize.
type FinalizeOptions struct {
	// IfSHA256, when set, must be the draft's SHA-256: a finalize
	// finalizes exactly the document that was reviewed, never one that a
	// billing run replaced in the meantime (ErrConflict).
	IfSHA256 string
	// Stamp, when set, is called inside the transaction with the new
	// number and the draft's document and returns the document to store
	// (e.g. with the number and issue date written into it); it must be
	// JSON. An error from Stamp rolls the finalize back, number included.
	Stamp func(number string, document []byte) ([]byte, error)
}

// VoidOptions tunes Void. Both functions are called inside the voiding
// transaction; an error from either rolls the void back (credit note
// number included).
type VoidOptions struct {
	// Reissue, when set, returns the next revision's starting document
	// from the voided one (e.g. without its number and issue date, which
	// the reissue gets when it is finalized); it must be JSON. nil: the
	// voided document as it is.
	Reissue func(voided []byte) ([]byte, error)
	// CreditNote, when set, returns the credit note's document from its
	// number, the time of the void and the voided document; it must be
	// JSON and is stored with its SHA-256. nil: the credit note has no
	// document.
	CreditNote func(number string, at time.Time, voided []byte) ([]byte, error)
}

// Voided is what Void did.
type Voided struct {
	Invoice    Invoice    // now void, number kept
	CreditNote CreditNote // cancels it
	Draft      Invoice    // the next revision, a draft
}

// CreditNote cancels a voided invoice.
type CreditNote struct {
	ID            int64     `json:"id"`
	InvoiceID     int64     `json:"invoice_id"`
	InvoiceNumber string    `json:"invoice_number"`
	Number        string    `json:"number"` // InvoiceNumber + "-CN" + sequence, e.g. "2026-000007-CN1"
	Reason        string    `json:"reason"`
	CreatedBy     string    `json:"created_by"`
	CreatedAt     time.Time `json:"created_at"`
	// SHA256 is the hex SHA-256 of Document, the credit note's document
	// (VoidOptions.CreditNote); both empty for a credit note issued without
	// one (before ledger migration 4, or without VoidOptions.CreditNote).
	SHA256   string          `json:"sha256,omitempty"`
	Document json.RawMessage `json:"document,omitempty" doc:"the credit note document (cardhour.invoice.v1 with credit_for: the voided invoice's lines negated); export it with export-credit-note"`
}

// InvoiceFilter selects invoices; zero fields match everything.
type InvoiceFilter struct {
	Project string
	Period  string
	Status  Status
	Cursor  string // from the previous page
	Limit   int    // 0: DefaultLimit; at most MaxLimit
}

// Role is what a token may do (enforced by the API).
type Role string

// The roles.
const (
	RoleAdmin   Role = "admin"
	RoleFinance Role = "finance"
	RoleLead    Role = "lead"
	RoleStudent Role = "student"
)

// NewToken describes a token to create.
type NewToken struct {
	Role    Role
	Project string // required for lead and student; empty for admin and finance
	User    string // required for student; empty otherwise
	Name    string // what it is for, free text
	TTL     time.Duration
}

// Token is a stored token, never with its secret. The API serves it as
// it is (its OpenAPI schema keeps the name TokenBody).
type Token struct {
	ID        int64     `json:"id"`
	Role      Role      `json:"role" enum:"admin,finance,lead,student"`
	Project   string    `json:"project,omitempty"`
	User      string    `json:"user,omitempty"`
	Name      string    `json:"name,omitempty"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	RevokedBy string    `json:"revoked_by,omitempty"`
	RevokedAt time.Time `json:"revoked_at,omitzero"` // zero unless revoked
}

// AuditRecord is a change to record.
type AuditRecord struct {
	Actor  string          `json:"actor"`            // who
	Action string          `json:"action"`           // what, e.g. "invoice.finalize"
	Object string          `json:"object"`           // on what, e.g. "invoice/12"
	Before json.RawMessage `json:"before,omitempty"` // nil when the object did not exist
	After  json.RawMessage `json:"after,omitempty"`  // nil when it no longer exists
}

// AuditEntry is a recorded change. The API serves it as it is (its OpenAPI
// schema keeps the name AuditBody).
type AuditEntry struct {
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	AuditRecord
}

// AuditFilter selects audit entries; zero fields match everything.
type AuditFilter struct {
	Actor  string
	Action string
	Object string
	Since  time.Time // At >= Since
	Until  time.Time // At < Until
	Cursor string
	Limit  int
}

// Page sizes.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// ---------------------------------------------------------------- helpers
// The helpers below are shared by the implementations, so that both
// validate, hash and number alike.

// TokenPrefix starts every token secret (so that secret scanners and
// people recognise one).
const TokenPrefix = "cht_"

// NewTokenSecret returns a new secret: TokenPrefix and 32 random bytes,
// base64url.
func NewTokenSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cannot read random bytes for a token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashToken is what is stored of a secret: its SHA-256.
func HashToken(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// SHA256Hex is the hex SHA-256 of b.
func SHA256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// InvoiceNumber formats the seq-th invoice number of year.
func InvoiceNumber(year, seq int) string {
	return fmt.Sprintf("%04d-%06d", year, seq)
}

// CreditNoteNumber formats the seq-th credit note of an invoice.
func CreditNoteNumber(invoiceNumber string, seq int) string {
	return invoiceNumber + "-CN" + strconv.Itoa(seq)
}

var periodRE = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])$`)

// CheckActor rejects an empty actor.
func CheckActor(actor string) error {
	if strings.TrimSpace(actor) == "" {
		return fmt.Errorf("%w: actor is required", ErrInvalidArgument)
	}
	return nil
}

// CheckDraft reports every problem with d at once.
func CheckDraft(d *Draft) error {
	var errs []error
	if strings.TrimSpace(d.Project) == "" {
		errs = append(errs, errors.New("project is required"))
	}
	if !periodRE.MatchString(d.Period) {
		errs = append(errs, fmt.Errorf("period %q: want YYYY-MM", d.Period))
	}
	if !json.Valid(d.Document) {
		errs = append(errs, errors.New("document is not valid JSON"))
	}
	if d.CatalogVersion <= 0 {
		errs = append(errs, fmt.Errorf("catalog version %d: want a stored version (1 or more)", d.CatalogVersion))
	}
	if d.DataCutoff.IsZero() {
		errs = append(errs, errors.New("data cut-off is required"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: draft %s/%s: %w", ErrInvalidArgument, d.Project, d.Period, errors.Join(errs...))
	}
	return nil
}

// CheckNewToken reports every problem with t at once.
func CheckNewToken(t *NewToken) error {
	var errs []error
	switch t.Role {
	case RoleAdmin, RoleFinance:
		if t.Project != "" || t.User != "" {
			errs = append(errs, fmt.Errorf("role %s takes no project or user", t.Role))
		}
	case RoleLead:
		if t.Project == "" {
			errs = append(errs, errors.New("role lead needs a project"))
		}
		if t.User != "" {
			errs = append(errs, errors.New("role lead takes no user"))
		}
	case RoleStudent:
		// A student token is always scoped to one project: without one it
		// would see the user's lines and the exemptions of every project.
		if t.Project == "" {
			errs = append(errs, errors.New("role student needs a project (a student token sees one project)"))
		}
		if t.User == "" {
			errs = append(errs, errors.New("role student needs a user"))
		}
	default:
		errs = append(errs, fmt.Errorf("role %q: want admin, finance, lead or student", t.Role))
	}
	if t.TTL <= 0 {
		errs = append(errs, fmt.Errorf("ttl %s: want a positive duration", t.TTL))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: token: %w", ErrInvalidArgument, errors.Join(errs...))
	}
	return nil
}

// CheckStatus rejects an unknown status ("" is allowed: any).
func CheckStatus(s Status) error {
	if s != "" && !s.Valid() {
		return fmt.Errorf("%w: status %q: want draft, finalized or void", ErrInvalidArgument, s)
	}
	return nil
}

// PageLimit turns a requested limit into the one to use.
func PageLimit(n int) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("%w: limit %d: want 0 (default %d) to %d", ErrInvalidArgument, n, DefaultLimit, MaxLimit)
	case n == 0:
		return DefaultLimit, nil
	case n > MaxLimit:
		return MaxLimit, nil
	}
	return n, nil
}

// EncodeCursor makes the opaque cursor that continues after the row with
// id (lists are newest first, so the next page has smaller ids).
func EncodeCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + strconv.FormatInt(id, 10)))
}

// DecodeCursor reads a cursor; "" means the first page (0).
func DecodeCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if s, ok := strings.CutPrefix(string(b), "v1:"); ok {
			if id, err := strconv.ParseInt(s, 10, 64); err == nil && id > 0 {
				return id, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: cursor %q is not one this store made", ErrInvalidArgument, c)
}
