package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/sqlite"
	"github.com/cardhour/cardhour/internal/reads"
)

// now is the fixture's clock: after November's grace period.
var now = time.Date(2026, 12, 10, 4, 0, 0, 0, time.UTC)

type fixture struct {
	t      *testing.T
	led    ledger.Store
	srv    *api.Server
	h      http.Handler
	usage  *fakeUsage
	flow   *fakeFlow
	tokens map[string]string // role name → secret ("" for anonymous)
	ids    map[string]int64  // named objects: inv-oct-ai101 (finalized), inv-nov-ai101 (draft), spare-token
	sha    map[int64]string
	signIn *api.SignIn // the server's sign-in (signInFor)
	// releaser carries out the releases asked for (POST /api/v1/held/release).
	releaser *fakeReleaser
}

func catalogYAML(t *testing.T) []byte {
	b, err := os.ReadFile("../schemas/examples/catalog.yaml")
	require.NoError(t, err)
	return b
}

func docFor(project string) []byte {
	d := fakeDoc{Project: project, Warnings: []string{}}
	switch project {
	case "ai101":
		d.Lines = []fakeLine{{User: "s-alice", Amount: "12.50"}, {User: "s-bob", Amount: "7.13"}}
		d.Students = []fakeStudent{{User: "s-alice", Name: "Alice Zhang"}, {User: "s-bob", Name: "Bob Li"}}
	default:
		d.Lines = []fakeLine{{User: "s-carol", Amount: "3.21"}}
		d.Students = []fakeStudent{{User: "s-carol", Name: "Carol Wu"}}
	}
	b, _ := json.Marshal(d)
	return b
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	led, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db"), Clock: func() time.Time { return now }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	f := &fixture{t: t, led: led, tokens: map[string]string{"anonymous": ""}, ids: map[string]int64{}, sha: map[int64]string{}}
	_, _, err = led.PutCatalog(ctx, "cli:test", catalogYAML(t))
	require.NoError(t, err)
	f.usage = &fakeUsage{
		rows: []reads.UsageGroup{
			{Project: "ai101", User: "s-alice", SKU: "a100-1g.10gb", Node: "gpu-node-01", Day: "2026-11-03", HeldSeconds: 7200},
			{Project: "ai101", User: "s-bob", SKU: "a100-1g.10gb", Node: "gpu-node-02", Day: "2026-11-03", HeldSeconds: 3600, IdleSeconds: 1854},
			{Project: "ai101", User: "s-alice", SKU: "a100-1g.10gb", Node: "gpu-node-01", Day: "2026-10-30", HeldSeconds: 10800, IdleSeconds: 3600},
			{Project: "nlp-lab", User: "s-carol", SKU: "a100-7g.80gb", Node: "gpu-node-01", Day: "2026-11-04", HeldSeconds: 36000},
		},
		held: []reads.Held{
			{InstanceID: "MIG-1", Node: "gpu-node-01", Project: "ai101", User: "s-alice", GPUModel: "A100", Since: now.Add(-time.Hour), LastSample: now},
			{InstanceID: "MIG-2", Node: "gpu-node-02", Project: "ai101", User: "s-bob", GPUModel: "A100", Since: now.Add(-time.Hour), LastSample: now, Idle: true, IdleSince: now.Add(-time.Minute)},
			{InstanceID: "GPU-3", Node: "gpu-node-01", Project: "nlp-lab", User: "s-carol", GPUModel: "A100", Since: now.Add(-time.Hour), LastSample: now},
		},
		quiet: []reads.NodeState{{Node: "gpu-node-09", LastSample: now.Add(-time.Hour), Silent: true}},
	}
	f.flow = &fakeFlow{led: led, now: func() time.Time { return now }, grace: 72 * time.Hour,
		docs: map[string][]byte{"ai101": docFor("ai101"), "nlp-lab": docFor("nlp-lab")},
		stud: []ledger.Student{{Project: "ai101", User: "s-alice", Name: "Alice Zhang"}, {Project: "ai101", User: "s-bob", Name: "Bob Li"}}}
	oct, err := f.flow.Run(ctx, "cli:test", "2026-10")
	require.NoError(t, err)
	f.ids["inv-oct-ai101"] = oct.Drafts[0].InvoiceID
	fin, err := f.flow.Finalize(ctx, "cli:test", oct.Drafts[0].InvoiceID, oct.Drafts[0].SHA256)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusFinalized, fin.Status)
	nov, err := f.flow.Run(ctx, "cli:test", "2026-11")
	require.NoError(t, err)
	f.ids["inv-nov-ai101"] = nov.Drafts[0].InvoiceID
	f.ids["inv-nov-nlp"] = nov.Drafts[1].InvoiceID
	f.sha[nov.Drafts[0].InvoiceID] = nov.Drafts[0].SHA256
	for name, nt := range map[string]ledger.NewToken{
		"admin":   {Role: ledger.RoleAdmin, TTL: time.Hour},
		"finance": {Role: ledger.RoleFinance, TTL: time.Hour},
		"lead":    {Role: ledger.RoleLead, Project: "ai101", TTL: time.Hour},
		"student": {Role: ledger.RoleStudent, Project: "ai101", User: "s-alice", TTL: time.Hour},
		"spare":   {Role: ledger.RoleFinance, Name: "to revoke", TTL: time.Hour},
	} {
		secret, tok, err := led.CreateToken(ctx, "cli:test", nt)
		require.NoError(t, err)
		if name == "spare" {
			f.ids["spare-token"] = tok.ID
			continue
		}
		f.tokens[name] = secret
	}
	f.seedWatch(ctx)
	f.signIn = signInFor(led)
	f.releaser = &fakeReleaser{}
	f.srv, err = api.New(api.Config{Ledger: led, Usage: f.usage, UsagePing: f.usage.ping, Invoicing: f.flow, Advice: fakeAdvisor{}, Clock: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxBodyBytes: 1 << 20, SignIn: f.signIn,
		Releases: askedReleases{led: led, rel: f.releaser}})
	require.NoError(t, err)
	f.srv.MarkServing(true)
	f.h = f.srv.Handler()
	return f
}

// seedWatch records what a watcher would have: idle alerts of s-alice and
// s-bob (ai101) and s-carol (nlp-lab), each with deliveries (s-alice's
// email failed for good), a release of s-bob's instance, an exemption of
// ai101 and a project and a student budget.
func (f *fixture) seedWatch(ctx context.Context) {
	t, led := f.t, f.led
	streak := now.Add(-3 * time.Hour)
	for _, a := range []struct{ name, project, user, instance string }{
		{"alert-alice", "ai101", "s-alice", "MIG-1"},
		{"alert-bob", "ai101", "s-bob", "MIG-2"},
		{"alert-carol", "nlp-lab", "s-carol", "GPU-3"},
	} {
		al, created, err := led.RecordAlert(ctx, "watch", ledger.NewAlert{Key: ledger.IdleAlertKey(billing.AlertIdleWarning, a.instance, streak),
			Kind: billing.AlertIdleWarning, Project: a.project, User: a.user, InstanceID: a.instance, StreakStart: streak,
			Facts: json.RawMessage(`{"node":"gpu-node-01","instance":"` + a.instance + `"}`)},
			[]ledger.NewDelivery{{Channel: "email", Recipient: a.user + "@example.edu", Payload: json.RawMessage(`{}`)},
				{Channel: "webhook", Recipient: "lead", Payload: json.RawMessage(`{}`)}})
		require.NoError(t, err)
		require.True(t, created)
		f.ids[a.name] = al.ID
	}
	ds, _, err := led.Deliveries(ctx, ledger.DeliveryFilter{AlertID: f.ids["alert-alice"], Channel: "email"})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	_, err = led.FinishDelivery(ctx, "watch", ds[0].ID, "550 mailbox unavailable", time.Time{})
	require.NoError(t, err)
	rel, started, err := led.BeginRelease(ctx, "watch", ledger.NewRelease{Key: ledger.ReleaseKey("MIG-2", streak), InstanceID: "MIG-2",
		Node: "gpu-node-02", Project: "ai101", User: "s-bob", StreakStart: streak, Evidence: json.RawMessage(`{"idle_samples":12}`)})
	require.NoError(t, err)
	require.True(t, started)
	_, err = led.FinishRelease(ctx, "watch", rel.ID, ledger.ReleaseResult{Status: billing.ReleaseDone, Action: "deleted pod ml/nb-0"})
	require.NoError(t, err)
	ex, err := led.GrantExemption(ctx, "cli:test", ledger.NewExemption{Project: "ai101", User: "s-alice", Until: now.Add(48 * time.Hour), Reason: "thesis run"})
	require.NoError(t, err)
	f.ids["exemption-alice"] = ex.ID
	ex, err = led.GrantExemption(ctx, "cli:test", ledger.NewExemption{Project: "nlp-lab", Until: now.Add(48 * time.Hour), Reason: "course demo"})
	require.NoError(t, err)
	f.ids["exemption-nlp"] = ex.ID
	rq, err := led.RequestExemption(ctx, "token:student", ledger.NewExemptionRequest{Project: "ai101", User: "s-alice", InstanceID: "MIG-1",
		Until: now.Add(24 * time.Hour), Reason: "training run"})
	require.NoError(t, err)
	f.ids["request-alice"] = rq.ID
	rq, err = led.RequestExemption(ctx, "token:carol", ledger.NewExemptionRequest{Project: "nlp-lab", User: "s-carol", Until: now.Add(24 * time.Hour), Reason: "paper"})
	require.NoError(t, err)
	f.ids["request-carol"] = rq.ID
	b, err := led.PutBudget(ctx, "cli:test", ledger.Budget{Scope: billing.BudgetProject, Project: "ai101", Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "500"})
	require.NoError(t, err)
	f.ids["budget-ai101"] = b.ID
	b, err = led.PutBudget(ctx, "cli:test", ledger.Budget{Scope: billing.BudgetStudent, Project: "ai101", User: "s-bob", Period: billing.BudgetMonth, Unit: billing.BudgetCardHours, Limit: "40"})
	require.NoError(t, err)
	f.ids["budget-bob"] = b.ID
}

type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (f *fixture) do(role, method, url string, body string, contentType string) response {
	f.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, url, r)
	if body != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if s := f.tokens[role]; s != "" {
		req.Header.Set("Authorization", "Bearer "+s)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	return response{w.Code, w.Header(), w.Body.Bytes()}
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), string(r.Body))
	return m
}
