package watch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/watch/alert"
)

// errStopped stands for the process that died: nothing it does after the
// point reaches the ledger.
var errStopped = errors.New("the process stopped")

// stopAfterFinish is a ledger whose process stops right after a release's
// outcome is committed: FinishRelease commits and its answer is lost, and
// no alert is recorded afterwards.
type stopAfterFinish struct {
	ledger.Store
	stopped atomic.Bool
}

func (s *stopAfterFinish) FinishRelease(ctx context.Context, actor string, id int64, res ledger.ReleaseResult) (ledger.Release, error) {
	if s.stopped.Load() {
		return ledger.Release{}, errStopped
	}
	r, err := s.Store.FinishRelease(ctx, actor, id, res)
	if err == nil {
		s.stopped.Store(true)
		err = errStopped
	}
	return r, err
}

func (s *stopAfterFinish) RecordAlert(ctx context.Context, actor string, a ledger.NewAlert, ds []ledger.NewDelivery) (ledger.Alert, bool, error) {
	if s.stopped.Load() {
		return ledger.Alert{}, false, errStopped
	}
	return s.Store.RecordAlert(ctx, actor, a, ds)
}

// A watcher that stops after a release's outcome is recorded and before
// its alert: once released the instance is no longer held, and the
// restarted watcher tells the outcome anyway, once, to each person, and
// releases nothing again. Each outcome: released, a dry run, a failure
// for good, and a release in quiet hours (told at their end).
func TestStopAfterFinishReleaseIsTold(t *testing.T) {
	for _, c := range []struct {
		name, project, inst string
		from, releaseAt     string
		restart             []string // cycles of the restarted watcher
		kind                billing.AlertKind
		outcome             string
		status              billing.ReleaseStatus
		sentAt              string // when the message is sent ("": at the first restarted cycle)
	}{
		{name: "released", project: "nlp", inst: "gpu-1", from: "10:00", releaseAt: "11:01", restart: []string{"11:30", "11:31", "12:30"},
			kind: billing.AlertIdleRelease, outcome: "deleted pod ml/gpu-1", status: billing.ReleaseDone},
		{name: "dry run", project: "dry", inst: "gpu-d", from: "10:00", releaseAt: "11:01", restart: []string{"11:30", "12:30"},
			kind: billing.AlertIdleReleaseDryRun, outcome: "would delete pod ml/gpu-d", status: billing.ReleaseDryRun},
		{name: "failed for good", project: "nlp", inst: "gpu-p", from: "10:00", releaseAt: "11:01", restart: []string{"11:30", "12:30"},
			kind: billing.AlertIdleReleaseFailed, outcome: "no handle", status: billing.ReleaseFailed},
		{name: "quiet hours", project: "quiet", inst: "gpu-q", from: "21:45", releaseAt: "22:46", restart: []string{"23:30", "+1 07:59", "+1 08:00", "+1 08:30"},
			kind: billing.AlertIdleRelease, outcome: "deleted pod ml/gpu-q", status: billing.ReleaseDone, sentAt: "+1 08:00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The samples stop when the release takes effect.
			f := newFixture(t, span{c.project, "s1", c.inst, at(c.from), at(c.releaseAt), 0.0})
			if c.inst == "gpu-p" {
				f.rel.out = func(alert.ReleaseRequest) (alert.ReleaseOutcome, error) { return alert.ReleaseOutcome{}, errNoHandle }
			}
			stop := &stopAfterFinish{Store: f.open()}
			w := f.watcher(stop)
			f.feed(at(c.releaseAt).Add(time.Second))
			f.clock.Set(at(c.releaseAt))
			if _, err := w.Cycle(context.Background(), at(c.releaseAt)); !errors.Is(err, errStopped) {
				t.Fatalf("the first cycle: %v, want it stopped after FinishRelease", err)
			}
			key := ledger.IdleAlertKey(c.kind, c.inst, at(c.from))
			r, err := f.ledger.ReleaseByKey(context.Background(), ledger.ReleaseKey(c.inst, at(c.from)))
			if err != nil || r.Status != c.status || !r.RetryAt.IsZero() {
				t.Fatalf("what the stop left: %+v, %v", r, err)
			}
			if _, err := f.ledger.AlertByKey(context.Background(), key); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("the outcome was told before the stop: %v", err)
			}
			// Warnings and reminders were sent before the stop.
			before := len(f.notify.sentKinds("s1@example.edu"))

			w2 := f.watcher(f.open())
			for _, s := range c.restart {
				f.cycle(w2, at(s))
				if c.sentAt != "" && at(s).Before(at(c.sentAt)) {
					if got := f.notify.sentKinds("s1@example.edu")[before:]; len(got) != 0 {
						t.Fatalf("%s: sent during quiet hours: %v", s, got)
					}
				}
			}
			want := []string{string(c.kind) + " " + c.inst}
			if got := f.notify.sentKinds("s1@example.edu")[before:]; !slices.Equal(got, want) {
				t.Fatalf("the holder received %v, want %v", got, want)
			}
			n := 0
			for _, e := range f.notify.sent {
				if e.To.IM == "ops-im" && e.Message.Kind == c.kind {
					n++
					if !strings.Contains(e.Message.Facts.Outcome, c.outcome) {
						t.Fatalf("the admin was told %q, want %q", e.Message.Facts.Outcome, c.outcome)
					}
				}
			}
			if n != 1 {
				t.Fatalf("the admin received %d %s, want 1", n, c.kind)
			}
			a, err := f.ledger.AlertByKey(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			ds, _, err := f.ledger.Deliveries(context.Background(), ledger.DeliveryFilter{AlertID: a.ID})
			if err != nil || len(ds) != 2 {
				t.Fatalf("deliveries of %s: %d, %v", key, len(ds), err)
			}
			for _, d := range ds {
				if d.Status != ledger.DeliverySent {
					t.Fatalf("delivery %+v", d)
				}
				if c.sentAt != "" && !d.NextAttemptAt.Equal(at(c.sentAt)) {
					t.Fatalf("delivery due %s, want %s", d.NextAttemptAt.In(sh), c.sentAt)
				}
			}
			if got := f.rel.keys(); len(got) != 1 {
				t.Fatalf("released again: %v", got)
			}
		})
	}
}

// A budget release whose process stops after FinishRelease and before the
// budget's 100 % alert: the alert the restarted watcher records tells the
// release, once, although the instance is no longer held; no idle alert
// tells it a second time.
func TestStopAfterBudgetReleaseIsTold(t *testing.T) {
	f := newFixture(t, span{"nlp", "s1", "gpu-1", at("09:00"), at("11:01"), 0.9})
	ctx := context.Background()
	// 1.00 CNY an hour: 50 % at 10:00, 80 % at 10:36, 100 % at 11:00.
	if _, err := f.ledger.PutBudget(ctx, "lead:nlp", ledger.Budget{Scope: billing.BudgetStudent, Project: "nlp", User: "s1",
		Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "2.00", Action: billing.BudgetRelease}); err != nil {
		t.Fatal(err)
	}
	w := f.watcher(f.ledger)
	f.cycle(w, at("10:01"))
	f.cycle(w, at("10:40"))
	stop := &stopAfterFinish{Store: f.open()}
	w = f.watcher(stop)
	f.feed(at("11:01").Add(time.Second))
	f.clock.Set(at("11:01"))
	if _, err := w.Cycle(ctx, at("11:01")); !errors.Is(err, errStopped) {
		t.Fatalf("the cycle at 11:01: %v, want it stopped after FinishRelease", err)
	}
	key := ledger.BudgetAlertKey(billing.BudgetStudent, "nlp", "s1", billing.BudgetMoney, "2026-12", 100)
	if _, err := f.ledger.AlertByKey(ctx, key); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the 100 %% alert was recorded before the stop: %v", err)
	}
	w2 := f.watcher(f.open())
	for _, s := range []string{"11:30", "11:31", "12:30"} {
		if rep := f.cycle(w2, at(s)); rep.Held != 0 {
			t.Fatalf("%s: %d held, want the released instance gone", s, rep.Held)
		}
	}
	var got []string
	for _, e := range f.notify.sent {
		if e.To.Email == "s1@example.edu" && e.Message.Kind == billing.AlertBudgetThreshold && e.Message.Facts.Budget.Percent == 100 {
			got = append(got, e.Message.Facts.Outcome)
		}
		if e.Message.Kind != billing.AlertBudgetThreshold {
			t.Fatalf("sent %s to %+v", e.Message.Kind, e.To)
		}
	}
	if want := []string{"deleted pod ml/gpu-1"}; !slices.Equal(got, want) {
		t.Fatalf("s1's 100 %% alerts told %q, want %q", got, want)
	}
	if got := f.rel.keys(); !slices.Equal(got, []string{"gpu-1 dry=false"}) {
		t.Fatalf("releases %v, want one", got)
	}
}

// downAlerts is a ledger that cannot record alerts while down.
type downAlerts struct {
	ledger.Store
	down atomic.Bool
}

func (d *downAlerts) RecordAlert(ctx context.Context, actor string, a ledger.NewAlert, ds []ledger.NewDelivery) (ledger.Alert, bool, error) {
	if d.down.Load() {
		return ledger.Alert{}, false, errors.New("the ledger is read-only")
	}
	return d.Store.RecordAlert(ctx, actor, a, ds)
}

// A release's alert that cannot be recorded for longer than the pass's
// margin (the ledger refuses it for 45 minutes, cycle after cycle, while
// the released instance stops being held) is told when the ledger takes
// it again, by the same process: a pass that failed is read again.
func TestReleaseToldAfterTheLedgerRefusedItsAlert(t *testing.T) {
	f := newFixture(t, span{"nlp", "s1", "gpu-1", at("10:00"), at("11:01"), 0.0})
	l := &downAlerts{Store: f.ledger}
	w := f.watcher(l)
	f.cycle(w, at("10:31")) // the warning
	l.down.Store(true)
	for _, s := range []string{"11:01", "11:15", "11:30", "11:45"} {
		f.feed(at(s).Add(time.Second))
		f.clock.Set(at(s))
		if _, err := w.Cycle(context.Background(), at(s)); err == nil {
			t.Fatalf("%s: the cycle had no alert left to record with the ledger refusing them: the release was dropped", s)
		}
	}
	if r, _ := f.ledger.ReleaseByKey(context.Background(), ledger.ReleaseKey("gpu-1", at("10:00"))); r.Status != billing.ReleaseDone {
		t.Fatalf("release %+v", r)
	}
	l.down.Store(false)
	for _, s := range []string{"12:00", "12:01"} {
		f.cycle(w, at(s))
	}
	if got := f.notify.sentKinds("s1@example.edu"); !slices.Equal(got, []string{"idle_warning gpu-1", "idle_release gpu-1"}) {
		t.Fatalf("s1 received %v", got)
	}
	if got := f.rel.keys(); len(got) != 1 {
		t.Fatalf("releases %v", got)
	}
}
