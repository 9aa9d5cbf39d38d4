package api_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
)

var roles = []string{"anonymous", "admin", "finance", "lead", "student"}

// want is the expected status per role, in the order of roles.
type want [5]int

// routeCase is one row of the role × route table: a route (gin's method and
// path template) and a concrete request of it.
type routeCase struct {
	method, route string
	url           func(f *fixture) string
	body, ctype   string
	want          want
}

// bodyFor is the row's request body: "catalog" is the fixture's catalog
// changed, "sha" the finalize body of the November ai101 draft.
func (rc routeCase) bodyFor(f *fixture) string {
	switch rc.body {
	case "catalog":
		return changedCatalog(f)
	case "sha":
		return fmt.Sprintf(`{"if_sha256":%q}`, f.sha[f.ids["inv-nov-ai101"]])
	case "batch":
		return fmt.Sprintf(`{"items":[{"id":%d,"if_sha256":%q}]}`, f.ids["inv-nov-ai101"], f.sha[f.ids["inv-nov-ai101"]])
	}
	return rc.body
}

func fixed(u string) func(*fixture) string { return func(*fixture) string { return u } }

func withID(format, name string) func(*fixture) string {
	return func(f *fixture) string { return fmt.Sprintf(format, f.ids[name]) }
}

// creditNoteURL voids inv-oct-ai101 (once) and formats its credit note's ID.
func creditNoteURL(format string) func(*fixture) string {
	return func(f *fixture) string {
		if _, ok := f.ids["credit-note"]; !ok {
			v, err := f.flow.Void(context.Background(), "cli:test", f.ids["inv-oct-ai101"], "wrong catalog")
			require.NoError(f.t, err)
			f.ids["credit-note"] = v.CreditNote.ID
		}
		return fmt.Sprintf(format, f.ids["credit-note"])
	}
}

const (
	ok   = 200
	made = 201
	u401 = 401
	f403 = 403
	n404 = 404
	c409 = 409
)

// public is a route every caller reaches; the rest need a token.
var all200 = want{ok, ok, ok, ok, ok}

func changedCatalog(f *fixture) string {
	return strings.Replace(string(catalogYAML(f.t)), "currency:", "# edited\ncurrency:", 1)
}

// The table: every route of the router, every role. A route added without a
// row fails TestEveryRouteHasARow.
var routeTable = []routeCase{
	{"GET", "/healthz", fixed("/healthz"), "", "", all200},
	{"GET", "/readyz", fixed("/readyz"), "", "", all200},
	{"GET", "/metrics", fixed("/metrics"), "", "", all200},
	{"GET", "/", fixed("/"), "", "", want{302, 302, 302, 302, 302}},
	{"GET", "/ui/*file", fixed("/ui/"), "", "", all200},
	{"HEAD", "/ui/*file", fixed("/ui/app.js"), "", "", all200},
	{"GET", "/api/v1/openapi.json", fixed("/api/v1/openapi.json"), "", "", all200},
	{"GET", "/api/v1/openapi.yaml", fixed("/api/v1/openapi.yaml"), "", "", all200},
	{"GET", "/api/v1/openapi-3.0.json", fixed("/api/v1/openapi-3.0.json"), "", "", all200},
	{"GET", "/api/v1/openapi-3.0.yaml", fixed("/api/v1/openapi-3.0.yaml"), "", "", all200},
	{"GET", "/api/v1/me", fixed("/api/v1/me"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/catalog", fixed("/api/v1/catalog"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/catalog/versions", fixed("/api/v1/catalog/versions"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/catalog/versions/:version", fixed("/api/v1/catalog/versions/1"), "", "", want{u401, ok, ok, ok, f403}},
	{"PUT", "/api/v1/catalog", fixed("/api/v1/catalog"), "catalog", "application/yaml", want{u401, ok, f403, f403, f403}},
	{"GET", "/api/v1/projects", fixed("/api/v1/projects"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/projects/:project/students", fixed("/api/v1/projects/ai101/students"), "", "", want{u401, ok, ok, ok, f403}},
	{"POST", "/api/v1/projects/:project/roster", fixed("/api/v1/projects/ai101/roster"), "student_id,name\ns-dave,Dave\n", "text/csv", want{u401, ok, f403, ok, f403}},
	{"GET", "/api/v1/usage", fixed("/api/v1/usage?period=2026-11&group_by=project,user"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/usage/export", fixed("/api/v1/usage/export?period=2026-11&group_by=project,user&format=xlsx&lang=zh-CN"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/occupancy", fixed("/api/v1/occupancy?period=2026-11"), "", "", want{u401, ok, ok, f403, f403}},
	{"GET", "/api/v1/utilization/heatmap", fixed("/api/v1/utilization/heatmap?period=2026-11"), "", "", want{u401, ok, ok, f403, f403}},
	{"GET", "/api/v1/held", fixed("/api/v1/held"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/nodes", fixed("/api/v1/nodes"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/advice", fixed("/api/v1/advice"), "", "", want{u401, ok, ok, ok, f403}},
	{"POST", "/api/v1/billing-runs", fixed("/api/v1/billing-runs"), `{"period":"2026-11"}`, "application/json", want{u401, ok, ok, f403, f403}},
	{"GET", "/api/v1/invoices", fixed("/api/v1/invoices?period=2026-11"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/invoices/:id", withID("/api/v1/invoices/%d", "inv-nov-ai101"), "", "", want{u401, ok, ok, ok, f403}},
	{"POST", "/api/v1/invoices/:id/finalize", withID("/api/v1/invoices/%d/finalize", "inv-nov-ai101"), "sha", "application/json", want{u401, ok, ok, f403, f403}},
	{"POST", "/api/v1/invoices/:id/approve", withID("/api/v1/invoices/%d/approve", "inv-nov-ai101"), "sha", "application/json", want{u401, ok, f403, ok, f403}},
	{"GET", "/api/v1/review", fixed("/api/v1/review?period=2026-11"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/review/export", fixed("/api/v1/review/export?period=2026-11&format=csv"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/periods/:period/summary", fixed("/api/v1/periods/2026-11/summary"), "", "", want{u401, ok, ok, ok, f403}},
	{"POST", "/api/v1/periods/:period/finalize", fixed("/api/v1/periods/2026-11/finalize"), "batch", "application/json", want{u401, ok, ok, f403, f403}},
	{"POST", "/api/v1/invoices/:id/void", withID("/api/v1/invoices/%d/void", "inv-oct-ai101"), `{"reason":"wrong catalog"}`, "application/json", want{u401, ok, ok, f403, f403}},
	{"GET", "/api/v1/invoices/:id/credit-notes", withID("/api/v1/invoices/%d/credit-notes", "inv-oct-ai101"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/invoices/:id/export", withID("/api/v1/invoices/%d/export?format=csv", "inv-oct-ai101"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/credit-notes/:id/export", creditNoteURL("/api/v1/credit-notes/%d/export?format=csv"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/invoices/:id/statements/:user", withID("/api/v1/invoices/%d/statements/s-alice", "inv-oct-ai101"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/invoices/:id/statements/:user/export", withID("/api/v1/invoices/%d/statements/s-alice/export?format=pdf", "inv-oct-ai101"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/statements", fixed("/api/v1/statements?user=s-alice"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/periods/:period/export", fixed("/api/v1/periods/2026-10/export?format=xlsx"), "", "", want{u401, ok, ok, f403, f403}},
	{"POST", "/api/v1/tokens", fixed("/api/v1/tokens"), `{"role":"lead","project":"ai101","ttl":"24h"}`, "application/json", want{u401, made, f403, f403, f403}},
	{"GET", "/api/v1/tokens", fixed("/api/v1/tokens"), "", "", want{u401, ok, f403, f403, f403}},
	{"DELETE", "/api/v1/tokens/:id", withID("/api/v1/tokens/%d", "spare-token"), "", "", want{u401, ok, f403, f403, f403}},
	{"GET", "/api/v1/alerts", fixed("/api/v1/alerts"), "", "", want{u401, ok, ok, ok, ok}},
	{"POST", "/api/v1/alerts/:id/ack", withID("/api/v1/alerts/%d/ack", "alert-alice"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/alerts/:id/deliveries", withID("/api/v1/alerts/%d/deliveries", "alert-alice"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/deliveries", fixed("/api/v1/deliveries?status=failed"), "", "", want{u401, ok, f403, f403, f403}},
	{"GET", "/api/v1/deliveries/backlog", fixed("/api/v1/deliveries/backlog"), "", "", want{u401, ok, f403, f403, f403}},
	{"POST", "/api/v1/deliveries/:id/resend", failedDelivery, "", "", want{u401, ok, f403, f403, f403}},
	{"GET", "/api/v1/releases", fixed("/api/v1/releases"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/exemptions", fixed("/api/v1/exemptions"), "", "", want{u401, ok, ok, ok, ok}},
	{"POST", "/api/v1/exemptions", fixed("/api/v1/exemptions"), `{"project":"ai101","user":"s-bob","until":"2026-12-12T00:00:00Z","reason":"thesis run"}`, "application/json", want{u401, made, made, made, f403}},
	{"DELETE", "/api/v1/exemptions/:id", withID("/api/v1/exemptions/%d", "exemption-alice"), "", "", want{u401, ok, ok, ok, f403}},
	{"POST", "/api/v1/held/release", fixed("/api/v1/held/release"), `{"instance":"MIG-1"}`, "application/json", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/exemption-requests", fixed("/api/v1/exemption-requests"), "", "", want{u401, ok, ok, ok, ok}},
	{"POST", "/api/v1/exemption-requests", fixed("/api/v1/exemption-requests"), `{"instance_id":"MIG-1","until":"2026-12-12T00:00:00Z","reason":"thesis run"}`, "application/json", want{u401, f403, f403, f403, made}},
	{"POST", "/api/v1/exemption-requests/:id/grant", withID("/api/v1/exemption-requests/%d/grant", "request-alice"), `{}`, "application/json", want{u401, ok, ok, ok, f403}},
	{"POST", "/api/v1/exemption-requests/:id/refuse", withID("/api/v1/exemption-requests/%d/refuse", "request-alice"), `{"reason":"the course needs the cards"}`, "application/json", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/budgets", fixed("/api/v1/budgets"), "", "", want{u401, ok, ok, ok, ok}},
	{"PUT", "/api/v1/budgets", fixed("/api/v1/budgets"), `{"scope":"student","project":"ai101","user":"s-alice","period":"month","unit":"money","limit":"120.50"}`, "application/json", want{u401, ok, ok, ok, f403}},
	{"DELETE", "/api/v1/budgets/:id", withID("/api/v1/budgets/%d", "budget-bob"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/audit", fixed("/api/v1/audit"), "", "", want{u401, ok, f403, f403, f403}},
	// Sign-in (a token changes nothing there: they are the browser's).
	{"GET", "/auth/providers", fixed("/auth/providers"), "", "", all200},
	{"GET", "/auth/session", fixed("/auth/session"), "", "", want{u401, u401, u401, u401, u401}},
	{"POST", "/auth/session/active", fixed("/auth/session/active"), `{"grant":0}`, "application/json", want{u401, u401, u401, u401, u401}},
	{"POST", "/auth/logout", fixed("/auth/logout"), "", "", want{u401, u401, u401, u401, u401}},
	{"GET", "/auth/login", fixed("/auth/login"), "", "", want{302, 302, 302, 302, 302}},
	{"GET", "/auth/callback", fixed("/auth/callback?state=x&code=code-root"), "", "", want{f403, f403, f403, f403, f403}},
	{"POST", "/auth/ldap", fixed("/auth/ldap"), "user=t0042&password=x", "application/x-www-form-urlencoded", want{f403, f403, f403, f403, f403}},
	{"GET", "/auth/cas/login", fixed("/auth/cas/login"), "", "", want{302, 302, 302, 302, 302}},
	{"GET", "/auth/cas/callback", fixed("/auth/cas/callback?state=x&ticket=ST-root"), "", "", want{f403, f403, f403, f403, f403}},
	{"GET", "/auth/demo", fixed("/auth/demo?as=9"), "", "", want{f403, f403, f403, f403, f403}},
}

// isSignInPage: the /auth routes answer a browser's refused sign-in with a
// page, not problem details.
func isSignInPage(r response) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") && strings.Contains(string(r.Body), `id="signin-page"`)
}

// failedDelivery is the re-send URL of the fixture's delivery failed for good.
// (found once: the URL is asked for again after the re-send).
func failedDelivery(f *fixture) string {
	if _, ok := f.ids["delivery-failed"]; !ok {
		ds, _, err := f.led.Deliveries(context.Background(), ledger.DeliveryFilter{Status: ledger.DeliveryFailed})
		require.NoError(f.t, err)
		require.Len(f.t, ds, 1)
		f.ids["delivery-failed"] = ds[0].ID
	}
	return fmt.Sprintf("/api/v1/deliveries/%d/resend", f.ids["delivery-failed"])
}

func TestRoleRouteTable(t *testing.T) {
	for _, rc := range routeTable {
		for i, role := range roles {
			t.Run(rc.method+" "+rc.route+" as "+role, func(t *testing.T) {
				f := newFixture(t)
				body := rc.bodyFor(f)
				r := f.do(role, rc.method, rc.url(f), body, rc.ctype)
				require.Equal(t, rc.want[i], r.Status, "%s %s as %s: %s", rc.method, rc.url(f), role, r.Body)
				if r.Status >= 400 && strings.HasPrefix(rc.route, "/auth/") && r.Status == f403 {
					require.True(t, isSignInPage(r), "a refused sign-in is the sign-in page: %s", r.Body)
				} else if r.Status >= 400 {
					require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), string(r.Body))
					p := r.json(t)
					require.Contains(t, []string{"https://cardhour.dev/problems/unauthorized", "https://cardhour.dev/problems/forbidden"}, p["type"])
					require.NotEmpty(t, p["request_id"])
				}
			})
		}
	}
}

// TestRoleRouteTableWithSessions runs the table's API rows as people signed
// in with a session of each role's grant: the same statuses as the tokens;
// and every request that changes something and is allowed, made without
// the session's CSRF token (or with another session's), is 403.
func TestRoleRouteTableWithSessions(t *testing.T) {
	grants := map[string]ledger.Grant{"admin": {Role: ledger.RoleAdmin}, "finance": {Role: ledger.RoleFinance},
		"lead": {Role: ledger.RoleLead, Project: "ai101"}, "student": {Role: ledger.RoleStudent, Project: "ai101", User: "s-alice"}}
	for _, rc := range routeTable {
		if !strings.HasPrefix(rc.route, "/api/v1/") || strings.HasPrefix(rc.route, "/api/v1/openapi") {
			continue
		}
		for i, role := range roles[1:] {
			t.Run(rc.method+" "+rc.route+" as "+role, func(t *testing.T) {
				f := newFixture(t)
				body := rc.bodyFor(f)
				secret, sess, err := f.led.CreateSession(context.Background(), ledger.NewSession{Person: "oidc:" + role, Grants: []ledger.Grant{grants[role]},
					Idle: time.Hour, TTL: 2 * time.Hour})
				require.NoError(t, err)
				b := &browser{f: f, cookie: secret}
				changes := rc.method != "GET" && rc.method != "HEAD"
				if changes && rc.want[i+1] < 400 {
					other, _, err := f.led.CreateSession(context.Background(), ledger.NewSession{Person: "oidc:other", Grants: []ledger.Grant{grants[role]}, Idle: time.Hour, TTL: 2 * time.Hour})
					require.NoError(t, err)
					otherSess, err := f.led.LookupSession(context.Background(), other)
					require.NoError(t, err)
					for _, csrf := range []string{"", otherSess.CSRF} {
						w := b.do(rc.method, rc.url(f), body, rc.ctype, map[string]string{"X-CSRF-Token": csrf})
						require.Equal(t, f403, w.Code, "%s %s as %s with CSRF %q: %s", rc.method, rc.url(f), role, csrf, w.Body)
					}
				}
				hdr := map[string]string{}
				if changes {
					hdr["X-CSRF-Token"] = sess.CSRF
				}
				w := b.do(rc.method, rc.url(f), body, rc.ctype, hdr)
				require.Equal(t, rc.want[i+1], w.Code, "%s %s as %s (session): %s", rc.method, rc.url(f), role, w.Body)
			})
		}
	}
}

// TestEveryRouteHasARow walks the router: a route without a row in the table
// (or a row without a route) fails.
func TestEveryRouteHasARow(t *testing.T) {
	f := newFixture(t)
	var have, rows []string
	for _, r := range f.srv.Engine().Routes() {
		have = append(have, r.Method+" "+r.Path)
	}
	for _, rc := range routeTable {
		rows = append(rows, rc.method+" "+rc.route)
	}
	sort.Strings(have)
	sort.Strings(rows)
	require.Equal(t, have, rows, "every route needs a row in routeTable (and every row a route)")
}

// legacyLedger answers one token as a student token without a project, as
// tokens made before every student token had to name one were stored.
type legacyLedger struct {
	ledger.Store
	secret string
}

func (l legacyLedger) LookupToken(ctx context.Context, secret string) (ledger.Token, error) {
	t, err := l.Store.LookupToken(ctx, secret)
	if err == nil && secret == l.secret {
		t.Project = ""
	}
	return t, err
}

// crossProject is, per route of the role × route table, requests of project
// B's data (nlp-lab, s-carol's lines there, its invoices, alerts,
// exemptions and budgets) made with a student token of project A.
var crossProject = map[string][]struct{ url, body, ctype string }{
	"GET /healthz":                           {{"/healthz", "", ""}},
	"GET /readyz":                            {{"/readyz", "", ""}},
	"GET /metrics":                           {{"/metrics", "", ""}},
	"GET /":                                  {{"/", "", ""}},
	"GET /ui/*file":                          {{"/ui/", "", ""}},
	"HEAD /ui/*file":                         {{"/ui/app.js", "", ""}},
	"GET /api/v1/openapi.json":               {{"/api/v1/openapi.json", "", ""}},
	"GET /api/v1/openapi.yaml":               {{"/api/v1/openapi.yaml", "", ""}},
	"GET /api/v1/openapi-3.0.json":           {{"/api/v1/openapi-3.0.json", "", ""}},
	"GET /api/v1/openapi-3.0.yaml":           {{"/api/v1/openapi-3.0.yaml", "", ""}},
	"GET /api/v1/me":                         {{"/api/v1/me", "", ""}},
	"GET /auth/providers":                    {{"/auth/providers", "", ""}},
	"GET /auth/session":                      {{"/auth/session", "", ""}},
	"POST /auth/session/active":              {{"/auth/session/active", `{"grant":0}`, "application/json"}},
	"POST /auth/logout":                      {{"/auth/logout", "", ""}},
	"GET /auth/login":                        {{"/auth/login", "", ""}},
	"GET /auth/callback":                     {{"/auth/callback?state=x&code=code-t0042", "", ""}},
	"POST /auth/ldap":                        {{"/auth/ldap", "user=t0042&password=lead-pass", "application/x-www-form-urlencoded"}},
	"GET /auth/cas/login":                    {{"/auth/cas/login", "", ""}},
	"GET /auth/cas/callback":                 {{"/auth/cas/callback?state=x&ticket=ST-t0042", "", ""}},
	"GET /auth/demo":                         {{"/auth/demo?as=0", "", ""}},
	"GET /api/v1/catalog":                    {{"/api/v1/catalog", "", ""}},
	"GET /api/v1/catalog/versions":           {{"/api/v1/catalog/versions", "", ""}},
	"GET /api/v1/catalog/versions/:version":  {{"/api/v1/catalog/versions/1", "", ""}},
	"PUT /api/v1/catalog":                    {{"/api/v1/catalog", "catalog", "application/yaml"}},
	"GET /api/v1/projects":                   {{"/api/v1/projects", "", ""}},
	"GET /api/v1/projects/:project/students": {{"/api/v1/projects/nlp-lab/students", "", ""}},
	"POST /api/v1/projects/:project/roster":  {{"/api/v1/projects/nlp-lab/roster", "student_id,name\ns-carol,Carol\n", "text/csv"}},
	"GET /api/v1/occupancy":                  {{"/api/v1/occupancy?period=2026-11", "", ""}},
	"GET /api/v1/utilization/heatmap": {{"/api/v1/utilization/heatmap?period=2026-11", "", ""},
		{"/api/v1/utilization/heatmap?period=2026-11&rows=2&node_from=gpu-node-1&node_to=gpu-node-2&node_prefix=gpu", "", ""}},
	"GET /api/v1/usage": {{"/api/v1/usage?period=2026-11&group_by=project,user", "", ""},
		{"/api/v1/usage?period=2026-11&group_by=project&project=nlp-lab", "", ""}},
	"GET /api/v1/usage/export": {{"/api/v1/usage/export?period=2026-11&group_by=project,user&format=csv", "", ""},
		{"/api/v1/usage/export?period=2026-11&group_by=month,project&project=nlp-lab&format=csv", "", ""}},
	"GET /api/v1/held":          {{"/api/v1/held", "", ""}, {"/api/v1/held?project=nlp-lab", "", ""}},
	"GET /api/v1/nodes":         {{"/api/v1/nodes", "", ""}, {"/api/v1/nodes?project=nlp-lab", "", ""}, {"/api/v1/nodes?user=s-carol", "", ""}},
	"GET /api/v1/advice":        {{"/api/v1/advice?project=nlp-lab", "", ""}},
	"POST /api/v1/billing-runs": {{"/api/v1/billing-runs", `{"period":"2026-11"}`, "application/json"}},
	"GET /api/v1/invoices":      {{"/api/v1/invoices?project=nlp-lab", "", ""}},
	"GET /api/v1/invoices/:id":  {{"/api/v1/invoices/{inv-nov-nlp}", "", ""}},
	"POST /api/v1/invoices/:id/finalize": {{"/api/v1/invoices/{inv-nov-nlp}/finalize",
		`{"if_sha256":"0000000000000000000000000000000000000000000000000000000000000000"}`, "application/json"}},
	"POST /api/v1/invoices/:id/void":        {{"/api/v1/invoices/{inv-nov-nlp}/void", `{"reason":"x"}`, "application/json"}},
	"GET /api/v1/invoices/:id/credit-notes": {{"/api/v1/invoices/{inv-nov-nlp}/credit-notes", "", ""}},
	"GET /api/v1/invoices/:id/export":       {{"/api/v1/invoices/{inv-nov-nlp}/export?format=json", "", ""}},
	// Staff only: a student is refused whatever credit note it names.
	"GET /api/v1/credit-notes/:id/export":              {{"/api/v1/credit-notes/1/export?format=json", "", ""}},
	"GET /api/v1/deliveries":                           {{"/api/v1/deliveries?status=failed", "", ""}},
	"GET /api/v1/deliveries/backlog":                   {{"/api/v1/deliveries/backlog", "", ""}},
	"POST /api/v1/deliveries/:id/resend":               {{"/api/v1/deliveries/1/resend", "", ""}},
	"GET /api/v1/invoices/:id/statements/:user":        {{"/api/v1/invoices/{inv-nov-nlp}/statements/s-carol", "", ""}},
	"GET /api/v1/invoices/:id/statements/:user/export": {{"/api/v1/invoices/{inv-nov-nlp}/statements/s-carol/export?format=json", "", ""}},
	"GET /api/v1/statements": {{"/api/v1/statements?user=s-carol", "", ""}, {"/api/v1/statements", "", ""},
		{"/api/v1/statements?user=s-carol&project=nlp-lab", "", ""}},
	"GET /api/v1/periods/:period/export":  {{"/api/v1/periods/2026-11/export?format=json", "", ""}},
	"GET /api/v1/periods/:period/summary": {{"/api/v1/periods/2026-11/summary", "", ""}},
	"GET /api/v1/review":                  {{"/api/v1/review?period=2026-11", "", ""}},
	"GET /api/v1/review/export":           {{"/api/v1/review/export?period=2026-11&format=csv", "", ""}},
	"POST /api/v1/invoices/:id/approve": {{"/api/v1/invoices/{inv-nov-nlp}/approve",
		`{"if_sha256":"0000000000000000000000000000000000000000000000000000000000000000"}`, "application/json"}},
	"POST /api/v1/periods/:period/finalize": {{"/api/v1/periods/2026-11/finalize", `{"items":[{"id":1,"if_sha256":"0000000000000000000000000000000000000000000000000000000000000000"}]}`, "application/json"}},
	"POST /api/v1/tokens":                   {{"/api/v1/tokens", `{"role":"student","project":"nlp-lab","user":"s-carol"}`, "application/json"}},
	"GET /api/v1/tokens":                    {{"/api/v1/tokens", "", ""}},
	"DELETE /api/v1/tokens/:id":             {{"/api/v1/tokens/{spare-token}", "", ""}},
	"GET /api/v1/alerts":                    {{"/api/v1/alerts", "", ""}, {"/api/v1/alerts?project=nlp-lab", "", ""}},
	"POST /api/v1/alerts/:id/ack":           {{"/api/v1/alerts/{alert-carol}/ack", "", ""}},
	"GET /api/v1/alerts/:id/deliveries":     {{"/api/v1/alerts/{alert-carol}/deliveries", "", ""}},
	"GET /api/v1/releases":                  {{"/api/v1/releases", "", ""}, {"/api/v1/releases?project=nlp-lab", "", ""}},
	"GET /api/v1/exemptions":                {{"/api/v1/exemptions", "", ""}, {"/api/v1/exemptions?project=nlp-lab", "", ""}},
	"POST /api/v1/exemptions":               {{"/api/v1/exemptions", `{"project":"nlp-lab","user":"s-carol","until":"2026-12-12T00:00:00Z","reason":"x"}`, "application/json"}},
	"DELETE /api/v1/exemptions/:id":         {{"/api/v1/exemptions/{exemption-nlp}", "", ""}},
	"GET /api/v1/budgets":                   {{"/api/v1/budgets", "", ""}, {"/api/v1/budgets?project=nlp-lab", "", ""}},
	"POST /api/v1/held/release":             {{"/api/v1/held/release", `{"instance":"GPU-3"}`, "application/json"}},
	"GET /api/v1/exemption-requests": {{"/api/v1/exemption-requests", "", ""}, {"/api/v1/exemption-requests?project=nlp-lab", "", ""},
		{"/api/v1/exemption-requests?user=s-carol", "", ""}},
	// A student asks in its own project only (201 there, nothing of B).
	"POST /api/v1/exemption-requests":            {{"/api/v1/exemption-requests", `{"until":"2026-12-12T00:00:00Z","reason":"x"}`, "application/json"}},
	"POST /api/v1/exemption-requests/:id/grant":  {{"/api/v1/exemption-requests/{request-carol}/grant", `{}`, "application/json"}},
	"POST /api/v1/exemption-requests/:id/refuse": {{"/api/v1/exemption-requests/{request-carol}/refuse", `{"reason":"x"}`, "application/json"}},
	"PUT /api/v1/budgets":                        {{"/api/v1/budgets", `{"scope":"student","project":"nlp-lab","user":"s-carol","period":"month","unit":"money","limit":"1"}`, "application/json"}},
	"DELETE /api/v1/budgets/:id":                 {{"/api/v1/budgets/{budget-carol}", "", ""}},
	"GET /api/v1/audit":                          {{"/api/v1/audit", "", ""}},
}

// What names project B (nlp-lab) in an answer: its ID, its name and funding
// code in the catalog.
var projectBMarks = []string{"nlp-lab", "NLP Lab", "NSFC-62276001"}

// A student token of project A (ai101) whose user (s-carol) also has lines,
// an alert and a budget in project B (nlp-lab) gets nothing of B on any
// route: 403 or 404, or a list without B. Both a token made today (with its
// project) and one stored without a project (tokens made before a student
// token had to name one) are checked; the second sees nothing at all.
func TestStudentOfProjectASeesNothingOfB(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b, err := f.led.PutBudget(ctx, "cli:test", ledger.Budget{Scope: billing.BudgetStudent, Project: "nlp-lab", User: "s-carol",
		Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "80"})
	require.NoError(t, err)
	f.ids["budget-carol"] = b.ID
	for _, name := range []string{"student-a", "student-legacy"} {
		secret, _, err := f.led.CreateToken(ctx, "cli:test", ledger.NewToken{Role: ledger.RoleStudent, Project: "ai101", User: "s-carol", Name: name, TTL: time.Hour})
		require.NoError(t, err)
		f.tokens[name] = secret
	}
	f.srv, err = api.New(api.Config{Ledger: legacyLedger{f.led, f.tokens["student-legacy"]}, Usage: f.usage, UsagePing: f.usage.ping,
		Invoicing: f.flow, Advice: fakeAdvisor{}, Clock: func() time.Time { return now }, MaxBodyBytes: 1 << 20})
	require.NoError(t, err)
	f.srv.MarkServing(true)
	f.h = f.srv.Handler()

	// Project B's data is there to leak: an admin sees it.
	for _, u := range []string{"/api/v1/projects", "/api/v1/exemptions", "/api/v1/budgets", "/api/v1/alerts",
		"/api/v1/statements?user=s-carol", fmt.Sprintf("/api/v1/invoices/%d/statements/s-carol", f.ids["inv-nov-nlp"])} {
		r := f.do("admin", "GET", u, "", "")
		require.Equal(t, 200, r.Status, "%s: %s", u, r.Body)
		require.Contains(t, string(r.Body), "nlp-lab", u)
	}

	var routes []string
	for _, r := range f.srv.Engine().Routes() {
		routes = append(routes, r.Method+" "+r.Path)
	}
	sort.Strings(routes)
	for _, route := range routes {
		reqs, okRow := crossProject[route]
		require.True(t, okRow, "route %s has no cross-project request in crossProject", route)
		for _, rq := range reqs {
			url := rq.url
			for name, id := range f.ids {
				url = strings.ReplaceAll(url, "{"+name+"}", fmt.Sprint(id))
			}
			body := rq.body
			if body == "catalog" {
				body = changedCatalog(f)
			}
			method, _, _ := strings.Cut(route, " ")
			for _, tok := range []string{"student-a", "student-legacy"} {
				r := f.do(tok, method, url, body, rq.ctype)
				what := fmt.Sprintf("%s %s as %s → %d: %s", method, url, tok, r.Status, r.Body)
				allowed := []int{200, 302, 403, 404}
				if route == "POST /api/v1/exemption-requests" && tok == "student-a" {
					allowed = append(allowed, 201) // its own request, in its own project
				}
				if strings.HasPrefix(url, "/auth/") {
					allowed = append(allowed, 401, 303) // not signed in; a sign-in as someone else
				}
				require.Contains(t, allowed, r.Status, what)
				if r.Status < 400 { // a refusal echoes the path asked for, nothing more
					for _, m := range projectBMarks {
						require.NotContains(t, string(r.Body), m, what)
					}
				}
				if tok == "student-legacy" && strings.HasPrefix(url, "/api/v1/") && !strings.HasPrefix(url, "/api/v1/openapi") {
					require.Equal(t, 403, r.Status, what)
				}
			}
		}
	}
	for route := range crossProject {
		require.Contains(t, routes, route, "crossProject names a route the router does not have")
	}

	// The token without a project is told what to do.
	r := f.do("student-legacy", "GET", "/api/v1/me", "", "")
	require.Equal(t, 403, r.Status)
	require.Contains(t, r.json(t)["detail"], "--project")
	// The scoped token still sees its own project.
	r = f.do("student-a", "GET", "/api/v1/projects", "", "")
	require.Equal(t, 200, r.Status)
	require.Contains(t, string(r.Body), `"id":"ai101"`)
}

// Neither the API nor the ledger makes a student token without a project.
func TestStudentTokenNeedsProject(t *testing.T) {
	f := newFixture(t)
	r := f.do("admin", "POST", "/api/v1/tokens", `{"role":"student","user":"s-dave"}`, "application/json")
	require.Equal(t, 422, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), "role student needs a project")
	r = f.do("admin", "POST", "/api/v1/tokens", `{"role":"student","project":"ai101","user":"s-dave"}`, "application/json")
	require.Equal(t, 201, r.Status, string(r.Body))
}
