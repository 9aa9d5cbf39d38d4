package testenv

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"math/big"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOIDCLoginThroughLDAP walks the whole chain the api's sign-in relies
// on: Dex's authorization endpoint shows Dex's own LDAP login form, the
// student's credentials (checked by slapd) redirect to the registered
// redirect URI with a code, and the token endpoint trades the code for an ID
// token, signed with a key of Dex's JWKS, that names the student and the
// student's LDAP groups.
func TestOIDCLoginThroughLDAP(t *testing.T) {
	p := OIDC(t)
	disc := discover(t, p.Issuer)
	c := browser(t, p.RedirectURL)

	page, pageURL := getLoginForm(t, c, authURL(disc.AuthorizationEndpoint, p, "state-ok"))
	code := postLogin(t, c, page, pageURL, "2022110315", "student-pass", p.RedirectURL, "state-ok")
	claims := exchangeCode(t, p, disc, code)

	if claims.Issuer != p.Issuer {
		t.Errorf("iss = %q, want %q", claims.Issuer, p.Issuer)
	}
	if claims.Audience != p.ClientID {
		t.Errorf("aud = %q, want %q", claims.Audience, p.ClientID)
	}
	if claims.PreferredUsername != "2022110315" {
		t.Errorf("preferred_username = %q, want the student ID 2022110315", claims.PreferredUsername)
	}
	if claims.Name != "Li Hua" || claims.Email != "2022110315@example.edu" {
		t.Errorf("name, email = %q, %q; want Li Hua, 2022110315@example.edu", claims.Name, claims.Email)
	}
	if !slices.Equal(claims.Groups, []string{"course-dl-2026"}) {
		t.Errorf("groups = %q, want [course-dl-2026]", claims.Groups)
	}
}

// TestOIDCLoginWrongPassword: a wrong password gives the form again, with
// an error, and no redirect with a code.
func TestOIDCLoginWrongPassword(t *testing.T) {
	p := OIDC(t)
	disc := discover(t, p.Issuer)
	c := browser(t, p.RedirectURL)
	page, pageURL := getLoginForm(t, c, authURL(disc.AuthorizationEndpoint, p, "state-bad"))
	resp := submit(t, c, page, pageURL, "2022110315", "not-the-password")
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusOK {
		t.Fatalf("wrong password: HTTP %d, want the form again (200 or 401): %s", resp.StatusCode, body)
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		t.Fatalf("wrong password redirected to %q", loc)
	}
	if !strings.Contains(body, `name="password"`) || !strings.Contains(strings.ToLower(body), "invalid") {
		t.Fatalf("wrong password: want the login form with an error, got: %s", body)
	}
}

type discovery struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	JWKSURI               string `json:"jwks_uri"`
}

func discover(t *testing.T, issuer string) discovery {
	t.Helper()
	resp, err := http.Get(issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var d discovery
	decodeJSON(t, resp, &d)
	if d.Issuer != issuer || d.AuthorizationEndpoint == "" || d.TokenEndpoint == "" || d.JWKSURI == "" {
		t.Fatalf("discovery document %+v: want issuer %q and the endpoints", d, issuer)
	}
	return d
}

// browser is an HTTP client with a cookie jar that follows redirects
// within the provider and stops at the redirect URI (nothing listens there).
func browser(t *testing.T, redirectURL string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), redirectURL) || len(via) >= 10 {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

func authURL(endpoint string, p OIDCProvider, state string) string {
	q := url.Values{
		"client_id":     {p.ClientID},
		"redirect_uri":  {p.RedirectURL},
		"response_type": {"code"},
		"scope":         {"openid profile email groups"},
		"state":         {state},
	}
	return endpoint + "?" + q.Encode()
}

var formAction = regexp.MustCompile(`<form[^>]*method="post"[^>]*action="([^"]+)"`)

// getLoginForm follows the authorization request to the page with Dex's
// LDAP login form and returns the page and its URL.
func getLoginForm(t *testing.T, c *http.Client, u string) (string, *url.URL) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d: %s", u, resp.StatusCode, body)
	}
	for _, want := range []string{`name="login"`, `name="password"`, "/auth/ldap/login"} {
		if !strings.Contains(body, want) {
			t.Fatalf("%s: not Dex's LDAP login form (no %s): %s", resp.Request.URL, want, body)
		}
	}
	return body, resp.Request.URL
}

// submit posts the login form of page (at pageURL) without following the
// redirect to the redirect URI.
func submit(t *testing.T, c *http.Client, page string, pageURL *url.URL, login, password string) *http.Response {
	t.Helper()
	m := formAction.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no <form method=\"post\" action=...> in the login page: %s", page)
	}
	action, err := pageURL.Parse(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatalf("form action %q: %v", m[1], err)
	}
	resp, err := c.PostForm(action.String(), url.Values{"login": {login}, "password": {password}})
	if err != nil {
		t.Fatalf("POST %s: %v", action, err)
	}
	return resp
}

// postLogin signs in and returns the code of the redirect to redirectURL.
func postLogin(t *testing.T, c *http.Client, page string, pageURL *url.URL, login, password, redirectURL, state string) string {
	t.Helper()
	resp := submit(t, c, page, pageURL, login, password)
	body := readBody(t, resp)
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("login as %s: HTTP %d and no redirect: %s", login, resp.StatusCode, body)
	}
	if !strings.HasPrefix(loc.String(), redirectURL+"?") {
		t.Fatalf("login as %s redirected to %s, want %s?code=...", login, loc, redirectURL)
	}
	if got := loc.Query().Get("state"); got != state {
		t.Fatalf("redirect state = %q, want %q", got, state)
	}
	code := loc.Query().Get("code")
	if code == "" {
		t.Fatalf("redirect %s has no code", loc)
	}
	return code
}

type idClaims struct {
	Issuer            string   `json:"iss"`
	Audience          string   `json:"aud"`
	Subject           string   `json:"sub"`
	Email             string   `json:"email"`
	Name              string   `json:"name"`
	PreferredUsername string   `json:"preferred_username"`
	Groups            []string `json:"groups"`
	Expiry            int64    `json:"exp"`
}

// exchangeCode trades code at the token endpoint (client_secret_basic) and
// returns the ID token's claims once its RS256 signature checks out.
func exchangeCode(t *testing.T, p OIDCProvider, d discovery, code string) idClaims {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {p.RedirectURL}}
	req, err := http.NewRequest(http.MethodPost, d.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(p.ClientID), url.QueryEscape(p.ClientSecret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("token endpoint: %v", err)
	}
	var tok struct {
		IDToken string `json:"id_token"`
	}
	decodeJSON(t, resp, &tok)
	var c idClaims
	verifyJWT(t, d.JWKSURI, tok.IDToken, &c)
	if time.Unix(c.Expiry, 0).Before(time.Now()) {
		t.Errorf("ID token expired at %v", time.Unix(c.Expiry, 0))
	}
	return c
}

// verifyJWT checks an RS256 JWT against the keys at jwksURI and decodes
// its payload into claims.
func verifyJWT(t *testing.T, jwksURI, token string, claims any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("ID token %q is not a JWS compact serialization", token)
	}
	var hdr struct{ Alg, Kid string }
	unmarshalB64(t, parts[0], &hdr)
	if hdr.Alg != "RS256" {
		t.Fatalf("ID token alg %q, want RS256", hdr.Alg)
	}
	key := jwksKey(t, jwksURI, hdr.Kid)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatalf("ID token signature: %v", err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig); err != nil {
		t.Fatalf("ID token signature does not verify with key %q of %s: %v", hdr.Kid, jwksURI, err)
	}
	unmarshalB64(t, parts[1], claims)
}

func jwksKey(t *testing.T, jwksURI, kid string) *rsa.PublicKey {
	t.Helper()
	resp, err := http.Get(jwksURI)
	if err != nil {
		t.Fatalf("JWKS: %v", err)
	}
	var set struct {
		Keys []struct{ Kid, Kty, N, E string }
	}
	decodeJSON(t, resp, &set)
	for _, k := range set.Keys {
		if k.Kid != kid || k.Kty != "RSA" {
			continue
		}
		n, errN := base64.RawURLEncoding.DecodeString(k.N)
		e, errE := base64.RawURLEncoding.DecodeString(k.E)
		if errN != nil || errE != nil {
			t.Fatalf("JWKS key %q: bad n or e", kid)
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	t.Fatalf("JWKS %s has no RSA key %q", jwksURI, kid)
	return nil
}

func unmarshalB64(t *testing.T, s string, v any) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("base64url %q: %v", s, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("JSON %s: %v", b, err)
	}
}

func decodeJSON(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: HTTP %d: %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v: %s", resp.Request.URL, err, body)
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close() //nolint:errcheck // read to the end already
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", resp.Request.URL, err)
	}
	return string(b)
}

func TestURLAddrs(t *testing.T) {
	web := map[string]string{"http": "80", "https": "443"}
	cases := []struct {
		value string
		want  []string
		err   bool
	}{
		{"http://127.0.0.1:15556/dex", []string{"127.0.0.1:15556"}, false},
		{"https://idp.example.edu/dex/", []string{"idp.example.edu:443"}, false},
		{"http://[::1]/dex", []string{"[::1]:80"}, false},
		{"", nil, false},
		{"ldap://127.0.0.1:13389", nil, true},
		{"http:///dex", nil, true},
		{"http://h:0/dex", nil, true},
	}
	for _, c := range cases {
		got, err := urlAddrs(c.value, web)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("urlAddrs(%q) = %q, %v; want %q, error %v", c.value, got, err, c.want, c.err)
		}
	}
	got, err := urlAddrs("ldaps://127.0.0.1", map[string]string{"ldap": "389", "ldaps": "636"})
	if err != nil || !slices.Equal(got, []string{"127.0.0.1:636"}) {
		t.Errorf("urlAddrs(ldaps://127.0.0.1) = %q, %v; want 127.0.0.1:636", got, err)
	}
}

func TestSecretFromFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "secret")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, secret, why string }{
		{good, "s3cret", ""},
		{empty, "", "is empty"},
		{filepath.Join(dir, "missing"), "", "no such file"},
		{"", "", "OIDC_CLIENT_SECRET and OIDC_CLIENT_SECRET_FILE not set"},
	} {
		s, why := secretFromFile(c.path)
		if s != c.secret || !strings.Contains(why, c.why) || (c.why == "") != (why == "") {
			t.Errorf("secretFromFile(%q) = %q, %q; want %q, %q", c.path, s, why, c.secret, c.why)
		}
	}
}

func TestMissingVars(t *testing.T) {
	got := missingVars(map[string]string{"B": "", "A": " ", "C": "x"})
	if want := "A, B not set"; got != want {
		t.Errorf("missingVars = %q, want %q", got, want)
	}
	if got := missingVars(map[string]string{"C": "x"}); got != "" {
		t.Errorf("missingVars with all set = %q, want \"\"", got)
	}
}
