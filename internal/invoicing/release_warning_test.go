package invoicing_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// An idle instance whose release failed stays billed for the time it was
// held, and the billing run and its invoice say so, naming the instance and
// the failure; another project's invoice does not.
func TestFailedReleaseIsBilledWithAWarning(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t, sqliteLedger(t), nil)
	if _, _, err := f.led.PutCatalog(ctx, "admin", exampleCatalog(t)); err != nil {
		t.Fatal(err)
	}
	write(t, f.usage,
		occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-03 09:00"), at("2026-11-03 19:00")),
		occupancy("cv-lab", bob, "t4-b", "Tesla T4", "full", at("2026-11-05 08:00"), at("2026-11-05 09:30")))
	rel, _, err := f.led.BeginRelease(ctx, "watch", ledger.NewRelease{Key: ledger.ReleaseKey("h100-a", at("2026-11-03 10:00")),
		InstanceID: "h100-a", Node: "gpu-node-7", Project: "nlp-lab", User: alice, StreakStart: at("2026-11-03 10:00")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.FinishRelease(ctx, "watch", rel.ID, ledger.ReleaseResult{Status: billing.ReleaseFailed,
		Failure: "namespace ml is not allowed"}); err != nil {
		t.Fatal(err)
	}
	run := must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11"))
	want := "instance h100-a on gpu-node-7 held by nlp-lab/" + alice + " was idle from 2026-11-03 10:00 +08:00 and due for release, " +
		"but the release failed (namespace ml is not allowed): it stayed held, and its idle time is billed"
	found := false
	for _, w := range run.Warnings {
		found = found || strings.Contains(w, want)
	}
	if !found {
		t.Fatalf("run warnings %q lack %q", run.Warnings, want)
	}
	for _, p := range []string{"nlp-lab", "cv-lab"} {
		inv := must[ledger.Invoice](t)(f.led.Invoice(ctx, draftOf(t, run, p).InvoiceID))
		var doc struct {
			Warnings []struct{ Code, Message string } `json:"warnings"`
		}
		if err := json.Unmarshal(inv.Document, &doc); err != nil {
			t.Fatal(err)
		}
		has := false
		for _, w := range doc.Warnings {
			has = has || w.Code == "release_failed" && strings.Contains(w.Message, "h100-a")
		}
		if has != (p == "nlp-lab") {
			t.Fatalf("invoice of %s: warnings %+v", p, doc.Warnings)
		}
	}
	// The time stays billed: ten hours held, ten hours on the invoice.
	if got := lineAmount(t, must[ledger.Invoice](t)(f.led.Invoice(ctx, draftOf(t, run, "nlp-lab").InvoiceID)).Document, "usage", alice, "h100-full"); got.IsZero() {
		t.Fatal("the held time was not billed")
	}
}

// The releases whose idle streak overlaps the period are on their project's
// invoice (done with its action, failed with its failure), and a student's
// statement shows that student's own; dry runs and other projects' are not.
func TestReleasesOnTheInvoiceAndStatement(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t, sqliteLedger(t), nil)
	if _, _, err := f.led.PutCatalog(ctx, "admin", exampleCatalog(t)); err != nil {
		t.Fatal(err)
	}
	write(t, f.usage,
		occupancy("nlp-lab", alice, "h100-a", h100, "full", at("2026-11-03 09:00"), at("2026-11-03 19:00")),
		occupancy("cv-lab", bob, "t4-b", "Tesla T4", "full", at("2026-11-05 08:00"), at("2026-11-05 09:30")))
	release := func(instance, project, user string, start string, dry bool, res ledger.ReleaseResult) {
		t.Helper()
		rel, _, err := f.led.BeginRelease(ctx, "watch", ledger.NewRelease{Key: ledger.ReleaseKey(instance, at(start)),
			InstanceID: instance, Node: "gpu-node-7", Project: project, User: user, StreakStart: at(start), DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.led.FinishRelease(ctx, "watch", rel.ID, res); err != nil {
			t.Fatal(err)
		}
	}
	release("h100-a", "nlp-lab", alice, "2026-11-03 10:00", false, ledger.ReleaseResult{Status: billing.ReleaseDone, Action: "deleted pod ml/nb-0"})
	release("h100-a", "nlp-lab", alice, "2026-11-03 12:00", false, ledger.ReleaseResult{Status: billing.ReleaseFailed, Failure: "namespace ml is not allowed"})
	release("h100-b", "nlp-lab", alice, "2026-11-03 13:00", true, ledger.ReleaseResult{Status: billing.ReleaseDryRun, Action: "would delete pod ml/nb-1"})
	release("t4-b", "cv-lab", bob, "2026-10-03 13:00", false, ledger.ReleaseResult{Status: billing.ReleaseDone, Action: "scancel 42"})
	run := must[*invoicing.RunReport](t)(f.svc.Run(ctx, "finance", "2026-11"))
	type rel struct {
		InstanceID, User, Status, Action, Failure string
		IdleSince                                 string `json:"idle_since"`
	}
	releases := func(doc []byte) []rel {
		t.Helper()
		var d struct {
			Releases []struct {
				rel
				InstanceID string `json:"instance_id"`
			} `json:"releases"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		var out []rel
		for _, r := range d.Releases {
			r.rel.InstanceID = r.InstanceID
			out = append(out, r.rel)
		}
		return out
	}
	nlp := releases(must[ledger.Invoice](t)(f.led.Invoice(ctx, draftOf(t, run, "nlp-lab").InvoiceID)).Document)
	if len(nlp) != 2 || nlp[0].Status != "done" || nlp[0].Action != "deleted pod ml/nb-0" || nlp[0].IdleSince != "2026-11-03T10:00:00+08:00" ||
		nlp[1].Status != "failed" || nlp[1].Failure != "namespace ml is not allowed" || nlp[1].Action != "" || nlp[1].User != alice {
		t.Fatalf("nlp-lab releases: %+v", nlp)
	}
	// An October streak released on 20 November (the ledger's clock)
	// overlaps November: it is on cv-lab's invoice, and only there.
	cv := releases(must[ledger.Invoice](t)(f.led.Invoice(ctx, draftOf(t, run, "cv-lab").InvoiceID)).Document)
	if len(cv) != 1 || cv[0].InstanceID != "t4-b" || cv[0].Action != "scancel 42" {
		t.Fatalf("cv-lab releases: %+v", cv)
	}
	st, err := f.svc.Statement(ctx, draftOf(t, run, "nlp-lab").InvoiceID, alice)
	if err != nil {
		t.Fatal(err)
	}
	if got := releases(st); len(got) != 2 {
		t.Fatalf("alice's statement releases: %+v", got)
	}
}
