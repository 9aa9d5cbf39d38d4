package invoicing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/ledger/postgres"
	"github.com/cardhour/cardhour/internal/ledger/sqlite"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
)

var shanghai = mustZone("Asia/Shanghai")

func mustZone(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

func at(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04", s, shanghai)
	if err != nil {
		panic(err)
	}
	return t
}

const (
	alice = "2023110042" // nlp-lab
	bob   = "2023110099" // cv-lab
	h100  = "NVIDIA H100 80GB HBM3"
)

func exampleCatalog(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../schemas/examples/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// changedCatalog raises the H100's hourly price from 21.00 to 25.00.
func changedCatalog(t *testing.T) []byte {
	t.Helper()
	b := exampleCatalog(t)
	i := bytes.Index(b, []byte("id: h100-full"))
	j := bytes.Index(b[i:], []byte(`hourly_price: "21.00"`))
	if i < 0 || j < 0 {
		t.Fatal("example catalog: the h100-full price moved; update the test")
	}
	out := append([]byte{}, b[:i+j]...)
	out = append(out, `hourly_price: "25.00"`...)
	return append(out, b[i+j+len(`hourly_price: "21.00"`):]...)
}

func occupancy(project, user, instance, model, profile string, from, to time.Time) schemas.Run {
	return schemas.Run{Key: schemas.Key{Project: project, User: user, InstanceID: instance, GPUModel: model, Profile: profile},
		StartMS: from.UnixMilli(), EndMS: to.UnixMilli()}
}

func write(t *testing.T, m *ingest.MemStore, runs ...schemas.Run) {
	t.Helper()
	if err := m.Write(context.Background(), &ingest.Batch{Occupancy: runs}); err != nil {
		t.Fatal(err)
	}
}

type openLedger func(t *testing.T, clock func() time.Time) ledger.Store

func sqliteLedger(t *testing.T) openLedger {
	path := filepath.Join(t.TempDir(), "ledger.db")
	return func(t *testing.T, clock func() time.Time) ledger.Store {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

func postgresLedger(t *testing.T) openLedger {
	dsn := testenv.PostgresDSN(t)
	return func(t *testing.T, clock func() time.Time) ledger.Store {
		s, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

type fixture struct {
	clock *ledgertest.Clock
	led   ledger.Store
	usage *ingest.MemStore
	svc   *invoicing.Service
}

func newFixture(t *testing.T, open openLedger, mod func(*invoicing.Config)) *fixture {
	t.Helper()
	f := &fixture{clock: ledgertest.NewClock(at("2026-11-20 12:00")), usage: ingest.NewMemStore()}
	f.led = open(t, f.clock.Now)
	cfg := invoicing.Config{Ledger: f.led, Usage: f.usage, Clock: f.clock.Now}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := invoicing.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	return f
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func draftOf(t *testing.T, run *invoicing.RunReport, project string) invoicing.RunDraft {
	t.Helper()
	for _, d := range run.Drafts {
		if d.Project == project {
			return d
		}
	}
	t.Fatalf("run of %s has no draft of %s: %+v", run.Period, project, run.Drafts)
	return invoicing.RunDraft{}
}

func lineAmount(t *testing.T, doc []byte, kind, user, sku string) decimal.Decimal {
	t.Helper()
	s := must[invoicing.DocSummary](t)(invoicing.ExportDocuments{}.Summary(doc))
	for _, l := range s.Lines {
		if l.Kind == kind && l.User == user && l.SKU == sku {
			return l.Amount
		}
	}
	t.Fatalf("document of %s has no line %s/%s/%s", s.Project, kind, user, sku)
	return decimal.Zero
}

func TestFlowSQLite(t *testing.T)   { flow(t, sqliteLedger(t)) }
func TestFlowPostgres(t *testing.T) { flow(t, postgresLedger(t)) }

// The whole flow: month to date, grace, finalize, late usage and a new
// catalog that change nothing finalized, the difference reported, void
// and reissue, statements and the export.
func flow(t *testing.T, open openLedger) {
	ctx := ctxT(t)
	f := newFixture(t, open, nil)
	if _, _, err := f.led.PutCatalog(ctx, "admin", exampleCatalog(t)); err != nil {
		t.Fatal(err)
	}
	must[invoicing.RosterResult](t)(f.svc.ImportRoster(ctx, "lead", strings.NewReader("student_id,name,project\n"+alice+",张三,nlp-lab\n"), "nlp-lab"))
	write(t, f.usage,
		occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-03 09:00"), at("2026-11-03 19:00")),
		occupancy("cv-lab", bob, "t4-b", "Tesla T4", "full", at("2026-11-05 08:00"), at("2026-11-05 09:30")))

	// A future month is refused; the current one bills month to date.
	_, err := f.svc.Run(ctx, "finance", "2026-12")
	if !errors.Is(err, invoicing.ErrFuturePeriod) || !errors.Is(err, ledger.ErrInvalidArgument) || !strings.Contains(err.Error(), "2026-12-01T00:00:00+08:00") {
		t.Fatalf("run of a future month: %v", err)
	}
	run := must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11"))
	if !run.MonthToDate || run.ID == 0 || len(run.Kept) != 0 || len(run.Diffs) != 0 {
		t.Fatalf("month-to-date run: %+v", run)
	}
	nlp := draftOf(t, run, "nlp-lab")
	if !run.DataCutoff.Equal(at("2026-11-03 19:00")) && !run.DataCutoff.Equal(at("2026-11-05 09:30")) {
		t.Fatalf("data cut-off %s: want the newest usage the run saw", run.DataCutoff)
	}

	// After the month: the draft is recomputed, but finalizing waits for
	// the grace period (3 days after the month's end in Asia/Shanghai).
	f.clock.Set(at("2026-12-02 10:00"))
	run = must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11"))
	if run.MonthToDate {
		t.Fatal("a run after the month is not month to date")
	}
	nlp2 := draftOf(t, run, "nlp-lab")
	if nlp2.InvoiceID != nlp.InvoiceID || nlp2.Revision != 1 {
		t.Fatalf("the open draft was not replaced: %+v then %+v", nlp, nlp2)
	}
	// No usage came since: the draft and its SHA-256 are kept.
	if nlp2.SHA256 != nlp.SHA256 || nlp2.Outcome != invoicing.OutcomeUnchanged {
		t.Fatalf("a run over the same usage replaced the draft: %+v then %+v", nlp, nlp2)
	}
	_, err = f.svc.Finalize(ctx, "finance", nlp2.InvoiceID, nlp2.SHA256)
	if !errors.Is(err, invoicing.ErrGracePeriod) || !errors.Is(err, ledger.ErrInvalidTransition) ||
		!strings.Contains(err.Error(), "2026-12-04T00:00:00+08:00") {
		t.Fatalf("finalize during the grace period: %v", err)
	}

	// After the grace period: a stale SHA-256 is refused, the reviewed one
	// finalizes, the number and issue date are stamped into the document.
	f.clock.Set(at("2026-12-04 09:00"))
	if _, err := f.svc.Finalize(ctx, "finance", nlp2.InvoiceID, strings.Repeat("0", 64)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("finalize of a replaced document: %v", err)
	}
	inv := must[ledger.Invoice](t)(f.svc.Finalize(ctx, "finance", nlp2.InvoiceID, nlp2.SHA256))
	if inv.Status != ledger.StatusFinalized || inv.Number != "2026-000001" {
		t.Fatalf("finalized: %+v", inv)
	}
	stamped := must[*export.Document](t)(export.Parse(inv.Document))
	if stamped.Number != inv.Number || stamped.IssuedAt == nil || !stamped.IssuedAt.Equal(at("2026-12-04 09:00")) {
		t.Fatalf("stamp: number %q issued %v", stamped.Number, stamped.IssuedAt)
	}
	if len(stamped.Students) != 1 || stamped.Students[0].Name != "张三" {
		t.Fatalf("the invoice does not name its student from the roster: %+v", stamped.Students)
	}
	if got := lineAmount(t, inv.Document, billing.KindUsage, alice, "h100-full"); !got.Equal(decimal.RequireFromString("210")) {
		t.Fatalf("10 h of H100 at 21.00: %s", got)
	}
	cv := draftOf(t, run, "cv-lab")
	must[ledger.Invoice](t)(f.svc.Finalize(ctx, "finance", cv.InvoiceID, ""))
	frozenDoc, frozenSum := inv.Document, inv.SHA256

	// Late November samples arrive and a new catalog raises the price.
	write(t, f.usage, occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-10 10:00"), at("2026-11-10 12:00")))
	if _, created, err := f.led.PutCatalog(ctx, "admin", changedCatalog(t)); err != nil || !created {
		t.Fatalf("new catalog: %v %v", created, err)
	}
	f.clock.Set(at("2026-12-06 09:00"))
	run = must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11"))
	if len(run.Drafts) != 0 || len(run.Kept) != 2 || run.CatalogVersion != 2 {
		t.Fatalf("run after finalizing: drafts %+v kept %+v version %d", run.Drafts, run.Kept, run.CatalogVersion)
	}
	// The finalized invoice is exactly as it was.
	again := must[ledger.Invoice](t)(f.led.Invoice(ctx, inv.ID))
	if !bytes.Equal(again.Document, frozenDoc) || again.SHA256 != frozenSum || again.Status != ledger.StatusFinalized || again.CatalogVersion != 1 {
		t.Fatalf("the finalized invoice changed: %+v", again)
	}
	// The run reports the difference: 12 h at 25.00 instead of 10 h at 21.00.
	if len(run.Diffs) != 1 {
		t.Fatalf("diffs: %+v", run.Diffs)
	}
	d := run.Diffs[0]
	if d.Project != "nlp-lab" || d.Number != inv.Number || d.Action != invoicing.ActionVoidAndReissue || len(d.Lines) != 1 ||
		!d.Delta.Equal(decimal.RequireFromString("90")) || !d.NewTotal.Sub(d.OldTotal.Decimal).Equal(d.Delta.Decimal) {
		t.Fatalf("diff: %+v", d)
	}
	l := d.Lines[0]
	if l.Kind != billing.KindUsage || l.User != alice || l.SKU != "h100-full" || !l.Old.Equal(decimal.NewFromInt(210)) ||
		!l.New.Equal(decimal.NewFromInt(300)) || !l.Delta.Equal(decimal.NewFromInt(90)) {
		t.Fatalf("diff line: %+v", l)
	}
	// The run is stored with its report.
	rec := must[ledger.BillingRun](t)(f.led.BillingRun(ctx, run.ID))
	var stored invoicing.RunReport
	if err := json.Unmarshal(rec.Report, &stored); err != nil || len(stored.Diffs) != 1 || !stored.Diffs[0].Delta.Equal(d.Delta.Decimal) {
		t.Fatalf("stored report: %v %s", err, rec.Report)
	}

	// Exports render the stored documents: byte-identical to the frozen one.
	dir := t.TempDir()
	paths := must[[]string](t)(f.svc.ExportPeriod(ctx, "finance", "2026-11", dir))
	if len(paths) != 5 {
		t.Fatalf("export files: %v", paths)
	}
	pdf := must[[]byte](t)(os.ReadFile(filepath.Join(dir, "invoice-"+inv.Number+".pdf")))
	var want bytes.Buffer
	if err := (invoicing.ExportDocuments{}).Render(&want, invoicing.FormatPDF, frozenDoc); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pdf, want.Bytes()) {
		t.Fatalf("PDF not rendered from the stored document: %s", pdf)
	}

	// The rule: void and reissue. The credit note cancels it; the next
	// run prices the new revision with what is known now.
	v := must[ledger.Voided](t)(f.svc.Void(ctx, "finance", inv.ID, "late usage and new H100 price"))
	if v.CreditNote.Number != inv.Number+"-CN1" || v.Draft.Revision != 2 {
		t.Fatalf("void: %+v", v)
	}
	run = must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11"))
	rev2 := draftOf(t, run, "nlp-lab")
	if rev2.InvoiceID != v.Draft.ID || len(run.Diffs) != 0 {
		t.Fatalf("run after the void: %+v", run)
	}
	reissued := must[ledger.Invoice](t)(f.svc.Finalize(ctx, "finance", rev2.InvoiceID, rev2.SHA256))
	if got := lineAmount(t, reissued.Document, billing.KindUsage, alice, "h100-full"); !got.Equal(decimal.NewFromInt(300)) || reissued.Number != "2026-000003" {
		t.Fatalf("reissued %s: %s", reissued.Number, got)
	}

	// A statement is derived from the stored document, with the roster's name.
	st := must[*export.Document](t)(export.Parse(must[[]byte](t)(f.svc.Statement(ctx, reissued.ID, alice))))
	if len(st.Students) != 1 || st.Students[0].Name != "张三" || st.Number != reissued.Number {
		t.Fatalf("statement: %+v", st)
	}
	for _, ln := range st.Lines {
		if ln.User != alice {
			t.Fatalf("statement of %s has a line of %q", alice, ln.User)
		}
	}
}

func TestServiceConfig(t *testing.T) {
	_, err := invoicing.New(invoicing.Config{Grace: -time.Hour, Webhook: invoicing.Webhook{URL: "ftp://x", Secret: []byte("short")}})
	for _, want := range []string{"a ledger is required", "a usage source is required", "grace -1h0m0s", "webhook URL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v; want %q", err, want)
		}
	}
}

// The grace period is configurable.
func TestGraceIsConfigurable(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t, sqliteLedger(t), func(c *invoicing.Config) { c.Grace = 12 * time.Hour })
	must[ledger.CatalogVersion](t)(firstOf(f.led.PutCatalog(ctx, "admin", exampleCatalog(t))))
	write(t, f.usage, occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-03 09:00"), at("2026-11-03 10:00")))
	f.clock.Set(at("2026-12-01 11:59"))
	run := must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11"))
	id := draftOf(t, run, "nlp-lab").InvoiceID
	if _, err := f.svc.Finalize(ctx, "finance", id, ""); !errors.Is(err, invoicing.ErrGracePeriod) || !strings.Contains(err.Error(), "2026-12-01T12:00:00+08:00") {
		t.Fatalf("finalize 1 minute early: %v", err)
	}
	f.clock.Set(at("2026-12-01 12:00"))
	must[ledger.Invoice](t)(f.svc.Finalize(ctx, "finance", id, ""))
}

func firstOf[A, B any](a A, _ B, err error) (A, error) { return a, err }
