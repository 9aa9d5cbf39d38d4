//go:build !collector

package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// `ingest stopped shutdown_took=…` measures the shutdown: from the signal
// (ctx ending), not from the start of the run.
func TestShutdownTookCountsFromTheSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	since := sinceDone(ctx)
	time.Sleep(time.Second) // the worker runs
	require.Zero(t, since(), "no shutdown yet")
	signalled := time.Now()
	cancel()
	time.Sleep(20 * time.Millisecond) // the worker shuts down
	took := since()
	// The stop is recorded when the context's AfterFunc runs, at or
	// after cancel: never more than the time since the signal, and the
	// second before it does not count.
	require.Positive(t, took)
	require.LessOrEqual(t, took, time.Since(signalled))
	require.Less(t, took, time.Second, "the time before the signal does not count")
}
