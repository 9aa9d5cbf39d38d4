package invoicing_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
)

// twoReplicas are two services, each with its own ledger connection, over
// one ledger and one usage store (two replicas of the server).
func twoReplicas(t *testing.T, open openLedger, mod func(*invoicing.Config)) (*ledgertest.Clock, ledger.Store, *ingest.MemStore, [2]*invoicing.Service) {
	clock := ledgertest.NewClock(at("2026-11-20 12:00"))
	usage := ingest.NewMemStore()
	var svcs [2]*invoicing.Service
	var led ledger.Store
	for i := range svcs {
		l := open(t, clock.Now)
		if i == 0 {
			led = l
		}
		cfg := invoicing.Config{Ledger: l, Usage: usage, Clock: clock.Now}
		if mod != nil {
			mod(&cfg)
		}
		svcs[i] = must[*invoicing.Service](t)(invoicing.New(cfg))
	}
	must[ledger.CatalogVersion](t)(firstOf(led.PutCatalog(ctxT(t), "admin", exampleCatalog(t))))
	write(t, usage,
		occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-03 09:00"), at("2026-11-03 19:00")),
		occupancy("cv-lab", bob, "t4-b", "Tesla T4", "full", at("2026-11-05 08:00"), at("2026-11-05 09:30")),
		occupancy("ai101", "s9", "t4-c", "Tesla T4", "full", at("2026-11-06 08:00"), at("2026-11-06 09:00")))
	return clock, led, usage, svcs
}

func finalizedOnce(t *testing.T, led ledger.Store, period string, want int) []ledger.Invoice {
	t.Helper()
	ctx := ctxT(t)
	invs := must[[]ledger.Invoice](t)(firstOf(led.Invoices(ctx, ledger.InvoiceFilter{Period: period, Limit: ledger.MaxLimit})))
	numbers := map[string]bool{}
	for _, inv := range invs {
		if inv.Status != ledger.StatusFinalized || inv.Revision != 1 || numbers[inv.Number] {
			t.Fatalf("invoice %+v: want each project finalized once, revision 1, its own number", inv)
		}
		numbers[inv.Number] = true
	}
	if len(invs) != want {
		t.Fatalf("%d invoices, want %d", len(invs), want)
	}
	audit := must[[]ledger.AuditEntry](t)(firstOf(led.Audit(ctx, ledger.AuditFilter{Action: "invoice.finalize", Limit: ledger.MaxLimit})))
	if len(audit) != want {
		t.Fatalf("%d finalizations audited, want %d", len(audit), want)
	}
	return invs
}

// Two replicas finalizing automatically at the same moment, without a
// lease: the ledger still finalizes each invoice once.
func TestAutoFinalizeRaceWithoutLease(t *testing.T) {
	ctx := ctxT(t)
	clock, led, _, svcs := twoReplicas(t, sqliteLedger(t), nil)
	must[*invoicing.RunReport](t)(svcs[0].Run(ctx, "finance", "2026-11"))
	// During the grace period nothing is finalized.
	clock.Set(at("2026-12-03 23:59"))
	if got := must[[]ledger.Invoice](t)(svcs[0].AutoFinalize(ctx)); len(got) != 0 {
		t.Fatalf("finalized during the grace period: %+v", got)
	}
	clock.Set(at("2026-12-04 00:00"))
	var wg sync.WaitGroup
	got := make([][]ledger.Invoice, 2)
	errs := make([]error, 2)
	for i := range svcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = svcs[i].AutoFinalize(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	finalizedOnce(t, led, "2026-11", 3)
	if n := len(got[0]) + len(got[1]); n > 3 {
		t.Fatalf("replicas report %d finalizations of 3 invoices", n)
	}
	// Nothing left: a later pass finalizes nothing.
	if again := must[[]ledger.Invoice](t)(svcs[1].AutoFinalize(ctx)); len(again) != 0 {
		t.Fatalf("second pass: %+v", again)
	}
}

// The loops of two replicas: one leads (the lease), every invoice is
// finalized once, on PostgreSQL.
func TestAutoFinalizeLoopsRacePostgres(t *testing.T) {
	clock, led, _, svcs := twoReplicas(t, postgresLedger(t), nil)
	must[*invoicing.RunReport](t)(svcs[0].Run(ctxT(t), "finance", "2026-11"))
	clock.Set(at("2026-12-04 00:00"))
	ctx, cancel := context.WithCancel(ctxT(t))
	var wg sync.WaitGroup
	for i, s := range svcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.AutoFinalizeLoop(ctx, "replica-"+string(rune('a'+i)), 10*time.Millisecond); !errors.Is(err, context.Canceled) {
				t.Errorf("loop %d: %v", i, err)
			}
		}()
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		invs := must[[]ledger.Invoice](t)(firstOf(led.Invoices(ctxT(t), ledger.InvoiceFilter{Status: ledger.StatusDraft})))
		if len(invs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a few more ticks of both loops
	cancel()
	wg.Wait()
	finalizedOnce(t, led, "2026-11", 3)
}

// The export job writes each finalized period once and delivers it to the
// webhook once, retrying a failed delivery; the receiver verifies the
// signature.
func TestExportJobOnceWithSignedWebhook(t *testing.T) {
	secret := []byte("0123456789abcdef-shared-secret")
	var posts, accepted atomic.Int32
	var deliveries sync.Map
	payloads := make(chan invoicing.WebhookPayload, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := posts.Add(1)
		body, _ := io.ReadAll(r.Body)
		if err := invoicing.Verify(secret, r.Header.Get(invoicing.HeaderTimestamp), r.Header.Get(invoicing.HeaderSignature),
			body, time.Unix(mustUnix(t, r.Header.Get(invoicing.HeaderTimestamp)), 0), 5*time.Minute); err != nil {
			t.Errorf("signature: %v", err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// A tampered body does not verify.
		if invoicing.Verify(secret, r.Header.Get(invoicing.HeaderTimestamp), r.Header.Get(invoicing.HeaderSignature),
			append(body, ' '), time.Unix(mustUnix(t, r.Header.Get(invoicing.HeaderTimestamp)), 0), 5*time.Minute) == nil {
			t.Error("a tampered body verified")
		}
		if n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable) // the first attempt fails
			return
		}
		var p invoicing.WebhookPayload
		if err := json.Unmarshal(body, &p); err != nil || p.Period != "2026-11" || len(p.Files) != 3+len(p.Invoices)+len(p.CreditNotes) || len(p.Invoices) != 3 || p.Edition == "" {
			t.Errorf("payload: %v %+v", err, p)
		}
		payloads <- p
		if _, dup := deliveries.LoadOrStore(r.Header.Get(invoicing.HeaderDelivery), true); dup {
			t.Errorf("delivery %s accepted twice", r.Header.Get(invoicing.HeaderDelivery))
		}
		accepted.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	dir := t.TempDir()
	clock, led, _, svcs := twoReplicas(t, sqliteLedger(t), func(c *invoicing.Config) {
		c.ExportDir = dir
		c.Webhook = invoicing.Webhook{URL: srv.URL, Secret: secret, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	})
	ctx := ctxT(t)
	run := must[*invoicing.RunReport](t)(svcs[0].Run(ctx, "finance", "2026-11"))
	clock.Set(at("2026-12-05 00:00"))
	// Not all finalized yet: nothing is exported.
	must[ledger.Invoice](t)(svcs[0].Finalize(ctx, "finance", run.Drafts[0].InvoiceID, ""))
	if got := must[[]string](t)(svcs[0].ExportJob(ctx)); len(got) != 0 {
		t.Fatalf("exported a period with drafts: %v", got)
	}
	if _, err := svcs[0].ExportPeriod(ctx, "finance", "2026-11", t.TempDir()); !errors.Is(err, invoicing.ErrNotFinalized) {
		t.Fatalf("ExportPeriod with drafts: %v", err)
	}
	for _, d := range run.Drafts[1:] {
		must[ledger.Invoice](t)(svcs[0].Finalize(ctx, "finance", d.InvoiceID, ""))
	}
	// Both replicas' jobs run, twice each: one export, one delivery.
	for range 2 {
		for _, s := range svcs {
			if _, err := s.ExportJob(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if posts.Load() != 2 || accepted.Load() != 1 {
		t.Fatalf("webhook: %d posts, %d accepted; want 2 (one retried) and 1", posts.Load(), accepted.Load())
	}
	runs := must[[]ledger.ExportRun](t)(firstOf(led.ExportRuns(ctx, ledger.ExportRunFilter{Period: "2026-11"})))
	if len(runs) != 2 {
		t.Fatalf("export runs: %+v", runs)
	}
	for _, r := range runs {
		if r.Status != ledger.ExportDone || r.Attempts != 1 || len(r.Files) != 6 {
			t.Fatalf("export run %+v: want done after one attempt with 6 files", r)
		}
		for _, f := range r.Files {
			b, err := os.ReadFile(filepath.Join(dir, f.Name))
			if err != nil || ledger.SHA256Hex(b) != f.SHA256 {
				t.Fatalf("%s: %v, or its SHA-256 is not the recorded one", f.Name, err)
			}
		}
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 6 {
		t.Fatalf("%d entries in the export directory, want 6", len(entries))
	}
	first := <-payloads
	if len(first.CreditNotes) != 0 {
		t.Fatalf("first delivery: credit notes %+v", first.CreditNotes)
	}

	// A void and a reissue make a new edition of the period: exported and
	// delivered once more, with the credit note, once.
	fin := must[[]ledger.Invoice](t)(firstOf(led.Invoices(ctx, ledger.InvoiceFilter{Period: "2026-11", Project: first.Invoices[0].Project})))
	v := must[ledger.Voided](t)(svcs[1].Void(ctx, "finance", fin[0].ID, "wrong rate"))
	if got := must[[]string](t)(svcs[0].ExportJob(ctx)); len(got) != 0 {
		t.Fatalf("exported with a draft open: %v", got)
	}
	rerun := must[*invoicing.RunReport](t)(svcs[0].Run(ctx, "finance", "2026-11"))
	must[ledger.Invoice](t)(svcs[0].Finalize(ctx, "finance", draftOf(t, rerun, v.Draft.Project).InvoiceID, ""))
	for range 2 {
		must[[]string](t)(svcs[1].ExportJob(ctx))
	}
	if accepted.Load() != 2 {
		t.Fatalf("after the reissue: %d deliveries accepted, want 2", accepted.Load())
	}
	second := <-payloads
	if second.Edition == first.Edition || len(second.CreditNotes) != 1 || second.CreditNotes[0].Number != v.CreditNote.Number ||
		second.CreditNotes[0].Reason != "wrong rate" {
		t.Fatalf("second delivery: edition %s (first %s), credit notes %+v", second.Edition, first.Edition, second.CreditNotes)
	}
}

// A webhook that refuses the request (4xx) is not retried; the run is
// failed with the reason and the next job tries again.
func TestWebhookRefusalIsRecorded(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		http.Error(w, "unknown sender", http.StatusForbidden)
	}))
	defer srv.Close()
	clock, led, _, svcs := twoReplicas(t, sqliteLedger(t), func(c *invoicing.Config) {
		c.Webhook = invoicing.Webhook{URL: srv.URL, Secret: []byte("0123456789abcdef"), MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	})
	ctx := ctxT(t)
	run := must[*invoicing.RunReport](t)(svcs[0].Run(ctx, "finance", "2026-11"))
	clock.Set(at("2026-12-05 00:00"))
	for _, d := range run.Drafts {
		must[ledger.Invoice](t)(svcs[0].Finalize(ctx, "finance", d.InvoiceID, ""))
	}
	if _, err := svcs[0].ExportJob(ctx); err == nil || posts.Load() != 1 {
		t.Fatalf("job against a refusing webhook: %v after %d posts", err, posts.Load())
	}
	runs := must[[]ledger.ExportRun](t)(firstOf(led.ExportRuns(ctx, ledger.ExportRunFilter{Period: "2026-11"})))
	if len(runs) != 1 || !strings.HasPrefix(runs[0].Target, invoicing.TargetWebhook+":") || runs[0].Status != ledger.ExportFailed || runs[0].LastError == "" {
		t.Fatalf("runs: %+v", runs)
	}
	_, _ = svcs[0].ExportJob(ctx)
	if posts.Load() != 2 {
		t.Fatalf("the next job did not retry: %d posts", posts.Load())
	}
}

func mustUnix(t *testing.T, s string) int64 {
	var n int64
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		t.Errorf("timestamp %q: %v", s, err)
	}
	return n
}
