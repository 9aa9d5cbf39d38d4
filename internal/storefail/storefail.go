// Package storefail recognises a database that cannot answer for now (its
// disk is full, its file system read-only, its server unreachable or
// restarting, its file locked by another writer) as opposed to a bug or a
// bad request: such errors wrap ErrUnavailable and name their cause, and the
// API answers them with 503 and Retry-After instead of 500.
//
// Stores classify at the driver: Connector wraps a database/sql driver so
// that every error it returns for such a reason (connecting, beginning,
// running a statement, reading a row, committing) is an *Error, whatever the
// store's code wraps it in. ingest and billing both use it; it imports
// neither.
package storefail

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// ErrUnavailable is wrapped by every error of a store that cannot answer
// for now; test it with errors.Is. Cause names why.
var ErrUnavailable = errors.New("store unavailable")

// Error is a store error that retrying later may cure.
type Error struct {
	Cause string // "disk full", "read-only file system", "unreachable (connection refused)", "database locked", …
	Err   error  // the driver's error
	// RetryAfter is the wait the cause suggests before a retry (an
	// overloaded server: soon; a full disk: later); 0 leaves it to the
	// caller (the API's default).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Cause + " (" + e.Err.Error() + ")" }

// Unwrap is the driver's error (errors.As finds *sqlite.Error, *pgconn.PgError, …).
func (e *Error) Unwrap() error { return e.Err }

// Is reports ErrUnavailable.
func (e *Error) Is(target error) bool { return target == ErrUnavailable }

// Cause is the cause of the first *Error err wraps, "" when there is none.
func Cause(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Cause
	}
	return ""
}

// RetryAfter is the wait suggested by the first *Error err wraps, 0 when
// there is none or it suggests none.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// Classifier names the cause of an error that makes a store unavailable,
// "" when err is of another kind.
type Classifier func(error) string

// Wrap returns err as an *Error when classify names a cause, else err as it
// is. Errors already classified are returned unchanged.
func Wrap(err error, classify Classifier) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if c := classify(err); c != "" {
		return &Error{Cause: c, Err: err}
	}
	return err
}

// SQLite classifies the errors of modernc.org/sqlite on the database file
// path: a full disk (SQLITE_FULL), a read-only database or file system
// (SQLITE_READONLY), a disk I/O error (SQLITE_IOERR: its cause is asked of
// the file system, so that a full or read-only one is named as such rather
// than as "disk I/O error (4874)"), a database another writer holds
// (SQLITE_BUSY, SQLITE_LOCKED) and a file that cannot be opened
// (SQLITE_CANTOPEN).
func SQLite(path string) Classifier {
	return func(err error) string {
		switch {
		case errors.Is(err, syscall.ENOSPC):
			return "disk full"
		case errors.Is(err, syscall.EROFS):
			return "read-only file system"
		}
		var se *sqlite.Error
		if !errors.As(err, &se) {
			return ""
		}
		switch se.Code() & 0xff {
		case sqliteFull:
			return "disk full"
		case sqliteReadOnly:
			if c := fsCause(path); c != "" {
				return c
			}
			return "read-only database"
		case sqliteIOErr:
			if c := fsCause(path); c != "" {
				return c
			}
			return "disk I/O error"
		case sqliteCantOpen:
			if c := fsCause(path); c != "" {
				return c
			}
			return "cannot open the database file"
		case sqliteBusy, sqliteLocked:
			return "database locked by another writer (busy)"
		}
		return ""
	}
}

// SQLite primary result codes.
const (
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadOnly = 8
	sqliteIOErr    = 10
	sqliteFull     = 13
	sqliteCantOpen = 14
)

// IsSQLiteBusy reports SQLITE_BUSY or SQLITE_LOCKED.
func IsSQLiteBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == sqliteBusy || se.Code()&0xff == sqliteLocked)
}

// Postgres classifies the errors of pgx: no connection (refused, reset,
// timed out, closed, the server gone mid-query), the server shutting down or
// starting (57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
// cannot_connect_now), class 08 (connection exception), class 53
// (insufficient resources: 53100 disk full, too many connections) and 25006
// (a read-only transaction: a standby).
func Postgres(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "57P01":
			return "the database server is shutting down (admin shutdown)"
		case pe.Code == "57P02":
			return "the database server restarts after a crash"
		case pe.Code == "57P03":
			return "the database server is starting and cannot accept connections yet"
		case pe.Code == "53100":
			return "the database server's disk is full"
		case pe.Code == "53300":
			return "the database server has too many connections"
		case strings.HasPrefix(pe.Code, "53"):
			return "the database server is out of resources (" + pe.Code + ")"
		case strings.HasPrefix(pe.Code, "08"):
			return "connection to the database server failed (" + pe.Code + ")"
		case pe.Code == "25006":
			return "read-only (the database server is a standby)"
		}
		return ""
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "unreachable (connection refused)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "unreachable (connection reset)"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable (no route to host)"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, net.ErrClosed):
		return "unreachable (the connection was closed)"
	case pgconn.Timeout(err):
		return "unreachable (timed out)"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	var de *net.DNSError
	switch {
	case errors.As(err, &de):
		return "unreachable (" + de.Err + ")"
	case errors.As(err, &ce), errors.As(err, &ne):
		return "unreachable"
	}
	return ""
}

// Describe is a start-up error's text with its cause first when it has one:
// "cannot open SQLite database x.db: disk full (…)".
func Describe(what string, err error, classify Classifier) error {
	return fmt.Errorf("%s: %w", what, Wrap(err, classify))
}
