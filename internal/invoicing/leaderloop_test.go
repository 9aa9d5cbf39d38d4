package invoicing_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/invoicing"
)

var errReleaseRefused = errors.New("the state store is closed")

// refusingRelease is a ledger whose ReleaseLease fails, as a store closed
// too early would; it counts the leases acquired.
type refusingRelease struct {
	invoicing.Ledger
	acquired atomic.Int32
}

func (l *refusingRelease) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	ok, err := l.Ledger.AcquireLease(ctx, name, holder, ttl)
	if ok {
		l.acquired.Add(1)
	}
	return ok, err
}

func (l *refusingRelease) ReleaseLease(context.Context, string, string) error {
	return errReleaseRefused
}

// A loop that cannot give its lease up when it stops says so: the release's
// error comes back with the context's, naming the lease, instead of being
// dropped (the other replicas wait for the lease to expire).
func TestLoopsReturnTheLeaseReleaseError(t *testing.T) {
	for _, tc := range []struct {
		lease string
		loop  func(*invoicing.Service) func(context.Context, string, time.Duration) error
	}{
		{invoicing.LeaseAutoFinalize, func(s *invoicing.Service) func(context.Context, string, time.Duration) error {
			return s.AutoFinalizeLoop
		}},
		{invoicing.LeaseExport, func(s *invoicing.Service) func(context.Context, string, time.Duration) error { return s.ExportLoop }},
	} {
		t.Run(tc.lease, func(t *testing.T) {
			var led *refusingRelease
			f := newFixture(t, sqliteLedger(t), func(c *invoicing.Config) {
				led = &refusingRelease{Ledger: c.Ledger}
				c.Ledger = led
			})
			ctx, cancel := context.WithCancel(ctxT(t))
			done := make(chan error, 1)
			go func() { done <- tc.loop(f.svc)(ctx, "replica-a", 10*time.Millisecond) }()
			deadline := time.Now().Add(10 * time.Second)
			for led.acquired.Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if led.acquired.Load() == 0 {
				t.Fatal("the loop never took its lease")
			}
			cancel()
			err := <-done
			if !errors.Is(err, context.Canceled) || !errors.Is(err, errReleaseRefused) {
				t.Fatalf("loop returned %v, want the stop and the refused release", err)
			}
			if want := tc.lease + " loop: cannot give the lease up"; !strings.Contains(err.Error(), want) {
				t.Fatalf("loop returned %q, want it to say %q", err, want)
			}
		})
	}
}
