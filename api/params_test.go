package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/require"
)

// The document and the server agree on every request below, each way: a
// request the document refuses is refused by the server (422 validation,
// naming the parameter), and one it allows is not refused as invalid. A
// cursor is an opaque string in the document; one the server did not make
// is the documented 400 bad-cursor. These are the disagreements
// schemathesis found (scripts/api-fuzz.sh runs it with every check).
func TestDocumentAndServerAgreeOnParameters(t *testing.T) {
	f := newFixture(t)
	r := f.do("", "GET", "/api/v1/openapi.json", "", "")
	doc, err := libopenapi.NewDocument(r.Body)
	require.NoError(t, err)
	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs)
	inv := f.ids["inv-nov-ai101"]
	cases := []struct {
		method, url, body string
		docValid          bool
		status            int    // what the server answers
		location          string // the problem names it (422)
	}{
		// empty values are not absent
		{"GET", "/api/v1/alerts?since=", "", false, 422, "query.since"},
		{"GET", "/api/v1/alerts?status=", "", false, 422, "query.status"},
		{"GET", "/api/v1/invoices?period=", "", false, 422, "query.period"},
		{"GET", "/api/v1/invoices?status=", "", false, 422, "query.status"},
		{"GET", fmt.Sprintf("/api/v1/invoices/%d/export?format=", inv), "", false, 422, "query.format"},
		{"GET", "/api/v1/usage?period=&group_by=project", "", false, 422, "query.period"},
		{"GET", "/api/v1/invoices?limit=", "", false, 422, "query.limit"},
		{"GET", "/api/v1/invoices?project=", "", true, 200, ""},
		// period years: 2000 to 2999
		{"GET", "/api/v1/invoices?period=0000-01", "", false, 422, "query.period"},
		{"GET", "/api/v1/usage?period=0000-01", "", false, 422, "query.period"},
		{"POST", "/api/v1/billing-runs", `{"period":"1970-01"}`, false, 422, "body.period"},
		{"GET", "/api/v1/periods/1999-12/export", "", false, 422, "path.period"},
		{"GET", "/api/v1/invoices?period=2000-01", "", true, 200, ""},
		// min_coverage is a share
		{"GET", "/api/v1/advice?min_coverage=lots", "", false, 422, "query.min_coverage"},
		{"GET", "/api/v1/advice?min_coverage=1.5", "", false, 422, "query.min_coverage"},
		{"GET", "/api/v1/advice?min_coverage=0.25", "", true, 200, ""},
		// free text without control characters
		{"POST", fmt.Sprintf("/api/v1/invoices/%d/void", f.ids["inv-oct-ai101"]), `{"reason":"wrong\u0000catalog"}`, false, 422, "body.reason"},
		{"POST", "/api/v1/exemptions", `{"project":"ai101","until":"2026-12-12T00:00:00Z","reason":"a\u0007b"}`, false, 422, "body.reason"},
		// A reason of white space only is no reason (the ledger trims it).
		{"POST", fmt.Sprintf("/api/v1/invoices/%d/void", f.ids["inv-oct-ai101"]), `{"reason":" \u3000\t"}`, false, 422, "body.reason"},
		{"POST", "/api/v1/exemptions", `{"project":"ai101","until":"2026-12-12T00:00:00Z","reason":"  "}`, false, 422, "body.reason"},
		// cursors are opaque: any string is valid in the document, the server
		// answers one it did not make with 400 bad-cursor
		{"GET", "/api/v1/invoices?cursor=anything", "", true, 400, ""},
		{"GET", "/api/v1/usage?period=2026-11&cursor=%00", "", true, 400, ""},
		{"GET", "/api/v1/audit?cursor=djE6MQ", "", true, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.url, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, "http://localhost"+c.url, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+f.tokens["admin"])
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if strings.HasSuffix(c.url, "since=") {
				// libopenapi-validator does not assert formats (schemathesis
				// does): the document says date-time, which "" is not.
				var since map[string]any
				for _, p := range r.json(t)["paths"].(map[string]any)["/api/v1/alerts"].(map[string]any)["get"].(map[string]any)["parameters"].([]any) {
					if p.(map[string]any)["name"] == "since" {
						since = p.(map[string]any)["schema"].(map[string]any)
					}
				}
				require.Equal(t, "date-time", since["format"])
			} else {
				docOK, verrs := v.ValidateHttpRequest(req)
				require.Equal(t, c.docValid, docOK, "the document on %s %s: %v", c.method, c.url, verrs)
			}
			res := f.do("admin", c.method, c.url, c.body, "application/json")
			require.Equal(t, c.status, res.Status, string(res.Body))
			switch {
			case c.status == 422:
				p := res.json(t)
				require.Equal(t, "https://cardhour.dev/problems/validation", p["type"])
				require.Contains(t, string(res.Body), `"location":"`+c.location+`"`, string(res.Body))
			case c.status == 400:
				p := res.json(t)
				require.Equal(t, "https://cardhour.dev/problems/bad-cursor", p["type"], string(res.Body))
				require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
			}
		})
	}
	// The 400 is documented on every list with a cursor.
	m := r.json(t)
	n := 0
	for path, item := range m["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			o := op.(map[string]any)
			params, _ := o["parameters"].([]any)
			for _, p := range params {
				if p.(map[string]any)["name"] == "cursor" {
					require.Contains(t, o["responses"], "400", "%s %s", method, path)
					n++
				}
			}
		}
	}
	require.GreaterOrEqual(t, n, 8)
}

// The document links the invoice lifecycle so that schemathesis' stateful
// phase (scripts/api-fuzz.sh) chains billing run -> draft -> finalize ->
// void -> finalize the reissue draft.
func TestDocumentLinksTheInvoiceLifecycle(t *testing.T) {
	f := newFixture(t)
	m := f.do("", "GET", "/api/v1/openapi.json", "", "").json(t)
	paths := m["paths"].(map[string]any)
	links := func(path, method string) map[string]any {
		op := paths[path].(map[string]any)[method].(map[string]any)
		l, _ := op["responses"].(map[string]any)["200"].(map[string]any)["links"].(map[string]any)
		return l
	}
	target := func(l map[string]any, name string) string {
		require.Contains(t, l, name)
		return l[name].(map[string]any)["operationId"].(string)
	}
	require.Equal(t, "finalize-invoice", target(links("/api/v1/billing-runs", "post"), "FinalizeFirstDraft"))
	require.Equal(t, "void-invoice", target(links("/api/v1/invoices/{id}/finalize", "post"), "Void"))
	l := links("/api/v1/invoices/{id}/void", "post")
	require.Equal(t, "finalize-invoice", target(l, "FinalizeReissue"))
	require.Equal(t, map[string]any{"if_sha256": "$response.body#/draft/sha256"}, l["FinalizeReissue"].(map[string]any)["requestBody"])
}
