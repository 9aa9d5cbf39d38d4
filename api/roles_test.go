package api_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

func fixed(u string) func(*fixture) string { return func(*fixture) string { return u } }

func withID(format, name string) func(*fixture) string {
	return func(f *fixture) string { return fmt.Sprintf(format, f.ids[name]) }
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
	{"GET", "/api/v1/held", fixed("/api/v1/held"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/advice", fixed("/api/v1/advice"), "", "", want{u401, ok, ok, ok, f403}},
	{"POST", "/api/v1/billing-runs", fixed("/api/v1/billing-runs"), `{"period":"2026-11"}`, "application/json", want{u401, ok, ok, f403, f403}},
	{"GET", "/api/v1/invoices", fixed("/api/v1/invoices?period=2026-11"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/invoices/:id", withID("/api/v1/invoices/%d", "inv-nov-ai101"), "", "", want{u401, ok, ok, ok, f403}},
	{"POST", "/api/v1/invoices/:id/finalize", withID("/api/v1/invoices/%d/finalize", "inv-nov-ai101"), "sha", "application/json", want{u401, ok, ok, f403, f403}},
	{"POST", "/api/v1/invoices/:id/void", withID("/api/v1/invoices/%d/void", "inv-oct-ai101"), `{"reason":"wrong catalog"}`, "application/json", want{u401, ok, ok, f403, f403}},
	{"GET", "/api/v1/invoices/:id/credit-notes", withID("/api/v1/invoices/%d/credit-notes", "inv-oct-ai101"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/invoices/:id/export", withID("/api/v1/invoices/%d/export?format=csv", "inv-oct-ai101"), "", "", want{u401, ok, ok, ok, f403}},
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
	{"GET", "/api/v1/releases", fixed("/api/v1/releases"), "", "", want{u401, ok, ok, ok, ok}},
	{"GET", "/api/v1/exemptions", fixed("/api/v1/exemptions"), "", "", want{u401, ok, ok, ok, ok}},
	{"POST", "/api/v1/exemptions", fixed("/api/v1/exemptions"), `{"project":"ai101","user":"s-bob","until":"2026-12-12T00:00:00Z","reason":"thesis run"}`, "application/json", want{u401, made, made, made, f403}},
	{"DELETE", "/api/v1/exemptions/:id", withID("/api/v1/exemptions/%d", "exemption-alice"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/budgets", fixed("/api/v1/budgets"), "", "", want{u401, ok, ok, ok, ok}},
	{"PUT", "/api/v1/budgets", fixed("/api/v1/budgets"), `{"scope":"student","project":"ai101","user":"s-alice","period":"month","unit":"money","limit":"120.50"}`, "application/json", want{u401, ok, ok, ok, f403}},
	{"DELETE", "/api/v1/budgets/:id", withID("/api/v1/budgets/%d", "budget-bob"), "", "", want{u401, ok, ok, ok, f403}},
	{"GET", "/api/v1/audit", fixed("/api/v1/audit"), "", "", want{u401, ok, f403, f403, f403}},
}

func TestRoleRouteTable(t *testing.T) {
	for _, rc := range routeTable {
		for i, role := range roles {
			t.Run(rc.method+" "+rc.route+" as "+role, func(t *testing.T) {
				f := newFixture(t)
				body := rc.body
				switch body {
				case "catalog":
					body = changedCatalog(f)
				case "sha":
					id := f.ids["inv-nov-ai101"]
					body = fmt.Sprintf(`{"if_sha256":%q}`, f.sha[id])
				}
				r := f.do(role, rc.method, rc.url(f), body, rc.ctype)
				require.Equal(t, rc.want[i], r.Status, "%s %s as %s: %s", rc.method, rc.url(f), role, r.Body)
				if r.Status >= 400 {
					require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), string(r.Body))
					p := r.json(t)
					require.Contains(t, []string{"https://cardhour.dev/problems/unauthorized", "https://cardhour.dev/problems/forbidden"}, p["type"])
					require.NotEmpty(t, p["request_id"])
				}
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
