package storefail

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// clickhouseCodes are the ClickHouse exception codes of a server that
// cannot answer for now, and their cause. The others (a query the server
// cannot parse, a missing table or column, a type mismatch) are bugs and
// stay unclassified.
var clickhouseCodes = map[int32]string{
	159: "timed out (TIMEOUT_EXCEEDED: the query ran longer than the server allows)",
	160: "timed out (TOO_SLOW: the server expects the query to run too long)",
	209: "timed out (SOCKET_TIMEOUT on the ClickHouse server)",
	210: "unreachable (NETWORK_ERROR on the ClickHouse server)",
	279: "unreachable (ALL_CONNECTION_TRIES_FAILED: a shard or replica)",
	202: "overloaded (TOO_MANY_SIMULTANEOUS_QUERIES)",
	203: "overloaded (NO_FREE_CONNECTION)",
	439: "overloaded (CANNOT_SCHEDULE_TASK)",
	252: "overloaded (TOO_MANY_PARTS: inserts outpace merges)",
	241: "overloaded (MEMORY_LIMIT_EXCEEDED)",
	173: "overloaded (CANNOT_ALLOCATE_MEMORY)",
	201: "overloaded (QUOTA_EXCEEDED)",
	243: "disk full (NOT_ENOUGH_SPACE on the ClickHouse server)",
	164: "read-only (READONLY: the ClickHouse user or server is read-only)",
	242: "read-only (TABLE_IS_READ_ONLY: a replicated table lost its coordination service)",
	225: "coordination service unavailable (NO_ZOOKEEPER)",
	999: "coordination service unavailable (KEEPER_EXCEPTION)",
	394: "the ClickHouse server cancelled the query (QUERY_WAS_CANCELLED: shutting down or killed)",
}

// ClickHouse classifies the errors of clickhouse-go: no connection (refused,
// reset, closed, the server gone mid-query, timed out, no such host), no
// free connection in the client's pool, and the server's exceptions that
// mean it cannot answer for now (overloaded, out of memory, timed out, disk
// full, read-only, its coordination service gone; see clickhouseCodes).
// A cancelled or expired request context is left to the caller.
func ClickHouse(err error) string {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ""
	}
	var ex *ch.Exception
	if errors.As(err, &ex) {
		return clickhouseCodes[ex.Code]
	}
	switch {
	case errors.Is(err, ch.ErrAcquireConnTimeout):
		return "overloaded (no free connection to ClickHouse)"
	case errors.Is(err, ch.ErrConnectionClosed), errors.Is(err, io.EOF):
		return "unreachable (the connection was closed)"
	}
	if c := netCause(err); c != "" {
		return c
	}
	// The driver's own words for a connection it found closed (no sentinel).
	if m := err.Error(); strings.Contains(m, "attempted sending on closed connection") || strings.Contains(m, "attempted reading on closed connection") {
		return "unreachable (the connection was closed)"
	}
	return ""
}

// WrapClickHouse is Wrap(err, ClickHouse) with the wait its cause suggests
// (RetryAfter): an overloaded server or client pool (a query slot frees in
// about a second) 1 s; a timed-out query, a memory limit or too many parts
// (the load must fall first) 10 s; a full disk or a read-only server (an
// operator must act) 60 s; an unreachable server (it restarts in seconds)
// the caller's default.
func WrapClickHouse(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	c := ClickHouse(err)
	if c == "" {
		return err
	}
	return &Error{Cause: c, Err: err, RetryAfter: clickhouseRetry(c)}
}

func clickhouseRetry(cause string) time.Duration {
	switch {
	case strings.HasPrefix(cause, "overloaded (MEMORY_LIMIT"), strings.HasPrefix(cause, "overloaded (CANNOT_ALLOCATE"),
		strings.HasPrefix(cause, "overloaded (TOO_MANY_PARTS"), strings.HasPrefix(cause, "timed out (TIMEOUT_EXCEEDED"),
		strings.HasPrefix(cause, "timed out (TOO_SLOW"):
		return 10 * time.Second
	case strings.HasPrefix(cause, "overloaded"):
		return time.Second
	case strings.HasPrefix(cause, "disk full"), strings.HasPrefix(cause, "read-only"):
		return time.Minute
	}
	return 0
}

// netCause names a connection that could not be made or was lost, "" for
// other errors.
func netCause(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "unreachable (connection refused)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "unreachable (connection reset)"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable (no route to host)"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "unreachable (the connection was closed)"
	}
	var de *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &de):
		return "unreachable (" + de.Err + ")"
	case errors.As(err, &ne) && ne.Timeout():
		return "unreachable (timed out)"
	case errors.As(err, &ne):
		return "unreachable"
	}
	return ""
}
