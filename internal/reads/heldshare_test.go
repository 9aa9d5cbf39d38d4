package reads_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

func TestHeldShareReadsOncePerTick(t *testing.T) {
	ctx := context.Background()
	cat, other := &schemas.Catalog{}, &schemas.Catalog{}
	t0 := time.Date(2026, 11, 30, 15, 30, 0, 0, time.UTC)
	var reads_ atomic.Int32
	release := make(chan struct{})
	read := func(_ context.Context, now time.Time) ([]reads.Held, error) {
		reads_.Add(1)
		<-release
		return []reads.Held{{InstanceID: now.Format(time.RFC3339Nano)}}, nil
	}
	s := &reads.HeldShare{Tick: time.Second}

	// Calls while a read runs share it, and its clock.
	var wg sync.WaitGroup
	got := make([][]reads.Held, 3)
	ats := make([]time.Time, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			got[i], ats[i], err = s.Get(ctx, cat, t0.Add(time.Duration(i)*100*time.Millisecond), read)
			assert.NoError(t, err)
		}()
		time.Sleep(20 * time.Millisecond) // the first call starts the read
	}
	close(release)
	wg.Wait()
	require.EqualValues(t, 1, reads_.Load(), "one read for three calls within a tick")
	for i := range 3 {
		require.Equal(t, t0, ats[i], "every call gets the clock of the read it shared")
		require.Equal(t, got[0], got[i])
	}

	// Within the tick a finished read is served; at the tick, or for another
	// catalog, or for a clock before it, a new read is made.
	_, at, err := s.Get(ctx, cat, t0.Add(999*time.Millisecond), read)
	require.NoError(t, err)
	require.Equal(t, t0, at)
	require.EqualValues(t, 1, reads_.Load())
	for i, c := range []struct {
		cat *schemas.Catalog
		now time.Time
	}{{cat, t0.Add(time.Second)}, {other, t0.Add(time.Second)}, {other, t0.Add(500 * time.Millisecond)}} {
		_, at, err = s.Get(ctx, c.cat, c.now, read)
		require.NoError(t, err)
		require.Equal(t, c.now, at, "case %d reads at its own clock", i)
		require.EqualValues(t, 2+i, reads_.Load())
	}
}

func TestHeldShareDoesNotKeepAFailedRead(t *testing.T) {
	ctx := context.Background()
	cat := &schemas.Catalog{}
	t0 := time.Date(2026, 11, 30, 15, 30, 0, 0, time.UTC)
	boom := errors.New("store down")
	n := 0
	read := func(context.Context, time.Time) ([]reads.Held, error) {
		n++
		if n == 1 {
			return nil, boom
		}
		return []reads.Held{{InstanceID: "MIG-1"}}, nil
	}
	s := &reads.HeldShare{}
	_, _, err := s.Get(ctx, cat, t0, read)
	require.ErrorIs(t, err, boom)
	held, _, err := s.Get(ctx, cat, t0.Add(time.Millisecond), read)
	require.NoError(t, err, "the next call reads again")
	require.Len(t, held, 1)
	require.Equal(t, 2, n)
}

func TestHeldShareCallerGoingAwayLeavesTheReadToOthers(t *testing.T) {
	cat := &schemas.Catalog{}
	t0 := time.Date(2026, 11, 30, 15, 30, 0, 0, time.UTC)
	release := make(chan struct{})
	var readCtxErr atomic.Value
	read := func(ctx context.Context, _ time.Time) ([]reads.Held, error) {
		<-release
		readCtxErr.Store(ctx.Err() == nil)
		return []reads.Held{{InstanceID: "MIG-1"}}, nil
	}
	s := &reads.HeldShare{Tick: time.Minute}
	gone, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, _, err := s.Get(gone, cat, t0, read)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "the caller that went away stops waiting")
	close(release)
	held, at, err := s.Get(context.Background(), cat, t0.Add(time.Second), read)
	require.NoError(t, err)
	require.Equal(t, t0, at, "the read the first caller started is shared")
	require.Len(t, held, 1)
	require.Equal(t, true, readCtxErr.Load(), "the read ran without the first caller's cancellation")
}
