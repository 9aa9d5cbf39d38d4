package signin_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/signin"
)

// testOP is an OpenID provider made for the tests: discovery, its keys and
// a token endpoint that hands out the ID token registered for a code, once
// the client authenticates and the PKCE verifier matches the challenge.
type testOP struct {
	t          *testing.T
	srv        *httptest.Server
	key, other *rsa.PrivateKey
	endSession bool
	keysDown   atomic.Bool // the key set answers 503

	mu    sync.Mutex
	codes map[string]grantedCode
}

type grantedCode struct{ challenge, idToken string }

const (
	opClientID = "cardhour"
	opSecret   = "client-secret"
	opRedirect = "https://cardhour.example.edu.cn/auth/oidc/callback"
)

func newTestOP(t *testing.T, endSession bool) *testOP {
	t.Helper()
	op := &testOP{t: t, codes: map[string]grantedCode{}, endSession: endSession}
	var err error
	op.key, err = rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	op.other, err = rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", op.discovery)
	mux.HandleFunc("GET /keys", op.keys)
	mux.HandleFunc("POST /token", op.token)
	op.srv = httptest.NewServer(mux)
	t.Cleanup(op.srv.Close)
	return op
}

func (op *testOP) issuer() string { return op.srv.URL }

func (op *testOP) discovery(w http.ResponseWriter, _ *http.Request) {
	doc := map[string]any{
		"issuer":                                op.issuer(),
		"authorization_endpoint":                op.issuer() + "/auth",
		"token_endpoint":                        op.issuer() + "/token",
		"jwks_uri":                              op.issuer() + "/keys",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	}
	if op.endSession {
		doc["end_session_endpoint"] = op.issuer() + "/logout?realm=campus"
	}
	_ = json.NewEncoder(w).Encode(doc)
}

func (op *testOP) keys(w http.ResponseWriter, _ *http.Request) {
	if op.keysDown.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &op.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}}
	_ = json.NewEncoder(w).Encode(set)
}

func (op *testOP) token(w http.ResponseWriter, r *http.Request) {
	fail := func(code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
	}
	if id, secret, ok := r.BasicAuth(); !ok || id != opClientID || secret != opSecret {
		// oauth2 may send the client's credentials in the form instead.
		if r.PostFormValue("client_id") != opClientID || r.PostFormValue("client_secret") != opSecret {
			fail("invalid_client")
			return
		}
	}
	if r.PostFormValue("grant_type") != "authorization_code" || r.PostFormValue("redirect_uri") != opRedirect {
		fail("invalid_request")
		return
	}
	op.mu.Lock()
	c, ok := op.codes[r.PostFormValue("code")]
	delete(op.codes, r.PostFormValue("code"))
	op.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
	if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
		fail("invalid_grant")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": "at", "token_type": "Bearer", "expires_in": 300, "id_token": c.idToken,
	})
}

// sign makes an ID token of claims, signed by key as key "k1".
func (op *testOP) sign(key *rsa.PrivateKey, claims map[string]any) string {
	op.t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	require.NoError(op.t, err)
	payload, err := json.Marshal(claims)
	require.NoError(op.t, err)
	jws, err := signer.Sign(payload)
	require.NoError(op.t, err)
	raw, err := jws.CompactSerialize()
	require.NoError(op.t, err)
	return raw
}

// claims are a good ID token's, changed by edit.
func (op *testOP) claims(nonce string, edit func(map[string]any)) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": op.issuer(), "aud": opClientID, "sub": "CgoyMDIyMTEwMzE1",
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "nonce": nonce,
		"preferred_username": "2022110315", "name": "张三", "email": "zhangsan@example.edu.cn",
		"groups": []string{"course-dl-2026", "students"}, "email_verified": true,
	}
	if edit != nil {
		edit(c)
	}
	return c
}

func newOIDC(t *testing.T, op *testOP, cfg signin.OIDCConfig) *signin.OIDC {
	t.Helper()
	cfg.Issuer, cfg.ClientID, cfg.ClientSecret, cfg.RedirectURL = op.issuer(), opClientID, opSecret, opRedirect
	cfg.HTTPClient = op.srv.Client()
	o, err := signin.NewOIDC(context.Background(), cfg)
	require.NoError(t, err)
	return o
}

// signIn runs one sign-in: the auth URL's challenge is registered with the
// token for code "c1", and the code is exchanged with verifier and nonce.
func signIn(t *testing.T, op *testOP, o *signin.OIDC, idToken func(nonce string) string, exchangeNonce string) (signin.Identity, string, error) {
	t.Helper()
	verifier := signin.NewVerifier()
	u, err := url.Parse(o.AuthURL("st", "n1", verifier))
	require.NoError(t, err)
	op.mu.Lock()
	op.codes["c1"] = grantedCode{challenge: u.Query().Get("code_challenge"), idToken: idToken(u.Query().Get("nonce"))}
	op.mu.Unlock()
	return o.Exchange(context.Background(), "c1", verifier, exchangeNonce)
}

func TestOIDCAuthURL(t *testing.T) {
	op := newTestOP(t, false)
	o := newOIDC(t, op, signin.OIDCConfig{})
	verifier := signin.NewVerifier()
	u, err := url.Parse(o.AuthURL("st", "n1", verifier))
	require.NoError(t, err)
	require.Equal(t, op.issuer()+"/auth", u.Scheme+"://"+u.Host+u.Path)
	q := u.Query()
	sum := sha256.Sum256([]byte(verifier))
	require.Equal(t, base64.RawURLEncoding.EncodeToString(sum[:]), q.Get("code_challenge"))
	require.Equal(t, "S256", q.Get("code_challenge_method"))
	require.Equal(t, "st", q.Get("state"))
	require.Equal(t, "n1", q.Get("nonce"))
	require.Equal(t, "code", q.Get("response_type"))
	require.Equal(t, opClientID, q.Get("client_id"))
	require.Equal(t, opRedirect, q.Get("redirect_uri"))
	require.Equal(t, "openid profile email", q.Get("scope"))

	o = newOIDC(t, op, signin.OIDCConfig{GroupsClaim: "roles"})
	u, _ = url.Parse(o.AuthURL("st", "n1", verifier))
	require.Equal(t, "openid profile email groups", u.Query().Get("scope"))
	o = newOIDC(t, op, signin.OIDCConfig{Scopes: []string{"profile"}})
	u, _ = url.Parse(o.AuthURL("st", "n1", verifier))
	require.Equal(t, "openid profile", u.Query().Get("scope"))
}

func TestOIDCExchangeGoodToken(t *testing.T) {
	op := newTestOP(t, false)
	o := newOIDC(t, op, signin.OIDCConfig{})
	var issued string
	id, raw, err := signIn(t, op, o, func(nonce string) string {
		issued = op.sign(op.key, op.claims(nonce, nil))
		return issued
	}, "n1")
	require.NoError(t, err)
	require.Equal(t, issued, raw, "the raw ID token is the logout hint")
	require.Equal(t, "oidc", id.Provider)
	require.Equal(t, "2022110315", id.ID)
	require.Equal(t, "张三", id.Name)
	require.Equal(t, "zhangsan@example.edu.cn", id.Email)
	require.Equal(t, []string{"course-dl-2026", "students"}, id.Groups)
	require.Equal(t, []string{"true"}, id.Attributes["email_verified"])
	require.Equal(t, []string{"CgoyMDIyMTEwMzE1"}, id.Attributes["sub"])
	require.NotContains(t, id.Attributes, "preferred_username")

	// A numeric ID claim and another groups claim.
	o = newOIDC(t, op, signin.OIDCConfig{UserClaim: "student_id", GroupsClaim: "roles"})
	id, _, err = signIn(t, op, o, func(nonce string) string {
		return op.sign(op.key, op.claims(nonce, func(c map[string]any) { c["student_id"] = 2022110315; c["roles"] = "lab-dl" }))
	}, "n1")
	require.NoError(t, err)
	require.Equal(t, "2022110315", id.ID)
	require.Equal(t, []string{"lab-dl"}, id.Groups)
}

func TestOIDCExchangeRefusals(t *testing.T) {
	op := newTestOP(t, false)
	o := newOIDC(t, op, signin.OIDCConfig{})
	for _, tc := range []struct {
		name, code, nonce string
		token             func(nonce string) string
	}{
		{"forged", "bad_token", "n1", func(n string) string { return op.sign(op.other, op.claims(n, nil)) }},
		{"expired", "bad_token", "n1", func(n string) string {
			return op.sign(op.key, op.claims(n, func(c map[string]any) {
				c["iat"], c["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-time.Minute).Unix()
			}))
		}},
		{"wrong audience", "wrong_audience", "n1", func(n string) string {
			return op.sign(op.key, op.claims(n, func(c map[string]any) { c["aud"] = "other-client" }))
		}},
		{"other issuer", "unknown_issuer", "n1", func(n string) string {
			return op.sign(op.key, op.claims(n, func(c map[string]any) { c["iss"] = "https://idp.other.example" }))
		}},
		{"missing claim", "missing_claim", "n1", func(n string) string {
			return op.sign(op.key, op.claims(n, func(c map[string]any) { delete(c, "preferred_username") }))
		}},
		{"claim not a string", "missing_claim", "n1", func(n string) string {
			return op.sign(op.key, op.claims(n, func(c map[string]any) { c["preferred_username"] = []string{"a"} }))
		}},
		{"wrong nonce", "bad_token", "n1", func(string) string { return op.sign(op.key, op.claims("n2", nil)) }},
		{"no nonce expected", "bad_token", "", func(string) string { return op.sign(op.key, op.claims("", nil)) }},
		{"not a JWT", "bad_token", "n1", func(string) string { return "not.a.jwt" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, raw, err := signIn(t, op, o, tc.token, tc.nonce)
			requireRefusal(t, err, tc.code)
			require.Empty(t, raw)
		})
	}
}

func TestOIDCExchangeCodeRefused(t *testing.T) {
	op := newTestOP(t, false)
	o := newOIDC(t, op, signin.OIDCConfig{})
	good := func(n string) string { return op.sign(op.key, op.claims(n, nil)) }
	// The provider refuses a verifier other than the challenge's.
	verifier := signin.NewVerifier()
	u, _ := url.Parse(o.AuthURL("st", "n1", verifier))
	op.mu.Lock()
	op.codes["c1"] = grantedCode{challenge: u.Query().Get("code_challenge"), idToken: good("n1")}
	op.mu.Unlock()
	_, _, err := o.Exchange(context.Background(), "c1", signin.NewVerifier(), "n1")
	requireRefusal(t, err, "bad_token")
	_, _, err = o.Exchange(context.Background(), "", verifier, "n1")
	requireRefusal(t, err, "bad_token")

	op.keysDown.Store(true)
	_, _, err = signIn(t, op, o, good, "n1")
	requireRefusal(t, err, "provider_unavailable")
	require.ErrorContains(t, err, "signing keys could not be fetched")
	op.keysDown.Store(false)

	op.srv.Close()
	_, _, err = signIn(t, op, o, good, "n1")
	requireRefusal(t, err, "provider_unavailable")
}

func TestOIDCEndSessionURL(t *testing.T) {
	o := newOIDC(t, newTestOP(t, false), signin.OIDCConfig{})
	require.Empty(t, o.EndSessionURL("hint", "https://cardhour.example.edu.cn/"))

	op := newTestOP(t, true)
	o = newOIDC(t, op, signin.OIDCConfig{})
	u, err := url.Parse(o.EndSessionURL("the.id.token", "https://cardhour.example.edu.cn/"))
	require.NoError(t, err)
	require.Equal(t, op.issuer()+"/logout", u.Scheme+"://"+u.Host+u.Path)
	require.Equal(t, url.Values{
		"realm": {"campus"}, "client_id": {opClientID}, "id_token_hint": {"the.id.token"},
		"post_logout_redirect_uri": {"https://cardhour.example.edu.cn/"},
	}, u.Query())
}

func TestNewOIDCUnreachableIssuer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	issuer := "http://" + ln.Addr().String() + "/realms/campus"
	ln.Close()
	_, err = signin.NewOIDC(context.Background(), signin.OIDCConfig{Issuer: issuer, ClientID: opClientID, RedirectURL: opRedirect})
	require.ErrorContains(t, err, "oidc: the issuer "+issuer+":")

	_, err = signin.NewOIDC(context.Background(), signin.OIDCConfig{RedirectURL: "/cb"})
	require.Error(t, err)
	for _, want := range []string{"issuer is required", "client ID is required", `redirect URL "/cb"`} {
		require.True(t, strings.Contains(err.Error(), want), "%v lacks %q", err, want)
	}
}
