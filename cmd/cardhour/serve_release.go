//go:build !collector

package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/watch"
)

// heldReleases carries out the releases people ask for through the API
// (POST /api/v1/held/release) with the releaser the watch file configures
// (the one the watcher uses), recorded in the state store as the watcher
// records its own (watch.ReleaseAsked). The demo sets its releaser after
// its server is open (it points at the server's own sink).
type heldReleases struct {
	led ledger.Store
	rel atomic.Pointer[watch.Releaser]
	now func() time.Time
}

func newHeldReleases(led ledger.Store, rel watch.Releaser, now func() time.Time) *heldReleases {
	h := &heldReleases{led: led, now: now}
	h.set(rel)
	return h
}

func (h *heldReleases) set(rel watch.Releaser) {
	if rel != nil {
		h.rel.Store(&rel)
	}
}

// ReleaseHeld implements api.Releases.
func (h *heldReleases) ReleaseHeld(ctx context.Context, actor string, held reads.Held) (ledger.Release, bool, error) {
	var rel watch.Releaser
	if p := h.rel.Load(); p != nil {
		rel = *p
	}
	r, repeated, err := watch.ReleaseAsked(ctx, h.led, rel, 10*time.Second, actor, held, h.now())
	if errors.Is(err, watch.ErrNoReleaser) {
		err = fmt.Errorf("%w: %w", api.ErrNotReleased, err)
	}
	return r, repeated, err
}
