package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/storefail"
)

// failingUsage answers every usage read with err.
type failingUsage struct {
	*fakeUsage
	err error
}

func (u failingUsage) Usage(context.Context, reads.UsageQuery) (*reads.UsageReport, error) {
	return nil, u.err
}

// A ClickHouse usage store that cannot answer for now: 503 problem+json
// whose Retry-After (header and detail) is the wait its cause suggests: an
// overloaded server soon, a full disk later, an unreachable one the default.
func TestUsageStoreUnavailableRetryAfterFollowsTheCause(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		err          error
		cause, retry string
	}{
		{&ch.Exception{Code: 202, Message: "Too many simultaneous queries. Maximum: 100"}, "overloaded (TOO_MANY_SIMULTANEOUS_QUERIES)", "1"},
		{&ch.Exception{Code: 241, Message: "Memory limit (total) exceeded"}, "overloaded (MEMORY_LIMIT_EXCEEDED)", "10"},
		{&ch.Exception{Code: 243, Message: "Cannot reserve 1.00 MiB, not enough space"}, "disk full", "60"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, "unreachable (connection refused)", "5"},
	} {
		srv, err := api.New(api.Config{Ledger: f.led, Usage: failingUsage{f.usage, fmt.Errorf("cannot read usage: %w", storefail.WrapClickHouse(c.err))},
			UsagePing: f.usage.ping, Invoicing: f.flow, Advice: fakeAdvisor{}, Clock: func() time.Time { return now },
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxBodyBytes: 1 << 20})
		require.NoError(t, err)
		srv.MarkServing(true)
		f.h = srv.Handler()
		r := f.do("admin", "GET", "/api/v1/usage?period=2026-11", "", "")
		require.Equal(t, 503, r.Status, string(r.Body))
		require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
		require.Equal(t, c.retry, r.Header.Get("Retry-After"), c.cause)
		p := r.json(t)
		require.Equal(t, "https://cardhour.dev/problems/unavailable", p["type"])
		require.Contains(t, p["detail"], c.cause)
		require.Contains(t, p["detail"], "retry in "+c.retry+" s")
		require.NotEmpty(t, p["request_id"])
	}
}
