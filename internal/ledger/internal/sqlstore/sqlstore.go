// Package sqlstore implements ledger.Store over database/sql, for both
// dialects the ledger speaks (SQLite and PostgreSQL): the SQL is the same
// but for placeholders, the migration lock and how a unique violation is
// recognised, which the Dialect supplies. The sqlite and postgres packages
// open the database, embed their own migrations and wrap this.
package sqlstore

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// Dialect is what differs between databases.
type Dialect struct {
	Name string // for messages: "sqlite", "postgres"
	// Rebind turns the ?-placeholders of a query into the dialect's.
	Rebind func(query string) string
	// IsUnique reports a unique or primary key violation.
	IsUnique func(error) bool
	// MigrationLock is run first in the migration transaction ("" none).
	MigrationLock string
	// ForUpdate ends a SELECT that must lock the rows it reads until the
	// transaction ends (" FOR UPDATE"; "" where transactions take the
	// database's write lock when they begin).
	ForUpdate string
}

// Config configures a Store.
type Config struct {
	DB         *sql.DB // the Store closes it
	Dialect    Dialect
	Clock      func() time.Time
	Migrations []Migration
}

// Store is ledger.Store over a database/sql handle. Write transactions must
// serialise on the rows they touch: SQLite begins them IMMEDIATE (one
// writer at a time), PostgreSQL locks the rows it updates.
type Store struct {
	db  *sql.DB
	d   Dialect
	now func() time.Time
}

var _ ledger.Store = (*Store)(nil)

// New migrates the database and returns the Store. On error it closes db.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Clock == nil {
		_ = cfg.DB.Close()
		return nil, fmt.Errorf("%s ledger: a clock is required", cfg.Dialect.Name)
	}
	s := &Store{db: cfg.DB, d: cfg.Dialect, now: func() time.Time { return cfg.Clock().UTC() }}
	if err := s.migrate(ctx, cfg.Migrations); err != nil {
		_ = cfg.DB.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database handle.
func (s *Store) Close() error { return s.db.Close() }

// ---------------------------------------------------------------- plumbing

// tx runs fn in a transaction and commits it; a unique violation is
// ledger.ErrConflict.
func (s *Store) tx(ctx context.Context, what string, fn func(*sql.Tx) error) error {
	err := s.tryTx(ctx, fn)
	if err != nil && s.d.IsUnique(err) {
		return fmt.Errorf("%w: %s: %w", ledger.ErrConflict, what, err)
	}
	return err
}

// lock takes the named lock until tx ends: a row of ledger_locks, written
// (PostgreSQL locks a row it inserts or updates until commit; SQLite's
// transactions hold the database's write lock already). Read-modify-write
// sequences that no row of their own guards (the next catalog version,
// the first draft of a period) take one first, so that concurrent writers
// queue instead of colliding.
func (s *Store) lock(ctx context.Context, tx *sql.Tx, name string) error {
	if _, err := s.exec(ctx, tx, `INSERT INTO ledger_locks (name) VALUES (?)
		ON CONFLICT (name) DO UPDATE SET name = excluded.name`, name); err != nil {
		return fmt.Errorf("%s ledger: cannot take lock %q: %w", s.d.Name, name, err)
	}
	return nil
}

func (s *Store) tryTx(ctx context.Context, fn func(*sql.Tx) error) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s ledger: cannot begin transaction: %w", s.d.Name, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("%s ledger: cannot commit: %w", s.d.Name, err)
	}
	return nil
}

type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) exec(ctx context.Context, q querier, query string, args ...any) (int64, error) {
	r, err := q.ExecContext(ctx, s.d.Rebind(query), args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (s *Store) audit(ctx context.Context, q querier, at time.Time, r ledger.AuditRecord) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_audit (at_ms, actor, action, object, before_json, after_json)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`),
		at.UnixMilli(), r.Actor, r.Action, r.Object, nullJSON(r.Before), nullJSON(r.After)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("%s ledger: cannot write audit entry %s %s: %w", s.d.Name, r.Action, r.Object, err)
	}
	return id, nil
}

func nullJSON(b json.RawMessage) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs of strings, numbers and times are marshalled
	}
	return b
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// ---------------------------------------------------------------- catalog

// PutCatalog implements ledger.Store.
func (s *Store) PutCatalog(ctx context.Context, actor string, content []byte) (ledger.CatalogVersion, bool, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.CatalogVersion{}, false, err
	}
	if len(content) == 0 {
		return ledger.CatalogVersion{}, false, fmt.Errorf("%w: catalog content is empty", ledger.ErrInvalidArgument)
	}
	var v ledger.CatalogVersion
	var created bool
	sum := ledger.SHA256Hex(content)
	err := s.tx(ctx, "catalog upload", func(tx *sql.Tx) error {
		if err := s.lock(ctx, tx, "catalog"); err != nil {
			return err
		}
		cur, err := s.catalog(ctx, tx, `ORDER BY version DESC LIMIT 1`)
		switch {
		case err == nil && cur.SHA256 == sum:
			v = cur
			return nil
		case err != nil && !errors.Is(err, ledger.ErrNotFound):
			return err
		}
		now := s.now()
		v = ledger.CatalogVersion{Version: cur.Version + 1, Content: content, SHA256: sum, CreatedBy: actor, CreatedAt: now}
		if _, err := s.exec(ctx, tx, `INSERT INTO ledger_catalog_versions (version, content, sha256, created_by, created_ms)
			VALUES (?, ?, ?, ?, ?)`, v.Version, content, sum, actor, now.UnixMilli()); err != nil {
			return fmt.Errorf("%s ledger: cannot store catalog version %d: %w", s.d.Name, v.Version, err)
		}
		created = true
		_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "catalog.upload",
			Object: "catalog/" + strconv.FormatInt(v.Version, 10), After: mustJSON(catalogView(v))})
		return err
	})
	if err != nil {
		return ledger.CatalogVersion{}, false, err
	}
	return v, created, nil
}

func catalogView(v ledger.CatalogVersion) any {
	return struct {
		Version int64  `json:"version"`
		SHA256  string `json:"sha256"`
		Bytes   int    `json:"bytes"`
	}{v.Version, v.SHA256, len(v.Content)}
}

func (s *Store) catalog(ctx context.Context, q querier, where string, args ...any) (ledger.CatalogVersion, error) {
	var v ledger.CatalogVersion
	var created int64
	err := q.QueryRowContext(ctx, s.d.Rebind(`SELECT version, content, sha256, created_by, created_ms
		FROM ledger_catalog_versions `+where), args...).Scan(&v.Version, &v.Content, &v.SHA256, &v.CreatedBy, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.CatalogVersion{}, fmt.Errorf("%w: catalog version", ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.CatalogVersion{}, fmt.Errorf("%s ledger: cannot read catalog version: %w", s.d.Name, err)
	}
	v.CreatedAt = fromMS(created)
	return v, nil
}

// Catalog implements ledger.Store.
func (s *Store) Catalog(ctx context.Context, version int64) (ledger.CatalogVersion, error) {
	v, err := s.catalog(ctx, s.db, `WHERE version = ?`, version)
	if errors.Is(err, ledger.ErrNotFound) {
		return v, fmt.Errorf("%w: catalog version %d", ledger.ErrNotFound, version)
	}
	return v, err
}

// CurrentCatalog implements ledger.Store.
func (s *Store) CurrentCatalog(ctx context.Context) (ledger.CatalogVersion, error) {
	v, err := s.catalog(ctx, s.db, `ORDER BY version DESC LIMIT 1`)
	if errors.Is(err, ledger.ErrNotFound) {
		return v, fmt.Errorf("%w: no catalog was uploaded", ledger.ErrNotFound)
	}
	return v, err
}

// CatalogVersions implements ledger.Store.
func (s *Store) CatalogVersions(ctx context.Context) ([]ledger.CatalogVersion, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT version, sha256, created_by, created_ms FROM ledger_catalog_versions ORDER BY version DESC`)
	if err != nil {
		return nil, fmt.Errorf("%s ledger: cannot list catalog versions: %w", s.d.Name, err)
	}
	defer rows.Close() //nolint:errcheck // read-only; errors surface on Next/Err
	var out []ledger.CatalogVersion
	for rows.Next() {
		var v ledger.CatalogVersion
		var created int64
		if err := rows.Scan(&v.Version, &v.SHA256, &v.CreatedBy, &created); err != nil {
			return nil, fmt.Errorf("%s ledger: cannot read catalog version: %w", s.d.Name, err)
		}
		v.CreatedAt = fromMS(created)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s ledger: cannot list catalog versions: %w", s.d.Name, err)
	}
	return out, nil
}

// ---------------------------------------------------------------- invoices

const invoiceCols = `id, project, period, revision, status, number, sha256, catalog_version, data_cutoff_ms,
	created_by, created_ms, updated_ms, finalized_by, finalized_ms, voided_by, voided_ms, void_reason`

func scanInvoice(sc rowScanner, withDoc bool) (ledger.Invoice, error) {
	var v ledger.Invoice
	var number sql.NullString
	var status string
	var cutoff, created, updated, finalized, voided int64
	dest := []any{&v.ID, &v.Project, &v.Period, &v.Revision, &status, &number, &v.SHA256, &v.CatalogVersion, &cutoff,
		&v.CreatedBy, &created, &updated, &v.FinalizedBy, &finalized, &v.VoidedBy, &voided, &v.VoidReason}
	if withDoc {
		dest = append(dest, &v.Document)
	}
	if err := sc.Scan(dest...); err != nil {
		return v, err
	}
	v.Status = ledger.Status(status)
	v.Number = number.String
	v.DataCutoff, v.CreatedAt, v.UpdatedAt = fromMS(cutoff), fromMS(created), fromMS(updated)
	v.FinalizedAt, v.VoidedAt = fromMS(finalized), fromMS(voided)
	return v, nil
}

func (s *Store) invoice(ctx context.Context, q querier, what, where string, args ...any) (ledger.Invoice, error) {
	return readRow(ctx, s, q, what, func(r rowScanner) (ledger.Invoice, error) { return scanInvoice(r, true) },
		`SELECT `+invoiceCols+`, document FROM ledger_invoices `+where, args...)
}

func invoiceWhat(id int64) string { return "invoice " + strconv.FormatInt(id, 10) }

func invoiceObject(id int64) string { return "invoice/" + strconv.FormatInt(id, 10) }

// invoiceView is an invoice as the audit log shows it: everything but the
// document, which its SHA-256 stands for.
func invoiceView(v ledger.Invoice) json.RawMessage {
	type view struct {
		ID             int64         `json:"id"`
		Project        string        `json:"project"`
		Period         string        `json:"period"`
		Revision       int           `json:"revision"`
		Status         ledger.Status `json:"status"`
		Number         string        `json:"number,omitempty"`
		SHA256         string        `json:"sha256"`
		CatalogVersion int64         `json:"catalog_version"`
		DataCutoff     time.Time     `json:"data_cutoff"`
		VoidReason     string        `json:"void_reason,omitempty"`
	}
	return mustJSON(view{v.ID, v.Project, v.Period, v.Revision, v.Status, v.Number, v.SHA256, v.CatalogVersion, v.DataCutoff, v.VoidReason})
}

// Invoice implements ledger.Store.
func (s *Store) Invoice(ctx context.Context, id int64) (ledger.Invoice, error) {
	return s.invoice(ctx, s.db, invoiceWhat(id), `WHERE id = ?`, id)
}

// InvoiceByKey implements ledger.Store.
func (s *Store) InvoiceByKey(ctx context.Context, k ledger.InvoiceKey) (ledger.Invoice, error) {
	return s.invoice(ctx, s.db, fmt.Sprintf("invoice %s/%s revision %d", k.Project, k.Period, k.Revision),
		`WHERE project = ? AND period = ? AND revision = ?`, k.Project, k.Period, k.Revision)
}

// SaveDraft implements ledger.Store.
func (s *Store) SaveDraft(ctx context.Context, actor string, d ledger.Draft) (ledger.Invoice, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Invoice{}, err
	}
	if err := ledger.CheckDraft(&d); err != nil {
		return ledger.Invoice{}, err
	}
	what := fmt.Sprintf("draft %s/%s", d.Project, d.Period)
	sum := ledger.SHA256Hex(d.Document)
	cutoff := d.DataCutoff.UTC().Truncate(time.Millisecond)
	var out ledger.Invoice
	err := s.tx(ctx, what, func(tx *sql.Tx) error {
		if err := s.lock(ctx, tx, "invoice/"+d.Project+"/"+d.Period); err != nil {
			return err
		}
		if _, err := s.catalog(ctx, tx, `WHERE version = ?`, d.CatalogVersion); err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("%w: %s: catalog version %d is not stored", ledger.ErrInvalidArgument, what, d.CatalogVersion)
			}
			return err
		}
		now := s.now()
		cur, err := s.invoice(ctx, tx, what, `WHERE project = ? AND period = ? AND status <> 'void'`, d.Project, d.Period)
		switch {
		case err == nil && cur.Status == ledger.StatusFinalized:
			return fmt.Errorf("%w: %s: invoice %s (revision %d) is finalized; void it to start a new revision",
				ledger.ErrConflict, what, cur.Number, cur.Revision)
		case err == nil: // the open draft: replace it
			if cur.SHA256 == sum && cur.CatalogVersion == d.CatalogVersion && cur.DataCutoff.Equal(cutoff) {
				out = cur
				return nil
			}
			before := invoiceView(cur)
			n, err := s.exec(ctx, tx, `UPDATE ledger_invoices SET document = ?, sha256 = ?, catalog_version = ?,
				data_cutoff_ms = ?, updated_ms = ? WHERE id = ? AND status = 'draft'`,
				d.Document, sum, d.CatalogVersion, cutoff.UnixMilli(), now.UnixMilli(), cur.ID)
			if err != nil {
				return fmt.Errorf("%s ledger: cannot update %s: %w", s.d.Name, what, err)
			}
			if n != 1 { // finalized since it was read
				return fmt.Errorf("%w: %s: invoice %d was finalized meanwhile; void it to start a new revision", ledger.ErrConflict, what, cur.ID)
			}
			out = cur
			out.Document, out.SHA256, out.CatalogVersion, out.DataCutoff, out.UpdatedAt = d.Document, sum, d.CatalogVersion, cutoff, now
			_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "invoice.draft.update",
				Object: invoiceObject(cur.ID), Before: before, After: invoiceView(out)})
			return err
		case !errors.Is(err, ledger.ErrNotFound):
			return err
		}
		var last sql.NullInt64
		if err := tx.QueryRowContext(ctx, s.d.Rebind(`SELECT MAX(revision) FROM ledger_invoices WHERE project = ? AND period = ?`),
			d.Project, d.Period).Scan(&last); err != nil {
			return fmt.Errorf("%s ledger: cannot read revisions of %s: %w", s.d.Name, what, err)
		}
		out = ledger.Invoice{InvoiceKey: ledger.InvoiceKey{Project: d.Project, Period: d.Period, Revision: int(last.Int64) + 1},
			Status: ledger.StatusDraft, Document: d.Document, SHA256: sum, CatalogVersion: d.CatalogVersion, DataCutoff: cutoff,
			CreatedBy: actor, CreatedAt: now, UpdatedAt: now}
		id, err := s.insertDraft(ctx, tx, out)
		if err != nil {
			return err
		}
		out.ID = id
		_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "invoice.draft.create",
			Object: invoiceObject(id), After: invoiceView(out)})
		return err
	})
	if err != nil {
		return ledger.Invoice{}, err
	}
	return out, nil
}

func (s *Store) insertDraft(ctx context.Context, tx *sql.Tx, v ledger.Invoice) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_invoices (project, period, revision, status, document, sha256,
		catalog_version, data_cutoff_ms, created_by, created_ms, updated_ms)
		VALUES (?, ?, ?, 'draft', ?, ?, ?, ?, ?, ?, ?) RETURNING id`),
		v.Project, v.Period, v.Revision, v.Document, v.SHA256, v.CatalogVersion, v.DataCutoff.UnixMilli(), v.CreatedBy,
		v.CreatedAt.UnixMilli(), v.UpdatedAt.UnixMilli()).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("%s ledger: cannot insert draft %s/%s revision %d: %w", s.d.Name, v.Project, v.Period, v.Revision, err)
	}
	return id, nil
}

// transitionError explains why a conditional status update matched no row.
func (s *Store) transitionError(ctx context.Context, tx *sql.Tx, id int64, verb string, want ledger.Status) error {
	cur, err := s.invoice(ctx, tx, invoiceWhat(id), `WHERE id = ?`, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: cannot %s invoice %d: it is %s, want %s", ledger.ErrInvalidTransition, verb, id, cur.Status, want)
}

// Finalize implements ledger.Store.
func (s *Store) Finalize(ctx context.Context, actor string, id int64, opt ledger.FinalizeOptions) (ledger.Invoice, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Invoice{}, err
	}
	var out ledger.Invoice
	err := s.tx(ctx, "finalize "+invoiceWhat(id), func(tx *sql.Tx) error {
		now := s.now()
		// Read the draft and lock its row (PostgreSQL: FOR UPDATE; SQLite:
		// the transaction holds the write lock already): a concurrent
		// finalize of the same invoice waits here and then finds it
		// finalized.
		cur, err := s.invoice(ctx, tx, invoiceWhat(id), `WHERE id = ?`+s.d.ForUpdate, id)
		if err != nil {
			return err
		}
		if cur.Status != ledger.StatusDraft {
			return fmt.Errorf("%w: cannot finalize %s: it is %s, want draft", ledger.ErrInvalidTransition, invoiceWhat(id), cur.Status)
		}
		if opt.IfSHA256 != "" && !strings.EqualFold(opt.IfSHA256, cur.SHA256) {
			return fmt.Errorf("%w: cannot finalize %s: its document is %s, not the %s that was reviewed",
				ledger.ErrConflict, invoiceWhat(id), cur.SHA256, opt.IfSHA256)
		}
		before := cur
		// The number: the year's counter row, incremented in this
		// transaction. The row stays locked until commit, so numbers are
		// unique; a rollback undoes the increment, so there are no gaps.
		year := now.Year()
		var seq int
		if err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_invoice_counters (year, last) VALUES (?, 1)
			ON CONFLICT (year) DO UPDATE SET last = ledger_invoice_counters.last + 1 RETURNING last`), year).Scan(&seq); err != nil {
			return fmt.Errorf("%s ledger: cannot number %s: %w", s.d.Name, invoiceWhat(id), err)
		}
		number := ledger.InvoiceNumber(year, seq)
		doc := cur.Document
		if opt.Stamp != nil {
			if doc, err = opt.Stamp(number, cur.Document); err != nil {
				return fmt.Errorf("cannot finalize %s: stamping the document: %w", invoiceWhat(id), err)
			}
			if !json.Valid(doc) {
				return fmt.Errorf("%w: cannot finalize %s: the stamped document is not valid JSON", ledger.ErrInvalidArgument, invoiceWhat(id))
			}
		}
		sum := ledger.SHA256Hex(doc)
		n, err := s.exec(ctx, tx, `UPDATE ledger_invoices SET status = 'finalized', number = ?, number_year = ?, number_seq = ?,
			document = ?, sha256 = ?, finalized_by = ?, finalized_ms = ?, updated_ms = ? WHERE id = ? AND status = 'draft'`,
			number, year, seq, doc, sum, actor, now.UnixMilli(), now.UnixMilli(), id)
		if err != nil {
			return fmt.Errorf("%s ledger: cannot finalize %s: %w", s.d.Name, invoiceWhat(id), err)
		}
		if n != 1 { // cannot happen under the row lock; never finalize on a guess
			return s.transitionError(ctx, tx, id, "finalize", ledger.StatusDraft)
		}
		out = cur
		out.Status, out.Number, out.Document, out.SHA256 = ledger.StatusFinalized, number, doc, sum
		out.FinalizedBy, out.FinalizedAt, out.UpdatedAt = actor, now, now
		_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "invoice.finalize",
			Object: invoiceObject(id), Before: invoiceView(before), After: invoiceView(out)})
		return err
	})
	if err != nil {
		return ledger.Invoice{}, err
	}
	return out, nil
}

// Void implements ledger.Store.
func (s *Store) Void(ctx context.Context, actor string, id int64, reason string, opt ledger.VoidOptions) (ledger.Voided, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Voided{}, err
	}
	if strings.TrimSpace(reason) == "" {
		return ledger.Voided{}, fmt.Errorf("%w: void %s: a reason is required", ledger.ErrInvalidArgument, invoiceWhat(id))
	}
	var out ledger.Voided
	err := s.tx(ctx, "void "+invoiceWhat(id), func(tx *sql.Tx) error {
		now := s.now()
		inv, err := s.markVoid(ctx, tx, now, actor, id, reason)
		if err != nil {
			return err
		}
		cn, err := s.issueCreditNote(ctx, tx, now, actor, inv, reason, opt)
		if err != nil {
			return err
		}
		next, err := s.reissueDraft(ctx, tx, now, actor, inv, opt)
		if err != nil {
			return err
		}
		out = ledger.Voided{Invoice: inv, CreditNote: cn, Draft: next}
		return nil
	})
	if err != nil {
		return ledger.Voided{}, err
	}
	return out, nil
}

// markVoid voids finalized invoice id and audits it, returning the voided
// invoice; it takes the lock of the invoice's project and period for the
// next revision.
func (s *Store) markVoid(ctx context.Context, tx *sql.Tx, now time.Time, actor string, id int64, reason string) (ledger.Invoice, error) {
	n, err := s.exec(ctx, tx, `UPDATE ledger_invoices SET status = 'void', voided_by = ?, voided_ms = ?, void_reason = ?, updated_ms = ?
		WHERE id = ? AND status = 'finalized'`, actor, now.UnixMilli(), reason, now.UnixMilli(), id)
	if err != nil {
		return ledger.Invoice{}, fmt.Errorf("%s ledger: cannot void %s: %w", s.d.Name, invoiceWhat(id), err)
	}
	if n == 0 {
		return ledger.Invoice{}, s.transitionError(ctx, tx, id, "void", ledger.StatusFinalized)
	}
	inv, err := s.invoice(ctx, tx, invoiceWhat(id), `WHERE id = ?`, id)
	if err != nil {
		return ledger.Invoice{}, err
	}
	before := inv
	before.Status, before.VoidedBy, before.VoidedAt, before.VoidReason = ledger.StatusFinalized, "", time.Time{}, ""
	// The next revision is inserted by reissueDraft: queue with SaveDraft.
	if err := s.lock(ctx, tx, "invoice/"+inv.Project+"/"+inv.Period); err != nil {
		return ledger.Invoice{}, err
	}
	if _, err := s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "invoice.void",
		Object: invoiceObject(id), Before: invoiceView(before), After: invoiceView(inv)}); err != nil {
		return ledger.Invoice{}, err
	}
	return inv, nil
}

// issueCreditNote issues and audits the credit note of voided invoice inv,
// numbered after the invoice (its row is locked by markVoid's update, so the
// sequence cannot race).
func (s *Store) issueCreditNote(ctx context.Context, tx *sql.Tx, now time.Time, actor string, inv ledger.Invoice, reason string, opt ledger.VoidOptions) (ledger.CreditNote, error) {
	id := inv.ID
	var last sql.NullInt64
	if err := tx.QueryRowContext(ctx, s.d.Rebind(`SELECT MAX(seq) FROM ledger_credit_notes WHERE invoice_id = ?`), id).Scan(&last); err != nil {
		return ledger.CreditNote{}, fmt.Errorf("%s ledger: cannot read credit notes of %s: %w", s.d.Name, invoiceWhat(id), err)
	}
	seq := int(last.Int64) + 1
	cn := ledger.CreditNote{InvoiceID: id, InvoiceNumber: inv.Number, Number: ledger.CreditNoteNumber(inv.Number, seq),
		Reason: reason, CreatedBy: actor, CreatedAt: now}
	if opt.CreditNote != nil {
		var err error
		if cn.Document, err = opt.CreditNote(cn.Number, now, inv.Document); err != nil {
			return ledger.CreditNote{}, fmt.Errorf("cannot void %s: making credit note %s: %w", invoiceWhat(id), cn.Number, err)
		}
		if !json.Valid(cn.Document) {
			return ledger.CreditNote{}, fmt.Errorf("%w: cannot void %s: the document of credit note %s is not valid JSON", ledger.ErrInvalidArgument, invoiceWhat(id), cn.Number)
		}
		cn.SHA256 = ledger.SHA256Hex(cn.Document)
	}
	if err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_credit_notes (invoice_id, seq, number, reason, created_by, created_ms, document, sha256)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`), id, seq, cn.Number, reason, actor, now.UnixMilli(), cn.Document, cn.SHA256).Scan(&cn.ID); err != nil {
		return ledger.CreditNote{}, fmt.Errorf("%s ledger: cannot issue credit note %s: %w", s.d.Name, cn.Number, err)
	}
	if _, err := s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "creditnote.issue",
		Object: "creditnote/" + strconv.FormatInt(cn.ID, 10), After: creditNoteView(cn)}); err != nil {
		return ledger.CreditNote{}, err
	}
	return cn, nil
}

// reissueDraft inserts and audits the next revision of voided invoice inv: a
// draft starting from the voided document (or opt.Reissue's).
func (s *Store) reissueDraft(ctx context.Context, tx *sql.Tx, now time.Time, actor string, inv ledger.Invoice, opt ledger.VoidOptions) (ledger.Invoice, error) {
	start := inv.Document
	if opt.Reissue != nil {
		var err error
		if start, err = opt.Reissue(inv.Document); err != nil {
			return ledger.Invoice{}, fmt.Errorf("cannot void %s: making the next revision's draft: %w", invoiceWhat(inv.ID), err)
		}
		if !json.Valid(start) {
			return ledger.Invoice{}, fmt.Errorf("%w: cannot void %s: the next revision's document is not valid JSON", ledger.ErrInvalidArgument, invoiceWhat(inv.ID))
		}
	}
	next := ledger.Invoice{InvoiceKey: ledger.InvoiceKey{Project: inv.Project, Period: inv.Period, Revision: inv.Revision + 1},
		Status: ledger.StatusDraft, Document: start, SHA256: ledger.SHA256Hex(start), CatalogVersion: inv.CatalogVersion,
		DataCutoff: inv.DataCutoff, CreatedBy: actor, CreatedAt: now, UpdatedAt: now}
	var err error
	if next.ID, err = s.insertDraft(ctx, tx, next); err != nil {
		return ledger.Invoice{}, err
	}
	if _, err := s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "invoice.draft.create",
		Object: invoiceObject(next.ID), After: invoiceView(next)}); err != nil {
		return ledger.Invoice{}, err
	}
	return next, nil
}

// Invoices implements ledger.Store.
func (s *Store) Invoices(ctx context.Context, f ledger.InvoiceFilter) ([]ledger.Invoice, string, error) {
	limit, err := ledger.PageLimit(f.Limit)
	if err != nil {
		return nil, "", err
	}
	if err := ledger.CheckStatus(f.Status); err != nil {
		return nil, "", err
	}
	after, err := ledger.DecodeCursor(f.Cursor)
	if err != nil {
		return nil, "", err
	}
	pq := &pagedQuery{limit: limit, after: after}
	pq.eq("project", f.Project)
	pq.eq("period", f.Period)
	pq.eq("status", string(f.Status))
	return readPage(ctx, s, pq, `SELECT `+invoiceCols+` FROM ledger_invoices`, "invoices",
		func(r *sql.Rows) (ledger.Invoice, error) { return scanInvoice(r, false) }, func(v *ledger.Invoice) int64 { return v.ID })
}

// creditNoteCols are read by scanCreditNote; the query joins the invoice
// as i for its number.
const creditNoteCols = `c.id, c.invoice_id, i.number, c.number, c.reason, c.created_by, c.created_ms, c.document, c.sha256`

func scanCreditNote(sc rowScanner) (ledger.CreditNote, error) {
	var c ledger.CreditNote
	var created int64
	if err := sc.Scan(&c.ID, &c.InvoiceID, &c.InvoiceNumber, &c.Number, &c.Reason, &c.CreatedBy, &created, (*[]byte)(&c.Document), &c.SHA256); err != nil {
		return c, err
	}
	if len(c.Document) == 0 {
		c.Document = nil
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

// CreditNotes implements ledger.Store.
func (s *Store) CreditNotes(ctx context.Context, invoiceID int64) ([]ledger.CreditNote, error) {
	rows, err := s.db.QueryContext(ctx, s.d.Rebind(`SELECT `+creditNoteCols+`
		FROM ledger_credit_notes c JOIN ledger_invoices i ON i.id = c.invoice_id WHERE c.invoice_id = ? ORDER BY c.seq`), invoiceID)
	if err != nil {
		return nil, fmt.Errorf("%s ledger: cannot list credit notes: %w", s.d.Name, err)
	}
	defer rows.Close() //nolint:errcheck // read-only; errors surface on Next/Err
	var out []ledger.CreditNote
	for rows.Next() {
		c, err := scanCreditNote(rows)
		if err != nil {
			return nil, fmt.Errorf("%s ledger: cannot read credit note: %w", s.d.Name, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s ledger: cannot list credit notes: %w", s.d.Name, err)
	}
	if len(out) == 0 {
		if _, err := s.Invoice(ctx, invoiceID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CreditNote implements ledger.Store.
func (s *Store) CreditNote(ctx context.Context, id int64) (ledger.CreditNote, error) {
	return readRow(ctx, s, s.db, "credit note "+strconv.FormatInt(id, 10), scanCreditNote, `SELECT `+creditNoteCols+`
		FROM ledger_credit_notes c JOIN ledger_invoices i ON i.id = c.invoice_id WHERE c.id = ?`, id)
}

// ---------------------------------------------------------------- tokens

const tokenCols = `id, role, project, user_name, name, created_by, created_ms, expires_ms, revoked_by, revoked_ms` //nolint:gosec // column names, not a credential

func scanToken(sc rowScanner, extra ...any) (ledger.Token, error) {
	var t ledger.Token
	var role string
	var created, expires, revoked int64
	if err := sc.Scan(append([]any{&t.ID, &role, &t.Project, &t.User, &t.Name, &t.CreatedBy, &created, &expires, &t.RevokedBy, &revoked}, extra...)...); err != nil {
		return t, err
	}
	t.Role = ledger.Role(role)
	t.CreatedAt, t.ExpiresAt, t.RevokedAt = fromMS(created), fromMS(expires), fromMS(revoked)
	return t, nil
}

// tokenView is a token as the audit log shows it (it never has a secret).
func tokenView(t ledger.Token) json.RawMessage {
	type view struct {
		ID        int64       `json:"id"`
		Role      ledger.Role `json:"role"`
		Project   string      `json:"project,omitempty"`
		User      string      `json:"user,omitempty"`
		Name      string      `json:"name,omitempty"`
		ExpiresAt time.Time   `json:"expires_at"`
		Revoked   bool        `json:"revoked"`
	}
	return mustJSON(view{t.ID, t.Role, t.Project, t.User, t.Name, t.ExpiresAt, !t.RevokedAt.IsZero()})
}

// creditNoteView is a credit note as the audit log shows it.
func creditNoteView(c ledger.CreditNote) json.RawMessage {
	type view struct {
		ID        int64  `json:"id"`
		InvoiceID int64  `json:"invoice_id"`
		Number    string `json:"number"`
		Reason    string `json:"reason"`
		SHA256    string `json:"sha256,omitempty"`
	}
	return mustJSON(view{c.ID, c.InvoiceID, c.Number, c.Reason, c.SHA256})
}

func tokenObject(id int64) string { return "token/" + strconv.FormatInt(id, 10) }

// CreateToken implements ledger.Store.
func (s *Store) CreateToken(ctx context.Context, actor string, nt ledger.NewToken) (string, ledger.Token, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return "", ledger.Token{}, err
	}
	if err := ledger.CheckNewToken(&nt); err != nil {
		return "", ledger.Token{}, err
	}
	secret, err := ledger.NewTokenSecret()
	if err != nil {
		return "", ledger.Token{}, err
	}
	var t ledger.Token
	err = s.tx(ctx, "create token", func(tx *sql.Tx) error {
		now := s.now()
		t = ledger.Token{Role: nt.Role, Project: nt.Project, User: nt.User, Name: nt.Name, CreatedBy: actor,
			CreatedAt: now, ExpiresAt: fromMS(now.Add(nt.TTL).UnixMilli())}
		if err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_tokens (hash, role, project, user_name, name, created_by, created_ms, expires_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`), ledger.HashToken(secret), string(t.Role), t.Project, t.User, t.Name,
			actor, now.UnixMilli(), t.ExpiresAt.UnixMilli()).Scan(&t.ID); err != nil {
			return fmt.Errorf("%s ledger: cannot store token: %w", s.d.Name, err)
		}
		_, err := s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "token.create", Object: tokenObject(t.ID), After: tokenView(t)})
		return err
	})
	if err != nil {
		return "", ledger.Token{}, err
	}
	return secret, t, nil
}

// LookupToken implements ledger.Store.
func (s *Store) LookupToken(ctx context.Context, secret string) (ledger.Token, error) {
	t, err := bySecret(ctx, s, "token", "SELECT "+tokenCols+", hash FROM ledger_tokens WHERE hash = ?", secret, scanToken)
	if err != nil {
		return ledger.Token{}, err
	}
	if !t.RevokedAt.IsZero() {
		return t, fmt.Errorf("%w: token %d was revoked at %s", ledger.ErrTokenRevoked, t.ID, t.RevokedAt.Format(time.RFC3339))
	}
	if !s.now().Before(t.ExpiresAt) {
		return t, fmt.Errorf("%w: token %d expired at %s", ledger.ErrTokenExpired, t.ID, t.ExpiresAt.Format(time.RFC3339))
	}
	return t, nil
}

// RevokeToken implements ledger.Store.
func (s *Store) RevokeToken(ctx context.Context, actor string, id int64) (ledger.Token, error) {
	return revoke(ctx, s, revocable[ledger.Token]{noun: "token", table: "ledger_tokens", cols: tokenCols,
		scan: func(r rowScanner) (ledger.Token, error) { return scanToken(r) }, object: tokenObject, view: tokenView,
		unrevoked: func(t ledger.Token) ledger.Token {
			t.RevokedBy, t.RevokedAt = "", time.Time{}
			return t
		}}, actor, id)
}

// Tokens implements ledger.Store.
func (s *Store) Tokens(ctx context.Context) ([]ledger.Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tokenCols+` FROM ledger_tokens ORDER BY id DESC`)
	if err != nil {
		return nil, fmt.Errorf("%s ledger: cannot list tokens: %w", s.d.Name, err)
	}
	defer rows.Close() //nolint:errcheck // read-only; errors surface on Next/Err
	var out []ledger.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("%s ledger: cannot read token: %w", s.d.Name, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s ledger: cannot list tokens: %w", s.d.Name, err)
	}
	return out, nil
}

// ---------------------------------------------------------------- audit

// RecordAudit implements ledger.Store.
func (s *Store) RecordAudit(ctx context.Context, r ledger.AuditRecord) (ledger.AuditEntry, error) {
	if err := ledger.CheckActor(r.Actor); err != nil {
		return ledger.AuditEntry{}, err
	}
	var errs []error
	if strings.TrimSpace(r.Action) == "" {
		errs = append(errs, errors.New("action is required"))
	}
	if strings.TrimSpace(r.Object) == "" {
		errs = append(errs, errors.New("object is required"))
	}
	for name, b := range map[string]json.RawMessage{"before": r.Before, "after": r.After} {
		if b != nil && !json.Valid(b) {
			errs = append(errs, fmt.Errorf("%s is not valid JSON", name))
		}
	}
	if len(errs) > 0 {
		return ledger.AuditEntry{}, fmt.Errorf("%w: audit record: %w", ledger.ErrInvalidArgument, errors.Join(errs...))
	}
	e := ledger.AuditEntry{AuditRecord: r}
	err := s.tx(ctx, "audit record", func(tx *sql.Tx) error {
		e.At = fromMS(s.now().UnixMilli())
		var err error
		e.ID, err = s.audit(ctx, tx, e.At, r)
		return err
	})
	if err != nil {
		return ledger.AuditEntry{}, err
	}
	return e, nil
}

// Audit implements ledger.Store.
func (s *Store) Audit(ctx context.Context, f ledger.AuditFilter) ([]ledger.AuditEntry, string, error) {
	pq, err := listQuery(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	pq.eq("actor", f.Actor)
	pq.eq("action", f.Action)
	pq.eq("object", f.Object)
	if !f.Since.IsZero() {
		pq.add("at_ms >= ?", f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		pq.add("at_ms < ?", f.Until.UnixMilli())
	}
	return readPage(ctx, s, pq, `SELECT id, at_ms, actor, action, object, before_json, after_json FROM ledger_audit`, "audit entries",
		scanAudit, func(e *ledger.AuditEntry) int64 { return e.ID })
}

func scanAudit(rows *sql.Rows) (ledger.AuditEntry, error) {
	var e ledger.AuditEntry
	var at int64
	var before, after sql.NullString
	if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Object, &before, &after); err != nil {
		return e, err
	}
	e.At = fromMS(at)
	if before.Valid {
		e.Before = json.RawMessage(before.String)
	}
	if after.Valid {
		e.After = json.RawMessage(after.String)
	}
	return e, nil
}

// ---------------------------------------------------------------- leases

// AcquireLease implements ledger.Store.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if name == "" || holder == "" || ttl <= 0 {
		return false, fmt.Errorf("%w: lease %q for %q, ttl %s: want a name, a holder and a positive ttl", ledger.ErrInvalidArgument, name, holder, ttl)
	}
	now := s.now()
	// One statement: insert, or take over when the holder is the same or
	// the lease expired; otherwise the upsert matches nothing.
	n, err := s.exec(ctx, s.db, `INSERT INTO ledger_leases (name, holder, expires_ms) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
		WHERE ledger_leases.holder = excluded.holder OR ledger_leases.expires_ms <= ?`,
		name, holder, now.Add(ttl).UnixMilli(), now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("%s ledger: cannot acquire lease %q: %w", s.d.Name, name, err)
	}
	return n == 1, nil
}

// ReleaseLease implements ledger.Store.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.exec(ctx, s.db, `DELETE FROM ledger_leases WHERE name = ? AND holder = ?`, name, holder); err != nil {
		return fmt.Errorf("%s ledger: cannot release lease %q: %w", s.d.Name, name, err)
	}
	return nil
}

// pagedQuery collects the conditions of a list query (ANDed) and their
// arguments; sql appends them to a SELECT and pages newest first by id,
// one row more than limit so the caller knows whether a next page exists.
// limit and after are the page asked for (listQuery); readPage adds the
// cursor's condition last.
type pagedQuery struct {
	where []string
	args  []any
	limit int
	after int64
}

func (q *pagedQuery) add(cond string, arg any) {
	q.where = append(q.where, cond)
	q.args = append(q.args, arg)
}

// eq adds col = v when v is set: an empty filter field matches every row.
func (q *pagedQuery) eq(col, v string) {
	if v != "" {
		q.add(col+" = ?", v)
	}
}

// listQuery starts a list's query from its requested limit and cursor.
func listQuery(limit int, cursor string) (*pagedQuery, error) {
	limit, err := ledger.PageLimit(limit)
	if err != nil {
		return nil, err
	}
	after, err := ledger.DecodeCursor(cursor)
	if err != nil {
		return nil, err
	}
	return &pagedQuery{limit: limit, after: after}, nil
}

// readPage runs q over selectFrom and reads one page, newest first, with scan;
// next is the cursor after the last row when there are more. what names the
// rows in errors ("invoices").
func readPage[T any](ctx context.Context, s *Store, q *pagedQuery, selectFrom string, what string,
	scan func(*sql.Rows) (T, error), id func(*T) int64) (out []T, next string, err error) {
	limit := q.limit
	query, args := q.statement(selectFrom)
	rows, err := s.db.QueryContext(ctx, s.d.Rebind(query), args...)
	if err != nil {
		return nil, "", fmt.Errorf("%s ledger: cannot list %s: %w", s.d.Name, what, err)
	}
	defer rows.Close() //nolint:errcheck // read-only; errors surface on Next/Err
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, "", fmt.Errorf("%s ledger: cannot read %s: %w", s.d.Name, what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("%s ledger: cannot list %s: %w", s.d.Name, what, err)
	}
	if len(out) > limit {
		out = out[:limit]
		next = ledger.EncodeCursor(id(&out[limit-1]))
	}
	return out, next, nil
}

// update runs query (an UPDATE or DELETE of one row) in tx and audits it as
// rec; failure says what could not be done in the error ("update release 7").
func (s *Store) update(ctx context.Context, tx *sql.Tx, now time.Time, rec ledger.AuditRecord, failure, query string, args ...any) error {
	if _, err := s.exec(ctx, tx, query, args...); err != nil {
		return fmt.Errorf("%s ledger: cannot %s: %w", s.d.Name, failure, err)
	}
	_, err := s.audit(ctx, tx, now, rec)
	return err
}

// rowScanner is a row to read: *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(...any) error }

// bySecret reads the row whose hash is secret's (query selects scan's
// columns, then the hash): ledger.ErrNotFound when there is none. The
// database found the row by its hash; it is compared again in constant
// time, so that no timing of ours depends on how much of it matched.
func bySecret[T any](ctx context.Context, s *Store, noun, query, secret string, scan func(rowScanner, ...any) (T, error)) (T, error) {
	want := ledger.HashToken(secret)
	var got []byte
	v, err := scan(s.db.QueryRowContext(ctx, s.d.Rebind(query), want), &got)
	var zero T
	if errors.Is(err, sql.ErrNoRows) {
		return zero, fmt.Errorf("%w: no such %s", ledger.ErrNotFound, noun)
	}
	if err != nil {
		return zero, fmt.Errorf("%s ledger: cannot look up %s: %w", s.d.Name, noun, err)
	}
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return zero, fmt.Errorf("%w: no such %s", ledger.ErrNotFound, noun)
	}
	return v, nil
}

// readRow reads the one row query selects with scan; what names it in errors
// ("exemption 7"): ledger.ErrNotFound when there is none.
func readRow[T any](ctx context.Context, s *Store, q querier, what string, scan func(rowScanner) (T, error),
	query string, args ...any) (T, error) {
	v, err := scan(q.QueryRowContext(ctx, s.d.Rebind(query), args...))
	if errors.Is(err, sql.ErrNoRows) {
		var zero T
		return zero, fmt.Errorf("%w: %s", ledger.ErrNotFound, what)
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s ledger: cannot read %s: %w", s.d.Name, what, err)
	}
	return v, nil
}

// revocable is a kind of row that is revoked, never deleted (tokens,
// exemptions): its table and columns, how it is read and audited.
type revocable[T any] struct {
	noun   string // "token": errors say "token 7", the audit action is "token.revoke"
	table  string
	cols   string
	scan   func(rowScanner) (T, error)
	object func(id int64) string // the audit's object: "token/7"
	view   func(T) json.RawMessage
	// unrevoked is the row as it was before: the audit's before.
	unrevoked func(T) T
}

// revoke marks row id of kind k revoked by actor now and audits it, in one
// transaction; a row revoked before is ledger.ErrInvalidTransition.
func revoke[T any](ctx context.Context, s *Store, k revocable[T], actor string, id int64) (T, error) {
	var out, zero T
	if err := ledger.CheckActor(actor); err != nil {
		return zero, err
	}
	what := k.noun + " " + strconv.FormatInt(id, 10)
	err := s.tx(ctx, "revoke "+what, func(tx *sql.Tx) error {
		now := s.now()
		n, err := s.exec(ctx, tx, `UPDATE `+k.table+` SET revoked_by = ?, revoked_ms = ? WHERE id = ? AND revoked_ms = 0`,
			actor, now.UnixMilli(), id)
		if err != nil {
			return fmt.Errorf("%s ledger: cannot revoke %s: %w", s.d.Name, what, err)
		}
		if out, err = readRow(ctx, s, tx, what, k.scan, `SELECT `+k.cols+` FROM `+k.table+` WHERE id = ?`, id); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: %s is already revoked", ledger.ErrInvalidTransition, what)
		}
		_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: k.noun + ".revoke",
			Object: k.object(id), Before: k.view(k.unrevoked(out)), After: k.view(out)})
		return err
	})
	if err != nil {
		return zero, err
	}
	return out, nil
}

// statement is q's SELECT (? placeholders) and its arguments: the
// conditions, then the cursor's, newest first, limit+1 rows.
func (q *pagedQuery) statement(selectFrom string) (string, []any) {
	where, args := q.where, q.args
	if q.after > 0 {
		where, args = append(slices.Clip(where), "id < ?"), append(slices.Clip(args), q.after)
	}
	if len(where) > 0 {
		selectFrom += " WHERE " + strings.Join(where, " AND ")
	}
	return selectFrom + " ORDER BY id DESC LIMIT " + strconv.Itoa(q.limit+1), args
}
