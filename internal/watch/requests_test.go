package watch

import (
	"context"
	"strings"
	"testing"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/watch/notify"
	"github.com/cardhour/cardhour/schemas"
)

// renderingNotifier plans as fakeNotifier does, each envelope rendered by
// the notifier's renderer in the person's language.
type renderingNotifier struct{ *fakeNotifier }

func (n renderingNotifier) Plan(m alert.Message, people []alert.Person) ([]alert.Envelope, error) {
	envs, err := n.fakeNotifier.Plan(m, people)
	if err != nil {
		return nil, err
	}
	for i := range envs {
		envs[i].Lang = envs[i].To.Lang
		if envs[i].Lang == "" { // the roster's students: the default here
			envs[i].Lang = notify.LangEN
		}
		if envs[i].Subject, envs[i].Body, err = notify.Render(m, envs[i].Lang); err != nil {
			return nil, err
		}
	}
	return envs, nil
}

// requestWatcher is a watcher of f's ledger l with nlp's lead (Chinese)
// and the dashboard's URL.
func (f *fixture) requestWatcher(l ledger.Store) *Watcher {
	f.t.Helper()
	w, err := New(Config{Ledger: l, Usage: f.usage, Notifier: renderingNotifier{f.notify}, Releaser: f.rel, Registerer: f.reg,
		Catalog: func(context.Context) (*schemas.Catalog, error) { return f.cat, nil },
		Admins:  []alert.Person{{Name: "ops", IM: "ops-im", Lang: "en"}},
		Leads:   map[string][]alert.Person{"nlp": {{Name: "Prof. Li", Email: "li@example.edu", Lang: "zh-CN"}}},
		// The trailing slash is dropped.
		DashboardURL: "https://gpu.example.edu/"})
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

// sentTo are the envelopes sent to an address (email or IM).
func (n *fakeNotifier) sentTo(to string) []alert.Envelope {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []alert.Envelope
	for _, e := range n.sent {
		if e.To.Email == to || e.To.IM == to {
			out = append(out, e)
		}
	}
	return out
}

// A student's request is told to the lead and the admins once, across
// cycles and restarts, also when the process that saw the request stopped
// before telling it; the decision is told to the student once, with the
// exemption's end for a grant and the reason for a refusal.
func TestExemptionRequestsAreTold(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	w := f.requestWatcher(f.ledger)
	f.cycle(w, at("09:00"))
	f.clock.Set(at("09:05"))
	asked, err := f.ledger.RequestExemption(ctx, "student:s1", ledger.NewExemptionRequest{Project: "nlp", User: "s1", InstanceID: "gpu-1",
		Until: at("+1 18:00"), Reason: "a two-day training run"})
	if err != nil {
		t.Fatal(err)
	}
	// The process stops before its next cycle; another one tells it.
	w = f.requestWatcher(f.open())
	if rep := f.cycle(w, at("09:06")); rep.Alerts != 1 {
		t.Fatalf("the request: %+v", rep)
	}
	lead := f.notify.sentTo("li@example.edu")
	if len(lead) != 1 || lead[0].Message.Kind != billing.AlertExemptionRequested || lead[0].Message.Key != RequestAlertKey(billing.AlertExemptionRequested, asked.ID) {
		t.Fatalf("the lead got %+v", lead)
	}
	if len(f.notify.sentTo("ops-im")) != 1 || len(f.notify.sentTo("s1@example.edu")) != 0 {
		t.Fatalf("admin %d, student %d messages", len(f.notify.sentTo("ops-im")), len(f.notify.sentTo("s1@example.edu")))
	}
	for _, want := range []string{"s1", "nlp", "gpu-1", "2026-12-02 18:00", "a two-day training run", "https://gpu.example.edu/ui/#/exemptions", "申请"} {
		if !strings.Contains(lead[0].Subject+lead[0].Body, want) {
			t.Errorf("the lead's message (zh-CN) lacks %q:\n%s\n%s", want, lead[0].Subject, lead[0].Body)
		}
	}
	if admin := f.notify.sentTo("ops-im")[0]; !strings.Contains(admin.Body, "asks for an exemption") {
		t.Errorf("the admin's message (en):\n%s", admin.Body)
	}
	// Again, and after a restart: nothing new.
	f.cycle(w, at("09:07"))
	w = f.requestWatcher(f.open())
	if rep := f.cycle(w, at("09:08")); rep.Alerts != 0 {
		t.Fatalf("after the restart: %+v", rep)
	}

	// Bob asks for all his instances; the lead grants alice's and refuses bob's.
	f.clock.Set(at("09:10"))
	all, err := f.ledger.RequestExemption(ctx, "student:s2", ledger.NewExemptionRequest{Project: "nlp", User: "s2", Until: at("+1 09:00"), Reason: "exam week"})
	if err != nil {
		t.Fatal(err)
	}
	f.cycle(w, at("09:11"))
	f.clock.Set(at("09:20"))
	if _, _, err := f.ledger.GrantExemptionRequest(ctx, "lead:li", asked.ID, "ok until tomorrow"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.RefuseExemptionRequest(ctx, "lead:li", all.ID, "the course needs the cards"); err != nil {
		t.Fatal(err)
	}
	if rep := f.cycle(w, at("09:21")); rep.Alerts != 2 {
		t.Fatalf("the decisions: %+v", rep)
	}
	for _, c := range []struct{ to, want string }{
		{"s1@example.edu", "was granted by lead:li"}, {"s1@example.edu", "suspended for instance gpu-1 until 2026-12-02 18:00"},
		{"s2@example.edu", "was refused by lead:li"}, {"s2@example.edu", "Reason given: the course needs the cards"},
	} {
		got := f.notify.sentTo(c.to)
		if len(got) != 1 || got[0].Message.Kind != billing.AlertExemptionDecided || !strings.Contains(got[0].Subject+got[0].Body, c.want) {
			t.Fatalf("%s: %d messages, want one saying %q: %+v", c.to, len(got), c.want, got)
		}
	}
	if n := len(f.notify.sentTo("li@example.edu")); n != 2 { // the two requests, not the decisions
		t.Fatalf("the lead got %d messages", n)
	}
	sent := len(f.notify.sent)
	f.cycle(w, at("09:22"))
	w = f.requestWatcher(f.open())
	f.cycle(w, at("09:30"))
	if len(f.notify.sent) != sent {
		t.Fatalf("after the restart: %d sent, was %d", len(f.notify.sent), sent)
	}
}

// An idle warning links to the request form of its instance when the
// watcher knows the dashboard's URL.
func TestIdleWarningLinksToTheRequestForm(t *testing.T) {
	f := newFixture(t, span{"nlp", "s1", "gpu/1", at("10:00"), at("12:00"), 0.0})
	w := f.requestWatcher(f.ledger)
	f.notify.sent = nil
	f.cycle(w, at("10:31"))
	got := f.notify.sentTo("s1@example.edu")
	if len(got) != 1 || got[0].Message.Kind != billing.AlertIdleWarning {
		t.Fatalf("sent %+v", got)
	}
	const link = "https://gpu.example.edu/ui/#/exemptions?request=gpu%2F1"
	if got[0].Message.Facts.Link != link || !strings.Contains(got[0].Body, "Request form: "+link) {
		t.Fatalf("link %q in:\n%s", got[0].Message.Facts.Link, got[0].Body)
	}
	// Without the URL: no link.
	g := newFixture(t, span{"nlp", "s1", "gpu-1", at("10:00"), at("12:00"), 0.0})
	g.cycle(g.watcher(g.ledger), at("10:31"))
	for _, m := range g.notify.planned {
		if m.Facts.Link != "" {
			t.Fatalf("a link without the dashboard's URL: %+v", m)
		}
	}
}
