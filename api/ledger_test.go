package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/ledger"
)

// tokenCatalogLedger is a state store of one lead token and one catalog
// version: the API's Ledger of just the concerns the routes below use (any
// other method would panic on the nil embedded interface).
type tokenCatalogLedger struct {
	api.Ledger
	catalog []byte
	reads   int
}

func (l *tokenCatalogLedger) LookupToken(_ context.Context, secret string) (ledger.Token, error) {
	if secret != "lead-secret" {
		return ledger.Token{}, ledger.ErrNotFound
	}
	return ledger.Token{ID: 1, Role: ledger.RoleLead, Project: "ai101", ExpiresAt: now.Add(time.Hour)}, nil
}

func (l *tokenCatalogLedger) CurrentCatalog(context.Context) (ledger.CatalogVersion, error) {
	l.reads++
	return ledger.CatalogVersion{Version: 1, Content: l.catalog}, nil
}

// The API runs over a fake of only the ledger concerns a route needs: the
// token lookup and the catalog, for a lead reading its identity and its
// project.
func TestTheAPIRunsOverASmallFakeLedger(t *testing.T) {
	led := &tokenCatalogLedger{catalog: catalogYAML(t)}
	srv, err := api.New(api.Config{Ledger: led, Clock: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	srv.MarkServing(true)
	get := func(path string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer lead-secret")
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	code, body := get("/api/v1/me")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"role":"lead"`)
	for range 2 {
		code, body = get("/api/v1/projects")
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `"id":"ai101"`)
		require.NotContains(t, body, `"id":"nlp-lab"`, "a lead sees its own project")
	}
	require.Equal(t, 2, led.reads, "the current catalog version is asked of the store for each request")
}

// recordsLedger is a state store that answers each record read with a
// fixed, fully populated record, for checking the JSON the API serves of
// the ledger's records byte by byte.
type recordsLedger struct {
	api.Ledger
}

var at = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func (recordsLedger) LookupToken(_ context.Context, secret string) (ledger.Token, error) {
	if secret != "admin-secret" {
		return ledger.Token{}, ledger.ErrNotFound
	}
	return ledger.Token{ID: 1, Role: ledger.RoleAdmin, CreatedBy: "cli:root", CreatedAt: at, ExpiresAt: at.Add(time.Hour)}, nil
}

func (recordsLedger) RevokeToken(_ context.Context, actor string, id int64) (ledger.Token, error) {
	return ledger.Token{ID: id, Role: ledger.RoleStudent, Project: "ai101", User: "s-alice", Name: "laptop",
		CreatedBy: "cli:root", CreatedAt: at, ExpiresAt: at.Add(time.Hour), RevokedBy: actor, RevokedAt: at.Add(time.Minute)}, nil
}

func (recordsLedger) Audit(context.Context, ledger.AuditFilter) ([]ledger.AuditEntry, string, error) {
	return []ledger.AuditEntry{
		{ID: 2, At: at, AuditRecord: ledger.AuditRecord{Actor: "token:1", Action: "token.revoke", Object: "token/7",
			Before: []byte(`{"revoked":false}`), After: []byte(`{"revoked":true}`)}},
		{ID: 1, At: at, AuditRecord: ledger.AuditRecord{Actor: "cli:root", Action: "config.set", Object: "config"}},
	}, "c2", nil
}

func (recordsLedger) Invoice(_ context.Context, id int64) (ledger.Invoice, error) {
	return ledger.Invoice{ID: id, InvoiceKey: ledger.InvoiceKey{Project: "ai101", Period: "2026-02", Revision: 1}, Status: ledger.StatusVoid, Number: "2026-000007"}, nil
}

func (recordsLedger) CreditNotes(_ context.Context, invoiceID int64) ([]ledger.CreditNote, error) {
	return []ledger.CreditNote{
		{ID: 3, InvoiceID: invoiceID, InvoiceNumber: "2026-000007", Number: "2026-000007-CN1", Reason: "wrong rate", CreatedBy: "token:1", CreatedAt: at,
			SHA256: "ab12", Document: []byte(`{ "schema": "cardhour.invoice.v1" }`)},
		{ID: 2, InvoiceID: invoiceID, InvoiceNumber: "2026-000007", Number: "2026-000007-CN0", Reason: "old", CreatedBy: "cli:root", CreatedAt: at, Document: []byte{}},
	}, nil
}

// The API serves the ledger's records with the JSON it always served:
// each field's name, omission and format, checked byte by byte.
func TestTheAPIServesTheLedgersRecordsAsBefore(t *testing.T) {
	srv, err := api.New(api.Config{Ledger: recordsLedger{}, Clock: func() time.Time { return at },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	srv.MarkServing(true)
	for _, c := range []struct{ method, path, want string }{
		{http.MethodGet, "/api/v1/me", `{"id":1,"role":"admin","created_by":"cli:root","created_at":"2026-03-04T05:06:07Z","expires_at":"2026-03-04T06:06:07Z"}`},
		{http.MethodDelete, "/api/v1/tokens/7", `{"id":7,"role":"student","project":"ai101","user":"s-alice","name":"laptop","created_by":"cli:root",` +
			`"created_at":"2026-03-04T05:06:07Z","expires_at":"2026-03-04T06:06:07Z","revoked_by":"token:1","revoked_at":"2026-03-04T05:07:07Z"}`},
		{http.MethodGet, "/api/v1/audit", `{"items":[{"id":2,"at":"2026-03-04T05:06:07Z","actor":"token:1","action":"token.revoke","object":"token/7",` +
			`"before":{"revoked":false},"after":{"revoked":true}},{"id":1,"at":"2026-03-04T05:06:07Z","actor":"cli:root","action":"config.set","object":"config"}],"next_cursor":"c2"}`},
		{http.MethodGet, "/api/v1/invoices/5/credit-notes", `{"items":[{"id":3,"invoice_id":5,"invoice_number":"2026-000007","number":"2026-000007-CN1","reason":"wrong rate",` +
			`"created_by":"token:1","created_at":"2026-03-04T05:06:07Z","sha256":"ab12","document":{"schema":"cardhour.invoice.v1"}},` +
			`{"id":2,"invoice_id":5,"invoice_number":"2026-000007","number":"2026-000007-CN0","reason":"old","created_by":"cli:root","created_at":"2026-03-04T05:06:07Z"}],"next_cursor":""}`},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Header.Set("Authorization", "Bearer admin-secret")
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		require.Equal(t, http.StatusOK, w.Code, "%s %s: %s", c.method, c.path, w.Body)
		require.JSONEq(t, c.want, w.Body.String(), "%s %s", c.method, c.path)
		require.Equal(t, c.want+"\n", w.Body.String(), "%s %s: the bytes, in order", c.method, c.path)
	}
}
