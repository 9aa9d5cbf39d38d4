package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/ledger/sqlite"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/schemas"
)

const testCatalog = `
currency: CNY
timezone: Asia/Shanghai
skus:
  - {id: a100-1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "1.00"}
defaults:
  idle: {threshold: 0.05, warn_after: 30m, remind_after: 45m, release_after: 60m, release: "on"}
projects:
  - id: nlp
  - id: quiet
    idle: {quiet_hours: "22:00-08:00"}
  - id: dry
    idle: {release: dry-run}
  - id: off
    idle: {auto_release: false}
`

var sh = func() *time.Location { l, _ := time.LoadLocation("Asia/Shanghai"); return l }()

// at is a time on 2026-12-01 (or the next day with "+1 ") in Shanghai.
func at(s string) time.Time {
	day := 1
	if rest, ok := strings.CutPrefix(s, "+1 "); ok {
		day, s = 2, rest
	}
	t, err := time.ParseInLocation("2006-01-02 15:04", fmt.Sprintf("2026-12-%02d %s", day, s), sh)
	if err != nil {
		panic(err)
	}
	return t
}

// span is a stretch of one-minute samples of one instance.
type span struct {
	project, user, inst string
	from, to            time.Time
	util                float64
}

func samples(spans ...span) []schemas.Sample {
	var out []schemas.Sample
	for _, s := range spans {
		for t := s.from; t.Before(s.to); t = t.Add(time.Minute) {
			out = append(out, schemas.Sample{StartMS: t.UnixMilli(), IntervalMS: 60_000, Node: "node-1", GPUUUID: "GPU-1",
				GPUModel: "A100", InstanceID: s.inst, Profile: "1g.10gb", Project: s.project, User: s.user,
				Util: s.util, UtilKnown: true, Processes: 1})
		}
	}
	return out
}

// ---------------------------------------------------------------- fakes

type fakeNotifier struct {
	mu      sync.Mutex
	planned []alert.Message
	sent    []alert.Envelope
	fail    map[string]error         // by channel: every send fails
	block   map[string]chan struct{} // by channel: a send waits for the channel to close
}

// Plan sends every message to every person by email (when they have an
// address) and by IM (when they have a handle).
func (n *fakeNotifier) Plan(m alert.Message, people []alert.Person) ([]alert.Envelope, error) {
	n.mu.Lock()
	n.planned = append(n.planned, m)
	n.mu.Unlock()
	var out []alert.Envelope
	for _, p := range people {
		if p.Email != "" {
			out = append(out, alert.Envelope{Channel: "email", To: p, Lang: "en", Subject: string(m.Kind), Body: m.Facts.Outcome, Message: m})
		}
		if p.IM != "" {
			out = append(out, alert.Envelope{Channel: "im", To: p, Lang: "zh-CN", Subject: string(m.Kind), Message: m})
		}
	}
	return out, nil
}

func (n *fakeNotifier) Send(ctx context.Context, e alert.Envelope) error {
	n.mu.Lock()
	b, err := n.block[e.Channel], n.fail[e.Channel]
	n.mu.Unlock()
	if b != nil {
		select {
		case <-b:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.sent = append(n.sent, e)
	n.mu.Unlock()
	return nil
}

var errPermanent = errors.New("550 no such mailbox")

func (n *fakeNotifier) Permanent(err error) bool { return errors.Is(err, errPermanent) }
func (n *fakeNotifier) Backoff(attempt int) time.Duration {
	return time.Duration(attempt) * time.Minute
}

func (n *fakeNotifier) sentKinds(to string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, e := range n.sent {
		if e.To.Email == to || e.To.IM == to {
			out = append(out, string(e.Message.Kind)+" "+e.Message.Facts.InstanceID)
		}
	}
	return out
}

type fakeReleaser struct {
	mu   sync.Mutex
	reqs []alert.ReleaseRequest
	out  func(r alert.ReleaseRequest) (alert.ReleaseOutcome, error)
}

var errNoHandle = errors.New("no handle")

func (f *fakeReleaser) Release(_ context.Context, r alert.ReleaseRequest) (alert.ReleaseOutcome, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	if f.out != nil {
		return f.out(r)
	}
	if r.DryRun {
		return alert.ReleaseOutcome{Action: "would delete pod ml/" + r.Target.InstanceID}, nil
	}
	return alert.ReleaseOutcome{Released: true, Action: "deleted pod ml/" + r.Target.InstanceID}, nil
}

func (f *fakeReleaser) Permanent(err error) bool { return errors.Is(err, errNoHandle) }

func (f *fakeReleaser) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reqs {
		out = append(out, fmt.Sprintf("%s dry=%t", r.Target.InstanceID, r.DryRun))
	}
	return out
}

// ---------------------------------------------------------------- fixture

type fixture struct {
	t      *testing.T
	clock  *ledgertest.Clock
	path   string
	ledger ledger.Store
	usage  *ingest.MemStore
	cat    *schemas.Catalog
	notify *fakeNotifier
	rel    *fakeReleaser
	reg    *prometheus.Registry
	spans  []span
	fed    time.Time // samples starting before this are in the usage store
	comp   *ingest.Compactor
}

func newFixture(t *testing.T, spans ...span) *fixture {
	t.Helper()
	cat, err := schemas.ParseCatalog([]byte(testCatalog), "catalog")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, clock: ledgertest.NewClock(at("09:00")), path: filepath.Join(t.TempDir(), "ledger.db"),
		usage: ingest.NewMemStore(), cat: cat, notify: &fakeNotifier{}, rel: &fakeReleaser{}, reg: prometheus.NewRegistry()}
	f.ledger = f.open()
	f.spans, f.comp = spans, ingest.NewCompactor(0)
	var students []ledger.Student
	var projects []string
	for _, p := range []string{"nlp", "quiet", "dry", "off"} {
		projects = append(projects, p)
		for _, u := range []string{"s1", "s2"} {
			students = append(students, ledger.Student{Project: p, User: u, Name: u, Email: u + "@example.edu"})
		}
	}
	if _, err := f.ledger.ImportRoster(context.Background(), "admin", ledger.RosterImport{Mode: ledger.RosterReplace,
		Projects: projects, Students: students}); err != nil {
		t.Fatal(err)
	}
	return f
}

// open is a new connection to the fixture's ledger (a restarted process).
func (f *fixture) open() ledger.Store {
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: f.path, Clock: f.clock.Now})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = s.Close() })
	return s
}

func (f *fixture) watcher(l ledger.Store) *Watcher {
	w, err := New(Config{Ledger: l, Usage: f.usage, Notifier: f.notify, Releaser: f.rel, Registerer: f.reg,
		Catalog: func(context.Context) (*schemas.Catalog, error) { return f.cat, nil },
		Admins:  []alert.Person{{Name: "ops", IM: "ops-im"}}, ExemptionHint: "ask your lead"})
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

// feed writes the samples that start before t (as a collector would have
// by then) to the usage store.
func (f *fixture) feed(t time.Time) {
	f.t.Helper()
	var batch []schemas.Sample
	for _, s := range samples(f.spans...) {
		if st := time.UnixMilli(s.StartMS); !st.Before(f.fed) && st.Before(t) {
			batch = append(batch, s)
		}
	}
	if t.After(f.fed) {
		f.fed = t
	}
	if len(batch) == 0 {
		return
	}
	if err := f.usage.Write(context.Background(), f.comp.Build(batch)); err != nil {
		f.t.Fatal(err)
	}
}

// cycle runs w at t (the ledger's clock too) and delivers what is due.
func (f *fixture) cycle(w *Watcher, t time.Time) CycleReport {
	f.t.Helper()
	f.feed(t.Add(time.Second))
	f.clock.Set(t)
	rep, err := w.Cycle(context.Background(), t)
	if err != nil {
		f.t.Fatalf("cycle at %s: %v", t.Format("15:04"), err)
	}
	w.Deliver(context.Background(), t)
	return rep
}

func (f *fixture) alertKinds(inst string) []string {
	f.t.Helper()
	as, _, err := f.ledger.Alerts(context.Background(), ledger.AlertFilter{InstanceID: inst, Limit: ledger.MaxLimit})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for i := len(as) - 1; i >= 0; i-- {
		out = append(out, string(as[i].Kind)+"@"+as[i].StreakStart.In(sh).Format("15:04"))
	}
	return out
}

// ---------------------------------------------------------------- tests

// Streaks, gaps and the policy stages, step by step with a frozen clock.
func TestIdlePolicySteps(t *testing.T) {
	f := newFixture(t,
		// gpu-1: busy until 10:00, then idle.
		span{"nlp", "s1", "gpu-1", at("09:00"), at("10:00"), 0.9}, span{"nlp", "s1", "gpu-1", at("10:00"), at("13:00"), 0.01},
		// gpu-2: a busy minute at 10:35 ends the first streak.
		span{"nlp", "s2", "gpu-2", at("10:00"), at("10:35"), 0.0}, span{"nlp", "s2", "gpu-2", at("10:35"), at("10:36"), 0.5},
		span{"nlp", "s2", "gpu-2", at("10:36"), at("13:00"), 0.0},
		// gpu-3: a 5-minute gap (over the 30 s tolerance) ends the holding and its streak.
		span{"off", "s1", "gpu-3", at("10:00"), at("10:20"), 0.0}, span{"off", "s1", "gpu-3", at("10:25"), at("13:00"), 0.0},
	)
	w := f.watcher(f.ledger)
	steps := []struct {
		at   string
		want map[string][]string // instance → alerts so far, oldest first
		rel  []string            // releaser calls so far
	}{
		{"10:20", map[string][]string{"gpu-1": nil, "gpu-2": nil}, nil},
		{"10:31", map[string][]string{"gpu-1": {"idle_warning@10:00"}, "gpu-2": {"idle_warning@10:00"}}, nil},
		{"10:40", map[string][]string{"gpu-1": {"idle_warning@10:00"}, "gpu-2": {"idle_warning@10:00"}, "gpu-3": nil}, nil},
		{"10:46", map[string][]string{"gpu-1": {"idle_warning@10:00", "idle_reminder@10:00"}, "gpu-2": {"idle_warning@10:00"}}, nil},
		{"10:56", map[string][]string{"gpu-3": {"idle_warning@10:25"}}, nil},
		{"11:01", map[string][]string{"gpu-1": {"idle_warning@10:00", "idle_reminder@10:00", "idle_release@10:00"}}, []string{"gpu-1 dry=false"}},
		{"11:07", map[string][]string{"gpu-2": {"idle_warning@10:00", "idle_warning@10:36"}}, []string{"gpu-1 dry=false"}},
		// release off (auto_release: false): warned and reminded, never released.
		{"11:26", map[string][]string{"gpu-3": {"idle_warning@10:25", "idle_reminder@10:25"}}, []string{"gpu-1 dry=false"}},
		{"12:30", map[string][]string{
			"gpu-1": {"idle_warning@10:00", "idle_reminder@10:00", "idle_release@10:00"},
			"gpu-2": {"idle_warning@10:00", "idle_warning@10:36", "idle_reminder@10:36", "idle_release@10:36"},
			"gpu-3": {"idle_warning@10:25", "idle_reminder@10:25"}}, []string{"gpu-1 dry=false", "gpu-2 dry=false"}},
	}
	for _, s := range steps {
		f.cycle(w, at(s.at))
		for inst, want := range s.want {
			if got := f.alertKinds(inst); !slices.Equal(got, want) {
				t.Fatalf("%s: alerts of %s: %v, want %v", s.at, inst, got, want)
			}
		}
		if got := f.rel.keys(); !slices.Equal(got, s.rel) {
			t.Fatalf("%s: releases %v, want %v", s.at, got, s.rel)
		}
	}
	// Each alert reached the holder once, by email, and the admin by IM.
	got := f.notify.sentKinds("s1@example.edu")
	want := []string{"idle_warning gpu-1", "idle_warning gpu-3", "idle_reminder gpu-1", "idle_reminder gpu-3",
		"idle_release gpu-1"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("s1 got %v, want %v", got, want)
	}
	if n := len(f.notify.sentKinds("ops-im")); n != 9 {
		t.Fatalf("the admin got %d messages, want 9", n)
	}
	// The release was recorded with its evidence and told with its outcome.
	r, err := f.ledger.ReleaseByKey(context.Background(), ledger.ReleaseKey("gpu-1", at("10:00")))
	if err != nil || r.Status != billing.ReleaseDone || r.Action != "deleted pod ml/gpu-1" {
		t.Fatalf("release: %+v %v", r, err)
	}
	var ev struct {
		IdleSamples int `json:"idle_samples"`
	}
	if err := json.Unmarshal(r.Evidence, &ev); err != nil || ev.IdleSamples != 62 {
		t.Fatalf("evidence %s: %v", r.Evidence, err)
	}
	a, _ := f.ledger.AlertByKey(context.Background(), ledger.IdleAlertKey(billing.AlertIdleRelease, "gpu-1", at("10:00")))
	var facts alert.Facts
	if err := json.Unmarshal(a.Facts, &facts); err != nil || facts.Outcome != "deleted pod ml/gpu-1" || facts.Cost.String() != "2.02" ||
		facts.GPUUUID != "GPU-1" {
		t.Fatalf("release facts %s: %v", a.Facts, err)
	}
	// The releaser was told which GPU, from the latest sample.
	for _, r := range f.rel.reqs {
		if r.Target.GPUUUID != "GPU-1" || r.Target.Node != "node-1" {
			t.Fatalf("release target %+v", r.Target)
		}
	}
	// The warning says what comes next: the reminder, at 10:45.
	a, _ = f.ledger.AlertByKey(context.Background(), ledger.IdleAlertKey(billing.AlertIdleWarning, "gpu-1", at("10:00")))
	if err := json.Unmarshal(a.Facts, &facts); err != nil || facts.NextAction != "reminder" || !facts.NextAt.Equal(at("10:45")) {
		t.Fatalf("warning facts %s: %v", a.Facts, err)
	}
	if v := testutil.ToFloat64(w.m.alerts.WithLabelValues(string(billing.AlertIdleWarning))); v != 4 {
		t.Fatalf("warnings counted: %v, want 4", v)
	}
	if v := testutil.ToFloat64(w.m.releases.WithLabelValues("done")); v != 2 {
		t.Fatalf("releases counted: %v, want 2", v)
	}
}

// Quiet hours: warnings and reminders that fall due inside them are not
// sent; the one still due when they end is. Releases happen anyway, and
// their notice waits for the end.
func TestQuietHours(t *testing.T) {
	f := newFixture(t,
		// gpu-q1 idles from 21:45: warn due 22:15, remind 22:30, release 22:45, all quiet.
		span{"quiet", "s1", "gpu-q1", at("21:00"), at("21:45"), 0.9}, span{"quiet", "s1", "gpu-q1", at("21:45"), at("23:30"), 0.0},
		// gpu-q2 idles from 07:20: warn due 07:50 (quiet), remind 08:05.
		span{"quiet", "s2", "gpu-q2", at("+1 07:00"), at("+1 07:20"), 0.9}, span{"quiet", "s2", "gpu-q2", at("+1 07:20"), at("+1 09:00"), 0.0},
	)
	w := f.watcher(f.ledger)
	for _, s := range []string{"22:16", "22:31"} {
		if rep := f.cycle(w, at(s)); rep.Deferred != 1 || rep.Alerts != 0 {
			t.Fatalf("%s: %+v", s, rep)
		}
	}
	f.cycle(w, at("22:46"))
	if got := f.alertKinds("gpu-q1"); !slices.Equal(got, []string{"idle_release@21:45"}) {
		t.Fatalf("alerts of gpu-q1: %v", got)
	}
	if got := f.rel.keys(); !slices.Equal(got, []string{"gpu-q1 dry=false"}) {
		t.Fatalf("releases: %v", got)
	}
	if got := f.notify.sentKinds("s1@example.edu"); len(got) != 0 {
		t.Fatalf("sent during quiet hours: %v", got)
	}
	ds, _, _ := f.ledger.Deliveries(context.Background(), ledger.DeliveryFilter{})
	for _, d := range ds {
		if !d.NextAttemptAt.Equal(at("+1 08:00")) {
			t.Fatalf("delivery due %s, want the end of quiet hours", d.NextAttemptAt.In(sh))
		}
	}
	f.cycle(w, at("+1 07:51"))
	if got := f.alertKinds("gpu-q2"); len(got) != 0 {
		t.Fatalf("alerts of gpu-q2 in quiet hours: %v", got)
	}
	f.cycle(w, at("+1 08:00"))
	if got := f.notify.sentKinds("s1@example.edu"); !slices.Equal(got, []string{"idle_release gpu-q1"}) {
		t.Fatalf("after quiet hours s1 got %v", got)
	}
	if got := f.alertKinds("gpu-q2"); !slices.Equal(got, []string{"idle_warning@07:20"}) {
		t.Fatalf("alerts of gpu-q2 at 08:00: %v", got)
	}
	f.cycle(w, at("+1 08:06"))
	if got := f.notify.sentKinds("s2@example.edu"); !slices.Equal(got, []string{"idle_warning gpu-q2", "idle_reminder gpu-q2"}) {
		t.Fatalf("s2 got %v", got)
	}
}

// Dry run: the releaser is asked with DryRun and the record and the
// message say what would have been done; no message announces a release.
func TestDryRun(t *testing.T) {
	f := newFixture(t, span{"dry", "s1", "gpu-d", at("10:00"), at("12:00"), 0.0})
	w := f.watcher(f.ledger)
	for _, s := range []string{"10:31", "10:46", "11:01", "11:30"} {
		f.cycle(w, at(s))
	}
	if got := f.alertKinds("gpu-d"); !slices.Equal(got, []string{"idle_warning@10:00", "idle_reminder@10:00", "idle_release_dry_run@10:00"}) {
		t.Fatalf("alerts: %v", got)
	}
	if got := f.rel.keys(); !slices.Equal(got, []string{"gpu-d dry=true"}) {
		t.Fatalf("releases: %v", got)
	}
	r, _ := f.ledger.ReleaseByKey(context.Background(), ledger.ReleaseKey("gpu-d", at("10:00")))
	if r.Status != billing.ReleaseDryRun || !r.DryRun || r.Action != "would delete pod ml/gpu-d" {
		t.Fatalf("release %+v", r)
	}
	for _, m := range f.notify.planned {
		if m.Facts.NextAction == "release" {
			t.Fatalf("a dry run announced a release: %+v", m)
		}
	}
	a, _ := f.ledger.AlertByKey(context.Background(), ledger.IdleAlertKey(billing.AlertIdleReminder, "gpu-d", at("10:00")))
	var facts alert.Facts
	if err := json.Unmarshal(a.Facts, &facts); err != nil || facts.NextAction != "" {
		t.Fatalf("reminder facts %s", a.Facts)
	}
}

// Releases that do not happen are told as failures, never as releases:
// an error the releaser calls permanent, an outcome with nothing released,
// and a retryable error after the attempts are spent.
func TestReleaseFailuresSayWhatHappened(t *testing.T) {
	f := newFixture(t,
		span{"nlp", "s1", "gpu-perm", at("10:00"), at("14:00"), 0.0},
		span{"nlp", "s1", "gpu-none", at("10:00"), at("14:00"), 0.0},
		span{"nlp", "s1", "gpu-flaky", at("10:00"), at("14:00"), 0.0})
	f.rel.out = func(r alert.ReleaseRequest) (alert.ReleaseOutcome, error) {
		switch r.Target.InstanceID {
		case "gpu-perm":
			return alert.ReleaseOutcome{}, fmt.Errorf("holder ref %q: %w", r.Target.HolderRef, errNoHandle)
		case "gpu-none":
			return alert.ReleaseOutcome{Action: "pod ml/x was already gone"}, nil
		}
		return alert.ReleaseOutcome{}, errors.New("api server 503")
	}
	w := f.watcher(f.ledger)
	f.cycle(w, at("11:01"))
	for _, inst := range []string{"gpu-perm", "gpu-none"} {
		if got := f.alertKinds(inst); !slices.Contains(got, "idle_release_failed@10:00") || slices.Contains(got, "idle_release@10:00") {
			t.Fatalf("alerts of %s: %v", inst, got)
		}
	}
	if got := f.alertKinds("gpu-flaky"); slices.Contains(got, "idle_release_failed@10:00") {
		t.Fatalf("a retryable failure was told at once: %v", got)
	}
	// Retried with backoff (1, 2, 4, 8 min) until the fifth attempt fails for good.
	for _, s := range []string{"11:01", "11:02", "11:04", "11:08", "11:16", "11:17", "12:00"} {
		f.cycle(w, at(s))
	}
	r, _ := f.ledger.ReleaseByKey(context.Background(), ledger.ReleaseKey("gpu-flaky", at("10:00")))
	if r.Status != billing.ReleaseFailed || r.Attempts != 5 || !r.RetryAt.IsZero() {
		t.Fatalf("flaky release: %+v", r)
	}
	if got := f.alertKinds("gpu-flaky"); !slices.Contains(got, "idle_release_failed@10:00") {
		t.Fatalf("alerts of gpu-flaky: %v", got)
	}
	n := 0
	for _, k := range f.rel.keys() {
		if strings.HasPrefix(k, "gpu-perm") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("a permanent failure was tried %d times", n)
	}
	a, _ := f.ledger.AlertByKey(context.Background(), ledger.IdleAlertKey(billing.AlertIdleReleaseFailed, "gpu-none", at("10:00")))
	var facts alert.Facts
	if err := json.Unmarshal(a.Facts, &facts); err != nil || facts.Outcome != "pod ml/x was already gone: the releaser released nothing" {
		t.Fatalf("facts %s", a.Facts)
	}
}

// Exemptions suspend the policy while they last; when one expires the
// streak's clock starts again at its end.
func TestExemptionExpires(t *testing.T) {
	f := newFixture(t, span{"nlp", "s2", "gpu-x", at("10:00"), at("13:00"), 0.0}, span{"nlp", "s1", "gpu-y", at("10:00"), at("13:00"), 0.0})
	f.clock.Set(at("09:59"))
	if _, err := f.ledger.GrantExemption(context.Background(), "lead:nlp", ledger.NewExemption{Project: "nlp", User: "s2",
		Until: at("11:00"), Reason: "thesis run"}); err != nil {
		t.Fatal(err)
	}
	w := f.watcher(f.ledger)
	for _, s := range []struct {
		at    string
		x, y  []string
		exemp int
	}{
		{"10:31", nil, []string{"idle_warning@10:00"}, 1},
		{"10:59", nil, nil, 1},
		{"11:00", nil, nil, 0},
		{"11:31", []string{"idle_warning@11:00"}, nil, 0},
		{"11:46", []string{"idle_warning@11:00", "idle_reminder@11:00"}, nil, 0},
		{"12:01", []string{"idle_warning@11:00", "idle_reminder@11:00", "idle_release@11:00"}, nil, 0},
	} {
		rep := f.cycle(w, at(s.at))
		if rep.Exempt != s.exemp {
			t.Fatalf("%s: %d exempt, want %d", s.at, rep.Exempt, s.exemp)
		}
		if got := f.alertKinds("gpu-x"); !slices.Equal(got, s.x) {
			t.Fatalf("%s: alerts of gpu-x %v, want %v", s.at, got, s.x)
		}
		if s.y != nil {
			if got := f.alertKinds("gpu-y"); !slices.Equal(got[:1], s.y) {
				t.Fatalf("%s: alerts of gpu-y %v", s.at, got)
			}
		}
	}
}

// A restart (a new watcher on a new connection to the same ledger) sends
// nothing twice and releases nothing twice.
func TestRestartSendsNothingTwice(t *testing.T) {
	f := newFixture(t, span{"nlp", "s1", "gpu-1", at("10:00"), at("12:00"), 0.0})
	w := f.watcher(f.ledger)
	f.cycle(w, at("10:31"))
	f.cycle(w, at("11:01"))
	sent := len(f.notify.sent)
	if sent == 0 || len(f.rel.reqs) != 1 {
		t.Fatalf("before the restart: %d sent, %d releases", sent, len(f.rel.reqs))
	}
	w2 := f.watcher(f.open())
	for _, s := range []string{"11:01", "11:02", "11:30"} {
		if rep := f.cycle(w2, at(s)); rep.Alerts != 0 || rep.Releases != 0 {
			t.Fatalf("after the restart at %s: %+v", s, rep)
		}
	}
	if len(f.notify.sent) != sent || len(f.rel.reqs) != 1 {
		t.Fatalf("after the restart: %d sent (was %d), %d releases", len(f.notify.sent), sent, len(f.rel.reqs))
	}
}

// Two replicas: one holds the lease and works; the other waits. Running
// both side by side sends every message once and releases once.
func TestTwoWatchersOneLease(t *testing.T) {
	f := newFixture(t, span{"nlp", "s1", "gpu-1", at("10:00"), at("12:00"), 0.0})
	f.feed(at("11:02"))
	f.clock.Set(at("11:01"))
	w1, w2 := f.watcher(f.ledger), f.watcher(f.open())
	ctx := context.Background()
	if ok, err := w1.Leader(ctx, "replica-1", time.Minute); !ok || err != nil {
		t.Fatalf("replica-1: %v %v", ok, err)
	}
	if ok, err := w2.Leader(ctx, "replica-2", time.Minute); ok || err != nil {
		t.Fatalf("replica-2 leads too: %v %v", ok, err)
	}
	if err := f.ledger.ReleaseLease(ctx, LeaseName, "replica-1"); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for i, w := range []*Watcher{w1, w2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.Run(rctx, fmt.Sprintf("replica-%d", i+1), 20*time.Millisecond, f.clock.Now)
		}()
	}
	wg.Wait()
	if len(f.rel.reqs) != 1 {
		t.Fatalf("%d releases, want 1", len(f.rel.reqs))
	}
	seen := map[string]int{}
	for _, e := range f.notify.sent {
		seen[e.Message.Key+" "+e.Channel+" "+recipient(e.To)]++
	}
	// At 11:01 the release is due: warning and reminder, superseded, are
	// not sent; the release notice goes to the holder by email and the
	// admin by IM.
	if len(seen) != 2 {
		t.Fatalf("messages %v", seen)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s sent %d times", k, n)
		}
	}
	// Stopped, neither leads.
	if l := testutil.ToFloat64(w1.m.leader); l != 0 {
		t.Fatalf("leader gauge %v after both stopped", l)
	}
}

// Deliveries: retried with the notifier's backoff, failed for good on a
// permanent error (and counted), and a slow channel delays only itself.
func TestDeliveries(t *testing.T) {
	f := newFixture(t, span{"nlp", "s1", "gpu-1", at("10:00"), at("12:00"), 0.0})
	f.notify.fail = map[string]error{"email": errors.New("421 try again")}
	f.notify.block = map[string]chan struct{}{"im": make(chan struct{})}
	w := f.watcher(f.ledger)
	ctx := context.Background()
	f.feed(at("10:32"))
	f.clock.Set(at("10:31"))
	if _, err := w.Cycle(ctx, at("10:31")); err != nil {
		t.Fatal(err)
	}
	if n := w.startDeliveries(ctx, at("10:31")); n != 2 {
		t.Fatalf("started %d deliveries", n)
	}
	// The email attempt finishes (recorded, and its round over) while the
	// IM one hangs.
	emailRoundOver := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.inFlight["email"]
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ds, _, _ := f.ledger.Deliveries(ctx, ledger.DeliveryFilter{Channel: "email"})
		if len(ds) == 1 && ds[0].Attempts == 1 && emailRoundOver() {
			if ds[0].Status != ledger.DeliveryPending || !ds[0].NextAttemptAt.Equal(at("10:32")) || ds[0].LastError != "421 try again" {
				t.Fatalf("email after one attempt: %+v", ds[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the email attempt waited for the slow channel")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A cycle is not held up by the hanging channel either.
	f.feed(at("10:47"))
	if _, err := w.Cycle(ctx, at("10:46")); err != nil {
		t.Fatal(err)
	}
	// The IM channel is busy: its new delivery waits; the email ones go.
	f.notify.mu.Lock()
	f.notify.fail["email"] = fmt.Errorf("mailbox: %w", errPermanent)
	f.notify.mu.Unlock()
	if n := w.startDeliveries(ctx, at("10:46")); n != 2 {
		t.Fatalf("second round started %d (want the two emails, not the busy IM channel)", n)
	}
	close(f.notify.block["im"])
	w.wg.Wait()
	w.Deliver(ctx, at("10:47"))
	failed, _, _ := f.ledger.Deliveries(ctx, ledger.DeliveryFilter{Status: ledger.DeliveryFailed})
	if len(failed) != 2 {
		t.Fatalf("failed for good: %+v", failed)
	}
	if v := testutil.ToFloat64(w.m.failed.WithLabelValues("email")); v != 2 {
		t.Fatalf("failed counter %v", v)
	}
	if got := f.notify.sentKinds("ops-im"); !slices.Equal(got, []string{"idle_warning gpu-1", "idle_reminder gpu-1"}) {
		t.Fatalf("IM sent %v", got)
	}
}

// Budgets: each threshold alerts once per period, across a restart and
// with two replicas; thresholds crossed together send only the highest;
// at 100 % a release budget releases the student's held instances.
func TestBudgetsOncePerThreshold(t *testing.T) {
	f := newFixture(t,
		span{"nlp", "s1", "gpu-1", at("09:00"), at("12:00"), 0.9},
		span{"nlp", "s2", "gpu-2", at("09:00"), at("12:00"), 0.9})
	ctx := context.Background()
	// 1.00 CNY an hour: s1 reaches 50 % (1.00) at 10:00, 80 % at 10:36, 100 % at 11:00.
	if _, err := f.ledger.PutBudget(ctx, "lead:nlp", ledger.Budget{Scope: billing.BudgetStudent, Project: "nlp", User: "s1",
		Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "2.00", Action: billing.BudgetRelease}); err != nil {
		t.Fatal(err)
	}
	// The project: 3 card-hours, warn only; two cards reach 50 % at 09:45, 80 % at 10:12, 100 % at 10:30.
	if _, err := f.ledger.PutBudget(ctx, "lead:nlp", ledger.Budget{Scope: billing.BudgetProject, Project: "nlp",
		Period: billing.BudgetMonth, Unit: billing.BudgetCardHours, Limit: "3"}); err != nil {
		t.Fatal(err)
	}
	budgetAlerts := func() []string {
		as, _, err := f.ledger.Alerts(ctx, ledger.AlertFilter{Kind: billing.AlertBudgetThreshold})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range as {
			out = append(out, fmt.Sprintf("%s/%s %d", a.Project, a.User, a.Threshold))
		}
		slices.Sort(out)
		return out
	}
	w := f.watcher(f.ledger)
	w2, w3 := f.watcher(f.open()), f.watcher(f.open()) // a restarted process and a second replica
	for _, s := range []struct {
		at   string
		ws   []*Watcher
		want []string
		rel  []string
	}{
		{"09:30", []*Watcher{w}, nil, nil},
		{"10:01", []*Watcher{w, w2, w3}, []string{"nlp/ 50", "nlp/s1 50"}, nil},
		{"10:20", []*Watcher{w2, w3}, []string{"nlp/ 50", "nlp/ 80", "nlp/s1 50"}, nil},
		{"10:40", []*Watcher{w3, w2}, []string{"nlp/ 100", "nlp/ 50", "nlp/ 80", "nlp/s1 50", "nlp/s1 80"}, nil},
		{"11:01", []*Watcher{w2, w3}, []string{"nlp/ 100", "nlp/ 50", "nlp/ 80", "nlp/s1 100", "nlp/s1 50", "nlp/s1 80"}, []string{"gpu-1 dry=false"}},
		{"11:02", []*Watcher{w3, w}, []string{"nlp/ 100", "nlp/ 50", "nlp/ 80", "nlp/s1 100", "nlp/s1 50", "nlp/s1 80"}, []string{"gpu-1 dry=false"}},
	} {
		for _, w := range s.ws {
			f.cycle(w, at(s.at))
		}
		if got := budgetAlerts(); !slices.Equal(got, s.want) {
			t.Fatalf("%s: %v, want %v", s.at, got, s.want)
		}
		if got := f.rel.keys(); !slices.Equal(got, s.rel) {
			t.Fatalf("%s: releases %v, want %v (s1's instance only, once)", s.at, got, s.rel)
		}
		if s.at == "10:01" { // what the budgets page shows: the month-to-date bill (the minute sampled at 10:01 counts whole)
			bs, _, err := f.ledger.Budgets(ctx, ledger.BudgetFilter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bs {
				u := b.Usage
				if u.Period != "2026-12" || !u.AsOf.Equal(at("10:01")) || !u.Start.Equal(billing.NewPeriod(2026, 12, f.cat.Location).Start) {
					t.Fatalf("usage of budget %d: %+v", b.ID, u)
				}
				if b.Scope == billing.BudgetProject && (u.CardMS != 2*62*60_000 || !u.Money.Equal(decimal.RequireFromString("2.06"))) ||
					b.Scope == billing.BudgetStudent && (u.CardMS != 62*60_000 || !u.Money.Equal(decimal.RequireFromString("1.03"))) {
					t.Fatalf("usage of the %s budget at 10:01: %d ms, %s", b.Scope, u.CardMS, u.Money)
				}
			}
		}
	}
	a, _ := f.ledger.AlertByKey(ctx, ledger.BudgetAlertKey(billing.BudgetStudent, "nlp", "s1", billing.BudgetMoney, "2026-12", 100))
	var facts alert.Facts
	if err := json.Unmarshal(a.Facts, &facts); err != nil || facts.Outcome != "deleted pod ml/gpu-1" || facts.Budget == nil ||
		facts.Budget.Used.String() != "2.03" || facts.Budget.Percent != 100 {
		t.Fatalf("facts of the 100 %% alert: %s", a.Facts)
	}
	// Each budget alert reached s1 once.
	n := 0
	for _, k := range f.notify.sentKinds("s1@example.edu") {
		if strings.HasPrefix(k, string(billing.AlertBudgetThreshold)) {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("s1 got %d budget messages, want 3", n)
	}
}

// Thresholds crossed at once: all are recorded (never sent later), only
// the highest is sent. Term budgets count from the term's first day.
func TestBudgetJumpAndTerm(t *testing.T) {
	f := newFixture(t, span{"nlp", "s1", "gpu-1", at("09:00"), at("12:00"), 0.9})
	cat, err := schemas.ParseCatalog([]byte(testCatalog+"terms:\n  - {id: 2026-autumn, start: 2026-09-01, end: 2027-01-17}\n"), "catalog")
	if err != nil {
		t.Fatal(err)
	}
	f.cat = cat
	ctx := context.Background()
	if _, err := f.ledger.PutBudget(ctx, "lead:nlp", ledger.Budget{Scope: billing.BudgetStudent, Project: "nlp", User: "s1",
		Period: billing.BudgetTerm, Unit: billing.BudgetCardHours, Limit: "1"}); err != nil {
		t.Fatal(err)
	}
	w := f.watcher(f.ledger)
	f.cycle(w, at("11:00"))
	as, _, _ := f.ledger.Alerts(ctx, ledger.AlertFilter{Kind: billing.AlertBudgetThreshold})
	if len(as) != 3 {
		t.Fatalf("alerts %+v", as)
	}
	for _, a := range as {
		if a.Period != "2026-autumn" {
			t.Fatalf("period %q", a.Period)
		}
		ds, _, _ := f.ledger.Deliveries(ctx, ledger.DeliveryFilter{AlertID: a.ID})
		if (a.Threshold == 100) != (len(ds) > 0) {
			t.Fatalf("threshold %d has %d deliveries", a.Threshold, len(ds))
		}
	}
	var facts alert.Facts
	_ = json.Unmarshal(as[0].Facts, &facts)
	if facts.Budget.Used.String() != "2" || facts.Budget.Unit != "card_hours" {
		t.Fatalf("facts %s", as[0].Facts)
	}
	bs, _, _ := f.ledger.Budgets(ctx, ledger.BudgetFilter{})
	if u := bs[0].Usage; u.Period != "2026-autumn" || u.CardMS != 2*3_600_000 || !u.Start.Equal(cat.Terms[0].Start) ||
		!u.End.Equal(cat.Terms[0].End) || !u.AsOf.Equal(at("11:00")) {
		t.Fatalf("term usage recorded: %+v", u)
	}
}

// A cycle makes at most MaxReleasesPerCycle release attempts; the rest
// wait for the next cycle (a hanging releaser cannot hold detection up
// for long).
func TestReleasesPerCycleAreBounded(t *testing.T) {
	f := newFixture(t,
		span{"nlp", "s1", "gpu-a", at("10:00"), at("12:00"), 0.0},
		span{"nlp", "s1", "gpu-b", at("10:00"), at("12:00"), 0.0},
		span{"nlp", "s1", "gpu-c", at("10:00"), at("12:00"), 0.0})
	w := f.watcher(f.ledger)
	w.cfg.MaxReleasesPerCycle = 2
	if rep := f.cycle(w, at("11:01")); rep.Releases != 2 || rep.Postponed != 1 {
		t.Fatalf("first cycle: %+v", rep)
	}
	if rep := f.cycle(w, at("11:02")); rep.Releases != 1 || rep.Postponed != 0 {
		t.Fatalf("second cycle: %+v", rep)
	}
	if got := f.rel.keys(); len(got) != 3 {
		t.Fatalf("releases %v", got)
	}
}

// A streak longer than reads.HeldLookback (24 h): HeldNow sees its start
// only as the lookback's start, which moves with every cycle. The streak
// keeps the start its alerts recorded: warned once, reminded once, and a
// release that failed for good is neither tried nor told again.
func TestStreakLongerThanLookback(t *testing.T) {
	f := newFixture(t,
		span{"off", "s1", "gpu-long", at("08:00"), at("09:00"), 0.9}, span{"off", "s1", "gpu-long", at("09:00"), at("+1 14:00"), 0.0},
		span{"nlp", "s2", "gpu-stuck", at("08:00"), at("09:00"), 0.9}, span{"nlp", "s2", "gpu-stuck", at("09:00"), at("+1 14:00"), 0.0},
		// Held for a day and more before it idles: its notice says since when.
		span{"nlp", "s1", "gpu-busy", at("08:00"), at("+1 10:00"), 0.9}, span{"nlp", "s1", "gpu-busy", at("+1 10:00"), at("+1 14:00"), 0.0},
	)
	f.rel.out = func(r alert.ReleaseRequest) (alert.ReleaseOutcome, error) { return alert.ReleaseOutcome{}, errNoHandle }
	w := f.watcher(f.ledger)
	times := []time.Time{at("09:31"), at("09:46"), at("10:01")}
	for h := 1; h <= 27; h++ {
		times = append(times, at("10:01").Add(time.Duration(h)*time.Hour))
	}
	for _, t := range times {
		f.cycle(w, t)
	}
	if got, want := f.alertKinds("gpu-long"), []string{"idle_warning@09:00", "idle_reminder@09:00"}; !slices.Equal(got, want) {
		t.Fatalf("alerts of gpu-long: %v, want %v", got, want)
	}
	if got, want := f.alertKinds("gpu-stuck"), []string{"idle_warning@09:00", "idle_reminder@09:00", "idle_release_failed@09:00"}; !slices.Equal(got, want) {
		t.Fatalf("alerts of gpu-stuck: %v, want %v", got, want)
	}
	if got := f.rel.keys(); !slices.Equal(got, []string{"gpu-stuck dry=false", "gpu-busy dry=false"}) {
		t.Fatalf("releases %v, want one each", got)
	}
	// A holding older than the lookback is told with its start and its cost
	// since then (27 h 1 min at 1.00 an hour).
	a, err := f.ledger.AlertByKey(context.Background(), ledger.IdleAlertKey(billing.AlertIdleReleaseFailed, "gpu-busy", at("+1 10:00")))
	if err != nil {
		t.Fatal(err)
	}
	var busy alert.Facts
	if err := json.Unmarshal(a.Facts, &busy); err != nil || !busy.HeldSince.Equal(at("08:00")) || busy.Cost.String() != "27.02" {
		t.Fatalf("facts %s: %v", a.Facts, err)
	}
	// The release notice says when the streak began, and held since no later.
	a, err = f.ledger.AlertByKey(context.Background(), ledger.IdleAlertKey(billing.AlertIdleReleaseFailed, "gpu-stuck", at("09:00")))
	if err != nil {
		t.Fatal(err)
	}
	var facts alert.Facts
	if err := json.Unmarshal(a.Facts, &facts); err != nil || !facts.IdleSince.Equal(at("09:00")) || facts.HeldSince.After(facts.IdleSince) {
		t.Fatalf("facts %s: %v", a.Facts, err)
	}
	// A restarted watcher (nothing in memory) finds the same start.
	w2 := f.watcher(f.open())
	if rep := f.cycle(w2, at("+1 13:50")); rep.Alerts != 0 || rep.Releases != 0 {
		t.Fatalf("a restarted watcher decided anew: %+v", rep)
	}
}

// A budget release of a holding older than reads.HeldLookback that
// failed for good is not tried again when the lookback's start moves.
func TestBudgetReleaseOfALongHolding(t *testing.T) {
	f := newFixture(t, span{"nlp", "s1", "gpu-1", at("08:00"), at("+1 14:00"), 0.9})
	f.rel.out = func(r alert.ReleaseRequest) (alert.ReleaseOutcome, error) { return alert.ReleaseOutcome{}, errNoHandle }
	if _, err := f.ledger.PutBudget(context.Background(), "lead:nlp", ledger.Budget{Scope: billing.BudgetStudent, Project: "nlp",
		User: "s1", Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "2.00", Action: billing.BudgetRelease}); err != nil {
		t.Fatal(err)
	}
	w := f.watcher(f.ledger)
	for h := 0; h <= 28; h++ {
		f.cycle(w, at("09:30").Add(time.Duration(h)*time.Hour))
	}
	if got := f.rel.keys(); !slices.Equal(got, []string{"gpu-1 dry=false"}) {
		t.Fatalf("releases %v, want one", got)
	}
}

// pausingLedger lets a test hold a DueDeliveries caller after its read.
type pausingLedger struct {
	ledger.Store
	read    chan struct{} // closed once the paused caller has read
	proceed chan struct{} // it returns when this is closed
	pause   atomic.Bool
}

func (p *pausingLedger) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]ledger.Delivery, error) {
	ds, err := p.Store.DueDeliveries(ctx, now, limit)
	if p.pause.CompareAndSwap(true, false) {
		close(p.read)
		<-p.proceed
	}
	return ds, err
}

// A round of deliveries that read what was due while an earlier round of
// the same channel was still sending does not send it again after that
// round finished (the cycle's round and the delivery ticker race so).
func TestDeliveryRoundsDoNotOverlap(t *testing.T) {
	f := newFixture(t, span{"nlp", "s1", "gpu-1", at("10:00"), at("12:00"), 0.0})
	f.notify.block = map[string]chan struct{}{"im": make(chan struct{})}
	pl := &pausingLedger{Store: f.ledger, read: make(chan struct{}), proceed: make(chan struct{})}
	w := f.watcher(pl)
	ctx := context.Background()
	f.feed(at("10:32"))
	f.clock.Set(at("10:31"))
	if _, err := w.Cycle(ctx, at("10:31")); err != nil {
		t.Fatal(err)
	}
	if n := w.startDeliveries(ctx, at("10:31")); n != 2 { // the email goes, the IM message hangs
		t.Fatalf("started %d deliveries", n)
	}
	pl.pause.Store(true)
	second := make(chan int)
	go func() { second <- w.startDeliveries(ctx, at("10:31")) }()
	<-pl.read // the second round has read the IM delivery as due
	close(f.notify.block["im"])
	w.wg.Wait() // the first round has sent and recorded it
	close(pl.proceed)
	<-second
	w.wg.Wait()
	if got := f.notify.sentKinds("ops-im"); !slices.Equal(got, []string{"idle_warning gpu-1"}) {
		t.Fatalf("IM sent %v, want the warning once", got)
	}
}

// closingLedger closes the state store as the watcher gives its lease up,
// as a process that closed its stores too early would.
type closingLedger struct{ ledger.Store }

func (c closingLedger) ReleaseLease(ctx context.Context, name, holder string) error {
	_ = c.Store.Close()
	return c.Store.ReleaseLease(ctx, name, holder)
}

// A stop that cannot give the lease up is not a clean stop: Run returns
// that error (not the context.Canceled a run group takes for success); a
// stop that gives it up returns the cancellation.
func TestRunReturnsTheFailedLeaseRelease(t *testing.T) {
	f := newFixture(t)
	run := func(l ledger.Store) error {
		w := f.watcher(l)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx, "replica-1", 10*time.Millisecond, f.clock.Now) }()
		for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(w.m.leader) != 1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the watcher never led")
			}
		}
		cancel()
		return <-done
	}
	f.reg = prometheus.NewRegistry()
	if err := run(f.open()); !errors.Is(err, context.Canceled) {
		t.Fatalf("a clean stop: %v, want context.Canceled", err)
	}
	f.reg = prometheus.NewRegistry()
	err := run(closingLedger{f.open()})
	if err == nil || errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cannot give the watch lease up") {
		t.Fatalf("a stop that kept the lease: %v, want the release's error", err)
	}
}
