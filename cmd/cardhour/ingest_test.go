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
	cancel()
	time.Sleep(20 * time.Millisecond) // the worker shuts down
	took := since()
	require.GreaterOrEqual(t, took, 20*time.Millisecond)
	require.Less(t, took, time.Second, "the time before the signal does not count")
}
