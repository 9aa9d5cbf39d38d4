package collector

import (
	"sync"
	"time"
)

// Clock is the collector's view of time. Intervals are measured with the
// monotonic reading carried by the times it returns (time.Now does that), wall
// time is only used for timestamps and tick alignment.
type Clock interface {
	Now() time.Time
	// After waits for d and then sends the time on the returned channel.
	After(d time.Duration) <-chan time.Time
}

// RealClock is the system clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// FastForwardClock is a fake clock that never sleeps: After(d) moves the clock
// forward by d at once. It replays days of sampling in seconds (cardhour
// simulate) and makes tick tests deterministic. It is safe for concurrent use.
type FastForwardClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFastForwardClock returns a clock that starts at start.
func NewFastForwardClock(start time.Time) *FastForwardClock {
	return &FastForwardClock{now: start}
}

// Now returns the current fake time.
func (c *FastForwardClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After advances the clock by d and returns a channel that is ready at once.
func (c *FastForwardClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	t := c.now
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- t
	return ch
}

// Set moves the clock to t.
func (c *FastForwardClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}
