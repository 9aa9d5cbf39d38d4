package clickhouse_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/storefail"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
)

// cutProxy forwards connections to target until cut; cut also drops the
// connections it carries, as a server that stops would.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
			go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// Every read and write of a store whose ClickHouse is gone is
// storefail.ErrUnavailable naming "unreachable" (the API's 503), not an
// unclassified error (its 500).
func TestUnreachableClickHouseIsUnavailableOnEveryPath(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	db := testenv.UniqueName(t, "chcut")
	open(t, addr, db) // migrated, dropped at the end
	p := newCutProxy(t, addr)
	st, err := clickhouse.Open(context.Background(), clickhouse.Config{Addr: p.ln.Addr().String(), Database: db, Logger: slog.New(slog.DiscardHandler), DialTimeout: time.Second})
	require.NoError(t, err)
	defer func() { _ = st.Close() }()
	ctx := context.Background()
	from, to := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	key := schemas.Key{Project: "p", User: "u", InstanceID: "i", GPUModel: "A100", Profile: "1g.10gb"}
	paths := map[string]func() error{
		"UsageRows": func() error {
			return st.UsageRows(ctx, schemas.UsageRowQuery{FromMS: from, ToMS: to, ByProject: true}, func(schemas.UsageRow) error { return nil })
		},
		"CompactUsageRows": func() error {
			_, err := st.CompactUsageRows(ctx, schemas.UsageRowQuery{FromMS: from, ToMS: to, ByProject: true}, func(schemas.UsageRow) error { return nil })
			return err
		},
		"HeldSamples": func() error { return st.HeldSamples(ctx, from, to, func(*schemas.Sample) error { return nil }) },
		"InstanceSamples": func() error {
			return st.InstanceSamples(ctx, []string{"i"}, from, to, func(*schemas.Sample) error { return nil })
		},
		"LatestSamples": func() error { return st.LatestSamples(ctx, from, func(*schemas.Sample) error { return nil }) },
		"Occupancy":     func() error { return st.Occupancy(ctx, from, to, func([]schemas.Run) error { return nil }) },
		"IdleRuns":      func() error { return st.IdleRuns(ctx, from, to, 0.05, func([]schemas.IdleRun) error { return nil }) },
		"RawIdle": func() error {
			return st.RawIdle(ctx, []string{"i"}, from, to, 0.05, func([]schemas.RawPoint) error { return nil })
		},
		"NodeBuckets": func() error {
			return st.NodeBuckets(ctx, from, to, 3600_000, func(schemas.NodeBucketRow) error { return nil })
		},
		"Unattributed": func() error {
			return st.Unattributed(ctx, from, to, 0.05, func(schemas.UnattributedUsage) error { return nil })
		},
		"Rejects":     func() error { _, _, err := st.Rejects(ctx, from, to, 5); return err },
		"DataVersion": func() error { _, err := st.DataVersion(ctx); return err },
		"Write": func() error {
			return st.Write(ctx, &ingest.Batch{Occupancy: []schemas.Run{{Key: key, StartMS: from, EndMS: from + 60_000}}})
		},
		"CheckSchema": func() error { return st.CheckSchema(ctx) },
	}
	for name, f := range paths {
		require.NoError(t, f(), "%s before the cut", name)
	}
	p.cut()
	for name, f := range paths {
		err := f()
		require.ErrorIs(t, err, storefail.ErrUnavailable, "%s: %v", name, err)
		require.Contains(t, storefail.Cause(err), "unreachable", name)
	}
}

// The server's own exceptions: those of a server that cannot answer for
// now (out of memory, timed out) are unavailable with their cause; a query
// bug is not (the API's 500), and the exception is still found beneath.
func TestClickHouseExceptionsAreClassifiedAtTheDriver(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "chex"))
	ctx := context.Background()
	mem := ch.Context(ctx, ch.WithSettings(ch.Settings{"max_memory_usage": 1 << 20}))
	err := st.Conn().QueryRow(mem, "SELECT length(groupArray(toString(number))) FROM numbers(10000000)").Scan(new(uint64))
	require.ErrorIs(t, err, storefail.ErrUnavailable, "%v", err)
	require.Contains(t, storefail.Cause(err), "overloaded (MEMORY_LIMIT_EXCEEDED)")
	var ex *ch.Exception
	require.True(t, errors.As(err, &ex), "%T", err)
	require.EqualValues(t, 241, ex.Code)

	slow := ch.Context(ctx, ch.WithSettings(ch.Settings{"max_execution_time": 1}))
	rows, err := st.Conn().Query(slow, "SELECT count() FROM numbers(100000000000)")
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		_ = rows.Close()
	}
	require.ErrorIs(t, err, storefail.ErrUnavailable, "%v", err)
	require.Contains(t, storefail.Cause(err), "timed out")

	err = st.Conn().QueryRow(ctx, "SELECT nosuch FROM system.one").Scan(new(uint64))
	require.Error(t, err)
	require.NotErrorIs(t, err, storefail.ErrUnavailable)
	require.True(t, errors.As(err, &ex), "%T", err)
}
