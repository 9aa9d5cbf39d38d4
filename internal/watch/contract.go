package watch

import (
	"context"
	"time"

	"github.com/cardhour/cardhour/internal/watch/alert"
)

// The watcher talks to its notifier (internal/watch/notify) and its
// releasers (internal/watch/release) through the small interfaces below,
// in the types of internal/watch/alert, which both sides use: a
// *notify.Notifier is a Notifier and a *release.Set a Releaser as they are.

// Notifier routes, renders and sends.
type Notifier interface {
	// Plan routes m to people's channels and renders each envelope.
	Plan(m alert.Message, people []alert.Person) ([]alert.Envelope, error)
	// Send makes one attempt at delivering e on its channel.
	Send(ctx context.Context, e alert.Envelope) error
	// Permanent reports an error that retrying cannot cure.
	Permanent(err error) bool
	// Backoff is the wait before attempt number attempt+1.
	Backoff(attempt int) time.Duration
}

// Releaser releases held instances.
type Releaser interface {
	Release(ctx context.Context, r alert.ReleaseRequest) (alert.ReleaseOutcome, error)
	// Permanent reports an error that retrying cannot cure (the
	// releaser had nothing to act on, or was not allowed to).
	Permanent(err error) bool
}
