package ledgertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// sessionCases are the sessions' and login attempts' part of the suite.
var sessionCases = []struct {
	name string
	fn   func(*testing.T, Opener)
}{
	{"Sessions", testSessions},
	{"SessionIdleAndAbsoluteExpiry", testSessionExpiry},
	{"SessionLastSeenIsThrottled", testSessionSeenThrottle},
	{"SessionActiveGrant", testSessionActiveGrant},
	{"SessionEnd", testSessionEnd},
	{"SessionPurge", testSessionPurge},
	{"SessionValidation", testSessionValidation},
	{"LoginAttempts", testLoginAttempts},
	{"ConcurrentTakeLoginOnce", testConcurrentTakeLogin},
}

var (
	adminGrant   = ledger.Grant{Role: ledger.RoleAdmin}
	studentGrant = ledger.Grant{Role: ledger.RoleStudent, Project: "vision", User: "li"}
	leadGrant    = ledger.Grant{Role: ledger.RoleLead, Project: "vision"}
)

func newSession(person string, idle, ttl time.Duration, grants ...ledger.Grant) ledger.NewSession {
	return ledger.NewSession{Person: person, Name: "Li Hua", Grants: grants, Idle: idle, TTL: ttl,
		LogoutHint: "eyJhbGciOiJSUzI1NiJ9.hint-of-" + person}
}

func sessionsEqual(a, b ledger.Session) bool { return reflect.DeepEqual(a, b) }

// Create and look up: what was stored comes back, secret and CSRF token
// random, the secret never stored or audited.
func testSessions(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	ns := newSession("oidc:2022110315", 30*time.Minute, 8*time.Hour, studentGrant, leadGrant)
	secret, sess := get2(s1.CreateSession(ctx, ns))(t)
	if !strings.HasPrefix(secret, ledger.SessionPrefix) || len(secret) != len(ledger.SessionPrefix)+43 {
		t.Fatalf("secret %q: want %s and 43 base64url characters", secret, ledger.SessionPrefix)
	}
	if sess.ID == 0 || sess.Person != ns.Person || sess.Name != "Li Hua" || !reflect.DeepEqual(sess.Grants, ns.Grants) ||
		sess.Active != 0 || sess.Grant() != studentGrant || len(sess.CSRF) != 43 || sess.LogoutHint != ns.LogoutHint ||
		!sess.CreatedAt.Equal(t0) || !sess.LastSeenAt.Equal(t0) || !sess.IdleUntil.Equal(t0.Add(30*time.Minute)) ||
		!sess.ExpiresAt.Equal(t0.Add(8*time.Hour)) {
		t.Fatalf("session = %+v", sess)
	}
	// Another replica finds it by its secret.
	if got := get(s2.LookupSession(ctx, secret))(t); !sessionsEqual(got, sess) {
		t.Fatalf("lookup = %+v, want %+v", got, sess)
	}
	secret2, sess2 := get2(s1.CreateSession(ctx, newSession("oidc:2022110316", time.Hour, time.Hour, adminGrant)))(t)
	if secret2 == secret || sess2.CSRF == sess.CSRF || sess2.ID == sess.ID {
		t.Fatalf("two sessions share a secret, a CSRF token or an id: %+v, %+v", sess, sess2)
	}
	tokSecret, _ := get2(s1.CreateToken(ctx, "admin:root", ledger.NewToken{Role: ledger.RoleAdmin, TTL: time.Hour}))(t)
	for _, bad := range []string{"", secret[:len(secret)-1], secret + "x", strings.ToUpper(secret), ledger.SessionPrefix,
		sess.CSRF, tokSecret, string(ledger.HashToken(secret))} {
		_, err := s1.LookupSession(ctx, bad)
		wantErr(t, err, ledger.ErrNotFound, fmt.Sprintf("lookup of %q", bad))
		if err != nil && bad != "" && strings.Contains(err.Error(), bad) {
			t.Fatalf("the error names the secret presented: %v", err)
		}
	}
	es, _ := get2(s1.Audit(ctx, ledger.AuditFilter{Action: "session.create"}))(t)
	if len(es) != 2 || es[1].Actor != ns.Person || es[1].Object != fmt.Sprintf("session/%d", sess.ID) {
		t.Fatalf("session audit = %+v", es)
	}
	noSecretsIn(t, es, secret, sess.CSRF, ns.LogoutHint, secret2, sess2.CSRF)
}

// noSecretsIn fails when any of secrets shows in the audit entries.
func noSecretsIn(t *testing.T, es []ledger.AuditEntry, secrets ...string) {
	t.Helper()
	b, _ := json.Marshal(es)
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s)) {
			t.Fatalf("%q shows in the audit log: %s", s, b)
		}
	}
}

// Lookups move the idle limit on, never past the absolute expiry.
func testSessionExpiry(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s1, s2, ctx := open(t, clock.Now), open(t, clock.Now), ctxT(t)
	idle, _ := get2(s1.CreateSession(ctx, newSession("oidc:1", 30*time.Minute, 8*time.Hour, adminGrant)))(t)
	abs, _ := get2(s1.CreateSession(ctx, newSession("oidc:2", time.Hour, 90*time.Minute, adminGrant)))(t)
	expires := t0.Add(90 * time.Minute)
	for i, s := range []ledger.Store{s1, s2, s1} { // 29 minutes apart: each lookup extends the idle limit
		clock.Advance(29 * time.Minute)
		now := clock.Now()
		got := get(s.LookupSession(ctx, idle))(t)
		if !got.LastSeenAt.Equal(now) || !got.IdleUntil.Equal(now.Add(30*time.Minute)) {
			t.Fatalf("lookup %d at %s: %+v", i, now, got)
		}
		got = get(s.LookupSession(ctx, abs))(t)
		want := now.Add(time.Hour)
		if want.After(expires) {
			want = expires
		}
		if !got.LastSeenAt.Equal(now) || !got.IdleUntil.Equal(want) ||
			!got.ExpiresAt.Equal(expires) {
			t.Fatalf("lookup %d at %s: %+v, want the idle limit at %s", i, now, got, want)
		}
	}
	clock.Advance(3 * time.Minute) // t0+90m: the absolute expiry, though seen 3 minutes ago
	_, err := s1.LookupSession(ctx, abs)
	wantErr(t, err, ledger.ErrSessionExpired, "lookup at the absolute expiry")
	clock.Advance(26*time.Minute + 59*time.Second) // the idle session was last seen at t0+87m
	get(s2.LookupSession(ctx, idle))(t)
	clock.Advance(30 * time.Minute)
	_, err = s1.LookupSession(ctx, idle)
	wantErr(t, err, ledger.ErrSessionExpired, "lookup after 30 idle minutes")
	if errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("an expired session is also not found: %v", err)
	}
	_, err = s2.LookupSession(ctx, idle)
	wantErr(t, err, ledger.ErrSessionExpired, "a second lookup of the expired session")
}

// The time last seen is written at most once per ledger.SessionSeenEvery.
func testSessionSeenThrottle(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s, ctx := open(t, clock.Now), ctxT(t)
	secret, _ := get2(s.CreateSession(ctx, newSession("cas:7", time.Minute, time.Hour, adminGrant)))(t)
	clock.Advance(ledger.SessionSeenEvery - time.Second)
	if got := get(s.LookupSession(ctx, secret))(t); !got.LastSeenAt.Equal(t0) || !got.IdleUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("seen written %s after the last write: %+v", ledger.SessionSeenEvery-time.Second, got)
	}
	clock.Advance(time.Second)
	if got := get(s.LookupSession(ctx, secret))(t); !got.LastSeenAt.Equal(clock.Now()) {
		t.Fatalf("seen not written %s after the last write: %+v", ledger.SessionSeenEvery, got)
	}
	clock.Advance(time.Minute - time.Millisecond) // idle for just under a minute since the write
	get(s.LookupSession(ctx, secret))(t)
}

// SetActiveGrant: in range only, on live sessions only; it sticks.
func testSessionActiveGrant(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	secret, sess := get2(s1.CreateSession(ctx, newSession("ldap:t0042", time.Hour, time.Hour, studentGrant, leadGrant)))(t)
	got := get(s1.SetActiveGrant(ctx, sess.ID, 1))(t)
	if got.Active != 1 || got.Grant() != leadGrant || got.ID != sess.ID || got.CSRF != sess.CSRF {
		t.Fatalf("after SetActiveGrant(1): %+v", got)
	}
	if got := get(s2.LookupSession(ctx, secret))(t); got.Active != 1 || got.Grant() != leadGrant {
		t.Fatalf("lookup after SetActiveGrant(1): %+v", got)
	}
	for _, i := range []int{-1, 2, 100} {
		_, err := s2.SetActiveGrant(ctx, sess.ID, i)
		wantErr(t, err, ledger.ErrInvalidArgument, fmt.Sprintf("grant %d of 2", i))
	}
	if got := get(s2.LookupSession(ctx, secret))(t); got.Active != 1 {
		t.Fatalf("a refused SetActiveGrant changed the session: %+v", got)
	}
	get(s2.SetActiveGrant(ctx, sess.ID, 0))(t)
	_, err := s1.SetActiveGrant(ctx, sess.ID+1000, 0)
	wantErr(t, err, ledger.ErrNotFound, "SetActiveGrant of an unknown session")
	get(s1.EndSession(ctx, sess.ID))(t)
	_, err = s1.SetActiveGrant(ctx, sess.ID, 1)
	wantErr(t, err, ledger.ErrNotFound, "SetActiveGrant of an ended session")

	clock := NewClock(t0)
	s := open(t, clock.Now)
	_, old := get2(s.CreateSession(ctx, newSession("ldap:t0043", time.Minute, time.Hour, studentGrant, leadGrant)))(t)
	clock.Advance(time.Minute)
	_, err = s.SetActiveGrant(ctx, old.ID, 1)
	wantErr(t, err, ledger.ErrNotFound, "SetActiveGrant of an expired session")
}

// EndSession: audited by the person, then the session is gone; twice is
// ErrNotFound.
func testSessionEnd(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	ns := newSession("oidc:2022110315", time.Hour, 8*time.Hour, adminGrant)
	secret, sess := get2(s1.CreateSession(ctx, ns))(t)
	other, _ := get2(s1.CreateSession(ctx, newSession("oidc:2022110316", time.Hour, 8*time.Hour, adminGrant)))(t)
	ended := get(s2.EndSession(ctx, sess.ID))(t)
	if ended.ID != sess.ID || ended.Person != ns.Person || ended.LogoutHint != ns.LogoutHint {
		t.Fatalf("ended = %+v", ended)
	}
	for _, s := range []ledger.Store{s1, s2} {
		_, err := s.LookupSession(ctx, secret)
		wantErr(t, err, ledger.ErrNotFound, "lookup of an ended session")
		_, err = s.EndSession(ctx, sess.ID)
		wantErr(t, err, ledger.ErrNotFound, "ending an ended session")
	}
	_, err := s1.EndSession(ctx, sess.ID+1000)
	wantErr(t, err, ledger.ErrNotFound, "ending an unknown session")
	get(s1.LookupSession(ctx, other))(t) // the other session lives on
	es, _ := get2(s1.Audit(ctx, ledger.AuditFilter{Object: fmt.Sprintf("session/%d", sess.ID)}))(t)
	if len(es) != 2 || es[0].Action != "session.end" || es[1].Action != "session.create" ||
		es[0].Actor != ns.Person || es[1].Actor != ns.Person || es[0].Before == nil || es[0].After == nil {
		t.Fatalf("audit of the session: %+v", es)
	}
	noSecretsIn(t, es, secret, sess.CSRF, ns.LogoutHint)
}

// Sessions ended or expired long ago are purged when sessions are made.
func testSessionPurge(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s, ctx := open(t, clock.Now), ctxT(t)
	expired, _ := get2(s.CreateSession(ctx, newSession("oidc:1", time.Hour, 2*time.Hour, adminGrant)))(t)
	idle, _ := get2(s.CreateSession(ctx, newSession("oidc:2", time.Minute, 2*time.Hour, adminGrant)))(t)
	clock.Advance(2 * time.Hour)
	_, err := s.LookupSession(ctx, expired)
	wantErr(t, err, ledger.ErrSessionExpired, "lookup of an expired session")
	clock.Advance(25 * time.Hour)
	live, _ := get2(s.CreateSession(ctx, newSession("oidc:3", time.Hour, 2*time.Hour, adminGrant)))(t)
	for _, secret := range []string{expired, idle} {
		_, err = s.LookupSession(ctx, secret)
		wantErr(t, err, ledger.ErrNotFound, "lookup of a session expired a day ago")
	}
	get(s.LookupSession(ctx, live))(t)
}

// CheckNewSession's refusals: nothing is stored or audited.
func testSessionValidation(t *testing.T, open Opener) {
	s := open(t, NewClock(t0).Now)
	ctx := ctxT(t)
	for _, ns := range []ledger.NewSession{
		{Grants: []ledger.Grant{adminGrant}, Idle: time.Hour, TTL: time.Hour},
		{Person: "oidc:1", Idle: time.Hour, TTL: time.Hour},
		{Person: "oidc:1", Grants: []ledger.Grant{{Role: ledger.RoleStudent, Project: "vision"}}, Idle: time.Hour, TTL: time.Hour},
		{Person: "oidc:1", Grants: []ledger.Grant{{Role: "root"}}, Idle: time.Hour, TTL: time.Hour},
		{Person: "oidc:1", Grants: []ledger.Grant{adminGrant}, Idle: 2 * time.Hour, TTL: time.Hour},
		{Person: "oidc:1", Grants: []ledger.Grant{adminGrant}, TTL: time.Hour},
		{Person: "oidc:1", Grants: []ledger.Grant{adminGrant}, Idle: time.Hour},
	} {
		secret, _, err := s.CreateSession(ctx, ns)
		wantErr(t, err, ledger.ErrInvalidArgument, fmt.Sprintf("session %+v", ns))
		if secret != "" {
			t.Fatalf("a refused session has a secret: %q", secret)
		}
	}
	if es, _ := get2(s.Audit(ctx, ledger.AuditFilter{}))(t); len(es) != 0 {
		t.Fatalf("refused sessions were audited: %+v", es)
	}
}

// Login attempts: taken once, expired ones refused and deleted.
func testLoginAttempts(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s1, s2, ctx := open(t, clock.Now), open(t, clock.Now), ctxT(t)
	a := ledger.LoginAttempt{State: "st-1", Provider: "oidc", Nonce: "n-1", Verifier: "v-1", ReturnTo: "/invoices", TTL: 10 * time.Minute}
	if err := s1.BeginLogin(ctx, a); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s2.BeginLogin(ctx, a), ledger.ErrConflict, "a state begun twice")
	clock.Advance(10*time.Minute - time.Millisecond)
	if got := get(s2.TakeLogin(ctx, "st-1"))(t); got != a {
		t.Fatalf("taken %+v, want %+v", got, a)
	}
	for _, state := range []string{"st-1", "st-2", ""} {
		_, err := s1.TakeLogin(ctx, state)
		wantErr(t, err, ledger.ErrNotFound, fmt.Sprintf("take of %q", state))
	}
	cas := ledger.LoginAttempt{State: "st-cas", Provider: "cas", TTL: time.Minute}
	if err := s1.BeginLogin(ctx, cas); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	_, err := s2.TakeLogin(ctx, "st-cas")
	wantErr(t, err, ledger.ErrSessionExpired, "take of an expired attempt")
	_, err = s1.TakeLogin(ctx, "st-cas")
	wantErr(t, err, ledger.ErrNotFound, "take of an expired attempt taken before")
	// BeginLogin deletes the expired attempts.
	old := ledger.LoginAttempt{State: "st-old", Provider: "cas", TTL: time.Minute}
	if err := s1.BeginLogin(ctx, old); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	if err := s2.BeginLogin(ctx, ledger.LoginAttempt{State: "st-new", Provider: "cas", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_, err = s1.TakeLogin(ctx, "st-old")
	wantErr(t, err, ledger.ErrNotFound, "take of an attempt expired before a BeginLogin")
	for _, bad := range []ledger.LoginAttempt{{Provider: "oidc", TTL: time.Minute}, {State: "x", TTL: time.Minute}, {State: "x", Provider: "oidc"}} {
		wantErr(t, s1.BeginLogin(ctx, bad), ledger.ErrInvalidArgument, fmt.Sprintf("attempt %+v", bad))
	}
}

// Eight takes of one state at once, on two replicas: exactly one gets it.
func testConcurrentTakeLogin(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	a := ledger.LoginAttempt{State: "st-race", Provider: "oidc", Nonce: "n", Verifier: "v", TTL: time.Minute}
	if err := s1.BeginLogin(ctx, a); err != nil {
		t.Fatal(err)
	}
	won := race(t, []ledger.Store{s1, s2}, 8, func(_ int, s ledger.Store) (bool, error) {
		got, err := s.TakeLogin(ctx, a.State)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			return false, nil
		case err != nil:
			return false, err
		case got != a:
			return false, fmt.Errorf("taken %+v, want %+v", got, a)
		}
		return true, nil
	})
	if won != 1 {
		t.Fatalf("%d of 8 takes got the attempt, want 1", won)
	}
}
