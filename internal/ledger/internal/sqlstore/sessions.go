package sqlstore

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// sessionPurgeAfter is how long an ended or expired session is kept before
// CreateSession deletes it.
const sessionPurgeAfter = 24 * time.Hour

const sessionCols = `id, person, name, grants_json, active, csrf, logout_hint, created_ms, last_seen_ms, idle_ms, expires_ms, ended_ms`

// sessionRow is a row of ledger_sessions: the session, its idle duration
// and when it was ended (zero while live).
type sessionRow struct {
	ledger.Session
	idle  time.Duration
	ended time.Time
}

func scanSession(sc rowScanner, extra ...any) (sessionRow, error) {
	var r sessionRow
	var grants string
	var created, seen, idle, expires, ended int64
	dest := []any{&r.ID, &r.Person, &r.Name, &grants, &r.Active, &r.CSRF, &r.LogoutHint, &created, &seen, &idle, &expires, &ended}
	if err := sc.Scan(append(dest, extra...)...); err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(grants), &r.Grants); err != nil {
		return r, fmt.Errorf("grants of session %d: %w", r.ID, err)
	}
	r.idle = time.Duration(idle) * time.Millisecond
	r.CreatedAt, r.ExpiresAt, r.ended = fromMS(created), fromMS(expires), fromMS(ended)
	r.seen(fromMS(seen))
	return r, nil
}

// seen sets the time last seen and the idle limit that follows from it.
func (r *sessionRow) seen(at time.Time) {
	r.LastSeenAt = at
	r.IdleUntil = at.Add(r.idle)
	if r.IdleUntil.After(r.ExpiresAt) {
		r.IdleUntil = r.ExpiresAt
	}
}

// expired reports whether the session's idle limit or lifetime has passed
// at now.
func (r *sessionRow) expired(now time.Time) bool { return !now.Before(r.IdleUntil) }

func sessionObject(id int64) string { return "session/" + strconv.FormatInt(id, 10) }

// sessionView is a session as the audit log shows it: never its secret, its
// CSRF token or the provider's logout hint.
func sessionView(r sessionRow) json.RawMessage {
	type view struct {
		ID        int64          `json:"id"`
		Person    string         `json:"person"`
		Name      string         `json:"name,omitempty"`
		Grants    []ledger.Grant `json:"grants"`
		CreatedAt time.Time      `json:"created_at"`
		IdleMS    int64          `json:"idle_ms"`
		ExpiresAt time.Time      `json:"expires_at"`
		EndedAt   time.Time      `json:"ended_at,omitzero"`
	}
	return mustJSON(view{r.ID, r.Person, r.Name, r.Grants, r.CreatedAt, r.idle.Milliseconds(), r.ExpiresAt, r.ended})
}

// CreateSession implements ledger.Store.
func (s *Store) CreateSession(ctx context.Context, ns ledger.NewSession) (string, ledger.Session, error) {
	if err := ledger.CheckNewSession(&ns); err != nil {
		return "", ledger.Session{}, err
	}
	secret, err := ledger.NewSessionSecret()
	if err != nil {
		return "", ledger.Session{}, err
	}
	csrf, err := ledger.NewCSRFToken()
	if err != nil {
		return "", ledger.Session{}, err
	}
	var r sessionRow
	err = s.tx(ctx, "create session", func(tx *sql.Tx) error {
		now := fromMS(s.now().UnixMilli())
		if err := s.purgeSessions(ctx, tx, now); err != nil {
			return err
		}
		r = sessionRow{Session: ledger.Session{Person: ns.Person, Name: ns.Name, Grants: ns.Grants, CSRF: csrf,
			LogoutHint: ns.LogoutHint, CreatedAt: now, ExpiresAt: fromMS(now.Add(ns.TTL).UnixMilli())},
			idle: max(ns.Idle.Truncate(time.Millisecond), time.Millisecond)}
		r.seen(now)
		if err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_sessions (hash, person, name, grants_json, active, csrf,
			logout_hint, created_ms, last_seen_ms, idle_ms, expires_ms) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?) RETURNING id`),
			ledger.HashToken(secret), r.Person, r.Name, string(mustJSON(r.Grants)), csrf, r.LogoutHint,
			now.UnixMilli(), now.UnixMilli(), r.idle.Milliseconds(), r.ExpiresAt.UnixMilli()).Scan(&r.ID); err != nil {
			return fmt.Errorf("%s ledger: cannot store session of %s: %w", s.d.Name, ns.Person, err)
		}
		_, err := s.audit(ctx, tx, now, ledger.AuditRecord{Actor: ns.Person, Action: "session.create",
			Object: sessionObject(r.ID), After: sessionView(r)})
		return err
	})
	if err != nil {
		return "", ledger.Session{}, err
	}
	return secret, r.Session, nil
}

// purgeSessions deletes the sessions ended or expired more than
// sessionPurgeAfter before now.
func (s *Store) purgeSessions(ctx context.Context, tx *sql.Tx, now time.Time) error {
	before := now.Add(-sessionPurgeAfter).UnixMilli()
	if _, err := s.exec(ctx, tx, `DELETE FROM ledger_sessions
		WHERE expires_ms < ? OR (ended_ms > 0 AND ended_ms < ?) OR last_seen_ms + idle_ms < ?`, before, before, before); err != nil {
		return fmt.Errorf("%s ledger: cannot purge old sessions: %w", s.d.Name, err)
	}
	return nil
}

// LookupSession implements ledger.Store.
func (s *Store) LookupSession(ctx context.Context, secret string) (ledger.Session, error) {
	r, err := bySecret(ctx, s, "session", "SELECT "+sessionCols+", hash FROM ledger_sessions WHERE hash = ?", secret, scanSession)
	if err != nil {
		return ledger.Session{}, err
	}
	if !r.ended.IsZero() {
		return ledger.Session{}, fmt.Errorf("%w: session %d was ended", ledger.ErrNotFound, r.ID)
	}
	now := fromMS(s.now().UnixMilli())
	if r.expired(now) {
		return r.Session, fmt.Errorf("%w: session %d of %s expired at %s", ledger.ErrSessionExpired, r.ID, r.Person,
			r.IdleUntil.Format(time.RFC3339))
	}
	if now.Sub(r.LastSeenAt) < ledger.SessionSeenEvery {
		return r.Session, nil
	}
	n, err := s.exec(ctx, s.db, `UPDATE ledger_sessions SET last_seen_ms = ? WHERE id = ? AND ended_ms = 0 AND last_seen_ms < ?`,
		now.UnixMilli(), r.ID, now.UnixMilli())
	if err != nil {
		return ledger.Session{}, fmt.Errorf("%s ledger: cannot update session %d: %w", s.d.Name, r.ID, err)
	}
	if n == 0 { // ended meanwhile, or another lookup wrote a later time: read it again
		return s.session(ctx, s.db, r.ID)
	}
	r.seen(now)
	return r.Session, nil
}

// session reads live session id: ledger.ErrNotFound when it is unknown or
// ended, ledger.ErrSessionExpired too when it expired.
func (s *Store) session(ctx context.Context, q querier, id int64) (ledger.Session, error) {
	r, err := s.sessionRow(ctx, q, id, "")
	if err != nil {
		return ledger.Session{}, err
	}
	return r.Session, nil
}

// sessionRow reads session id (with lock appended to the SELECT) when it is
// live: ledger.ErrNotFound when it is unknown or ended, ledger.ErrNotFound
// and ledger.ErrSessionExpired when it expired.
func (s *Store) sessionRow(ctx context.Context, q querier, id int64, lock string) (sessionRow, error) {
	what := "session " + strconv.FormatInt(id, 10)
	r, err := readRow(ctx, s, q, what, func(sc rowScanner) (sessionRow, error) { return scanSession(sc) },
		`SELECT `+sessionCols+` FROM ledger_sessions WHERE id = ?`+lock, id)
	switch {
	case err != nil:
		return sessionRow{}, err
	case !r.ended.IsZero():
		return sessionRow{}, fmt.Errorf("%w: %s was ended", ledger.ErrNotFound, what)
	case r.expired(fromMS(s.now().UnixMilli())):
		return sessionRow{}, fmt.Errorf("%w: %s: %w", ledger.ErrNotFound, what, ledger.ErrSessionExpired)
	}
	return r, nil
}

// SetActiveGrant implements ledger.Store.
func (s *Store) SetActiveGrant(ctx context.Context, id int64, i int) (ledger.Session, error) {
	var r sessionRow
	err := s.tx(ctx, "switch the grant of session "+strconv.FormatInt(id, 10), func(tx *sql.Tx) error {
		var err error
		if r, err = s.sessionRow(ctx, tx, id, s.d.ForUpdate); err != nil {
			return err
		}
		if i < 0 || i >= len(r.Grants) {
			return fmt.Errorf("%w: session %d: grant %d: want 0 to %d", ledger.ErrInvalidArgument, id, i, len(r.Grants)-1)
		}
		if _, err := s.exec(ctx, tx, `UPDATE ledger_sessions SET active = ? WHERE id = ?`, i, id); err != nil {
			return fmt.Errorf("%s ledger: cannot update session %d: %w", s.d.Name, id, err)
		}
		r.Active = i
		return nil
	})
	if err != nil {
		return ledger.Session{}, err
	}
	return r.Session, nil
}

// EndSession implements ledger.Store.
func (s *Store) EndSession(ctx context.Context, id int64) (ledger.Session, error) {
	what := "session " + strconv.FormatInt(id, 10)
	var r sessionRow
	err := s.tx(ctx, "end "+what, func(tx *sql.Tx) error {
		now := fromMS(s.now().UnixMilli())
		n, err := s.exec(ctx, tx, `UPDATE ledger_sessions SET ended_ms = ? WHERE id = ? AND ended_ms = 0`, now.UnixMilli(), id)
		if err != nil {
			return fmt.Errorf("%s ledger: cannot end %s: %w", s.d.Name, what, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: %s (unknown, or ended before)", ledger.ErrNotFound, what)
		}
		if r, err = readRow(ctx, s, tx, what, func(sc rowScanner) (sessionRow, error) { return scanSession(sc) },
			`SELECT `+sessionCols+` FROM ledger_sessions WHERE id = ?`, id); err != nil {
			return err
		}
		live := r
		live.ended = time.Time{}
		_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: r.Person, Action: "session.end",
			Object: sessionObject(id), Before: sessionView(live), After: sessionView(r)})
		return err
	})
	if err != nil {
		return ledger.Session{}, err
	}
	return r.Session, nil
}

// BeginLogin implements ledger.Store.
func (s *Store) BeginLogin(ctx context.Context, a ledger.LoginAttempt) error {
	if err := ledger.CheckLoginAttempt(&a); err != nil {
		return err
	}
	return s.tx(ctx, "begin "+a.Provider+" login", func(tx *sql.Tx) error {
		now := s.now().UnixMilli()
		if _, err := s.exec(ctx, tx, `DELETE FROM ledger_login_attempts WHERE expires_ms <= ?`, now); err != nil {
			return fmt.Errorf("%s ledger: cannot delete expired login attempts: %w", s.d.Name, err)
		}
		if _, err := s.exec(ctx, tx, `INSERT INTO ledger_login_attempts (state_hash, provider, nonce, verifier, return_to, created_ms, expires_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, ledger.HashToken(a.State), a.Provider, a.Nonce, a.Verifier, a.ReturnTo,
			now, now+a.TTL.Milliseconds()); err != nil {
			return fmt.Errorf("%s ledger: cannot store %s login attempt: %w", s.d.Name, a.Provider, err)
		}
		return nil
	})
}

// TakeLogin implements ledger.Store. One statement deletes the attempt and
// returns it, so that of two takes of one state exactly one gets it.
func (s *Store) TakeLogin(ctx context.Context, state string) (ledger.LoginAttempt, error) {
	want := ledger.HashToken(state)
	a := ledger.LoginAttempt{State: state}
	var got []byte
	var created, expires int64
	err := s.db.QueryRowContext(ctx, s.d.Rebind(`DELETE FROM ledger_login_attempts WHERE state_hash = ?
		RETURNING provider, nonce, verifier, return_to, created_ms, expires_ms, state_hash`), want).
		Scan(&a.Provider, &a.Nonce, &a.Verifier, &a.ReturnTo, &created, &expires, &got)
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.LoginAttempt{}, fmt.Errorf("%w: no such login attempt (unknown, or taken before)", ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.LoginAttempt{}, fmt.Errorf("%s ledger: cannot take login attempt: %w", s.d.Name, err)
	}
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ledger.LoginAttempt{}, fmt.Errorf("%w: no such login attempt", ledger.ErrNotFound)
	}
	a.TTL = time.Duration(expires-created) * time.Millisecond
	if s.now().UnixMilli() >= expires {
		return ledger.LoginAttempt{}, fmt.Errorf("%w: %s login attempt expired at %s", ledger.ErrSessionExpired, a.Provider,
			fromMS(expires).Format(time.RFC3339))
	}
	return a, nil
}
