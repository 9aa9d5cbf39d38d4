package storefail_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/storefail"
)

// The errors of a ClickHouse that cannot answer for now name their cause;
// a query bug, a schema mismatch and a cancelled request stay unclassified.
func TestClickHouseCauses(t *testing.T) {
	dial := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
	}
	for _, c := range []struct {
		cause string
		err   error
	}{
		{"overloaded (TOO_MANY_SIMULTANEOUS_QUERIES)", &ch.Exception{Code: 202, Message: "Too many simultaneous queries. Maximum: 100"}},
		{"overloaded (MEMORY_LIMIT_EXCEEDED)", &ch.Exception{Code: 241}},
		{"timed out (TIMEOUT_EXCEEDED", &ch.Exception{Code: 159}},
		{"disk full (NOT_ENOUGH_SPACE", &ch.Exception{Code: 243}},
		{"read-only (READONLY", &ch.Exception{Code: 164}},
		{"overloaded (TOO_MANY_PARTS", &ch.Exception{Code: 252}},
		{"unreachable (connection refused)", dial(syscall.ECONNREFUSED)},
		{"unreachable (connection reset)", fmt.Errorf("read: %w", dial(syscall.ECONNRESET))},
		{"unreachable (no route to host)", dial(syscall.EHOSTUNREACH)},
		{"unreachable (the connection was closed)", fmt.Errorf("read data: failed to read block name: %w", io.EOF)},
		{"unreachable (timed out)", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}},
		{"unreachable (no such host)", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "clickhouse"}}},
		{"overloaded (no free connection to ClickHouse)", ch.ErrAcquireConnTimeout},
		{"unreachable (the connection was closed)", errors.New("attempted reading on closed connection")},
	} {
		got := storefail.Wrap(fmt.Errorf("cannot read usage: %w", c.err), storefail.ClickHouse)
		require.ErrorIs(t, got, storefail.ErrUnavailable, "%v", c.err)
		require.Contains(t, storefail.Cause(got), c.cause, "%v", c.err)
		require.ErrorIs(t, got, c.err, "the driver's error is still beneath")
	}
	for _, err := range []error{
		&ch.Exception{Code: 47, Message: "Missing columns: 'nosuch'"}, // UNKNOWN_IDENTIFIER
		&ch.Exception{Code: 60}, // UNKNOWN_TABLE
		&ch.Exception{Code: 62}, // SYNTAX_ERROR
		&ch.Exception{Code: 53}, // TYPE_MISMATCH
		errors.New("clickhouse [AppendRow]: converting string to Int64 is unsupported"),
		context.Canceled,
		fmt.Errorf("dial: %w", context.DeadlineExceeded),
	} {
		require.NotErrorIs(t, storefail.Wrap(err, storefail.ClickHouse), storefail.ErrUnavailable, "%v", err)
	}
}

// WrapClickHouse suggests the wait of the cause; an error already
// classified keeps its own, and others none.
func TestClickHouseRetryAfter(t *testing.T) {
	for code, want := range map[int32]time.Duration{202: time.Second, 203: time.Second, 241: 10 * time.Second, 159: 10 * time.Second, 243: time.Minute, 164: time.Minute, 394: 0} {
		err := fmt.Errorf("cannot read usage: %w", storefail.WrapClickHouse(&ch.Exception{Code: code}))
		require.ErrorIs(t, err, storefail.ErrUnavailable, code)
		require.Equal(t, want, storefail.RetryAfter(err), code)
	}
	refused := storefail.WrapClickHouse(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})
	require.Zero(t, storefail.RetryAfter(refused), "unreachable: the caller's default")
	again := storefail.WrapClickHouse(fmt.Errorf("retry: %w", storefail.WrapClickHouse(&ch.Exception{Code: 243})))
	require.Equal(t, time.Minute, storefail.RetryAfter(again))
	require.Zero(t, storefail.RetryAfter(storefail.WrapClickHouse(&ch.Exception{Code: 47})))
	require.Zero(t, storefail.RetryAfter(nil))
}
