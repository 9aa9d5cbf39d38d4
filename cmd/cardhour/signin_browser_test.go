//go:build !collector

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	ldapv3 "github.com/go-ldap/ldap/v3"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/testenv"
)

// signinMapping is the browser test's role mapping over the test directory
// (deployments/testenv/ldap): the lab-dl group leads ai101, course-dl-2026
// are its students; the finance group is not mapped, so that f0007 has no
// role here.
const signinMapping = `help: "Ask the HPC office, room 301."
help_zh: "请联系高性能计算办公室（301 室）。"
projects:
  ai101:
    lead:
      - group: lab-dl
    student:
      - group: course-dl-2026
`

// signinSamples are November's example samples with one of ai101's two
// students renamed to the directory's student 2022110315, so that ai101
// has a student who signs in and one who does not.
func signinSamples(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(novemberSamples(tb))
	require.NoError(tb, err)
	path := filepath.Join(tb.TempDir(), "signin.jsonl")
	require.NoError(tb, os.WriteFile(path, []byte(strings.ReplaceAll(string(b), `"user":"2026010204"`, `"user":"2022110315"`)), 0o644))
	return path
}

// oidcServeFlags builds the sign-in the way serve does, from its flags,
// against the test provider.
func oidcServeFlags(t *testing.T, p testenv.OIDCProvider) func(ledger.Store) *api.SignIn {
	dir := t.TempDir()
	secret, mapping := filepath.Join(dir, "client-secret"), filepath.Join(dir, "mapping.yaml")
	require.NoError(t, os.WriteFile(secret, []byte(p.ClientSecret+"\n"), 0o600))
	require.NoError(t, os.WriteFile(mapping, []byte(signinMapping), 0o600))
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sf := addSigninFlags(fs)
	require.NoError(t, fs.Parse([]string{"--oidc-issuer", p.Issuer, "--oidc-client-id", p.ClientID, "--oidc-client-secret-file", secret,
		"--oidc-redirect-url", p.RedirectURL, "--oidc-name", "Campus account", "--role-mapping", mapping}))
	require.NoError(t, sf.applyConfig())
	return func(led ledger.Store) *api.SignIn {
		si, err := sf.build(context.Background(), led, false)
		require.NoError(t, err)
		require.NotNil(t, si)
		return si
	}
}

// TestBrowserSignsInThroughTheProvidersOwnPage: headless Chromium signs in
// through Dex's own login page (its LDAP connector over the test
// directory) as a student, who sees their own usage and no one else's,
// signs out, then as the lead of the project, who sees both students; the
// audit log names each person.
func TestBrowserSignsInThroughTheProvidersOwnPage(t *testing.T) {
	chromium := needChromium(t)
	p := testenv.OIDC(t)
	redirect, err := url.Parse(p.RedirectURL)
	require.NoError(t, err)
	d := startDashboard(t, signinSamples(t), time.Date(2026, 11, 28, 12, 0, 0, 0, shanghai), time.Date(2026, 12, 10, 0, 0, 0, 0, shanghai), nil,
		func(s *dashSetup) { s.addr, s.signIn = redirect.Host, oidcServeFlags(t, p) })
	require.Equal(t, "http://"+redirect.Host, d.base)
	shots := artifactDir(t, "signin")
	tb := langTab(t, chromium, shots, "en")

	signIn := func(user, password string) {
		t.Helper()
		tb.do(chromedp.Navigate(d.base+"/ui/#/usage"),
			chromedp.WaitVisible(chromedp.CSS(`#signin-oidc`)),
			chromedp.Click(chromedp.CSS(`#signin-oidc`)),
			// Dex's own login form (its LDAP connector's).
			chromedp.WaitVisible(chromedp.CSS(`input[name="login"]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), user),
			chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), password),
			chromedp.Submit(chromedp.CSS(`input[name="password"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#logout`)),
			chromedp.WaitVisible(chromedp.CSS(`#page-usage[data-ready="true"]`)))
	}
	var who, page string
	signIn("2022110315", "student-pass")
	tb.screenshot("student-usage")
	who, page = tb.text("#who"), tb.text("#page-usage")
	require.Contains(t, who, "student")
	// 2022110315 held 0.50 card-hours of ai101's 1.50 in November.
	require.Contains(t, page, "over 0.50 card-hours", "the student sees their own usage")
	for u, b := range tb.bodies() {
		require.NotContains(t, b, "2026010203", "no answer to the student names the other student: %s", u)
	}

	tb.do(chromedp.Click(chromedp.CSS(`#logout`)), chromedp.WaitVisible(chromedp.CSS(`#signin-oidc`)))
	code, _ := d.apiDo(t, "", "GET", "/api/v1/me", "")
	require.Equal(t, 401, code)
	// Dex may remember who signed in there; the lead signs in afresh.
	_, err = chromedp.Call(tb.ctx, network.ClearBrowserCookies, cdp.Empty{})
	require.NoError(t, err)

	signIn("t0042", "lead-pass")
	tb.route("#/usage?period=2026-11&by=user", "usage")
	tb.screenshot("lead-usage")
	who, page = tb.text("#who"), tb.text("#page-usage")
	require.Contains(t, who, "lead")
	require.Contains(t, page, "over 1.50 card-hours")
	require.Contains(t, page, "2022110315")
	require.Contains(t, page, "2026010203", "the lead sees every student of the project")
	tb.do(chromedp.Click(chromedp.CSS(`#logout`)), chromedp.WaitVisible(chromedp.CSS(`#signin-oidc`)))
	tb.screenshot("signed-out")

	// A person the mapping gives no role: the page says whom to ask, in
	// both languages, and no session is opened.
	_, err = chromedp.Call(tb.ctx, network.ClearBrowserCookies, cdp.Empty{})
	require.NoError(t, err)
	tb.do(chromedp.Navigate(d.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#signin-oidc`)), chromedp.Click(chromedp.CSS(`#signin-oidc`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name="login"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), "f0007"), chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "finance-pass"),
		chromedp.Submit(chromedp.CSS(`input[name="password"]`)), chromedp.WaitVisible(chromedp.CSS(`#signin-page`)))
	tb.screenshot("no-role")
	page = tb.text("#signin-page")
	require.Contains(t, page, "oidc:f0007")
	require.Contains(t, page, "Ask the HPC office, room 301.")
	require.Contains(t, page, "请联系高性能计算办公室（301 室）。")
	tb.do(chromedp.Navigate(d.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#signin-oidc`)))

	// The sign-in page in Chinese.
	zh := langTab(t, chromium, shots, "zh-CN")
	zh.do(chromedp.Navigate(d.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#signin-oidc`)))
	zh.screenshot("signin-zh")
	require.Equal(t, "使用Campus account登录", zh.text("#signin-oidc"))
	require.Contains(t, zh.text("#main"), "或粘贴 API 令牌")

	for _, action := range []string{"session.create", "session.end"} {
		es, _, err := d.led.Audit(context.Background(), ledger.AuditFilter{Action: action})
		require.NoError(t, err)
		var actors []string
		for _, e := range es {
			actors = append(actors, e.Actor)
		}
		require.ElementsMatch(t, []string{"oidc:2022110315", "oidc:t0042"}, actors, action)
	}
}

func (t *tab) text(sel string) string {
	t.tb.Helper()
	v, err := chromedp.Run(t.ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t.tb, err, sel)
	return v
}

// TestServeSignsInWithLDAPOnly: serve's --ldap-* flags against the test
// directory (StartTLS with its CA): the login form signs the student and
// the lead in; a wrong password, an injection in the user name and a form
// from another site are refused with the page and an audit entry, and open
// no session.
func TestServeSignsInWithLDAPOnly(t *testing.T) {
	l := testenv.LDAP(t)
	dir := t.TempDir()
	pw, mapping := filepath.Join(dir, "bind-password"), filepath.Join(dir, "mapping.yaml")
	require.NoError(t, os.WriteFile(pw, []byte(l.BindPassword), 0o600))
	require.NoError(t, os.WriteFile(mapping, []byte(signinMapping), 0o600))
	cfg := filepath.Join(dir, "signin.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("ldap-url: "+l.URL+"\nldap-start-tls: true\nldap-ca-file: "+l.CAFile+
		"\nldap-bind-dn: \""+l.BindDN+"\"\nldap-bind-password-file: "+pw+"\nldap-base-dn: \""+l.BaseDN+"\"\nrole-mapping: "+mapping+"\n"), 0o600))
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sf := addSigninFlags(fs)
	require.NoError(t, fs.Parse([]string{"--signin-config", cfg}))
	require.NoError(t, sf.applyConfig())
	d := startDashboard(t, signinSamples(t), time.Date(2026, 11, 28, 12, 0, 0, 0, shanghai), time.Date(2026, 12, 10, 0, 0, 0, 0, shanghai), nil,
		func(s *dashSetup) {
			s.signIn = func(led ledger.Store) *api.SignIn {
				si, err := sf.build(context.Background(), led, false)
				require.NoError(t, err)
				si.RecheckEvery = -1 // the directory is read again at every request
				return si
			}
		})
	post := func(user, password, origin string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("POST", d.base+"/auth/ldap", strings.NewReader(url.Values{"user": {user}, "password": {password}}.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.Do(req)
		require.NoError(t, err)
		defer res.Body.Close() //nolint:errcheck // read to the end
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, string(b)
	}
	me := func(res *http.Response) map[string]any {
		t.Helper()
		var cookie *http.Cookie
		for _, c := range res.Cookies() {
			if c.Name == "cardhour_session" {
				cookie = c
			}
		}
		require.NotNil(t, cookie, "a session cookie")
		req, _ := http.NewRequest("GET", d.base+"/api/v1/me", nil)
		req.AddCookie(cookie)
		r, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer r.Body.Close() //nolint:errcheck // decoded
		var m map[string]any
		require.NoError(t, json.NewDecoder(r.Body).Decode(&m))
		return m
	}
	res, body := post("2022110315", "student-pass", d.base)
	require.Equal(t, http.StatusSeeOther, res.StatusCode, body)
	m := me(res)
	require.Equal(t, "student", m["role"])
	require.Equal(t, "ai101", m["project"])
	require.Equal(t, "2022110315", m["user"])
	res, body = post("t0042", "lead-pass", "")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, body)
	require.Equal(t, "lead", me(res)["role"])

	// Taken out of course-dl-2026 in the directory, the second student
	// loses ai101 at the next look (every request here; the idle limit by
	// default). (Nobody else's test uses 2022110316: the others run on.)
	res, body = post("2022110316", "student2-pass", "")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, body)
	require.Equal(t, "student", me(res)["role"])
	leaveGroup(t, l, "cn=course-dl-2026,"+l.GroupBaseDN, "uid=2022110316,"+l.BaseDN)
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "cardhour_session" {
			cookie = c
		}
	}
	req, _ := http.NewRequest("GET", d.base+"/api/v1/me", nil)
	req.AddCookie(cookie)
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	require.Equal(t, http.StatusUnauthorized, r.StatusCode, string(b))
	require.Contains(t, string(b), "the directory no longer gives you student of ai101")
	res, body = post("2022110316", "student2-pass", "")
	require.Equal(t, http.StatusForbidden, res.StatusCode, "signing in again: no role any more")
	require.Contains(t, body, "ldap:2022110316")

	for _, c := range []struct{ user, password, origin, code string }{
		{"2022110315", "wrong", "", "bad_credentials"},
		{"nobody", "student-pass", "", "bad_credentials"},
		{"*)(uid=*", "student-pass", "", "bad_user_name"},
		{"2022110315)(|(uid=*", "x", "", "bad_user_name"},
		{"2022110315", "", "", "bad_credentials"},
		{"2022110315", "student-pass", "https://evil.example", "cross_site"},
	} {
		res, body := post(c.user, c.password, c.origin)
		require.Equal(t, http.StatusForbidden, res.StatusCode, "%+v: %s", c, body)
		require.Contains(t, body, `data-code="`+c.code+`"`, "%+v", c)
		require.Empty(t, res.Cookies(), "%+v: no session", c)
	}
	refused, _, err := d.led.Audit(context.Background(), ledger.AuditFilter{Action: "signin.refused"})
	require.NoError(t, err)
	require.Len(t, refused, 6)
	created, _, err := d.led.Audit(context.Background(), ledger.AuditFilter{Action: "session.create"})
	require.NoError(t, err)
	require.Len(t, created, 3)
}

// leaveGroup removes member from the test directory's group as its admin,
// and puts them back when the test ends.
func leaveGroup(t *testing.T, l testenv.LDAPServer, group, member string) {
	t.Helper()
	modify := func(op func(*ldapv3.ModifyRequest)) error {
		conn, err := ldapv3.DialURL(l.URL)
		if err != nil {
			return err
		}
		defer conn.Close() //nolint:errcheck // test
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(l.CAFile)
		if err != nil {
			return err
		}
		pool.AppendCertsFromPEM(pem)
		if err := conn.StartTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}); err != nil {
			return err
		}
		if err := conn.Bind("cn=admin,dc=example,dc=edu", "admin-pass"); err != nil {
			return err
		}
		req := ldapv3.NewModifyRequest(group, nil)
		op(req)
		return conn.Modify(req)
	}
	// A groupOfNames has at least one member: the service account holds
	// the place meanwhile (in one request, applied at once).
	placeholder := l.BindDN
	require.NoError(t, modify(func(r *ldapv3.ModifyRequest) {
		r.Add("member", []string{placeholder})
		r.Delete("member", []string{member})
	}))
	t.Cleanup(func() {
		require.NoError(t, modify(func(r *ldapv3.ModifyRequest) {
			r.Add("member", []string{member})
			r.Delete("member", []string{placeholder})
		}))
	})
}
