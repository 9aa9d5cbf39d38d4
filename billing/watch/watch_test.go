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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cardhour/cardhour/billing/ledger"
	"github.com/cardhour/cardhour/billing/ledger/ledgertest"
	"github.com/cardhour/cardhour/billing/ledger/sqlite"
	"github.com/cardhour/cardhour/ingest"
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
	planned []Message
	sent    []Envelope
	fail    map[string]error         // by channel: every send fails
	block   map[string]chan struct{} // by channel: a send waits for the channel to close
}

// Plan sends every message to every person by email (when they have an
// address) and by IM (when they have a handle).
func (n *fakeNotifier) Plan(m Message, people []Person) ([]Envelope, error) {
	n.mu.Lock()
	n.planned = append(n.planned, m)
	n.mu.Unlock()
	var out []Envelope
	for _, p := range people {
		if p.Email != "" {
			out = append(out, Envelope{Channel: "email", To: p, Lang: "en", Subject: m.Kind, Body: m.Facts.Outcome, Message: m})
		}
		if p.IM != "" {
			out = append(out, Envelope{Channel: "im", To: p, Lang: "zh-CN", Subject: m.Kind, Message: m})
		}
	}
	return out, nil
}

func (n *fakeNotifier) Send(ctx context.Context, e Envelope) error {
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

func (n *fakeNotifier) Permanent(err error) bool        { return errors.Is(err, errPermanent) }
func (n *fakeNotifier) Backoff(attempt int) time.Duration { return time.Duration(attempt) * time.Minute }

func (n *fakeNotifier) sentKinds(to string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, e := range n.sent {
		if e.To.Email == to || e.To.IM == to {
			out = append(out, e.Message.Kind+" "+e.Message.Facts.InstanceID)
		}
	}
	return out
}

type fakeReleaser struct {
	mu   sync.Mutex
	reqs []ReleaseRequest
	out  func(r ReleaseRequest) (Outcome, error)
}

var errNoHandle = errors.New("no handle")

func (f *fakeReleaser) Release(_ context.Context, r ReleaseRequest) (Outcome, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	if f.out != nil {
		return f.out(r)
	}
	if r.DryRun {
		return Outcome{Action: "would delete pod ml/" + r.Target.InstanceID}, nil
	}
	return Outcome{Released: true, Action: "deleted pod ml/" + r.Target.InstanceID}, nil
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
	if err := f.usage.Write(context.Background(), ingest.NewCompactor(0).Build(samples(spans...))); err != nil {
		t.Fatal(err)
	}
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
		Admins:  []Person{{Name: "ops", IM: "ops-im"}}, ExemptionHint: "ask your lead"})
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

// cycle runs w at t (the ledger's clock too) and delivers what is due.
func (f *fixture) cycle(w *Watcher, t time.Time) CycleReport {
	f.t.Helper()
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
		out = append(out, as[i].Kind+"@"+as[i].StreakStart.In(sh).Format("15:04"))
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
	if err != nil || r.Status != ledger.ReleaseDone || r.Action != "deleted pod ml/gpu-1" {
		t.Fatalf("release: %+v %v", r, err)
	}
	var ev struct {
		IdleSamples int `json:"idle_samples"`
	}
	if err := json.Unmarshal(r.Evidence, &ev); err != nil || ev.IdleSamples != 62 {
		t.Fatalf("evidence %s: %v", r.Evidence, err)
	}
	a, _ := f.ledger.AlertByKey(context.Background(), ledger.IdleAlertKey(KindIdleRelease, "gpu-1", at("10:00")))
	var facts Facts
	if err := json.Unmarshal(a.Facts, &facts); err != nil || facts.Outcome != "deleted pod ml/gpu-1" || facts.Cost.String() != "2.02" {
		t.Fatalf("release facts %s: %v", a.Facts, err)
	}
	// The warning says what comes next: the reminder, at 10:45.
	a, _ = f.ledger.AlertByKey(context.Background(), ledger.IdleAlertKey(KindIdleWarning, "gpu-1", at("10:00")))
	if err := json.Unmarshal(a.Facts, &facts); err != nil || facts.NextAction != "reminder" || !facts.NextAt.Equal(at("10:45")) {
		t.Fatalf("warning facts %s: %v", a.Facts, err)
	}
	if v := testutil.ToFloat64(w.m.alerts.WithLabelValues(KindIdleWarning)); v != 4 {
		t.Fatalf("warnings counted: %v, want 4", v)
	}
	if v := testutil.ToFloat64(w.m.releases.WithLabelValues("done")); v != 2 {
		t.Fatalf("releases counted: %v, want 2", v)
	}
}
