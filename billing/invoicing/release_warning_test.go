package invoicing_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cardhour/cardhour/billing/invoicing"
	"github.com/cardhour/cardhour/billing/ledger"
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
	if _, err := f.led.FinishRelease(ctx, "watch", rel.ID, ledger.ReleaseResult{Status: ledger.ReleaseFailed,
		Failure: "namespace ml is not allowed"}); err != nil {
		t.Fatal(err)
	}
	run := must[*invoicing.Run](t)(f.svc.Run(ctx, "finance", "2026-11"))
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
