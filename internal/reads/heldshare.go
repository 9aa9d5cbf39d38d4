package reads

import (
	"context"
	"sync"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// DefaultHeldTick is how long one read of what is held serves the reads
// that follow it (HeldShare.Tick's default).
const DefaultHeldTick = time.Second

// HeldShare reads what is held now at most once per clock tick: the reads
// made while one runs, or within Tick after its clock, share it. A page
// that asks for what is held and for its nodes at once (GET /api/v1/held
// and GET /api/v1/nodes, each computing the same held-now over every
// instance's latest sample) makes one read instead of two, and so do the
// pages of a fleet that load together. What a read returns is shared
// between callers and must not be modified.
type HeldShare struct {
	// Tick is how long after its clock a read is served (default
	// DefaultHeldTick); a read for a clock earlier than a finished read's
	// is not served from it.
	Tick time.Duration

	mu  sync.Mutex
	cur *heldRead
}

type heldRead struct {
	cat  *schemas.Catalog
	at   time.Time
	done chan struct{} // closed when held and err are set
	held []Held
	err  error
}

// Get returns what is held at now under cat: read runs it (at now) unless
// a read of the same catalog at a clock within Tick before now has finished
// or is running, whose answer and clock are returned instead. A failed
// read is shared only with the calls that waited for it. The read runs
// without the caller's cancellation, so that the calls sharing it are not
// failed by the first one's going away; a caller that goes away stops
// waiting.
func (s *HeldShare) Get(ctx context.Context, cat *schemas.Catalog, now time.Time, read func(ctx context.Context, now time.Time) ([]Held, error)) ([]Held, time.Time, error) {
	tick := s.Tick
	if tick <= 0 {
		tick = DefaultHeldTick
	}
	s.mu.Lock()
	r := s.cur
	if r == nil || r.cat != cat || now.Before(r.at) || now.Sub(r.at) >= tick || r.failed() {
		r = &heldRead{cat: cat, at: now, done: make(chan struct{})}
		s.cur = r
		go func(ctx context.Context) {
			r.held, r.err = read(ctx, r.at)
			close(r.done)
		}(context.WithoutCancel(ctx))
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.held, r.at, r.err
	case <-ctx.Done():
		return nil, time.Time{}, ctx.Err()
	}
}

// failed reports whether r finished with an error.
func (r *heldRead) failed() bool {
	select {
	case <-r.done:
		return r.err != nil
	default:
		return false
	}
}
