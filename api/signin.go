package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/oauth2"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/signin"
)

// People sign in through the site's identity provider (docs/auth.md):
// OpenID Connect (GET /auth/login, /auth/callback), CAS 3.0
// (GET /auth/cas/login, /auth/cas/callback) or an LDAP login form
// (POST /auth/ldap); the demo has one-click people (GET /auth/demo). A
// sign-in maps the person to grants (the role mapping and the rosters) and
// opens a session: an HttpOnly cookie naming a session stored hashed in the
// state store. Requests with the cookie and no Authorization header act as
// the session's active grant; those that change something carry the
// session's CSRF token in X-CSRF-Token. A request with a bearer token never
// uses a session.

// Defaults of SignIn.
const (
	DefaultSessionIdle = 30 * time.Minute
	DefaultSessionTTL  = 12 * time.Hour
	loginAttemptTTL    = 10 * time.Minute
	sessionCookie      = "cardhour_session"
	csrfHeader         = "X-CSRF-Token"
)

// SignInStore is what sign-in keeps in the state store: sessions, login
// attempts, the audit log of sign-ins and the rosters (a person on a
// project's roster is a student of it). Any ledger.Store is one.
type SignInStore interface {
	ledger.SessionStore
	RecordAudit(ctx context.Context, r ledger.AuditRecord) (ledger.AuditEntry, error)
	Students(ctx context.Context, f ledger.StudentFilter) (page []ledger.Student, next string, err error)
}

// RoleMapper turns an identity into grants (internal/signin's Mapping).
type RoleMapper interface {
	Grants(ctx context.Context, id signin.Identity, rosters signin.RosterLookup) ([]ledger.Grant, error)
	Help() string
	HelpZH() string
}

// OIDCProvider is an OpenID Connect relying party (internal/signin's OIDC).
type OIDCProvider interface {
	AuthURL(state, nonce, verifier string) string
	Exchange(ctx context.Context, code, verifier, nonce string) (id signin.Identity, rawIDToken string, err error)
	EndSessionURL(idTokenHint, postLogoutRedirect string) string
}

// LDAPProvider checks a user name and password (internal/signin's LDAP).
type LDAPProvider interface {
	Authenticate(ctx context.Context, user, password string) (signin.Identity, error)
}

// IdentityLookup is a provider that can read a person again without them
// (LDAP, through its service account): the sessions it opened re-check
// their grants every RecheckEvery.
type IdentityLookup interface {
	Lookup(ctx context.Context, id string) (signin.Identity, error)
}

// CASProvider is a CAS 3.0 client (internal/signin's CAS).
type CASProvider interface {
	LoginURL(state string) string
	Validate(ctx context.Context, ticket, state string) (signin.Identity, error)
}

// DemoPerson is a person the demo signs in with one click (never
// configured outside `cardhour demo`).
type DemoPerson struct {
	Label    string // what the button says
	Identity signin.Identity
}

// SignIn configures people's sign-in; a nil *SignIn in Config: tokens only.
type SignIn struct {
	Store   SignInStore // required
	Mapping RoleMapper  // required
	// The providers; at least one of them or Demo.
	OIDC     OIDCProvider
	OIDCName string // the button's "Sign in with …" name; "" the campus account
	LDAP     LDAPProvider
	LDAPName string
	CAS      CASProvider
	CASName  string
	Demo     []DemoPerson
	// Idle and TTL bound a session (DefaultSessionIdle, DefaultSessionTTL).
	Idle, TTL time.Duration
	// RecheckEvery is how often a session the LDAP form opened reads the
	// person's groups again (IdentityLookup) and loses a grant the mapping
	// no longer gives; 0: Idle, so that leaving a group ends what it gave
	// within the idle limit; negative: at every request.
	RecheckEvery time.Duration
	// SecureCookie marks the cookie Secure; serve sets it when it speaks
	// TLS (a request that came over TLS gets it anyway).
	SecureCookie bool
	// PublicURL is where people reach the dashboard (for the provider's
	// post-logout redirect); "" the request's own host.
	PublicURL string
}

func (c *SignIn) check() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("sign-in needs the state store"))
	}
	if c.Mapping == nil {
		errs = append(errs, errors.New("sign-in needs a role mapping"))
	}
	if c.OIDC == nil && c.LDAP == nil && c.CAS == nil && len(c.Demo) == 0 {
		errs = append(errs, errors.New("sign-in needs a provider (OpenID Connect, LDAP, CAS or the demo's)"))
	}
	if c.Idle == 0 {
		c.Idle = DefaultSessionIdle
	}
	if c.TTL == 0 {
		c.TTL = DefaultSessionTTL
	}
	if c.Idle < 0 || c.TTL < 0 || c.Idle > c.TTL {
		errs = append(errs, errors.New("session idle and lifetime must be positive, idle no longer than the lifetime"))
	}
	return errors.Join(errs...)
}

// routesSignIn adds the sign-in routes (always: without sign-in configured
// they say so).
func (s *Server) routesSignIn(e *gin.Engine) {
	e.GET("/auth/providers", s.authProviders)
	e.GET("/auth/session", s.authSession)
	e.POST("/auth/session/active", s.authSetActive)
	e.POST("/auth/logout", s.authLogout)
	e.GET("/auth/login", s.oidcLogin)
	e.GET("/auth/callback", s.oidcCallback)
	e.POST("/auth/ldap", s.ldapLogin)
	e.GET("/auth/cas/login", s.casLogin)
	e.GET("/auth/cas/callback", s.casCallback)
	e.GET("/auth/demo", s.demoLogin)
}

// providersBody is what the dashboard's sign-in page offers.
type providersBody struct {
	OIDC  string   `json:"oidc,omitempty"` // the button's name; "" none
	LDAP  string   `json:"ldap,omitempty"`
	CAS   string   `json:"cas,omitempty"`
	Demo  []string `json:"demo,omitempty"` // labels, by index
	Token bool     `json:"token"`          // the token paste (always)
}

func (s *Server) authProviders(c *gin.Context) {
	b := providersBody{Token: true}
	if si := s.cfg.SignIn; si != nil {
		if si.OIDC != nil {
			b.OIDC = nameOr(si.OIDCName, "OpenID Connect")
		}
		if si.LDAP != nil {
			b.LDAP = nameOr(si.LDAPName, "LDAP")
		}
		if si.CAS != nil {
			b.CAS = nameOr(si.CASName, "CAS")
		}
		for _, d := range si.Demo {
			b.Demo = append(b.Demo, d.Label)
		}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, b)
}

func nameOr(n, def string) string {
	if n = strings.TrimSpace(n); n != "" {
		return n
	}
	return def
}

// randomString is n random bytes, base64url.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// returnPath keeps a return target only when it is a dashboard path of
// this origin (no open redirect).
func returnPath(v string) string {
	if !strings.HasPrefix(v, "/ui/") || strings.HasPrefix(v, "//") || strings.ContainsAny(v, "\\\r\n") {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || u.Host != "" || u.Scheme != "" {
		return ""
	}
	return v
}

func (s *Server) oidcLogin(c *gin.Context) {
	si := s.cfg.SignIn
	if si == nil || si.OIDC == nil {
		s.signInPage(c, http.StatusNotFound, pageNoProvider, "oidc", nil)
		return
	}
	a := ledger.LoginAttempt{State: randomString(24), Provider: "oidc", Nonce: randomString(24),
		Verifier: oauth2.GenerateVerifier(), ReturnTo: returnPath(c.Query("return")), TTL: loginAttemptTTL}
	if err := si.Store.BeginLogin(c.Request.Context(), a); err != nil {
		s.signInFailed(c, "oidc", "", err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusFound, si.OIDC.AuthURL(a.State, a.Nonce, a.Verifier))
}

func (s *Server) oidcCallback(c *gin.Context) {
	si := s.cfg.SignIn
	if si == nil || si.OIDC == nil {
		s.signInPage(c, http.StatusNotFound, pageNoProvider, "oidc", nil)
		return
	}
	ctx := c.Request.Context()
	if e := c.Query("error"); e != "" {
		s.refuse(c, "oidc", "", signin.Refused("provider_error", "the provider refused the sign-in: "+clean(e+" "+c.Query("error_description"), 200), nil))
		return
	}
	a, err := s.takeLogin(ctx, c.Query("state"), "oidc")
	if err != nil {
		s.refuse(c, "oidc", "", err)
		return
	}
	id, raw, err := si.OIDC.Exchange(ctx, c.Query("code"), a.Verifier, a.Nonce)
	if err != nil {
		s.refuse(c, "oidc", "", err)
		return
	}
	s.openSession(c, id, raw, a.ReturnTo)
}

// takeLogin takes the login attempt of state: an unknown, replayed or
// expired state, or one of another provider, is a refusal (bad_state).
func (s *Server) takeLogin(ctx context.Context, state, provider string) (ledger.LoginAttempt, error) {
	if state == "" {
		return ledger.LoginAttempt{}, signin.Refused("bad_state", "the sign-in came back without its state", nil)
	}
	a, err := s.cfg.SignIn.Store.TakeLogin(ctx, state)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return a, signin.Refused("bad_state", "the sign-in's state is unknown or was used before (a replayed or forged return)", nil)
	case errors.Is(err, ledger.ErrSessionExpired):
		return a, signin.Refused("bad_state", "the sign-in took too long (more than 10 minutes); start again", nil)
	case err != nil:
		return a, err
	case a.Provider != provider:
		return a, signin.Refused("bad_state", "the sign-in's state belongs to another provider", nil)
	}
	return a, nil
}

func (s *Server) casLogin(c *gin.Context) {
	si := s.cfg.SignIn
	if si == nil || si.CAS == nil {
		s.signInPage(c, http.StatusNotFound, pageNoProvider, "cas", nil)
		return
	}
	a := ledger.LoginAttempt{State: randomString(24), Provider: "cas", ReturnTo: returnPath(c.Query("return")), TTL: loginAttemptTTL}
	if err := si.Store.BeginLogin(c.Request.Context(), a); err != nil {
		s.signInFailed(c, "cas", "", err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusFound, si.CAS.LoginURL(a.State))
}

func (s *Server) casCallback(c *gin.Context) {
	si := s.cfg.SignIn
	if si == nil || si.CAS == nil {
		s.signInPage(c, http.StatusNotFound, pageNoProvider, "cas", nil)
		return
	}
	ctx := c.Request.Context()
	state := c.Query("state")
	a, err := s.takeLogin(ctx, state, "cas")
	if err != nil {
		s.refuse(c, "cas", "", err)
		return
	}
	if c.Query("ticket") == "" {
		s.refuse(c, "cas", "", signin.Refused("bad_ticket", "CAS sent no ticket", nil))
		return
	}
	id, err := si.CAS.Validate(ctx, c.Query("ticket"), state)
	if err != nil {
		s.refuse(c, "cas", "", err)
		return
	}
	s.openSession(c, id, "", a.ReturnTo)
}

// ldapLogin is the dashboard's login form for sites with LDAP only. A
// form posted from another site is refused (login CSRF: it would sign the
// victim in as someone else).
func (s *Server) ldapLogin(c *gin.Context) {
	si := s.cfg.SignIn
	if si == nil || si.LDAP == nil {
		s.signInPage(c, http.StatusNotFound, pageNoProvider, "ldap", nil)
		return
	}
	if !sameOrigin(c.Request) {
		s.refuse(c, "ldap", "", signin.Refused("cross_site", "the login form was posted from another site", nil))
		return
	}
	user := strings.TrimSpace(c.PostForm("user"))
	id, err := si.LDAP.Authenticate(c.Request.Context(), user, c.PostForm("password"))
	if err != nil {
		s.refuse(c, "ldap", clean(user, 64), err)
		return
	}
	s.openSession(c, id, "", returnPath(c.PostForm("return")))
}

// clean is s fit for the audit log and a page: printable runes, at most n
// bytes.
func clean(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len()+len(string(r)) > n {
			break
		}
		if r >= 0x20 && r != 0x7f {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sameOrigin: the Origin header (or, without it, the Referer) names this
// host; Sec-Fetch-Site same-origin counts too.
func sameOrigin(r *http.Request) bool {
	if v := r.Header.Get("Sec-Fetch-Site"); v != "" {
		return v == "same-origin" || v == "none"
	}
	o := r.Header.Get("Origin")
	if o == "" {
		o = r.Header.Get("Referer")
	}
	if o == "" || o == "null" {
		return o == "" // a client that sends neither (curl, a test) is not a browser
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

func (s *Server) demoLogin(c *gin.Context) {
	si := s.cfg.SignIn
	if si == nil || len(si.Demo) == 0 {
		s.signInPage(c, http.StatusNotFound, pageNoProvider, "demo", nil)
		return
	}
	i, ok := indexParam(c.Query("as"), len(si.Demo))
	if !ok {
		s.refuse(c, "demo", "", signin.Refused("bad_request", "no such demo person", nil))
		return
	}
	s.openSession(c, si.Demo[i].Identity, "", "")
}

func indexParam(v string, n int) (int, bool) {
	i, err := strconv.Atoi(v)
	return i, err == nil && i >= 0 && i < n
}
