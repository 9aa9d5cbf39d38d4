package ingest

import (
	"errors"
	"syscall"
)

// PermanentError marks a store error that retrying cannot cure: a read-only
// database or file system, permission denied, a schema missing or newer than
// this build, a full disk. Writers fail at once on it instead of retrying, and
// `cardhour ingest` exits with its message. Stores wrap the errors they know to
// be permanent (see ingest/sqlite and ingest/clickhouse); IsPermanent also
// recognises the file-system errors of any store.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent (nil stays nil).
func Permanent(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	return &PermanentError{Err: err}
}

// permanentErrnos are the file-system errors no retry cures.
var permanentErrnos = []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOSPC}

// IsPermanent reports whether err (or an error it wraps) is permanent: marked
// with Permanent, or a file-system error EACCES, EPERM, EROFS or ENOSPC.
// Everything else (a lost connection, a timeout, a busy database) is transient.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		return true
	}
	for _, e := range permanentErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
