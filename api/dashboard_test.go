package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The dashboard is served at /ui/ without a token (its files hold no data;
// the pages read the API with the user's token), and / leads there.
func TestDashboardRoutes(t *testing.T) {
	f := newFixture(t)
	r := f.do("anonymous", http.MethodGet, "/", "", "")
	require.Equal(t, http.StatusFound, r.Status)
	require.Equal(t, "/ui/", r.Header.Get("Location"))
	r = f.do("anonymous", http.MethodGet, "/ui/", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, string(r.Body), `<script type="module" src="app.js">`)
	require.Contains(t, r.Header.Get("Content-Security-Policy"), "default-src 'self'")
	require.NotEmpty(t, r.Header.Get("X-Request-ID"), "the API's middleware runs for it too")
	r = f.do("anonymous", http.MethodGet, "/ui/vendor/echarts-5.6.0.min.js", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.Greater(t, len(r.Body), 500_000)
	r = f.do("anonymous", http.MethodGet, "/ui/missing.js", "", "")
	require.Equal(t, http.StatusNotFound, r.Status)
	r = f.do("anonymous", http.MethodGet, "/api/v1/me", "", "")
	require.Equal(t, http.StatusUnauthorized, r.Status, "the API still needs a token")
	r = f.do("anonymous", http.MethodGet, "/metrics", "", "")
	require.Contains(t, string(r.Body), `route="/ui/*file"`)
}
