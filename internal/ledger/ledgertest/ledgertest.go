// Package ledgertest is the conformance suite of ledger.Store: every
// implementation runs it (against a real database) and must pass it whole.
package ledgertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// Opener opens a Store on the database its Backend made. Every call is a
// new, independent connection (as a second process or replica would have)
// to the same database; the Backend closes what it opened when the test
// ends.
type Opener func(t *testing.T, clock func() time.Time) ledger.Store

// Backend makes a fresh, empty database for one test.
type Backend func(t *testing.T) Opener

// Clock is a settable clock for the stores under test.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set sets the clock.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

var t0 = time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)

// Run runs the suite, each case on a fresh database from backend.
func Run(t *testing.T, backend Backend) {
	cases := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"CatalogVersions", testCatalogVersions},
		{"ConcurrentCatalogUploads", testConcurrentCatalogs},
		{"InvoiceLifecycle", testInvoiceLifecycle},
		{"DraftValidation", testDraftValidation},
		{"FinalizeStampAndNoGaps", testFinalizeStampAndNoGaps},
		{"NumberingPerYear", testNumberingPerYear},
		{"ConcurrentFinalizeIsGaplessAndUnique", testConcurrentFinalize},
		{"ConcurrentFinalizeOfOneInvoice", testConcurrentFinalizeSame},
		{"ConcurrentDraftsKeepTheNaturalKey", testConcurrentDrafts},
		{"InvoiceListAndPagination", testInvoiceList},
		{"Tokens", testTokens},
		{"TokenValidation", testTokenValidation},
		{"AuditLog", testAuditLog},
		{"Leases", testLeases},
		{"ReopenKeepsEverything", testReopen},
		{"Roster", testRoster},
		{"RosterValidation", testRosterValidation},
		{"BillingRuns", testBillingRuns},
		{"ExportRunsAreAnOutbox", testExportRuns},
		{"ConcurrentExportBeginsOnce", testConcurrentExportBegin},
		{"AlertsOncePerKey", testAlertsOnce},
		{"ConcurrentAlertsRecordOnce", testConcurrentAlerts},
		{"DeliveriesAreAnOutbox", testDeliveries},
		{"Releases", testReleases},
		{"ConcurrentReleaseBegins", testConcurrentReleases},
		{"Exemptions", testExemptions},
		{"ExemptionRequests", testExemptionRequests},
		{"Budgets", testBudgets},
	}
	cases = append(cases, sessionCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, backend(t)) })
	}
}

// ---------------------------------------------------------------- helpers

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// replicas opens two stores on one database, as two replicas of the service
// would, on one clock at t0.
func replicas(t *testing.T, open Opener) (s1, s2 ledger.Store, ctx context.Context) {
	clock := NewClock(t0)
	return open(t, clock.Now), open(t, clock.Now), ctxT(t)
}

// atOnce runs do(0) … do(n-1) at the same time and waits for them all.
func atOnce(n int, do func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do(i)
		}()
	}
	wg.Wait()
}

// race calls do n times at once, call i on stores[i%len(stores)] (replicas
// contending for one thing), and returns how many calls got it (true); an
// error fails the test.
func race(t *testing.T, stores []ledger.Store, n int, do func(i int, s ledger.Store) (bool, error)) int {
	t.Helper()
	var mu sync.Mutex
	won := 0
	atOnce(n, func(i int) {
		ok, err := do(i, stores[i%len(stores)])
		if err != nil {
			t.Error(err)
			return
		}
		if ok {
			mu.Lock()
			won++
			mu.Unlock()
		}
	})
	return won
}

// get(f())(t) is f's value; an error fails the test.
func get[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func wantErr(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func creditNotesEqual(a, b ledger.CreditNote) bool {
	return a.ID == b.ID && a.InvoiceID == b.InvoiceID && a.InvoiceNumber == b.InvoiceNumber && a.Number == b.Number &&
		a.Reason == b.Reason && a.CreatedBy == b.CreatedBy && a.CreatedAt.Equal(b.CreatedAt) &&
		bytes.Equal(a.Document, b.Document) && a.SHA256 == b.SHA256
}

func doc(project, period string, cents int) []byte {
	return []byte(fmt.Sprintf(`{"project":%q,"period":%q,"total":"%d.%02d","lines":[]}`, project, period, cents/100, cents%100))
}

func catalog(t *testing.T, s ledger.Store) int64 {
	t.Helper()
	v, _, err := s.PutCatalog(ctxT(t), "cli:test", []byte("version: 1\nprices: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return v.Version
}

func draft(t *testing.T, s ledger.Store, cat int64, project, period string, cents int, cutoff time.Time) ledger.Invoice {
	t.Helper()
	return get(s.SaveDraft(ctxT(t), "billing-run", ledger.Draft{Project: project, Period: period,
		Document: doc(project, period, cents), CatalogVersion: cat, DataCutoff: cutoff}))(t)
}

func actions(t *testing.T, s ledger.Store, f ledger.AuditFilter) []string {
	t.Helper()
	f.Limit = ledger.MaxLimit
	es, _ := get2(s.Audit(ctxT(t), f))(t)
	var out []string
	for i := len(es) - 1; i >= 0; i-- { // oldest first
		out = append(out, es[i].Action+" "+es[i].Object)
	}
	return out
}

// get2 is get for two values.
func get2[A, B any](a A, b B, err error) func(*testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

// ---------------------------------------------------------------- catalog

func testCatalogVersions(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	_, err := s.CurrentCatalog(ctx)
	wantErr(t, err, ledger.ErrNotFound, "current catalog of an empty store")
	_, _, err = s.PutCatalog(ctx, "alice", nil)
	wantErr(t, err, ledger.ErrInvalidArgument, "empty catalog")
	_, _, err = s.PutCatalog(ctx, " ", []byte("x"))
	wantErr(t, err, ledger.ErrInvalidArgument, "catalog without actor")

	c1 := []byte("catalog: one\n\x00binary-safe\xff")
	v1, created := get2(s.PutCatalog(ctx, "alice", c1))(t)
	if !created || v1.Version != 1 || v1.SHA256 != ledger.SHA256Hex(c1) || v1.CreatedBy != "alice" || !v1.CreatedAt.Equal(t0) {
		t.Fatalf("first upload = %+v created=%v", v1, created)
	}
	clock.Advance(time.Minute)
	again, created := get2(s.PutCatalog(ctx, "bob", c1))(t)
	if created || again.Version != 1 || again.CreatedBy != "alice" {
		t.Fatalf("uploading the current catalog again = %+v created=%v, want version 1 unchanged", again, created)
	}
	c2 := []byte("catalog: two\n")
	v2, created := get2(s.PutCatalog(ctx, "bob", c2))(t)
	if !created || v2.Version != 2 {
		t.Fatalf("second upload = %+v created=%v", v2, created)
	}
	clock.Advance(time.Minute)
	// Going back to an old content is a new version: versions are history.
	v3, created := get2(s.PutCatalog(ctx, "carol", c1))(t)
	if !created || v3.Version != 3 {
		t.Fatalf("re-upload of version 1's content = %+v created=%v, want version 3", v3, created)
	}
	cur := get(s.CurrentCatalog(ctx))(t)
	if cur.Version != 3 || !bytes.Equal(cur.Content, c1) {
		t.Fatalf("current = %d %q", cur.Version, cur.Content)
	}
	got := get(s.Catalog(ctx, 2))(t)
	if !bytes.Equal(got.Content, c2) || got.SHA256 != ledger.SHA256Hex(c2) || got.CreatedBy != "bob" {
		t.Fatalf("version 2 = %+v", got)
	}
	_, err = s.Catalog(ctx, 4)
	wantErr(t, err, ledger.ErrNotFound, "catalog version 4")
	list := get(s.CatalogVersions(ctx))(t)
	if len(list) != 3 || list[0].Version != 3 || list[2].Version != 1 || list[0].Content != nil || list[2].SHA256 != v1.SHA256 {
		t.Fatalf("versions = %+v, want 3, 2, 1 without content", list)
	}
	if a := actions(t, s, ledger.AuditFilter{Action: "catalog.upload"}); strings.Join(a, ",") != "catalog.upload catalog/1,catalog.upload catalog/2,catalog.upload catalog/3" {
		t.Fatalf("audit = %v", a)
	}
}

// testConcurrentCatalogs uploads different catalogs at once from two
// connections: each becomes its own version, numbered 1…n.
func testConcurrentCatalogs(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	const n = 12
	errs := make([]error, n)
	atOnce(n, func(i int) {
		_, created, err := []ledger.Store{s1, s2}[i%2].PutCatalog(ctx, "alice", []byte(fmt.Sprintf("catalog %d", i)))
		if err == nil && !created {
			err = errors.New("not created")
		}
		errs[i] = err
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("upload %d: %v", i, err)
		}
	}
	list := get(s1.CatalogVersions(ctx))(t)
	seen := map[string]bool{}
	for i, v := range list {
		if v.Version != int64(n-i) {
			t.Fatalf("versions %+v: want %d…1", list, n)
		}
		seen[v.SHA256] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct catalogs stored, want %d", len(seen), n)
	}
}

// ---------------------------------------------------------------- invoices

// testInvoiceLifecycle takes one invoice through its life: drafted and
// recomputed, finalized, voided with a credit note, and its next revision
// finalized with the next number; the audit log records each step.
func testInvoiceLifecycle(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	lc := &lifecycle{t: t, clock: clock, s: s, ctx: ctxT(t), cat: catalog(t, s),
		cutoff: time.Date(2026, 12, 3, 23, 59, 59, 123e6, time.UTC)}
	lc.draftAndRecompute()
	lc.finalize()
	lc.voidRefusals()
	lc.void()
	lc.afterVoid()
	lc.nextRevision()
	lc.checkAudit()
}

// lifecycle is the state testInvoiceLifecycle carries from step to step.
type lifecycle struct {
	t      *testing.T
	clock  *Clock
	s      ledger.Store
	ctx    context.Context
	cat    int64
	cutoff time.Time
	d1     ledger.Invoice // the first draft
	d1b    ledger.Invoice // its recomputation, then finalized
	v      ledger.Voided
}

// draftAndRecompute saves a draft, the same again (no change) and a
// recomputed one; a draft cannot be voided.
func (lc *lifecycle) draftAndRecompute() {
	t, s, ctx, clock := lc.t, lc.s, lc.ctx, lc.clock
	cat, cutoff := lc.cat, lc.cutoff
	d1 := draft(t, s, cat, "vision", "2026-11", 12345, cutoff)
	if d1.Revision != 1 || d1.Status != ledger.StatusDraft || d1.Number != "" || !d1.DataCutoff.Equal(cutoff) ||
		d1.SHA256 != ledger.SHA256Hex(d1.Document) || d1.CatalogVersion != cat {
		t.Fatalf("first draft = %+v", d1)
	}
	clock.Advance(time.Hour)
	same := draft(t, s, cat, "vision", "2026-11", 12345, cutoff)
	if same.ID != d1.ID || !same.UpdatedAt.Equal(d1.UpdatedAt) {
		t.Fatalf("saving the same draft again changed it: %+v", same)
	}
	d1b := draft(t, s, cat, "vision", "2026-11", 12399, cutoff.Add(time.Hour))
	if d1b.ID != d1.ID || d1b.Revision != 1 || d1b.SHA256 == d1.SHA256 || !d1b.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("recomputed draft = %+v, want the same draft with a new document", d1b)
	}
	_, err := s.Void(ctx, "finance", d1.ID, "wrong", ledger.VoidOptions{})
	wantErr(t, err, ledger.ErrInvalidTransition, "voiding a draft")
	lc.d1, lc.d1b = d1, d1b
}

// finalize refuses a document that changed since review, then finalizes with
// the first number; the finalized document is frozen.
func (lc *lifecycle) finalize() {
	t, s, ctx, clock := lc.t, lc.s, lc.ctx, lc.clock
	cat, cutoff, d1, d1b := lc.cat, lc.cutoff, lc.d1, lc.d1b
	// A finalize of what was reviewed before the recompute is refused.
	_, err := s.Finalize(ctx, "finance", d1.ID, ledger.FinalizeOptions{IfSHA256: d1.SHA256})
	wantErr(t, err, ledger.ErrConflict, "finalizing a document that changed")
	clock.Advance(time.Hour)
	f1 := get(s.Finalize(ctx, "finance", d1.ID, ledger.FinalizeOptions{IfSHA256: d1b.SHA256}))(t)
	if f1.Status != ledger.StatusFinalized || f1.Number != "2026-000001" || f1.FinalizedBy != "finance" ||
		!f1.FinalizedAt.Equal(clock.Now()) || !bytes.Equal(f1.Document, d1b.Document) || f1.SHA256 != d1b.SHA256 {
		t.Fatalf("finalized = %+v (the refused finalize must not have used a number)", f1)
	}
	got := get(s.Invoice(ctx, d1.ID))(t)
	if !bytes.Equal(got.Document, d1b.Document) || got.Number != f1.Number || got.CatalogVersion != cat || !got.DataCutoff.Equal(cutoff.Add(time.Hour)) {
		t.Fatalf("stored = %+v", got)
	}
	_, err = s.Finalize(ctx, "finance", d1.ID, ledger.FinalizeOptions{})
	wantErr(t, err, ledger.ErrInvalidTransition, "finalizing twice")
	_, err = s.SaveDraft(ctx, "billing-run", ledger.Draft{Project: "vision", Period: "2026-11", Document: doc("vision", "2026-11", 1),
		CatalogVersion: cat, DataCutoff: cutoff})
	wantErr(t, err, ledger.ErrConflict, "a draft over a finalized invoice")
	if got := get(s.Invoice(ctx, d1.ID))(t); !bytes.Equal(got.Document, d1b.Document) {
		t.Fatal("the refused draft changed the finalized document")
	}
}

// voidRefusals: a void needs a reason, and one whose credit note or reissue
// fails rolls back.
func (lc *lifecycle) voidRefusals() {
	t, s, ctx, clock := lc.t, lc.s, lc.ctx, lc.clock
	d1 := lc.d1
	_, err := s.Void(ctx, "finance", d1.ID, "  ", ledger.VoidOptions{})
	wantErr(t, err, ledger.ErrInvalidArgument, "void without a reason")
	clock.Advance(time.Hour)
	// A failing credit note or reissue rolls the void back, number included.
	for name, opt := range map[string]ledger.VoidOptions{
		"credit note": {CreditNote: func(string, time.Time, []byte) ([]byte, error) { return nil, errors.New("no") }},
		"reissue":     {Reissue: func([]byte) ([]byte, error) { return []byte("not json"), nil }},
	} {
		_, err = s.Void(ctx, "finance", d1.ID, "x", opt)
		if err == nil {
			t.Fatalf("a void whose %s fails succeeded", name)
		}
		if got := get(s.Invoice(ctx, d1.ID))(t); got.Status != ledger.StatusFinalized {
			t.Fatalf("a void whose %s failed left the invoice %s", name, got.Status)
		}
	}
	clock.Advance(time.Hour)
}

// void voids the invoice with a credit note and a reissued next revision.
func (lc *lifecycle) void() {
	t, s, ctx, clock := lc.t, lc.s, lc.ctx, lc.clock
	d1, d1b := lc.d1, lc.d1b
	reissued := doc("vision", "2026-11", 0)
	var cnAt time.Time
	v := get(s.Void(ctx, "finance", d1.ID, "GPU model mislabelled", ledger.VoidOptions{
		Reissue: func(voided []byte) ([]byte, error) {
			if !bytes.Equal(voided, d1b.Document) {
				return nil, errors.New("reissue got another document")
			}
			return reissued, nil
		},
		CreditNote: func(number string, at time.Time, voided []byte) ([]byte, error) {
			cnAt = at
			return []byte(fmt.Sprintf(`{"number":%q,"credit_for":"2026-000001","total":"-123.99","voided_sha256":%q}`, number, ledger.SHA256Hex(voided))), nil
		},
	}))(t)
	if v.Invoice.Status != ledger.StatusVoid || v.Invoice.Number != "2026-000001" || v.Invoice.VoidReason != "GPU model mislabelled" ||
		!v.Invoice.VoidedAt.Equal(clock.Now()) || !bytes.Equal(v.Invoice.Document, d1b.Document) || v.Invoice.SHA256 != d1b.SHA256 {
		t.Fatalf("voided = %+v (the frozen document keeps its bytes and hash)", v.Invoice)
	}
	wantCN := fmt.Sprintf(`{"number":"2026-000001-CN1","credit_for":"2026-000001","total":"-123.99","voided_sha256":%q}`, d1b.SHA256)
	if v.CreditNote.Number != "2026-000001-CN1" || v.CreditNote.InvoiceID != d1.ID || v.CreditNote.InvoiceNumber != "2026-000001" || v.CreditNote.ID == 0 ||
		string(v.CreditNote.Document) != wantCN || v.CreditNote.SHA256 != ledger.SHA256Hex([]byte(wantCN)) || !cnAt.Equal(clock.Now()) {
		t.Fatalf("credit note = %+v (document %s)", v.CreditNote, v.CreditNote.Document)
	}
	if byID := get(s.CreditNote(ctx, v.CreditNote.ID))(t); !creditNotesEqual(byID, v.CreditNote) {
		t.Fatalf("credit note by id = %+v, want %+v", byID, v.CreditNote)
	}
	_, err := s.CreditNote(ctx, 999999)
	wantErr(t, err, ledger.ErrNotFound, "credit note 999999")
	if v.Draft.Revision != 2 || v.Draft.Status != ledger.StatusDraft || v.Draft.Project != "vision" || v.Draft.Period != "2026-11" ||
		!bytes.Equal(v.Draft.Document, reissued) || v.Draft.SHA256 != ledger.SHA256Hex(reissued) || v.Draft.Number != "" || v.Draft.ID == d1.ID {
		t.Fatalf("next revision = %+v", v.Draft)
	}
	if got := get(s.Invoice(ctx, v.Draft.ID))(t); !bytes.Equal(got.Document, reissued) || got.SHA256 != v.Draft.SHA256 {
		t.Fatalf("stored next revision = %+v", got)
	}
	lc.v = v
}

// afterVoid: a void invoice cannot be voided or finalized again; its credit
// notes are listed.
func (lc *lifecycle) afterVoid() {
	t, s, ctx := lc.t, lc.s, lc.ctx
	d1, v := lc.d1, lc.v
	_, err := s.Void(ctx, "finance", d1.ID, "again", ledger.VoidOptions{})
	wantErr(t, err, ledger.ErrInvalidTransition, "voiding twice")
	_, err = s.Finalize(ctx, "finance", d1.ID, ledger.FinalizeOptions{})
	wantErr(t, err, ledger.ErrInvalidTransition, "finalizing a void invoice")
	cns := get(s.CreditNotes(ctx, d1.ID))(t)
	if len(cns) != 1 || !creditNotesEqual(cns[0], v.CreditNote) {
		t.Fatalf("credit notes = %+v, want %+v", cns, v.CreditNote)
	}
	if cns := get(s.CreditNotes(ctx, v.Draft.ID))(t); len(cns) != 0 {
		t.Fatalf("credit notes of the new draft = %+v", cns)
	}
	_, err = s.CreditNotes(ctx, 999999)
	wantErr(t, err, ledger.ErrNotFound, "credit notes of no invoice")
}

// nextRevision recomputes and finalizes the next revision with the next
// number; revisions are found by key.
func (lc *lifecycle) nextRevision() {
	t, s, ctx := lc.t, lc.s, lc.ctx
	cat, cutoff, d1, v := lc.cat, lc.cutoff, lc.d1, lc.v
	// The next revision is recomputed and finalized with the next number.
	d2 := draft(t, s, cat, "vision", "2026-11", 12000, cutoff.Add(2*time.Hour))
	if d2.ID != v.Draft.ID || d2.Revision != 2 {
		t.Fatalf("recomputed revision 2 = %+v", d2)
	}
	f2 := get(s.Finalize(ctx, "finance", d2.ID, ledger.FinalizeOptions{}))(t)
	if f2.Number != "2026-000002" {
		t.Fatalf("revision 2 number = %q", f2.Number)
	}
	byKey := get(s.InvoiceByKey(ctx, ledger.InvoiceKey{Project: "vision", Period: "2026-11", Revision: 1}))(t)
	if byKey.ID != d1.ID || byKey.Status != ledger.StatusVoid {
		t.Fatalf("revision 1 by key = %+v", byKey)
	}
	_, err := s.InvoiceByKey(ctx, ledger.InvoiceKey{Project: "vision", Period: "2026-11", Revision: 3})
	wantErr(t, err, ledger.ErrNotFound, "revision 3")
	_, err = s.Invoice(ctx, 999999)
	wantErr(t, err, ledger.ErrNotFound, "invoice 999999")
	_, err = s.Finalize(ctx, "finance", 999999, ledger.FinalizeOptions{})
	wantErr(t, err, ledger.ErrNotFound, "finalizing invoice 999999")
	_, err = s.Void(ctx, "finance", 999999, "x", ledger.VoidOptions{})
	wantErr(t, err, ledger.ErrNotFound, "voiding invoice 999999")
}

// checkAudit: the audit log records every step, the finalize with its before
// and after.
func (lc *lifecycle) checkAudit() {
	t, s, ctx := lc.t, lc.s, lc.ctx
	d1, v := lc.d1, lc.v
	want := []string{
		"invoice.draft.create invoice/1", "invoice.draft.update invoice/1", "invoice.finalize invoice/1",
		"invoice.void invoice/1", fmt.Sprintf("creditnote.issue creditnote/%d", v.CreditNote.ID),
		fmt.Sprintf("invoice.draft.create invoice/%d", v.Draft.ID), fmt.Sprintf("invoice.draft.update invoice/%d", v.Draft.ID),
		fmt.Sprintf("invoice.finalize invoice/%d", v.Draft.ID),
	}
	var got2 []string
	for _, a := range actions(t, s, ledger.AuditFilter{}) {
		if !strings.HasPrefix(a, "catalog.") {
			got2 = append(got2, strings.Replace(a, fmt.Sprintf("invoice/%d", d1.ID), "invoice/1", 1))
		}
	}
	if strings.Join(got2, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit:\n%s\nwant:\n%s", strings.Join(got2, "\n"), strings.Join(want, "\n"))
	}
	// Before and after of the finalize show the transition.
	es, _ := get2(s.Audit(ctx, ledger.AuditFilter{Action: "invoice.finalize", Object: fmt.Sprintf("invoice/%d", d1.ID)}))(t)
	var before, after struct{ Status, Number string }
	if len(es) != 1 || json.Unmarshal(es[0].Before, &before) != nil || json.Unmarshal(es[0].After, &after) != nil ||
		before.Status != "draft" || before.Number != "" || after.Status != "finalized" || after.Number != "2026-000001" || es[0].Actor != "finance" {
		t.Fatalf("finalize audit = %+v (before %+v, after %+v)", es, before, after)
	}
}

func testDraftValidation(t *testing.T, open Opener) {
	s := open(t, NewClock(t0).Now)
	ctx := ctxT(t)
	cat := catalog(t, s)
	good := ledger.Draft{Project: "p", Period: "2026-11", Document: []byte(`{}`), CatalogVersion: cat, DataCutoff: t0}
	for name, mod := range map[string]func(*ledger.Draft){
		"no project":      func(d *ledger.Draft) { d.Project = "" },
		"bad period":      func(d *ledger.Draft) { d.Period = "2026-13" },
		"period with day": func(d *ledger.Draft) { d.Period = "2026-11-01" },
		"not JSON":        func(d *ledger.Draft) { d.Document = []byte(`{"a":`) },
		"no document":     func(d *ledger.Draft) { d.Document = nil },
		"no catalog":      func(d *ledger.Draft) { d.CatalogVersion = 0 },
		"unknown catalog": func(d *ledger.Draft) { d.CatalogVersion = cat + 1 },
		"no cut-off":      func(d *ledger.Draft) { d.DataCutoff = time.Time{} },
	} {
		d := good
		mod(&d)
		_, err := s.SaveDraft(ctx, "run", d)
		wantErr(t, err, ledger.ErrInvalidArgument, name)
	}
	_, err := s.SaveDraft(ctx, "", good)
	wantErr(t, err, ledger.ErrInvalidArgument, "no actor")
	if l, _ := get2(s.Invoices(ctx, ledger.InvoiceFilter{}))(t); len(l) != 0 {
		t.Fatalf("invalid drafts were stored: %+v", l)
	}
	get(s.SaveDraft(ctx, "run", good))(t)
}

func testFinalizeStampAndNoGaps(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	cat := catalog(t, s)
	a := draft(t, s, cat, "a", "2026-11", 100, t0)
	b := draft(t, s, cat, "b", "2026-11", 200, t0)

	boom := errors.New("renderer down")
	var seen string
	_, err := s.Finalize(ctx, "finance", a.ID, ledger.FinalizeOptions{Stamp: func(number string, d []byte) ([]byte, error) {
		seen = number
		return nil, boom
	}})
	if !errors.Is(err, boom) || seen != "2026-000001" {
		t.Fatalf("failing stamp: error %v, number %q", err, seen)
	}
	_, err = s.Finalize(ctx, "finance", a.ID, ledger.FinalizeOptions{Stamp: func(number string, d []byte) ([]byte, error) {
		return []byte("not json"), nil
	}})
	wantErr(t, err, ledger.ErrInvalidArgument, "stamp returning no JSON")
	if got := get(s.Invoice(ctx, a.ID))(t); got.Status != ledger.StatusDraft || got.Number != "" || !bytes.Equal(got.Document, a.Document) {
		t.Fatalf("after failed finalizes: %+v", got)
	}
	// The failed finalizes gave no number away: b gets the first one.
	fb := get(s.Finalize(ctx, "finance", b.ID, ledger.FinalizeOptions{Stamp: stampNumber}))(t)
	if fb.Number != "2026-000001" {
		t.Fatalf("after two failed finalizes the next number is %q, want 2026-000001 (no gaps)", fb.Number)
	}
	var m map[string]any
	if err := json.Unmarshal(fb.Document, &m); err != nil || m["number"] != "2026-000001" || m["total"] != "2.00" {
		t.Fatalf("stamped document %s", fb.Document)
	}
	if fb.SHA256 != ledger.SHA256Hex(fb.Document) {
		t.Fatal("SHA-256 is not that of the stamped document")
	}
	if got := get(s.Invoice(ctx, b.ID))(t); !bytes.Equal(got.Document, fb.Document) {
		t.Fatalf("stored %s, want the stamped %s", got.Document, fb.Document)
	}
	fa := get(s.Finalize(ctx, "finance", a.ID, ledger.FinalizeOptions{}))(t)
	if fa.Number != "2026-000002" {
		t.Fatalf("second number %q", fa.Number)
	}
	if a := actions(t, s, ledger.AuditFilter{Action: "invoice.finalize"}); len(a) != 2 {
		t.Fatalf("failed finalizes were audited: %v", a)
	}
}

// stampNumber writes the number into the document's top-level object.
func stampNumber(number string, d []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(d, &m); err != nil {
		return nil, err
	}
	m["number"], _ = json.Marshal(number)
	return json.Marshal(m)
}

func testNumberingPerYear(t *testing.T, open Opener) {
	clock := NewClock(time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC))
	s := open(t, clock.Now)
	ctx := ctxT(t)
	cat := catalog(t, s)
	a := draft(t, s, cat, "a", "2026-11", 1, t0)
	b := draft(t, s, cat, "b", "2026-11", 1, t0)
	c := draft(t, s, cat, "c", "2026-12", 1, t0)
	if n := get(s.Finalize(ctx, "f", a.ID, ledger.FinalizeOptions{}))(t).Number; n != "2026-000001" {
		t.Fatalf("last second of 2026: %q", n)
	}
	clock.Advance(time.Second)
	if n := get(s.Finalize(ctx, "f", b.ID, ledger.FinalizeOptions{}))(t).Number; n != "2027-000001" {
		t.Fatalf("first second of 2027: %q, want the year's first number", n)
	}
	if n := get(s.Finalize(ctx, "f", c.ID, ledger.FinalizeOptions{}))(t).Number; n != "2027-000002" {
		t.Fatalf("then %q", n)
	}
}

// testConcurrentFinalize finalizes many drafts at once from two
// independent connections, a third of them with a stamp that fails: the
// numbers given are exactly 1…successes, each once.
func testConcurrentFinalize(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	cat := catalog(t, s1)
	const n = 30
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = draft(t, s1, cat, fmt.Sprintf("p%02d", i), "2026-11", i, t0).ID
	}
	type result struct {
		number string
		err    error
	}
	results := make([]result, n)
	atOnce(n, func(i int) {
		opt := ledger.FinalizeOptions{Stamp: stampNumber}
		if i%3 == 0 {
			opt.Stamp = func(string, []byte) ([]byte, error) { return nil, errors.New("fails on purpose") }
		}
		inv, err := []ledger.Store{s1, s2}[i%2].Finalize(ctx, "finance", ids[i], opt)
		results[i] = result{inv.Number, err}
	})
	var numbers []string
	for i, r := range results {
		switch {
		case i%3 == 0 && r.err == nil:
			t.Errorf("finalize %d with a failing stamp succeeded", i)
		case i%3 != 0 && r.err != nil:
			t.Errorf("finalize %d: %v", i, r.err)
		case r.err == nil:
			numbers = append(numbers, r.number)
		}
	}
	sort.Strings(numbers)
	for i, num := range numbers {
		if want := ledger.InvoiceNumber(2026, i+1); num != want {
			t.Fatalf("numbers %v: position %d is %s, want %s (gapless and unique)", numbers, i, num, want)
		}
	}
	list, _ := get2(s2.Invoices(ctx, ledger.InvoiceFilter{Status: ledger.StatusFinalized, Limit: ledger.MaxLimit}))(t)
	if len(list) != len(numbers) {
		t.Fatalf("%d finalized invoices stored, %d finalizes succeeded", len(list), len(numbers))
	}
}

// testConcurrentFinalizeSame races two connections to finalize one draft.
func testConcurrentFinalizeSame(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	cat := catalog(t, s1)
	for round := range 5 {
		id := draft(t, s1, cat, fmt.Sprintf("p%d", round), "2026-11", 1, t0).ID
		errs := make([]error, 2)
		atOnce(2, func(i int) {
			_, errs[i] = []ledger.Store{s1, s2}[i].Finalize(ctx, "finance", id, ledger.FinalizeOptions{})
		})
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, ledger.ErrInvalidTransition):
				t.Fatalf("round %d: losing finalize failed with %v, want ErrInvalidTransition", round, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d finalizes of one draft succeeded (%v), want 1", round, ok, errs)
		}
		if got := get(s2.Invoice(ctx, id))(t); got.Number != ledger.InvoiceNumber(2026, round+1) {
			t.Fatalf("round %d: number %q", round, got.Number)
		}
	}
}

// testConcurrentDrafts races two connections (two replicas of a billing
// run) saving the first draft of the same project and period: there is one
// invoice afterwards, never two.
func testConcurrentDrafts(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	cat := catalog(t, s1)
	for round := range 5 {
		project := fmt.Sprintf("p%d", round)
		errs := make([]error, 8)
		atOnce(len(errs), func(i int) {
			_, errs[i] = []ledger.Store{s1, s2}[i%2].SaveDraft(ctx, "run", ledger.Draft{Project: project, Period: "2026-11",
				Document: doc(project, "2026-11", i), CatalogVersion: cat, DataCutoff: t0})
		})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, writer %d: %v (concurrent writers of one draft queue, they do not fail)", round, i, err)
			}
		}
		list, _ := get2(s1.Invoices(ctx, ledger.InvoiceFilter{Project: project}))(t)
		if len(list) != 1 || list[0].Revision != 1 {
			t.Fatalf("round %d: %d invoices for one project and period: %+v", round, len(list), list)
		}
	}
}

func testInvoiceList(t *testing.T, open Opener) {
	s := open(t, NewClock(t0).Now)
	ctx := ctxT(t)
	cat := catalog(t, s)
	var all []int64
	for i := range 7 {
		inv := draft(t, s, cat, []string{"a", "b"}[i%2], fmt.Sprintf("2026-%02d", i+1), i, t0)
		all = append(all, inv.ID)
		if i%3 == 0 {
			get(s.Finalize(ctx, "f", inv.ID, ledger.FinalizeOptions{}))(t)
		}
	}
	// Newest first, three at a time, every invoice once.
	var got []int64
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		page, next := get2(s.Invoices(ctx, ledger.InvoiceFilter{Limit: 3, Cursor: cursor}))(t)
		for _, inv := range page {
			if inv.Document != nil {
				t.Fatal("lists carry no documents")
			}
			got = append(got, inv.ID)
		}
		if next == "" {
			if len(page) == 0 || len(page) > 3 {
				t.Fatalf("last page has %d rows", len(page))
			}
			break
		}
		if len(page) != 3 {
			t.Fatalf("page of %d rows with a next cursor", len(page))
		}
		cursor = next
	}
	if len(got) != len(all) {
		t.Fatalf("pages gave %v, want %v newest first", got, all)
	}
	for i := range got {
		if got[i] != all[len(all)-1-i] {
			t.Fatalf("pages gave %v, want %v newest first", got, all)
		}
	}
	page, _ := get2(s.Invoices(ctx, ledger.InvoiceFilter{Project: "a", Status: ledger.StatusFinalized}))(t)
	if len(page) != 2 || page[0].Period != "2026-07" || page[1].Period != "2026-01" {
		t.Fatalf("finalized invoices of a = %+v", page)
	}
	page, _ = get2(s.Invoices(ctx, ledger.InvoiceFilter{Period: "2026-04"}))(t)
	if len(page) != 1 || page[0].Project != "b" || page[0].Number != "2026-000002" {
		t.Fatalf("invoices of 2026-04 = %+v", page)
	}
	_, _, err := s.Invoices(ctx, ledger.InvoiceFilter{Status: "paid"})
	wantErr(t, err, ledger.ErrInvalidArgument, "unknown status")
	_, _, err = s.Invoices(ctx, ledger.InvoiceFilter{Cursor: "bm90LWEtY3Vyc29y"})
	wantErr(t, err, ledger.ErrInvalidArgument, "foreign cursor")
	_, _, err = s.Invoices(ctx, ledger.InvoiceFilter{Limit: -1})
	wantErr(t, err, ledger.ErrInvalidArgument, "negative limit")
}

// ---------------------------------------------------------------- tokens

func testTokens(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	secret, tok := get2(s.CreateToken(ctx, "admin:root", ledger.NewToken{Role: ledger.RoleLead, Project: "vision", Name: "lab lead", TTL: 24 * time.Hour}))(t)
	if !strings.HasPrefix(secret, ledger.TokenPrefix) || len(secret) != len(ledger.TokenPrefix)+43 {
		t.Fatalf("secret %q: want %s and 43 base64url characters", secret, ledger.TokenPrefix)
	}
	if tok.ID == 0 || tok.Role != ledger.RoleLead || tok.Project != "vision" || tok.User != "" || tok.Name != "lab lead" ||
		!tok.ExpiresAt.Equal(t0.Add(24*time.Hour)) || tok.CreatedBy != "admin:root" {
		t.Fatalf("token = %+v", tok)
	}
	secret2, _ := get2(s.CreateToken(ctx, "admin:root", ledger.NewToken{Role: ledger.RoleStudent, Project: "vision", User: "li", TTL: time.Hour}))(t)
	if secret2 == secret {
		t.Fatal("two tokens with one secret")
	}
	got := get(s.LookupToken(ctx, secret))(t)
	if got != tok {
		t.Fatalf("lookup = %+v, want %+v", got, tok)
	}
	for _, bad := range []string{"", secret[:len(secret)-1], secret + "x", strings.ToUpper(secret), ledger.TokenPrefix} {
		_, err := s.LookupToken(ctx, bad)
		wantErr(t, err, ledger.ErrNotFound, fmt.Sprintf("lookup of %q", bad))
	}
	// Nothing the store gives back or logs holds the secret.
	list := get(s.Tokens(ctx))(t)
	es, _ := get2(s.Audit(ctx, ledger.AuditFilter{}))(t)
	for _, v := range []any{list, es} {
		b, _ := json.Marshal(v)
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(secret[len(ledger.TokenPrefix):])) {
			t.Fatalf("a secret shows in %s", b)
		}
	}
	if len(list) != 2 || list[1].ID != tok.ID {
		t.Fatalf("tokens = %+v", list)
	}

	clock.Advance(time.Hour) // the student's token expires now
	_, err := s.LookupToken(ctx, secret2)
	wantErr(t, err, ledger.ErrTokenExpired, "expired token")
	get(s.LookupToken(ctx, secret))(t)

	r := get(s.RevokeToken(ctx, "admin:root", tok.ID))(t)
	if !r.RevokedAt.Equal(clock.Now()) || r.RevokedBy != "admin:root" {
		t.Fatalf("revoked = %+v", r)
	}
	_, err = s.LookupToken(ctx, secret)
	wantErr(t, err, ledger.ErrTokenRevoked, "revoked token")
	_, err = s.RevokeToken(ctx, "admin:root", tok.ID)
	wantErr(t, err, ledger.ErrInvalidTransition, "revoking twice")
	_, err = s.RevokeToken(ctx, "admin:root", 999999)
	wantErr(t, err, ledger.ErrNotFound, "revoking no token")
	if a := actions(t, s, ledger.AuditFilter{Object: fmt.Sprintf("token/%d", tok.ID)}); len(a) != 2 ||
		a[0] != fmt.Sprintf("token.create token/%d", tok.ID) || a[1] != fmt.Sprintf("token.revoke token/%d", tok.ID) {
		t.Fatalf("token audit = %v", a)
	}
}

func testTokenValidation(t *testing.T, open Opener) {
	s := open(t, NewClock(t0).Now)
	ctx := ctxT(t)
	for _, nt := range []ledger.NewToken{
		{Role: "root", TTL: time.Hour},
		{Role: ledger.RoleAdmin, Project: "p", TTL: time.Hour},
		{Role: ledger.RoleFinance, User: "u", TTL: time.Hour},
		{Role: ledger.RoleLead, TTL: time.Hour},
		{Role: ledger.RoleLead, Project: "p", User: "u", TTL: time.Hour},
		{Role: ledger.RoleStudent, Project: "p", TTL: time.Hour},
		{Role: ledger.RoleStudent, User: "u", TTL: time.Hour},
		{Role: ledger.RoleAdmin},
		{Role: ledger.RoleAdmin, TTL: -time.Hour},
	} {
		_, _, err := s.CreateToken(ctx, "admin", nt)
		wantErr(t, err, ledger.ErrInvalidArgument, fmt.Sprintf("token %+v", nt))
	}
	_, _, err := s.CreateToken(ctx, "", ledger.NewToken{Role: ledger.RoleAdmin, TTL: time.Hour})
	wantErr(t, err, ledger.ErrInvalidArgument, "token without actor")
	if l := get(s.Tokens(ctx))(t); len(l) != 0 {
		t.Fatalf("invalid tokens were stored: %+v", l)
	}
	for _, nt := range []ledger.NewToken{
		{Role: ledger.RoleAdmin, TTL: time.Hour},
		{Role: ledger.RoleFinance, TTL: time.Hour},
		{Role: ledger.RoleStudent, Project: "p", User: "u", TTL: time.Hour},
	} {
		get2(s.CreateToken(ctx, "admin", nt))(t)
	}
}

// ---------------------------------------------------------------- audit

func testAuditLog(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	var ids []int64
	for i := range 12 {
		e := get(s.RecordAudit(ctx, ledger.AuditRecord{Actor: []string{"alice", "bob", "carol"}[i%3], Action: "config.set",
			Object: fmt.Sprintf("config/k%d", i%4), Before: json.RawMessage(fmt.Sprintf(`{"v": %d}`, i)), After: json.RawMessage(fmt.Sprintf(`{"v":%d}`, i+1))}))(t)
		if e.ID == 0 || !e.At.Equal(clock.Now()) {
			t.Fatalf("entry %+v", e)
		}
		ids = append(ids, e.ID)
		clock.Advance(time.Minute)
	}
	created := get(s.RecordAudit(ctx, ledger.AuditRecord{Actor: "alice", Action: "release.create", Object: "release/1", After: json.RawMessage(`{"ok":true}`)}))(t)

	es, next := get2(s.Audit(ctx, ledger.AuditFilter{Limit: 1}))(t)
	if next == "" || len(es) != 1 || es[0].ID != created.ID || es[0].Before != nil || string(es[0].After) != `{"ok":true}` {
		t.Fatalf("newest entry = %+v", es)
	}
	es, _ = get2(s.Audit(ctx, ledger.AuditFilter{Object: "config/k1"}))(t)
	if len(es) != 3 || es[0].ID != ids[9] || es[2].ID != ids[1] || string(es[2].Before) != `{"v": 1}` {
		t.Fatalf("entries of config/k1 = %+v (JSON is kept byte for byte)", es)
	}
	es, _ = get2(s.Audit(ctx, ledger.AuditFilter{Actor: "bob", Action: "config.set"}))(t)
	if len(es) != 4 {
		t.Fatalf("bob's entries = %+v", es)
	}
	es, _ = get2(s.Audit(ctx, ledger.AuditFilter{Since: t0.Add(2 * time.Minute), Until: t0.Add(5 * time.Minute)}))(t)
	if len(es) != 3 || es[0].ID != ids[4] || es[2].ID != ids[2] {
		t.Fatalf("entries in [t0+2m, t0+5m) = %+v", es)
	}
	// Every entry of alice once, newest first, two per page.
	var got []int64
	cursor := ""
	for {
		page, next := get2(s.Audit(ctx, ledger.AuditFilter{Actor: "alice", Limit: 2, Cursor: cursor}))(t)
		for _, e := range page {
			got = append(got, e.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	want := []int64{created.ID, ids[9], ids[6], ids[3], ids[0]}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("alice's entries by page = %v, want %v", got, want)
	}
	for name, r := range map[string]ledger.AuditRecord{
		"no actor":    {Action: "a", Object: "o"},
		"no action":   {Actor: "a", Object: "o"},
		"no object":   {Actor: "a", Action: "a"},
		"bad before":  {Actor: "a", Action: "a", Object: "o", Before: json.RawMessage(`{`)},
		"bad after":   {Actor: "a", Action: "a", Object: "o", After: json.RawMessage(`nope`)},
		"empty after": {Actor: "a", Action: "a", Object: "o", After: json.RawMessage{}},
	} {
		_, err := s.RecordAudit(ctx, r)
		wantErr(t, err, ledger.ErrInvalidArgument, name)
	}
	_, _, err := s.Audit(ctx, ledger.AuditFilter{Cursor: "%%%"})
	wantErr(t, err, ledger.ErrInvalidArgument, "bad cursor")
}

// ---------------------------------------------------------------- leases

func testLeases(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s1 := open(t, clock.Now)
	s2 := open(t, clock.Now)
	ctx := ctxT(t)
	acquire := func(s ledger.Store, name, holder string, want bool) {
		t.Helper()
		got, err := s.AcquireLease(ctx, name, holder, 30*time.Second)
		if err != nil || got != want {
			t.Fatalf("%s acquires %s at %s: %v, %v; want %v", holder, name, clock.Now().Format(time.TimeOnly), got, err, want)
		}
	}
	acquire(s1, "watch", "replica-1", true)
	acquire(s2, "watch", "replica-2", false)
	acquire(s2, "export", "replica-2", true) // another lease
	clock.Advance(20 * time.Second)
	acquire(s1, "watch", "replica-1", true) // renewed until t0+50s
	clock.Advance(20 * time.Second)
	acquire(s2, "watch", "replica-2", false) // the renewal holds
	clock.Advance(10 * time.Second)
	acquire(s2, "watch", "replica-2", true) // expired: taken over
	acquire(s1, "watch", "replica-1", false)
	if err := s1.ReleaseLease(ctx, "watch", "replica-1"); err != nil { // not the holder: nothing
		t.Fatal(err)
	}
	acquire(s1, "watch", "replica-1", false)
	if err := s2.ReleaseLease(ctx, "watch", "replica-2"); err != nil {
		t.Fatal(err)
	}
	acquire(s1, "watch", "replica-1", true)
	_, err := s1.AcquireLease(ctx, "watch", "replica-1", 0)
	wantErr(t, err, ledger.ErrInvalidArgument, "lease without ttl")

	// Many contenders at once: exactly one wins.
	clock.Advance(time.Hour)
	winners := race(t, []ledger.Store{s1, s2}, 8, func(i int, s ledger.Store) (bool, error) {
		return s.AcquireLease(ctx, "race", fmt.Sprintf("h%d", i), time.Minute)
	})
	if winners != 1 {
		t.Fatalf("%d contenders won one lease", winners)
	}
}

// ---------------------------------------------------------------- reopen

func testReopen(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	cat := catalog(t, s)
	inv := get(s.Finalize(ctx, "f", draft(t, s, cat, "p", "2026-11", 5, t0).ID, ledger.FinalizeOptions{}))(t)
	secret, _ := get2(s.CreateToken(ctx, "admin", ledger.NewToken{Role: ledger.RoleAdmin, TTL: time.Hour}))(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, clock.Now) // migrations are not run again
	got := get(s.Invoice(ctx, inv.ID))(t)
	if !bytes.Equal(got.Document, inv.Document) || got.Number != inv.Number || got.SHA256 != inv.SHA256 {
		t.Fatalf("after reopening: %+v", got)
	}
	get(s.LookupToken(ctx, secret))(t)
	next := get(s.Finalize(ctx, "f", draft(t, s, cat, "q", "2026-11", 5, t0).ID, ledger.FinalizeOptions{}))(t)
	if next.Number != "2026-000002" {
		t.Fatalf("numbering after reopening: %q", next.Number)
	}
}
