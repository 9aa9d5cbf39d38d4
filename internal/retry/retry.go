// Package retry is the one backoff of every retry loop (ingest's writes and
// reads, the export job's webhook): shared so that all of them back off alike.
package retry

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Backoff is exponential from lo to hi (doubling), each delay randomised by
// ±50 % so that workers that failed together do not retry together, and no
// limit on the elapsed time (the caller's context or options decide when to
// give up).
func Backoff(lo, hi time.Duration) *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = lo
	b.MaxInterval = hi
	b.Multiplier = 2
	b.RandomizationFactor = 0.5
	b.Reset()
	return b
}
