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
