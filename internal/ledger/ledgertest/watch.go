package ledgertest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
)

func idleAlert(kind billing.AlertKind, inst string, start time.Time) ledger.NewAlert {
	return ledger.NewAlert{Key: ledger.IdleAlertKey(kind, inst, start), Kind: kind, Project: "nlp", User: "s1",
		InstanceID: inst, StreakStart: start, Facts: json.RawMessage(`{"node":"n1"}`)}
}

func deliveries(n int) []ledger.NewDelivery {
	var out []ledger.NewDelivery
	for i := range n {
		out = append(out, ledger.NewDelivery{Channel: "email", Recipient: fmt.Sprintf("r%d@example.edu", i),
			Payload: json.RawMessage(fmt.Sprintf(`{"subject":"s%d"}`, i))})
	}
	return out
}

// An alert is recorded once per natural key, with its deliveries in the
// same transaction; recording it again writes nothing.
func testAlertsOnce(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	start := t0.Add(-40 * time.Minute)
	a, created, err := s.RecordAlert(ctx, "watch", idleAlert(billing.AlertIdleWarning, "gpu-1", start), deliveries(2))
	if err != nil || !created {
		t.Fatalf("first record: %+v, %v, %v", a, created, err)
	}
	if !a.StreakStart.Equal(start) || a.Kind != billing.AlertIdleWarning || a.ID == 0 {
		t.Fatalf("alert: %+v", a)
	}
	clock.Advance(time.Minute)
	again, created, err := s.RecordAlert(ctx, "watch", idleAlert(billing.AlertIdleWarning, "gpu-1", start), deliveries(3))
	if err != nil || created || again.ID != a.ID {
		t.Fatalf("second record: %+v, %v, %v", again, created, err)
	}
	ds, _ := get2(s.Deliveries(ctx, ledger.DeliveryFilter{AlertID: a.ID}))(t)
	if len(ds) != 2 {
		t.Fatalf("deliveries: %d, want 2 (the second record adds none)", len(ds))
	}
	// Another kind or another streak is another alert.
	get3(s.RecordAlert(ctx, "watch", idleAlert(billing.AlertIdleReminder, "gpu-1", start), nil))(t)
	get3(s.RecordAlert(ctx, "watch", idleAlert(billing.AlertIdleWarning, "gpu-1", start.Add(time.Hour)), nil))(t)
	byKey := get(s.AlertByKey(ctx, ledger.IdleAlertKey(billing.AlertIdleWarning, "gpu-1", start)))(t)
	if byKey.ID != a.ID || string(byKey.Facts) != `{"node":"n1"}` {
		t.Fatalf("by key: %+v", byKey)
	}
	all, _ := get2(s.Alerts(ctx, ledger.AlertFilter{InstanceID: "gpu-1"}))(t)
	if len(all) != 3 {
		t.Fatalf("alerts of gpu-1: %d, want 3", len(all))
	}
	p1, next := get2(s.Alerts(ctx, ledger.AlertFilter{Limit: 2}))(t)
	p2, last := get2(s.Alerts(ctx, ledger.AlertFilter{Limit: 2, Cursor: next}))(t)
	if len(p1) != 2 || next == "" || len(p2) != 1 || last != "" || p2[0].ID >= p1[1].ID {
		t.Fatalf("pages: %d %q %d %q", len(p1), next, len(p2), last)
	}
	if got, _ := get2(s.Alerts(ctx, ledger.AlertFilter{Since: t0.Add(30 * time.Second)}))(t); len(got) != 2 {
		t.Fatalf("alerts since: %d, want 2", len(got))
	}
	// Budget keys.
	k := ledger.BudgetAlertKey(billing.BudgetStudent, "nlp", "s1", billing.BudgetMoney, "2026-12", 80)
	if k != "budget_threshold|student|nlp/s1|money|2026-12|80" {
		t.Fatalf("budget key %q", k)
	}
	// Acknowledge once.
	acked := get(s.AckAlert(ctx, "lead:nlp", a.ID))(t)
	if acked.AckedBy != "lead:nlp" || acked.AckedAt.IsZero() {
		t.Fatalf("acked: %+v", acked)
	}
	_, err = s.AckAlert(ctx, "lead:nlp", a.ID)
	wantErr(t, err, ledger.ErrInvalidTransition, "second ack")
	_, err = s.AckAlert(ctx, "lead:nlp", 999)
	wantErr(t, err, ledger.ErrNotFound, "ack of nothing")
	if got, _ := get2(s.Alerts(ctx, ledger.AlertFilter{Unacked: true}))(t); len(got) != 2 {
		t.Fatalf("unacked: %d, want 2", len(got))
	}
	if got, _ := get2(s.Alerts(ctx, ledger.AlertFilter{Acked: true}))(t); len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("acked: %+v, want alert %d only", got, a.ID)
	}
	// Bad input.
	_, _, err = s.RecordAlert(ctx, "watch", ledger.NewAlert{Key: "k", Kind: "shout"}, nil)
	wantErr(t, err, ledger.ErrInvalidArgument, "unknown kind")
	_, _, err = s.RecordAlert(ctx, "watch", idleAlert(billing.AlertIdleWarning, "gpu-9", start),
		[]ledger.NewDelivery{{Channel: "email", Recipient: "x", Payload: json.RawMessage(`{`)}})
	wantErr(t, err, ledger.ErrInvalidArgument, "bad payload")
	if _, err := s.AlertByKey(ctx, ledger.IdleAlertKey(billing.AlertIdleWarning, "gpu-9", start)); err == nil {
		t.Fatal("a rejected alert was stored")
	}
	if got := auditActions(t, s, ledger.AuditFilter{Object: fmt.Sprintf("alert/%d", a.ID)}); !slices.Equal(got, []string{"alert.ack", "alert.record"}) {
		t.Fatalf("audit of the alert: %v", got)
	}
}

// Two replicas recording the same alert at once: one alert, one set of
// deliveries.
func testConcurrentAlerts(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	stores := []ledger.Store{s1, s2}
	createdN := race(t, stores, 8, func(_ int, s ledger.Store) (bool, error) {
		_, created, err := s.RecordAlert(ctx, "watch", idleAlert(billing.AlertIdleWarning, "gpu-1", t0), deliveries(2))
		return created, err
	})
	ds, _ := get2(stores[0].Deliveries(ctx, ledger.DeliveryFilter{}))(t)
	if createdN != 1 || len(ds) != 2 {
		t.Fatalf("created %d times, %d deliveries; want 1 and 2", createdN, len(ds))
	}
}

// Deliveries: due ones in order, sent once, retried with their next time,
// failed for good; never changed after.
func testDeliveries(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	ds := deliveries(3)
	ds[2].NextAttemptAt = t0.Add(10 * time.Minute) // quiet hours: later
	a := get3(s.RecordAlert(ctx, "watch", idleAlert(billing.AlertIdleWarning, "gpu-1", t0), ds))(t)
	due := get(s.DueDeliveries(ctx, t0, 10))(t)
	if len(due) != 2 || due[0].AlertID != a.ID || due[0].Status != ledger.DeliveryPending || due[0].Attempts != 0 {
		t.Fatalf("due now: %+v", due)
	}
	sent := get(s.FinishDelivery(ctx, "watch", due[0].ID, "", time.Time{}))(t)
	if sent.Status != ledger.DeliverySent || sent.Attempts != 1 || sent.SentAt.IsZero() {
		t.Fatalf("sent: %+v", sent)
	}
	_, err := s.FinishDelivery(ctx, "watch", due[0].ID, "", time.Time{})
	wantErr(t, err, ledger.ErrInvalidTransition, "sending a sent delivery again")
	retry := get(s.FinishDelivery(ctx, "watch", due[1].ID, "502 from relay", t0.Add(time.Minute)))(t)
	if retry.Status != ledger.DeliveryPending || retry.Attempts != 1 || retry.LastError != "502 from relay" || !retry.NextAttemptAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("retry: %+v", retry)
	}
	if due := get(s.DueDeliveries(ctx, t0.Add(30*time.Second), 10))(t); len(due) != 0 {
		t.Fatalf("due before the retry time: %+v", due)
	}
	due = get(s.DueDeliveries(ctx, t0.Add(10*time.Minute), 10))(t)
	if len(due) != 2 || due[0].ID != retry.ID {
		t.Fatalf("due later: %+v", due)
	}
	failed := get(s.FinishDelivery(ctx, "watch", retry.ID, "550 no such user", time.Time{}))(t)
	if failed.Status != ledger.DeliveryFailed || failed.Attempts != 2 {
		t.Fatalf("failed: %+v", failed)
	}
	if got, _ := get2(s.Deliveries(ctx, ledger.DeliveryFilter{Status: ledger.DeliveryFailed}))(t); len(got) != 1 || got[0].ID != failed.ID {
		t.Fatalf("failed deliveries: %+v", got)
	}
	_, _, err = s.Deliveries(ctx, ledger.DeliveryFilter{Status: "lost"})
	wantErr(t, err, ledger.ErrInvalidArgument, "unknown status")
	_, err = s.FinishDelivery(ctx, "watch", 999, "", time.Time{})
	wantErr(t, err, ledger.ErrNotFound, "finish of nothing")
	got := auditActions(t, s, ledger.AuditFilter{Object: fmt.Sprintf("delivery/%d", retry.ID)})
	if !slices.Equal(got, []string{"delivery.fail", "delivery.retry"}) {
		t.Fatalf("audit of a delivery: %v", got)
	}
}

func newRelease(inst string, start time.Time, dry bool) ledger.NewRelease {
	return ledger.NewRelease{Key: ledger.ReleaseKey(inst, start), InstanceID: inst, Node: "n1", Project: "nlp", User: "s1",
		StreakStart: start, DryRun: dry, Evidence: json.RawMessage(`{"idle_samples":12}`)}
}

// Releases: begun once; a pending one (an attempt that never finished) and
// a failed one due for retry start again; done, dry-run and failed for
// good never do.
func testReleases(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	r := releaseRetriedUntilDone(t, ctx, s, clock)
	d := releaseDryRun(t, ctx, s)
	releaseFailedForGood(t, ctx, s, clock)
	checkReleaseReads(t, ctx, s, clock, r, d)
}

// releaseRetriedUntilDone takes gpu-1's release through a crash (pending,
// started again once stale) and a failure retried at its time to done.
func releaseRetriedUntilDone(t *testing.T, ctx context.Context, s ledger.Store, clock *Clock) ledger.Release {
	r, started, err := s.BeginRelease(ctx, "watch", newRelease("gpu-1", t0.Add(-time.Hour), false))
	if err != nil || !started || r.Status != billing.ReleasePending || r.Attempts != 1 {
		t.Fatalf("begin: %+v %v %v", r, started, err)
	}
	// In progress: not started twice.
	if _, started, _ := s.BeginRelease(ctx, "watch", newRelease("gpu-1", t0.Add(-time.Hour), false)); started {
		t.Fatal("a release in progress started again")
	}
	// A crash before the outcome: once stale, the next begin starts it again.
	clock.Advance(ledger.ReleaseStale)
	r2, started, err := s.BeginRelease(ctx, "watch", newRelease("gpu-1", t0.Add(-time.Hour), false))
	if err != nil || !started || r2.ID != r.ID || r2.Attempts != 2 {
		t.Fatalf("begin after a crash: %+v %v %v", r2, started, err)
	}
	retryAt := clock.Now().Add(time.Minute)
	fail := get(s.FinishRelease(ctx, "watch", r.ID, ledger.ReleaseResult{Status: billing.ReleaseFailed, Failure: "api server 503",
		RetryAt: retryAt}))(t)
	if fail.Status != billing.ReleaseFailed || !fail.RetryAt.Equal(retryAt) {
		t.Fatalf("failed: %+v", fail)
	}
	if _, started, _ := s.BeginRelease(ctx, "watch", newRelease("gpu-1", t0.Add(-time.Hour), false)); started {
		t.Fatal("a failed release started before its retry time")
	}
	clock.Advance(time.Minute)
	r3, started, err := s.BeginRelease(ctx, "watch", newRelease("gpu-1", t0.Add(-time.Hour), false))
	if err != nil || !started || r3.Attempts != 3 {
		t.Fatalf("retry: %+v %v %v", r3, started, err)
	}
	done := get(s.FinishRelease(ctx, "watch", r.ID, ledger.ReleaseResult{Status: billing.ReleaseDone, Action: "deleted pod ml/nb-0"}))(t)
	if done.Status != billing.ReleaseDone || done.Action != "deleted pod ml/nb-0" || done.LastError != "api server 503" && done.LastError != "" {
		t.Fatalf("done: %+v", done)
	}
	if got, started, _ := s.BeginRelease(ctx, "watch", newRelease("gpu-1", t0.Add(-time.Hour), false)); started || got.Status != billing.ReleaseDone {
		t.Fatalf("a done release started again: %+v", got)
	}
	_, err = s.FinishRelease(ctx, "watch", r.ID, ledger.ReleaseResult{Status: billing.ReleaseDone, Action: "x"})
	wantErr(t, err, ledger.ErrInvalidTransition, "finishing a done release")
	return r
}

// releaseDryRun: a dry run ends as a dry run, never done.
func releaseDryRun(t *testing.T, ctx context.Context, s ledger.Store) ledger.Release {
	d := get3(s.BeginRelease(ctx, "watch", newRelease("gpu-2", t0, true)))(t)
	_, err := s.FinishRelease(ctx, "watch", d.ID, ledger.ReleaseResult{Status: billing.ReleaseDone, Action: "deleted"})
	wantErr(t, err, ledger.ErrInvalidArgument, "done for a dry run")
	d = get(s.FinishRelease(ctx, "watch", d.ID, ledger.ReleaseResult{Status: billing.ReleaseDryRun, Action: "would run scancel 42"}))(t)
	if !d.DryRun || d.Status != billing.ReleaseDryRun {
		t.Fatalf("dry run: %+v", d)
	}
	return d
}

// releaseFailedForGood: a failure without a retry time never starts again;
// a failure needs its text, a release its instance.
func releaseFailedForGood(t *testing.T, ctx context.Context, s ledger.Store, clock *Clock) {
	p := get3(s.BeginRelease(ctx, "watch", newRelease("gpu-3", t0, false)))(t)
	get(s.FinishRelease(ctx, "watch", p.ID, ledger.ReleaseResult{Status: billing.ReleaseFailed, Failure: "no handle"}))(t)
	clock.Advance(time.Hour)
	if _, started, _ := s.BeginRelease(ctx, "watch", newRelease("gpu-3", t0, false)); started {
		t.Fatal("a release failed for good started again")
	}
	_, err := s.FinishRelease(ctx, "watch", p.ID, ledger.ReleaseResult{Status: billing.ReleaseFailed})
	wantErr(t, err, ledger.ErrInvalidArgument, "failure without text")
	_, _, err = s.BeginRelease(ctx, "watch", ledger.NewRelease{Key: "k"})
	wantErr(t, err, ledger.ErrInvalidArgument, "release without instance")
}

// checkReleaseReads reads the releases back by key and by filter, and the
// audit of r (done after retries) with its evidence; d is the dry run.
func checkReleaseReads(t *testing.T, ctx context.Context, s ledger.Store, clock *Clock, r, d ledger.Release) {
	byKey := get(s.ReleaseByKey(ctx, ledger.ReleaseKey("gpu-2", t0)))(t)
	if byKey.ID != d.ID || string(byKey.Evidence) != `{"idle_samples":12}` {
		t.Fatalf("by key: %+v", byKey)
	}
	if got, _ := get2(s.Releases(ctx, ledger.ReleaseFilter{Status: billing.ReleaseFailed}))(t); len(got) != 1 || got[0].InstanceID != "gpu-3" {
		t.Fatalf("failed releases: %+v", got)
	}
	if got, _ := get2(s.Releases(ctx, ledger.ReleaseFilter{Project: "nlp"}))(t); len(got) != 3 {
		t.Fatalf("releases of nlp: %d", len(got))
	}
	// The three were last changed an hour ago (the clock moved since).
	if got, _ := get2(s.Releases(ctx, ledger.ReleaseFilter{UpdatedSince: clock.Now().Add(-time.Hour)}))(t); len(got) != 3 {
		t.Fatalf("releases updated in the last hour: %d", len(got))
	}
	if got, _ := get2(s.Releases(ctx, ledger.ReleaseFilter{UpdatedSince: clock.Now().Add(-time.Hour + time.Millisecond)}))(t); len(got) != 0 {
		t.Fatalf("releases updated since: %+v", got)
	}
	got := auditActions(t, s, ledger.AuditFilter{Object: fmt.Sprintf("release/%d", r.ID)})
	want := []string{"release.done", "release.retry", "release.failed", "release.retry", "release.begin"}
	if !slices.Equal(got, want) {
		t.Fatalf("audit of a release: %v, want %v", got, want)
	}
	// The audit keeps the evidence.
	es, _ := get2(s.Audit(ctx, ledger.AuditFilter{Object: fmt.Sprintf("release/%d", r.ID), Action: "release.done"}))(t)
	if len(es) != 1 || !strings.Contains(string(es[0].After), `"idle_samples":12`) || !strings.Contains(string(es[0].After), "deleted pod ml/nb-0") {
		t.Fatalf("audit of the release's outcome: %+v", es)
	}
}

// Two replicas beginning the same release at once: one starts it.
func testConcurrentReleases(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	stores := []ledger.Store{s1, s2}
	n := race(t, stores, 8, func(_ int, s ledger.Store) (bool, error) {
		_, started, err := s.BeginRelease(ctx, "watch", newRelease("gpu-1", t0, false))
		return started, err
	})
	r := get(stores[0].ReleaseByKey(ctx, ledger.ReleaseKey("gpu-1", t0)))(t)
	if n != 1 || r.Status != billing.ReleasePending || r.Attempts != 1 {
		t.Fatalf("release %+v after %d starts, want one", r, n)
	}
}

// Exemptions: active between their grant and their end (until or
// revocation), for a project, a student or an instance.
func testExemptions(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	friday := t0.Add(72 * time.Hour)
	e := get(s.GrantExemption(ctx, "lead:nlp", ledger.NewExemption{Project: "nlp", User: "s1", Until: friday, Reason: "thesis run"}))(t)
	if e.GrantedBy != "lead:nlp" || !e.Until.Equal(friday) || !e.ActiveAt(t0) || e.ActiveAt(friday) {
		t.Fatalf("exemption: %+v", e)
	}
	if !e.Covers("nlp", "s1", "gpu-7") || e.Covers("nlp", "s2", "gpu-7") || e.Covers("cv", "s1", "gpu-7") {
		t.Fatal("Covers")
	}
	inst := get(s.GrantExemption(ctx, "admin", ledger.NewExemption{Project: "nlp", InstanceID: "gpu-9", Until: t0.Add(time.Hour), Reason: "benchmark"}))(t)
	get(s.GrantExemption(ctx, "admin", ledger.NewExemption{Project: "cv", Until: t0.Add(time.Hour), Reason: "course demo"}))(t)
	active := func(at time.Time, f ledger.ExemptionFilter) int {
		f.ActiveAt = at
		got, _ := get2(s.Exemptions(ctx, f))(t)
		return len(got)
	}
	if n := active(t0, ledger.ExemptionFilter{Project: "nlp"}); n != 2 {
		t.Fatalf("active in nlp now: %d", n)
	}
	if n := active(t0.Add(2*time.Hour), ledger.ExemptionFilter{}); n != 1 {
		t.Fatalf("active in 2 h: %d", n)
	}
	if n := active(t0.Add(-time.Minute), ledger.ExemptionFilter{}); n != 0 {
		t.Fatalf("active before the grant: %d", n)
	}
	// The user filter includes exemptions of the whole project.
	if n := active(t0, ledger.ExemptionFilter{Project: "nlp", User: "s2"}); n != 1 {
		t.Fatalf("active for s2: %d (want the instance one)", n)
	}
	clock.Advance(10 * time.Minute)
	rv := get(s.RevokeExemption(ctx, "admin", inst.ID))(t)
	if rv.RevokedBy != "admin" || !rv.End().Equal(t0.Add(10*time.Minute)) || rv.ActiveAt(t0.Add(11*time.Minute)) {
		t.Fatalf("revoked: %+v", rv)
	}
	_, err := s.RevokeExemption(ctx, "admin", inst.ID)
	wantErr(t, err, ledger.ErrInvalidTransition, "revoking twice")
	if one := get(s.Exemption(ctx, inst.ID))(t); one.InstanceID != "gpu-9" || one.RevokedBy != "admin" || one.Reason != "benchmark" {
		t.Fatalf("one exemption: %+v", one)
	}
	_, err = s.Exemption(ctx, 999)
	wantErr(t, err, ledger.ErrNotFound, "no such exemption")
	if n := active(t0.Add(11*time.Minute), ledger.ExemptionFilter{Project: "nlp"}); n != 1 {
		t.Fatalf("active after the revocation: %d", n)
	}
	if got, _ := get2(s.Exemptions(ctx, ledger.ExemptionFilter{EndsAfter: t0.Add(30 * time.Minute)}))(t); len(got) != 2 {
		t.Fatalf("ending after 30 min: %d", len(got))
	}
	_, err = s.GrantExemption(ctx, "lead", ledger.NewExemption{Project: "nlp", Until: t0, Reason: ""})
	wantErr(t, err, ledger.ErrInvalidArgument, "exemption in the past without reason")
	if err == nil || !strings.Contains(err.Error(), "reason is required") || !strings.Contains(err.Error(), "want a time after now") {
		t.Fatalf("exemption errors: %v", err)
	}
	if got := auditActions(t, s, ledger.AuditFilter{Object: fmt.Sprintf("exemption/%d", inst.ID)}); !slices.Equal(got, []string{"exemption.revoke", "exemption.grant"}) {
		t.Fatalf("audit: %v", got)
	}
}

// testBudgetUsage: what the watcher measured is stored with the budget,
// read back exactly, replaced by the next measure, kept when the limit is
// set again, never audited; a deleted budget's is skipped.
func testBudgetUsage(t *testing.T, s ledger.Store, id int64) {
	t.Helper()
	ctx := ctxT(t)
	before := auditActions(t, s, ledger.AuditFilter{Object: fmt.Sprintf("budget/%d", id)})
	if b := get(s.Budget(ctx, id))(t); b.Usage != (ledger.BudgetUsage{}) {
		t.Fatalf("usage before any measure: %+v", b.Usage)
	}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	u := ledger.BudgetUsage{Period: "2026-11", Start: start, End: start.AddDate(0, 1, 0), Money: decimal.RequireFromString("2417.05"),
		CardMS: 7_200_001, AsOf: start.Add(19*24*time.Hour + time.Millisecond)}
	if err := s.RecordBudgetUsage(ctx, map[int64]ledger.BudgetUsage{id: u, 1 << 40: u}); err != nil {
		t.Fatalf("record usage (one budget unknown): %v", err)
	}
	got := get(s.Budget(ctx, id))(t).Usage
	if got.Period != u.Period || !got.Start.Equal(u.Start) || !got.End.Equal(u.End) || !got.Money.Equal(u.Money) ||
		got.CardMS != u.CardMS || !got.AsOf.Equal(u.AsOf) {
		t.Fatalf("usage read back %+v, want %+v", got, u)
	}
	u.Money, u.AsOf = decimal.RequireFromString("2500"), u.AsOf.Add(time.Minute)
	if err := s.RecordBudgetUsage(ctx, map[int64]ledger.BudgetUsage{id: u}); err != nil {
		t.Fatal(err)
	}
	b := get(s.Budget(ctx, id))(t)
	if !b.Usage.Money.Equal(u.Money) || !b.Usage.AsOf.Equal(u.AsOf) {
		t.Fatalf("second measure: %+v", b.Usage)
	}
	again := b
	again.ID, again.Usage = 0, ledger.BudgetUsage{}
	if kept := get(s.PutBudget(ctx, "lead:nlp", again))(t); !kept.Usage.Money.Equal(u.Money) {
		t.Fatalf("setting the same budget changed its usage: %+v", kept.Usage)
	}
	if got := get(s.Budget(ctx, id))(t).Usage; !got.Money.Equal(u.Money) {
		t.Fatalf("usage after setting the budget again: %+v", got)
	}
	page, _ := get2(s.Budgets(ctx, ledger.BudgetFilter{Project: b.Project, User: b.User}))(t)
	if len(page) == 0 || page[0].ID != id || !page[0].Usage.Money.Equal(u.Money) {
		t.Fatalf("listed usage: %+v", page)
	}
	wantErr(t, s.RecordBudgetUsage(ctx, map[int64]ledger.BudgetUsage{id: {}}), ledger.ErrInvalidArgument, "usage without a period")
	if after := auditActions(t, s, ledger.AuditFilter{Object: fmt.Sprintf("budget/%d", id)}); !slices.Equal(after, before) {
		t.Fatalf("measures were audited: %v, before %v", after, before)
	}
}

// Budgets: one per natural key, replaced in place, validated with every
// problem named, deleted with an audit entry.
func testBudgets(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	b := get(s.PutBudget(ctx, "lead:nlp", ledger.Budget{Scope: billing.BudgetStudent, Project: "nlp", User: "s1",
		Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "500.00"}))(t)
	if b.ID == 0 || !slices.Equal(b.Thresholds, []int{50, 80, 100}) || b.Action != billing.BudgetWarn || b.Limit != "500" {
		t.Fatalf("budget: %+v", b)
	}
	same := get(s.PutBudget(ctx, "lead:nlp", ledger.Budget{Scope: billing.BudgetStudent, Project: "nlp", User: "s1",
		Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "500"}))(t)
	if same.ID != b.ID {
		t.Fatalf("same budget: %+v", same)
	}
	up := get(s.PutBudget(ctx, "lead:nlp", ledger.Budget{Scope: billing.BudgetStudent, Project: "nlp", User: "s1",
		Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "800.50", Thresholds: []int{100, 90}, Action: billing.BudgetRelease}))(t)
	if up.ID != b.ID || up.Limit != "800.5" || !slices.Equal(up.Thresholds, []int{90, 100}) || up.Action != billing.BudgetRelease {
		t.Fatalf("updated: %+v", up)
	}
	if !up.LimitDecimal().Equal(up.LimitDecimal()) || up.LimitDecimal().String() != "800.5" {
		t.Fatalf("limit %s", up.LimitDecimal())
	}
	get(s.PutBudget(ctx, "lead:nlp", ledger.Budget{Scope: billing.BudgetProject, Project: "nlp", Period: billing.BudgetTerm,
		Unit: billing.BudgetCardHours, Limit: "2000"}))(t)
	if got, _ := get2(s.Budgets(ctx, ledger.BudgetFilter{Project: "nlp"}))(t); len(got) != 2 {
		t.Fatalf("budgets: %d", len(got))
	}
	if got, _ := get2(s.Budgets(ctx, ledger.BudgetFilter{Scope: billing.BudgetStudent, User: "s1"}))(t); len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("student budgets: %+v", got)
	}
	_, err := s.PutBudget(ctx, "lead", ledger.Budget{Scope: "lab", Period: "week", Unit: "gpus", Limit: "1e3",
		Thresholds: []int{80, 80, 0}, Action: "shout"})
	wantErr(t, err, ledger.ErrInvalidArgument, "bad budget")
	for _, want := range []string{`scope "lab"`, "project is required", `period "week"`, `unit "gpus"`, `limit "1e3"`,
		`action "shout"`, "threshold 0 %", "threshold 80 % is given twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("budget error %q lacks %q", err, want)
		}
	}
	_, err = s.PutBudget(ctx, "lead", ledger.Budget{Scope: billing.BudgetStudent, Project: "nlp", Period: billing.BudgetMonth,
		Unit: billing.BudgetMoney, Limit: "0"})
	if err == nil || !strings.Contains(err.Error(), "needs a user") || !strings.Contains(err.Error(), "more than 0") {
		t.Fatalf("student budget without user: %v", err)
	}
	testBudgetUsage(t, s, b.ID)
	if err := s.DeleteBudget(ctx, "admin", b.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.Budget(ctx, b.ID)
	wantErr(t, err, ledger.ErrNotFound, "deleted budget")
	wantErr(t, s.DeleteBudget(ctx, "admin", b.ID), ledger.ErrNotFound, "deleting twice")
	got := auditActions(t, s, ledger.AuditFilter{Object: fmt.Sprintf("budget/%d", b.ID)})
	if !slices.Equal(got, []string{"budget.delete", "budget.update", "budget.create"}) {
		t.Fatalf("audit: %v", got)
	}
}

// get3(f())(t) is f's first value; an error fails the test.
func get3[T any, U any](v T, _ U, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// auditActions lists the actions of the audit entries f selects, newest
// first.
func auditActions(t *testing.T, s ledger.Store, f ledger.AuditFilter) []string {
	t.Helper()
	f.Limit = ledger.MaxLimit
	es, _ := get2(s.Audit(ctxT(t), f))(t)
	var out []string
	for _, e := range es {
		out = append(out, e.Action)
	}
	return out
}
