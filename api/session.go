package api

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humagin"
	"github.com/gin-gonic/gin"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/signin"
)

// openSession maps id to grants and opens a session, or refuses: a person
// with no role gets the page saying whom to ask, and no session.
func (s *Server) openSession(c *gin.Context, id signin.Identity, logoutHint, returnTo string) {
	si := s.cfg.SignIn
	ctx := c.Request.Context()
	if id.ID == "" {
		s.refuse(c, id.Provider, "", signin.Refused("missing_claim", "the provider named no user", nil))
		return
	}
	grants, err := si.Mapping.Grants(ctx, id, s.rosterLookup)
	if err != nil {
		s.signInFailed(c, id.Provider, id.Person(), err)
		return
	}
	if len(grants) == 0 {
		s.auditSignIn(ctx, id.Person(), "signin.no_role", map[string]string{"provider": id.Provider})
		s.signInPage(c, http.StatusForbidden, pageNoRole, id.Provider, &pageData{Person: id.Person(), Name: id.Name})
		return
	}
	secret, sess, err := si.Store.CreateSession(ctx, ledger.NewSession{Person: id.Person(), Name: id.Name, Grants: grants,
		Idle: si.Idle, TTL: si.TTL, LogoutHint: logoutHint})
	if err != nil {
		s.signInFailed(c, id.Provider, id.Person(), err)
		return
	}
	s.setSessionCookie(c, secret, sess.ExpiresAt.Sub(sess.CreatedAt))
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusSeeOther, cmp.Or(returnTo, "/ui/"))
}

// rosterLookup is the rosters' part of the role mapping: the projects on
// whose roster user is.
func (s *Server) rosterLookup(ctx context.Context, user string) ([]string, error) {
	var projects []string
	cursor := ""
	for {
		page, next, err := s.cfg.SignIn.Store.Students(ctx, ledger.StudentFilter{User: user, Cursor: cursor, Limit: ledger.MaxLimit})
		if err != nil {
			return nil, err
		}
		for _, st := range page {
			if st.User == user {
				projects = append(projects, st.Project)
			}
		}
		if next == "" {
			return projects, nil
		}
		cursor = next
	}
}

// refuse answers a refused sign-in with its page and an audit entry.
func (s *Server) refuse(c *gin.Context, provider, who string, err error) {
	r := signin.AsRefusal(err)
	if r == nil {
		s.signInFailed(c, provider, who, err)
		return
	}
	logFrom(c.Request.Context()).Warn("sign-in refused", "provider", provider, "code", r.Code, "err", r.Error())
	person := provider + ":?"
	if who != "" {
		person = provider + ":" + who
	}
	s.auditSignIn(c.Request.Context(), person, "signin.refused", map[string]string{"provider": provider, "code": r.Code, "reason": r.Reason})
	s.signInPage(c, http.StatusForbidden, pageRefused, provider, &pageData{Code: r.Code, Reason: r.Reason})
}

// signInFailed answers a sign-in that failed on our side or the
// provider's (a store or provider that did not answer): 503, no session.
func (s *Server) signInFailed(c *gin.Context, provider, who string, err error) {
	if r := signin.AsRefusal(err); r != nil {
		s.refuse(c, provider, who, err)
		return
	}
	logFrom(c.Request.Context()).Error("sign-in failed", "provider", provider, "err", err)
	s.signInPage(c, http.StatusServiceUnavailable, pageFailed, provider, nil)
}

func (s *Server) auditSignIn(ctx context.Context, person, action string, what map[string]string) {
	after, _ := json.Marshal(what)
	if _, err := s.cfg.SignIn.Store.RecordAudit(ctx, ledger.AuditRecord{Actor: person, Action: action, Object: "signin/" + what["provider"], After: after}); err != nil {
		logFrom(ctx).Error("cannot record a sign-in in the audit log", "action", action, "err", err)
	}
}

// setSessionCookie sets the cookie for the session's lifetime, relative
// (Max-Age): the store's clock may not be the browser's (the demo runs a
// simulated one).
func (s *Server) setSessionCookie(c *gin.Context, secret string, ttl time.Duration) {
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: secret, Path: "/", MaxAge: int(ttl / time.Second),
		HttpOnly: true, Secure: s.cfg.SignIn.SecureCookie || c.Request.TLS != nil, SameSite: http.SameSiteLaxMode})
}

func (s *Server) clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	secure := r.TLS != nil || (s.cfg.SignIn != nil && s.cfg.SignIn.SecureCookie)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
}

// sessionOf looks the request's session up: ok false with no cookie (or no
// sign-in configured); err ErrNotFound or ErrSessionExpired for a cookie
// that names no live session.
func (s *Server) sessionOf(r *http.Request) (ledger.Session, bool, error) {
	if s.cfg.SignIn == nil {
		return ledger.Session{}, false, nil
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return ledger.Session{}, false, nil
	}
	sess, err := s.cfg.SignIn.Store.LookupSession(r.Context(), ck.Value)
	return sess, true, err
}

// sessionBody is the session as the dashboard reads it.
type sessionBody struct {
	Person    string         `json:"person"`
	Name      string         `json:"name,omitempty"`
	Grants    []ledger.Grant `json:"grants"`
	Active    int            `json:"active"`
	CSRF      string         `json:"csrf_token"`
	ExpiresAt time.Time      `json:"expires_at"`
	IdleUntil time.Time      `json:"idle_until"`
}

func bodyOf(sess ledger.Session) sessionBody {
	return sessionBody{Person: sess.Person, Name: sess.Name, Grants: sess.Grants, Active: sess.Active, CSRF: sess.CSRF,
		ExpiresAt: sess.ExpiresAt, IdleUntil: sess.IdleUntil}
}

func (s *Server) authSession(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	sess, ok, err := s.sessionOf(c.Request)
	if !s.sessionUsable(c, ok, err) {
		return
	}
	c.JSON(http.StatusOK, bodyOf(sess))
}

// sessionUsable answers the request when there is no usable session (401,
// or 503 when the store did not answer) and reports whether there is one.
func (s *Server) sessionUsable(c *gin.Context, ok bool, err error) bool {
	switch {
	case !ok:
		s.writeProblem(c, newProblem(http.StatusUnauthorized, ProblemUnauthorized, "not signed in"))
	case errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrSessionExpired):
		s.clearSessionCookie(c.Writer, c.Request)
		s.writeProblem(c, newProblem(http.StatusUnauthorized, ProblemUnauthorized, "the session ended: sign in again"))
	case err != nil:
		logFrom(c.Request.Context()).Error("session lookup failed", "err", err)
		s.writeProblem(c, newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "the state store did not answer"))
	default:
		return true
	}
	return false
}

// csrfOK: the request carries the session's CSRF token in its header (a
// form another site makes a browser post cannot set a header, nor read the
// token from /auth/session).
func csrfOK(r *http.Request, sess ledger.Session) bool {
	got := r.Header.Get(csrfHeader)
	return sess.CSRF != "" && subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) == 1
}

// sessionChange is the session of a request to /auth that changes it, with
// its CSRF token; ok false when it answered the request itself.
func (s *Server) sessionChange(c *gin.Context) (ledger.Session, bool) {
	sess, ok, err := s.sessionOf(c.Request)
	if !s.sessionUsable(c, ok, err) {
		return sess, false
	}
	if !csrfOK(c.Request, sess) {
		s.writeProblem(c, newProblem(http.StatusForbidden, ProblemForbidden, "this request needs the session's "+csrfHeader))
		return sess, false
	}
	return sess, true
}

func (s *Server) authSetActive(c *gin.Context) {
	sess, ok := s.sessionChange(c)
	if !ok {
		return
	}
	var in struct {
		Grant *int `json:"grant"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, 1<<10)).Decode(&in); err != nil || in.Grant == nil {
		s.writeProblem(c, newProblem(http.StatusBadRequest, ProblemBadRequest, `want {"grant": N}, N the index of one of the session's grants`))
		return
	}
	if *in.Grant < 0 || *in.Grant >= len(sess.Grants) {
		s.writeProblem(c, newProblem(http.StatusUnprocessableEntity, ProblemValidation, "grant: no such grant of this session"))
		return
	}
	sess, err := s.cfg.SignIn.Store.SetActiveGrant(c.Request.Context(), sess.ID, *in.Grant)
	if !s.sessionUsable(c, true, err) {
		return
	}
	c.JSON(http.StatusOK, bodyOf(sess))
}

// authLogout ends the session and says where the browser goes next: the
// provider's logout (RP-initiated logout) when it has one, else the
// dashboard.
func (s *Server) authLogout(c *gin.Context) {
	sess, ok := s.sessionChange(c)
	if !ok {
		return
	}
	if _, err := s.cfg.SignIn.Store.EndSession(c.Request.Context(), sess.ID); err != nil && !errors.Is(err, ledger.ErrNotFound) {
		logFrom(c.Request.Context()).Error("cannot end a session", "err", err)
		s.writeProblem(c, newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "the state store did not answer; the session is still open"))
		return
	}
	s.rechecked.Delete(sess.ID)
	s.clearSessionCookie(c.Writer, c.Request)
	next := "/ui/"
	if si := s.cfg.SignIn; si.OIDC != nil && sess.LogoutHint != "" {
		if u := si.OIDC.EndSessionURL(sess.LogoutHint, s.publicURL(c.Request)+"/ui/"); u != "" {
			next = u
		}
	}
	c.JSON(http.StatusOK, gin.H{"ended": true, "redirect": next})
}

func (s *Server) publicURL(r *http.Request) string {
	if u := s.cfg.SignIn.PublicURL; u != "" {
		return u
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// sessionPrincipal resolves a request that carries no Authorization header
// but a session cookie: the principal is the session's active grant, the
// actor its person; a state-changing request needs the CSRF token. handled
// is true when it answered the request itself (refused).
func (s *Server) sessionPrincipal(ctx huma.Context) (tok ledger.Token, person string, found, handled bool) {
	gc := humagin.Unwrap(ctx)
	if gc == nil {
		return ledger.Token{}, "", false, false
	}
	r := gc.Request
	sess, ok, err := s.sessionOf(r)
	if !ok {
		return ledger.Token{}, "", false, false
	}
	switch {
	case errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrSessionExpired):
		ctx.AppendHeader("Set-Cookie", (&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode}).String())
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, "the session ended: sign in again")
		return ledger.Token{}, "", true, true
	case err != nil:
		writeUnavailable(ctx, err)
		return ledger.Token{}, "", true, true
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if !csrfOK(r, sess) {
			_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, "a request made with a session that changes something needs the session's "+csrfHeader+" header")
			return ledger.Token{}, "", true, true
		}
	}
	g := sess.Grant()
	if lost := s.recheck(r.Context(), sess); lost != "" {
		ctx.AppendHeader("Set-Cookie", (&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode}).String())
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, lost+": sign in again to see what you may still do")
		return ledger.Token{}, "", true, true
	}
	if g.Via == ledger.GrantViaRoster {
		// The roster alone made this person a student: taken off it, they
		// lose the project at their next request, not at the next sign-in.
		on, err := s.onRoster(r.Context(), g.Project, g.User)
		if err != nil {
			writeUnavailable(ctx, err)
			return ledger.Token{}, "", true, true
		}
		if !on {
			_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, "you are no longer on the roster of project "+g.Project+": sign in again to see what you may still do")
			return ledger.Token{}, "", true, true
		}
	}
	return ledger.Token{Role: g.Role, Project: g.Project, User: g.User, Name: sess.Person, CreatedBy: sess.Person,
		CreatedAt: sess.CreatedAt, ExpiresAt: sess.ExpiresAt}, sess.Person, true, false
}

// onRoster reports whether user is on project's roster.
func (s *Server) onRoster(ctx context.Context, project, user string) (bool, error) {
	page, _, err := s.cfg.SignIn.Store.Students(ctx, ledger.StudentFilter{Project: project, User: user, Limit: 1})
	if err != nil {
		return false, err
	}
	return len(page) > 0 && page[0].User == user && page[0].Project == project, nil
}

// recheck reads a person the LDAP form signed in again from the directory
// once RecheckEvery has passed since the last look (on this replica; since
// sign-in at first) and ends the session when the mapping no longer gives
// its active grant; it returns why ("" when the session holds). A directory
// that does not answer is logged and asked again at the next request: it
// never ends a session.
func (s *Server) recheck(ctx context.Context, sess ledger.Session) string {
	si := s.cfg.SignIn
	lookup, ok := si.LDAP.(IdentityLookup)
	id, isLDAP := strings.CutPrefix(sess.Person, "ldap:")
	if !ok || !isLDAP {
		return ""
	}
	every := si.RecheckEvery
	if every == 0 {
		every = si.Idle
	}
	now := s.now()
	last := sess.CreatedAt
	if v, ok := s.rechecked.Load(sess.ID); ok {
		last = v.(time.Time)
	}
	if every > 0 && now.Sub(last) < every {
		return ""
	}
	person, err := lookup.Lookup(ctx, id)
	var grants []ledger.Grant
	if err == nil {
		grants, err = si.Mapping.Grants(ctx, person, s.rosterLookup)
	}
	if r := signin.AsRefusal(err); err != nil && (r == nil || r.Code != "gone") {
		logFrom(ctx).Warn("cannot re-check a session's grants; asked again at the next request", "person", sess.Person, "err", err)
		return ""
	}
	active := sess.Grant()
	if slices.ContainsFunc(grants, func(g ledger.Grant) bool {
		return g.Role == active.Role && g.Project == active.Project && g.User == active.User
	}) {
		s.rechecked.Store(sess.ID, now)
		return ""
	}
	s.rechecked.Delete(sess.ID)
	if _, err := si.Store.EndSession(ctx, sess.ID); err != nil && !errors.Is(err, ledger.ErrNotFound) {
		logFrom(ctx).Error("cannot end a session whose grant was withdrawn", "person", sess.Person, "err", err)
	}
	what := string(active.Role)
	if active.Project != "" {
		what += " of " + active.Project
	}
	return "the directory no longer gives you " + what
}
