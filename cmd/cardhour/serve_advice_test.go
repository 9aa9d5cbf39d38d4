//go:build !collector

package main

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/schemas"
)

type fakeVersion struct{ v atomic.Value }

func (f *fakeVersion) DataVersion(context.Context) (string, error) { return f.v.Load().(string), nil }

func TestAdviceMemoKeepsAnAnswerWhileTheDataStays(t *testing.T) {
	ctx := context.Background()
	ver := &fakeVersion{}
	ver.v.Store("1")
	m := newAdviceMemo(ver)
	require.NotNil(t, m)
	var computed atomic.Int32
	release := make(chan struct{})
	compute := func(context.Context) (*advice.Report, error) {
		n := computed.Add(1)
		<-release
		return &advice.Report{Months: int(n)}, nil
	}
	cat := &schemas.Catalog{}
	k := adviceKey{cat: cat, q: "2026-09|3|\"\"|0.5|0"}
	var wg sync.WaitGroup
	reps := make([]*advice.Report, 3)
	for i := range reps {
		wg.Go(func() {
			var err error
			reps[i], err = m.get(ctx, k, compute)
			assert.NoError(t, err)
		})
	}
	for computed.Load() == 0 { // the first call starts the computation
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	require.EqualValues(t, 1, computed.Load(), "concurrent reads of one window share one search")
	for _, r := range reps {
		require.Same(t, reps[0], r)
	}
	again, err := m.get(ctx, k, compute)
	require.NoError(t, err)
	require.Same(t, reps[0], again, "kept while the data version stays")

	_, err = m.get(ctx, adviceKey{cat: cat, q: "2026-10|3|\"\"|0.5|0"}, compute)
	require.NoError(t, err)
	require.EqualValues(t, 2, computed.Load(), "another window is its own answer")
	_, err = m.get(ctx, adviceKey{cat: &schemas.Catalog{}, q: k.q}, compute)
	require.NoError(t, err)
	require.EqualValues(t, 3, computed.Load(), "another catalog is its own answer")

	ver.v.Store("2")
	fresh, err := m.get(ctx, k, compute)
	require.NoError(t, err)
	require.EqualValues(t, 4, computed.Load(), "a write makes the window searched again")
	require.Equal(t, 4, fresh.Months)
}

func TestAdviceMemoDoesNotKeepAFailure(t *testing.T) {
	ver := &fakeVersion{}
	ver.v.Store("1")
	m := newAdviceMemo(ver)
	boom := errors.New("store down")
	n := 0
	compute := func(context.Context) (*advice.Report, error) {
		if n++; n == 1 {
			return nil, boom
		}
		return &advice.Report{}, nil
	}
	k := adviceKey{q: "w"}
	_, err := m.get(context.Background(), k, compute)
	require.ErrorIs(t, err, boom)
	_, err = m.get(context.Background(), k, compute)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Nil(t, newAdviceMemo(struct{}{}), "a store without a data version keeps nothing")
}

func TestAdviceMemoIsBounded(t *testing.T) {
	ver := &fakeVersion{}
	ver.v.Store("1")
	m := newAdviceMemo(ver)
	for i := range adviceMemoSize + 10 {
		_, err := m.get(context.Background(), adviceKey{q: string(rune('a' + i))}, func(context.Context) (*advice.Report, error) { return &advice.Report{}, nil })
		require.NoError(t, err)
	}
	require.Len(t, m.entries, adviceMemoSize)
}
