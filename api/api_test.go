package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A student's responses never hold another student's ID, name or cost,
// whatever they ask for: asking for another user is 403, and every list
// and document is filtered on the server.
func TestStudentSeesNoOtherStudent(t *testing.T) {
	f := newFixture(t)
	oct, nov := f.ids["inv-oct-ai101"], f.ids["inv-nov-ai101"]
	secrets := []string{"s-bob", "Bob Li", "7.13", "s-carol", "Carol Wu", "3.21"}
	allowed := []string{
		"/api/v1/me",
		"/api/v1/projects",
		"/api/v1/usage?period=2026-11",
		"/api/v1/usage?period=2026-11&group_by=project,user,sku,node,day",
		"/api/v1/usage?period=2026-11&group_by=user&project=ai101",
		"/api/v1/usage?from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z&group_by=user&user=s-alice",
		"/api/v1/held",
		"/api/v1/held?project=ai101",
		"/api/v1/nodes",
		"/api/v1/nodes?project=ai101&user=s-alice",
		fmt.Sprintf("/api/v1/invoices/%d/statements/s-alice", oct),
		fmt.Sprintf("/api/v1/invoices/%d/statements/s-alice", nov),
		fmt.Sprintf("/api/v1/invoices/%d/statements/s-alice/export?format=json", oct),
		fmt.Sprintf("/api/v1/invoices/%d/statements/s-alice/export?format=csv", nov),
		"/api/v1/statements",
		"/api/v1/statements?user=s-alice&period=2026-10",
	}
	for _, u := range allowed {
		r := f.do("student", "GET", u, "", "")
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", u, r.Body)
		for _, s := range secrets {
			require.NotContains(t, string(r.Body), s, "%s leaks %q: %s", u, s, r.Body)
		}
	}
	refused := []string{
		"/api/v1/usage?period=2026-11&user=s-bob",
		"/api/v1/usage?period=2026-11&user=s-alice,s-bob",
		"/api/v1/usage?period=2026-11&project=nlp-lab",
		"/api/v1/held?user=s-bob",
		"/api/v1/held?project=nlp-lab",
		"/api/v1/nodes?user=s-bob",
		"/api/v1/nodes?project=nlp-lab",
		fmt.Sprintf("/api/v1/invoices/%d/statements/s-bob", oct),
		fmt.Sprintf("/api/v1/invoices/%d/statements/s-bob/export?format=csv", oct),
		fmt.Sprintf("/api/v1/invoices/%d/statements/s-carol", f.ids["inv-nov-nlp"]),
		"/api/v1/statements?user=s-bob",
		"/api/v1/statements?project=nlp-lab",
		fmt.Sprintf("/api/v1/invoices/%d", oct),
		fmt.Sprintf("/api/v1/invoices/%d/export?format=json", oct),
		"/api/v1/invoices",
		"/api/v1/projects/ai101/students",
		"/api/v1/audit",
	}
	for _, u := range refused {
		r := f.do("student", "GET", u, "", "")
		require.Equal(t, http.StatusForbidden, r.Status, "%s: %s", u, r.Body)
		for _, s := range secrets {
			require.NotContains(t, string(r.Body), s, "%s: the refusal names %q", u, s)
		}
	}
}

// A lead sees only its project.
func TestLeadIsLimitedToItsProject(t *testing.T) {
	f := newFixture(t)
	r := f.do("lead", "GET", "/api/v1/invoices?period=2026-11", "", "")
	require.Equal(t, 200, r.Status)
	require.Contains(t, string(r.Body), `"ai101"`)
	require.NotContains(t, string(r.Body), "nlp-lab")
	for _, u := range []string{
		"/api/v1/invoices?project=nlp-lab",
		fmt.Sprintf("/api/v1/invoices/%d", f.ids["inv-nov-nlp"]),
		"/api/v1/usage?period=2026-11&project=nlp-lab",
		"/api/v1/projects/nlp-lab/students",
	} {
		require.Equal(t, 403, f.do("lead", "GET", u, "", "").Status, u)
	}
	r = f.do("lead", "GET", "/api/v1/usage?period=2026-11&group_by=project", "", "")
	require.Equal(t, 200, r.Status)
	require.NotContains(t, string(r.Body), "nlp-lab")
}

func problemOf(t *testing.T, r response) map[string]any {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), string(r.Body))
	p := r.json(t)
	require.EqualValues(t, r.Status, p["status"])
	require.NotEmpty(t, p["request_id"])
	return p
}

func TestProblemTypes(t *testing.T) {
	f := newFixture(t)
	nov, oct := f.ids["inv-nov-ai101"], f.ids["inv-oct-ai101"]
	cases := []struct {
		name, method, url, body, ctype string
		status                         int
		typ                            string
	}{
		{"no such invoice", "GET", "/api/v1/invoices/999", "", "", 404, "not-found"},
		{"no such route", "GET", "/api/v1/nothing", "", "", 404, "not-found"},
		{"bad id", "GET", "/api/v1/invoices/x", "", "", 422, "validation"},
		{"bad period", "GET", "/api/v1/usage?period=2026-13", "", "", 422, "validation"},
		{"bad cursor", "GET", "/api/v1/invoices?cursor=zz", "", "", 400, "bad-cursor"},
		{"period and range", "GET", "/api/v1/usage?period=2026-11&from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z", "", "", 422, "validation"},
		{"group twice", "GET", "/api/v1/usage?period=2026-11&group_by=day,day", "", "", 422, "validation"},
		{"unknown group", "GET", "/api/v1/usage?period=2026-11&group_by=colour", "", "", 422, "validation"},
		{"stale sha", "POST", fmt.Sprintf("/api/v1/invoices/%d/finalize", nov), `{"if_sha256":"` + strings.Repeat("0", 64) + `"}`, "application/json", 409, "conflict"},
		{"void a draft", "POST", fmt.Sprintf("/api/v1/invoices/%d/void", nov), `{"reason":"x"}`, "application/json", 409, "invalid-transition"},
		{"finalize twice", "POST", fmt.Sprintf("/api/v1/invoices/%d/finalize", oct), `{"if_sha256":"` + strings.Repeat("0", 64) + `"}`, "application/json", 409, "invalid-transition"},
		{"bad token role", "POST", "/api/v1/tokens", `{"role":"lead"}`, "application/json", 422, "validation"},
		{"token of a project not in the catalog", "POST", "/api/v1/tokens", `{"role":"lead","project":"nosuch"}`, "application/json", 422, "validation"},
		{"bad json", "POST", "/api/v1/billing-runs", `{"period":`, "application/json", 400, "bad-request"},
		{"too large", "PUT", "/api/v1/catalog", strings.Repeat("#", 2<<20), "application/yaml", 413, "too-large"},
		{"wrong method", "PATCH", "/api/v1/catalog", "", "", 405, "method-not-allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do("admin", c.method, c.url, c.body, c.ctype)
			require.Equal(t, c.status, r.Status, string(r.Body))
			p := problemOf(t, r)
			require.Equal(t, "https://cardhour.dev/problems/"+c.typ, p["type"], string(r.Body))
		})
	}
}

func TestGracePeriodProblem(t *testing.T) {
	f := newFixture(t)
	f.flow.now = func() time.Time { return time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC) }
	id := f.ids["inv-nov-ai101"]
	r := f.do("finance", "POST", fmt.Sprintf("/api/v1/invoices/%d/finalize", id), fmt.Sprintf(`{"if_sha256":%q}`, f.sha[id]), "application/json")
	require.Equal(t, 409, r.Status, string(r.Body))
	require.Equal(t, "https://cardhour.dev/problems/grace-period", problemOf(t, r)["type"])
}

// A catalog upload is validated like bill does; the problem names each
// error's line and field.
func TestCatalogUploadErrorsNameLineAndField(t *testing.T) {
	f := newFixture(t)
	bad := strings.Replace(string(catalogYAML(t)), "timezone: Asia/Shanghai", "timezone: Mars/Olympus", 1)
	r := f.do("admin", "PUT", "/api/v1/catalog", bad, "application/yaml")
	require.Equal(t, 422, r.Status, string(r.Body))
	p := problemOf(t, r)
	errs, _ := p["errors"].([]any)
	require.NotEmpty(t, errs)
	first := errs[0].(map[string]any)
	require.EqualValues(t, 5, first["line"], string(r.Body))
	require.Equal(t, "timezone", first["field"], string(r.Body))

	// A valid upload makes version 2, audited as the token; the same again
	// makes none.
	good := changedCatalog(f)
	r = f.do("admin", "PUT", "/api/v1/catalog", good, "application/yaml")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, true, r.json(t)["created"])
	require.EqualValues(t, 2, r.json(t)["version"])
	r = f.do("admin", "PUT", "/api/v1/catalog", good, "application/yaml")
	require.Equal(t, false, r.json(t)["created"])
	a := f.do("admin", "GET", "/api/v1/audit?action=catalog.upload", "", "")
	require.Equal(t, 200, a.Status, string(a.Body))
	require.Contains(t, string(a.Body), `"actor":"token:`)
}

func TestRequestIDAndMetrics(t *testing.T) {
	f := newFixture(t)
	req := httptest.NewRequest("GET", fmt.Sprintf("/api/v1/invoices/%d", f.ids["inv-nov-ai101"]), nil)
	req.Header.Set("X-Request-ID", "finance-pull-42")
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	require.Equal(t, 401, w.Code)
	require.Equal(t, "finance-pull-42", w.Header().Get("X-Request-ID"))
	require.Contains(t, w.Body.String(), `"request_id":"finance-pull-42"`)

	r := f.do("admin", "GET", "/api/v1/me", "", "")
	require.Len(t, r.Header.Get("X-Request-ID"), 24)

	m := f.do("anonymous", "GET", "/metrics", "", "")
	body := string(m.Body)
	require.Contains(t, body, `cardhour_http_requests_total{code="401",method="GET",route="/api/v1/invoices/:id"} 1`)
	require.Contains(t, body, `cardhour_http_request_duration_seconds_bucket{method="GET",route="/api/v1/me"`)
	require.NotContains(t, body, fmt.Sprintf("/api/v1/invoices/%d", f.ids["inv-nov-ai101"]), "raw paths are never labels")
}

func TestReadyz(t *testing.T) {
	f := newFixture(t)
	require.Equal(t, 200, f.do("", "GET", "/readyz", "", "").Status)
	f.usage.down = true
	r := f.do("", "GET", "/readyz", "", "")
	require.Equal(t, 503, r.Status)
	require.Contains(t, string(r.Body), "usage store down")
	f.srv.MarkServing(false)
	require.Equal(t, 503, f.do("", "GET", "/healthz", "", "").Status)
}

// Lists page with an opaque cursor.
func TestPagination(t *testing.T) {
	f := newFixture(t)
	seen := map[string]bool{}
	url := "/api/v1/audit?limit=2"
	pages := 0
	for {
		r := f.do("admin", "GET", url, "", "")
		require.Equal(t, 200, r.Status, string(r.Body))
		m := r.json(t)
		items := m["items"].([]any)
		require.LessOrEqual(t, len(items), 2)
		for _, it := range items {
			id := fmt.Sprint(it.(map[string]any)["id"])
			require.False(t, seen[id], "entry %s twice", id)
			seen[id] = true
		}
		pages++
		next := m["next_cursor"].(string)
		if next == "" {
			break
		}
		url = "/api/v1/audit?limit=2&cursor=" + next
	}
	require.Greater(t, pages, 2)
	require.Greater(t, len(seen), 4)

	r := f.do("admin", "GET", "/api/v1/usage?period=2026-11&group_by=user&limit=2", "", "")
	m := r.json(t)
	require.Len(t, m["rows"], 2)
	next := m["next_cursor"].(string)
	require.NotEmpty(t, next)
	r = f.do("admin", "GET", "/api/v1/usage?period=2026-11&group_by=user&limit=2&cursor="+next, "", "")
	m = r.json(t)
	require.Len(t, m["rows"], 1)
	require.Equal(t, "", m["next_cursor"])
}

// The finance flow end to end: run, list drafts, finalize the reviewed
// one, export it; the export of a finalized invoice does not change.
func TestFinanceFlow(t *testing.T) {
	f := newFixture(t)
	r := f.do("finance", "POST", "/api/v1/billing-runs", `{"period":"2026-11"}`, "application/json")
	require.Equal(t, 200, r.Status, string(r.Body))
	r = f.do("finance", "GET", "/api/v1/invoices?period=2026-11&status=draft&project=ai101", "", "")
	items := r.json(t)["items"].([]any)
	require.Len(t, items, 1)
	inv := items[0].(map[string]any)
	id, sha := int64(inv["id"].(float64)), inv["sha256"].(string)
	r = f.do("finance", "POST", fmt.Sprintf("/api/v1/invoices/%d/finalize", id), fmt.Sprintf(`{"if_sha256":%q}`, sha), "application/json")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, "finalized", r.json(t)["status"])
	require.NotEmpty(t, r.json(t)["number"])
	e1 := f.do("finance", "GET", fmt.Sprintf("/api/v1/invoices/%d/export?format=csv", id), "", "")
	require.Equal(t, 200, e1.Status)
	require.Equal(t, "text/csv; charset=utf-8", e1.Header.Get("Content-Type"))
	require.Contains(t, e1.Header.Get("Content-Disposition"), "invoice-2026-")
	_ = f.do("finance", "POST", "/api/v1/billing-runs", `{"period":"2026-11"}`, "application/json")
	e2 := f.do("finance", "GET", fmt.Sprintf("/api/v1/invoices/%d/export?format=csv", id), "", "")
	require.Equal(t, e1.Body, e2.Body)
	a := f.do("admin", "GET", "/api/v1/audit?action=invoice.finalize", "", "")
	require.Contains(t, string(a.Body), `"actor":"token:`)
}

// The statements list: a student's own invoices with lines, with the
// student's total, which is the total of the statement itself; staff name
// the student.
func TestStatementsList(t *testing.T) {
	f := newFixture(t)
	r := f.do("student", "GET", "/api/v1/statements", "", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	var page struct {
		Items []struct {
			InvoiceID int64  `json:"invoice_id"`
			Project   string `json:"project"`
			Period    string `json:"period"`
			User      string `json:"user"`
			Total     string `json:"total"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &page))
	require.NotEmpty(t, page.Items)
	ids := map[int64]bool{}
	for _, it := range page.Items {
		require.Equal(t, "ai101", it.Project)
		require.Equal(t, "s-alice", it.User)
		ids[it.InvoiceID] = true
		one := f.do("student", "GET", fmt.Sprintf("/api/v1/invoices/%d/statements/s-alice", it.InvoiceID), "", "")
		require.Equal(t, http.StatusOK, one.Status)
		var st struct {
			Document struct {
				Total string `json:"total"`
			} `json:"document"`
		}
		require.NoError(t, json.Unmarshal(one.Body, &st))
		require.Equal(t, st.Document.Total, it.Total, "the list's total is the statement's")
	}
	require.True(t, ids[f.ids["inv-oct-ai101"]], "October's invoice has alice's lines")

	r = f.do("finance", "GET", "/api/v1/statements", "", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "staff must name the student: %s", r.Body)
	r = f.do("finance", "GET", "/api/v1/statements?user=s-alice", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	r = f.do("finance", "GET", "/api/v1/statements?user=nobody", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.JSONEq(t, `{"items":[],"next_cursor":""}`, string(r.Body), "a user with no lines has no statements")
}
