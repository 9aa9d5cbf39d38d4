package ledger

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// Sessions of people signed in through the site's identity provider (the
// dashboard's cookie names one). A session is stored by the SHA-256 of its
// random secret, like a token, so that the state store never holds what the
// browser presents; replicas share it through the store. A session has an
// idle limit (no request for that long ends it) and an absolute expiry.
//
// What a session may do is its grants, read from the role mapping and the
// rosters at sign-in and never changed afterwards: the next sign-in reads
// them again. One grant is active at a time, so that every request is
// scoped exactly as a token of that role and project would be.

// ErrSessionExpired: LookupSession found the session but its idle limit or
// its absolute lifetime has passed. Test with errors.Is.
var ErrSessionExpired = errors.New("session expired")

// Grant is one thing a signed-in person may do: a role, and for a lead or a
// student the project (and for a student the user, as usage names them).
// The same rules as a token's (CheckNewToken) apply.
type Grant struct {
	Role    Role   `json:"role" enum:"admin,finance,lead,student"`
	Project string `json:"project,omitempty"`
	User    string `json:"user,omitempty"`
	// Via is "roster" for a student grant that only the project's roster
	// gave (no group or ID in the mapping): it holds while the person is on
	// the roster, so that taking them off ends it at their next request.
	Via string `json:"via,omitempty"`
}

// GrantViaRoster is Grant.Via of a grant the roster alone gave.
const GrantViaRoster = "roster"

// NewSession describes a session to open.
type NewSession struct {
	// Person names who signed in, as the audit log shows them:
	// "<provider>:<id>" ("oidc:2022110315", "ldap:t0042", "cas:2022110315").
	Person string
	// Name is the person's display name, when the provider gave one.
	Name string
	// Grants: at least one (a person without a role gets no session).
	Grants []Grant
	// Idle ends the session after that long without a request; TTL is its
	// absolute lifetime. Both positive, Idle <= TTL.
	Idle, TTL time.Duration
	// LogoutHint is what the provider needs for RP-initiated logout (the
	// ID token, for OpenID Connect's id_token_hint); "" when none.
	LogoutHint string
}

// Session is a stored session, never with its secret.
type Session struct {
	ID         int64
	Person     string
	Name       string
	Grants     []Grant
	Active     int    // index into Grants: the grant requests are scoped by
	CSRF       string // the session's CSRF token: state-changing requests carry it
	LogoutHint string
	CreatedAt  time.Time
	LastSeenAt time.Time
	IdleUntil  time.Time // LastSeenAt + Idle, never past ExpiresAt
	ExpiresAt  time.Time // CreatedAt + TTL
}

// Grant is the session's active grant.
func (s Session) Grant() Grant {
	if s.Active < 0 || s.Active >= len(s.Grants) {
		return Grant{}
	}
	return s.Grants[s.Active]
}

// LoginAttempt is what a redirect sign-in (OpenID Connect, CAS) keeps
// between sending the browser to the provider and its return: the state is
// its key, taken once.
type LoginAttempt struct {
	State    string // random, sent to the provider and back; stored hashed
	Provider string // "oidc", "cas"
	Nonce    string // OpenID Connect's nonce ("" for CAS)
	Verifier string // the PKCE code verifier ("" for CAS)
	ReturnTo string // the dashboard path to land on, "" for the start page
	TTL      time.Duration
}

// SessionStore keeps sessions and login attempts. Opening and ending a
// session is audited with the person as actor.
type SessionStore interface {
	// CreateSession opens a session and returns its secret, shown this
	// once (the cookie's value): only its SHA-256 is stored. It is audited
	// as "session.create" by ns.Person.
	CreateSession(ctx context.Context, ns NewSession) (secret string, s Session, err error)
	// LookupSession finds the session whose secret was presented and
	// moves its idle limit on (now + Idle, never past ExpiresAt).
	// ErrNotFound when there is none (or it was ended), ErrSessionExpired
	// when its idle limit or lifetime passed. To keep reads cheap, the
	// time last seen is written at most once per SessionSeenEvery of the
	// store's clock, so the idle limit may lag now + Idle by that much.
	LookupSession(ctx context.Context, secret string) (Session, error)
	// SetActiveGrant makes grant i of session id the active one;
	// ErrInvalidArgument when i is out of range, ErrNotFound when there is
	// no such live session.
	SetActiveGrant(ctx context.Context, id int64, i int) (Session, error)
	// EndSession ends a session (sign-out), audited as "session.end" by
	// its person; ending an ended or unknown one is ErrNotFound.
	EndSession(ctx context.Context, id int64) (Session, error)

	// BeginLogin stores a login attempt until now + a.TTL (ErrConflict
	// when one with that state is stored already). It deletes the
	// attempts that expired.
	BeginLogin(ctx context.Context, a LoginAttempt) error
	// TakeLogin returns and deletes the attempt with that state, so that a
	// state is good for one return only: ErrNotFound when there is none
	// (unknown, or taken before: a replay), ErrSessionExpired when it is
	// older than its TTL (and deletes it too).
	TakeLogin(ctx context.Context, state string) (LoginAttempt, error)
}

// CheckNewSession reports every problem with ns at once.
func CheckNewSession(ns *NewSession) error {
	var errs []error
	if ns.Person == "" {
		errs = append(errs, errors.New("person is required"))
	}
	if len(ns.Grants) == 0 {
		errs = append(errs, errors.New("a session needs at least one grant"))
	}
	for i, g := range ns.Grants {
		nt := NewToken{Role: g.Role, Project: g.Project, User: g.User, TTL: time.Hour}
		if err := CheckNewToken(&nt); err != nil {
			errs = append(errs, fmt.Errorf("grant %d: %w", i+1, err))
		}
	}
	if ns.Idle <= 0 || ns.TTL <= 0 || ns.Idle > ns.TTL {
		errs = append(errs, errors.New("idle and ttl must be positive, idle no longer than ttl"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: session of %s: %w", ErrInvalidArgument, ns.Person, errors.Join(errs...))
	}
	return nil
}

// SessionPrefix starts every session secret (the cookie's value), as
// TokenPrefix starts a token's.
const SessionPrefix = "chs_"

// SessionSeenEvery is how often at most LookupSession writes a session's
// time last seen.
const SessionSeenEvery = 10 * time.Second

// NewSessionSecret returns a new session secret: SessionPrefix and 32
// random bytes, base64url.
func NewSessionSecret() (string, error) { return randomString(SessionPrefix, "a session") }

// NewCSRFToken returns a new CSRF token: 32 random bytes, base64url.
func NewCSRFToken() (string, error) { return randomString("", "a CSRF token") }

func randomString(prefix, what string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cannot read random bytes for %s: %w", what, err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// CheckLoginAttempt reports every problem with a at once.
func CheckLoginAttempt(a *LoginAttempt) error {
	var errs []error
	if a.State == "" {
		errs = append(errs, errors.New("state is required"))
	}
	if a.Provider == "" {
		errs = append(errs, errors.New("provider is required"))
	}
	if a.TTL <= 0 {
		errs = append(errs, fmt.Errorf("ttl %s: want a positive duration", a.TTL))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: login attempt: %w", ErrInvalidArgument, errors.Join(errs...))
	}
	return nil
}
