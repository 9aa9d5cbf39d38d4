package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/ledger"
)

// browser is a cookie-keeping client of the fixture's handler.
type browser struct {
	f      *fixture
	cookie string // the session cookie's value
	csrf   string
}

func (b *browser) do(method, target, body, ctype string, hdr map[string]string) *httptest.ResponseRecorder {
	b.f.t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if b.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "cardhour_session", Value: b.cookie})
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	b.f.h.ServeHTTP(w, req)
	for _, c := range w.Result().Cookies() {
		if c.Name == "cardhour_session" {
			b.cookie = c.Value
			if c.MaxAge < 0 {
				b.cookie = ""
			}
		}
	}
	return w
}

// oidcSignIn goes through /auth/login and /auth/callback with code.
func (b *browser) oidcSignIn(t *testing.T, code string) *httptest.ResponseRecorder {
	t.Helper()
	w := b.do("GET", "/auth/login?return=/ui/%23/usage", "", "", nil)
	require.Equal(t, http.StatusFound, w.Code, w.Body.String())
	loc, err := url.Parse(w.Header().Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "idp.example.edu", loc.Host)
	state := loc.Query().Get("state")
	require.NotEmpty(t, state)
	return b.do("GET", "/auth/callback?"+url.Values{"state": {state}, "code": {code}}.Encode(), "", "", nil)
}

func (b *browser) loadCSRF(t *testing.T) {
	t.Helper()
	w := b.do("GET", "/auth/session", "", "", nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	b.csrf = jsonOf(t, w.Body.Bytes())["csrf_token"].(string)
	require.NotEmpty(t, b.csrf)
}

func TestOIDCSignInOpensASessionActingAsTheMappedRole(t *testing.T) {
	f := newFixture(t)
	b := &browser{f: f}
	w := b.oidcSignIn(t, "code-t0042")
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	require.Equal(t, "/ui/#/usage", w.Header().Get("Location"))
	ck := w.Result().Cookies()
	require.Len(t, ck, 1)
	require.True(t, ck[0].HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, ck[0].SameSite)
	require.False(t, ck[0].Secure, "plain HTTP: not Secure")
	require.NotEmpty(t, b.cookie)

	me := jsonOf(t, b.do("GET", "/api/v1/me", "", "", nil).Body.Bytes())
	require.Equal(t, "lead", me["role"])
	require.Equal(t, "ai101", me["project"])
	// A lead of ai101 sees ai101 only, as a lead token would.
	require.Equal(t, http.StatusForbidden, b.do("GET", "/api/v1/usage?project=nlp-lab&from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z", "", "", nil).Code)

	// Changing something with the session needs its CSRF token.
	w = b.do("POST", "/api/v1/alerts/"+itoa(f.ids["alert-alice"])+"/ack", "", "", nil)
	require.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "X-CSRF-Token")
	b.loadCSRF(t)
	w = b.do("POST", "/api/v1/alerts/"+itoa(f.ids["alert-alice"])+"/ack", "", "", map[string]string{"X-CSRF-Token": "wrong"})
	require.Equal(t, http.StatusForbidden, w.Code)
	w = b.do("POST", "/api/v1/alerts/"+itoa(f.ids["alert-alice"])+"/ack", "", "", map[string]string{"X-CSRF-Token": b.csrf})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())

	// The audit log names the person, not a token.
	entries, _, err := f.led.Audit(context.Background(), ledger.AuditFilter{Action: "alert.ack"})
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	require.Equal(t, "oidc:t0042", entries[0].Actor)
	created, _, err := f.led.Audit(context.Background(), ledger.AuditFilter{Action: "session.create"})
	require.NoError(t, err)
	require.Equal(t, "oidc:t0042", created[0].Actor)
	require.NotContains(t, string(created[0].After), b.cookie)
}

func TestOIDCReplayedUnknownAndForgedAreRefusedWithAPageAndAnAuditEntry(t *testing.T) {
	f := newFixture(t)
	b := &browser{f: f}
	w := b.do("GET", "/auth/login", "", "", nil)
	loc, _ := url.Parse(w.Header().Get("Location"))
	state := loc.Query().Get("state")
	cb := "/auth/callback?" + url.Values{"state": {state}, "code": {"code-t0042"}}.Encode()
	require.Equal(t, http.StatusSeeOther, b.do("GET", cb, "", "", nil).Code)

	for name, target := range map[string]string{
		"replayed state": cb,
		"unknown state":  "/auth/callback?state=made-up&code=code-root",
		"no state":       "/auth/callback?code=code-root",
	} {
		t.Run(name, func(t *testing.T) {
			nb := &browser{f: f}
			w := nb.do("GET", target, "", "", nil)
			require.Equal(t, http.StatusForbidden, w.Code)
			require.Contains(t, w.Header().Get("Content-Type"), "text/html")
			require.Contains(t, w.Body.String(), `data-code="bad_state"`)
			require.Contains(t, w.Body.String(), "登录被拒绝")
			require.Empty(t, nb.cookie, "a refused sign-in opens no session")
		})
	}
	nb := &browser{f: f}
	w = nb.oidcSignIn(t, "forged")
	require.Equal(t, http.StatusForbidden, w.Code)
	require.Contains(t, w.Body.String(), `data-code="bad_token"`)
	require.Empty(t, nb.cookie)
	refused, _, err := f.led.Audit(context.Background(), ledger.AuditFilter{Action: "signin.refused"})
	require.NoError(t, err)
	require.Len(t, refused, 4)
	require.Contains(t, string(refused[0].After), "bad_token")
}

func TestNoRoleGetsThePageSayingWhomToAskAndNoSession(t *testing.T) {
	f := newFixture(t)
	b := &browser{f: f}
	w := b.oidcSignIn(t, "code-nobody")
	require.Equal(t, http.StatusForbidden, w.Code)
	require.Contains(t, w.Body.String(), "oidc:nobody")
	require.Contains(t, w.Body.String(), "Ask the HPC office, room 301.")
	require.Contains(t, w.Body.String(), "请联系高性能计算办公室（301 室）。")
	require.Empty(t, b.cookie)
	require.Equal(t, http.StatusUnauthorized, b.do("GET", "/api/v1/me", "", "", nil).Code)
	es, _, err := f.led.Audit(context.Background(), ledger.AuditFilter{Action: "signin.no_role"})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, "oidc:nobody", es[0].Actor)
}

func TestRosterMakesAStudentOfEveryProjectAndTheGrantCanBeSwitched(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.led.ImportRoster(ctx, "cli:test", ledger.RosterImport{Mode: ledger.RosterReplace, Projects: []string{"ai101", "nlp-lab"},
		Students: []ledger.Student{{Project: "ai101", User: "s-alice", Name: "Alice"}, {Project: "nlp-lab", User: "s-alice", Name: "Alice"}}})
	require.NoError(t, err)
	b := &browser{f: f}
	w := b.do("POST", "/auth/ldap", url.Values{"user": {"s-alice"}, "password": {"alice-pass"}}.Encode(), "application/x-www-form-urlencoded",
		map[string]string{"Origin": "http://example.com"})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	sess := jsonOf(t, b.do("GET", "/auth/session", "", "", nil).Body.Bytes())
	require.Equal(t, "ldap:s-alice", sess["person"])
	require.Len(t, sess["grants"], 2)
	me := jsonOf(t, b.do("GET", "/api/v1/me", "", "", nil).Body.Bytes())
	require.Equal(t, "student", me["role"])
	require.Equal(t, "s-alice", me["user"])
	first := me["project"]
	b.loadCSRF(t)
	require.Equal(t, http.StatusForbidden, b.do("POST", "/auth/session/active", `{"grant":1}`, "application/json", nil).Code, "switching needs CSRF")
	w = b.do("POST", "/auth/session/active", `{"grant":1}`, "application/json", map[string]string{"X-CSRF-Token": b.csrf})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	me = jsonOf(t, b.do("GET", "/api/v1/me", "", "", nil).Body.Bytes())
	require.NotEqual(t, first, me["project"])
	require.Equal(t, http.StatusUnprocessableEntity, b.do("POST", "/auth/session/active", `{"grant":2}`, "application/json", map[string]string{"X-CSRF-Token": b.csrf}).Code)

	// Taken off the roster of the project she acts in, she loses it at her
	// next request, not at her next sign-in.
	_, err = f.led.ImportRoster(ctx, "cli:test", ledger.RosterImport{Mode: ledger.RosterReplace, Projects: []string{me["project"].(string)}})
	require.NoError(t, err)
	w = b.do("GET", "/api/v1/me", "", "", nil)
	require.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "no longer on the roster")
}

func TestLDAPFormFromAnotherSiteAndWrongPasswordAreRefused(t *testing.T) {
	f := newFixture(t)
	b := &browser{f: f}
	form := url.Values{"user": {"t0042"}, "password": {"lead-pass"}}.Encode()
	w := b.do("POST", "/auth/ldap", form, "application/x-www-form-urlencoded", map[string]string{"Origin": "https://evil.example"})
	require.Equal(t, http.StatusForbidden, w.Code)
	require.Contains(t, w.Body.String(), `data-code="cross_site"`)
	w = b.do("POST", "/auth/ldap", form, "application/x-www-form-urlencoded", map[string]string{"Sec-Fetch-Site": "cross-site"})
	require.Equal(t, http.StatusForbidden, w.Code)
	w = b.do("POST", "/auth/ldap", url.Values{"user": {"t0042"}, "password": {"nope"}}.Encode(), "application/x-www-form-urlencoded", nil)
	require.Equal(t, http.StatusForbidden, w.Code)
	require.Contains(t, w.Body.String(), `data-code="bad_credentials"`)
	require.Empty(t, b.cookie)
	w = b.do("POST", "/auth/ldap", form, "application/x-www-form-urlencoded", map[string]string{"Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusSeeOther, w.Code)
	require.NotEmpty(t, b.cookie)
}

func TestCASTicketForAnotherServiceIsRefused(t *testing.T) {
	f := newFixture(t)
	b := &browser{f: f}
	start := func() string {
		w := b.do("GET", "/auth/cas/login", "", "", nil)
		require.Equal(t, http.StatusFound, w.Code)
		svc, _ := url.Parse(w.Header().Get("Location"))
		back, _ := url.Parse(svc.Query().Get("service"))
		return back.Query().Get("state")
	}
	w := b.do("GET", "/auth/cas/callback?"+url.Values{"state": {start()}, "ticket": {"ST-other-service"}}.Encode(), "", "", nil)
	require.Equal(t, http.StatusForbidden, w.Code)
	require.Contains(t, w.Body.String(), `data-code="wrong_service"`)
	require.Empty(t, b.cookie)
	w = b.do("GET", "/auth/cas/callback?"+url.Values{"state": {start()}, "ticket": {"ST-f0007"}}.Encode(), "", "", nil)
	require.Equal(t, http.StatusSeeOther, w.Code)
	me := jsonOf(t, b.do("GET", "/api/v1/me", "", "", nil).Body.Bytes())
	require.Equal(t, "finance", me["role"])
}

func TestBearerTokenNeverUsesTheSessionAndLogoutEndsIt(t *testing.T) {
	f := newFixture(t)
	b := &browser{f: f}
	b.oidcSignIn(t, "code-t0042")
	// A request with a bearer token is the token's, cookie or not.
	me := jsonOf(t, b.do("GET", "/api/v1/me", "", "", map[string]string{"Authorization": "Bearer " + f.tokens["student"]}).Body.Bytes())
	require.Equal(t, "student", me["role"])
	require.Equal(t, http.StatusUnauthorized, b.do("GET", "/api/v1/me", "", "", map[string]string{"Authorization": "Bearer cht_unknown"}).Code)

	require.Equal(t, http.StatusForbidden, b.do("POST", "/auth/logout", "", "", nil).Code, "logout needs CSRF")
	b.loadCSRF(t)
	old := b.cookie
	w := b.do("POST", "/auth/logout", "", "", map[string]string{"X-CSRF-Token": b.csrf})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	out := jsonOf(t, w.Body.Bytes())
	require.Contains(t, out["redirect"], "https://idp.example.edu/logout?")
	require.Contains(t, out["redirect"], "id_token_hint=id-token-of-code-t0042")
	require.Empty(t, b.cookie, "the cookie is cleared")
	b.cookie = old // a copy kept by an attacker is dead too
	require.Equal(t, http.StatusUnauthorized, b.do("GET", "/api/v1/me", "", "", nil).Code)
	es, _, err := f.led.Audit(context.Background(), ledger.AuditFilter{Action: "session.end"})
	require.NoError(t, err)
	require.Equal(t, "oidc:t0042", es[0].Actor)
}

func TestReturnTargetStaysOnTheDashboard(t *testing.T) {
	f := newFixture(t)
	for _, ret := range []string{"https://evil.example/", "//evil.example/ui/", "/api/v1/tokens", "/ui/\r\nSet-Cookie: x"} {
		b := &browser{f: f}
		w := b.do("GET", "/auth/login?"+url.Values{"return": {ret}}.Encode(), "", "", nil)
		loc, _ := url.Parse(w.Header().Get("Location"))
		w = b.do("GET", "/auth/callback?"+url.Values{"state": {loc.Query().Get("state")}, "code": {"code-root"}}.Encode(), "", "", nil)
		require.Equal(t, "/ui/", w.Header().Get("Location"), "return %q", ret)
	}
}

func TestDemoSignInAndProviders(t *testing.T) {
	f := newFixture(t)
	p := jsonOf(t, (&browser{f: f}).do("GET", "/auth/providers", "", "", nil).Body.Bytes())
	require.Equal(t, "Campus account", p["oidc"])
	require.Equal(t, []any{"Alice (student)"}, p["demo"])
	_, err := f.led.ImportRoster(context.Background(), "cli:test", ledger.RosterImport{Mode: ledger.RosterReplace, Projects: []string{"ai101"},
		Students: []ledger.Student{{Project: "ai101", User: "s-alice", Name: "Alice"}}})
	require.NoError(t, err)
	b := &browser{f: f}
	require.Equal(t, http.StatusSeeOther, b.do("GET", "/auth/demo?as=0", "", "", nil).Code)
	require.Equal(t, "s-alice", jsonOf(t, b.do("GET", "/api/v1/me", "", "", nil).Body.Bytes())["user"])
	require.Equal(t, http.StatusForbidden, (&browser{f: f}).do("GET", "/auth/demo?as=7", "", "", nil).Code)
}

func jsonOf(t *testing.T, b []byte) map[string]any {
	t.Helper()
	return response{Body: b}.json(t)
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

func TestLDAPSessionLosesAGrantTheDirectoryNoLongerGives(t *testing.T) {
	f := newFixture(t)
	f.signIn.RecheckEvery = -1 // at every request
	b := &browser{f: f}
	w := b.do("POST", "/auth/ldap", url.Values{"user": {"t0042"}, "password": {"lead-pass"}}.Encode(), "application/x-www-form-urlencoded", nil)
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	require.Equal(t, "lead", jsonOf(t, b.do("GET", "/api/v1/me", "", "", nil).Body.Bytes())["role"])
	f.signIn.LDAP.(fakeLDAP).gone["t0042"] = true
	w = b.do("GET", "/api/v1/me", "", "", nil)
	require.Equal(t, http.StatusUnauthorized, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "the directory no longer gives you lead of ai101")
	require.Empty(t, b.cookie, "the cookie is cleared")
	es, _, err := f.led.Audit(context.Background(), ledger.AuditFilter{Action: "session.end"})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, "ldap:t0042", es[0].Actor)
}
