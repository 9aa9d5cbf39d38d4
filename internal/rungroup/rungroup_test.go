package rungroup

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// events is what the actors and closers did, in order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *events) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

// untilStopped is an actor that runs until told to stop, then takes a
// while (a drain), so that a later stage told to stop early would show.
func untilStopped(ev *events, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		ev.add(name + " stopped")
		return ctx.Err()
	}
}

func TestStagesStopInOrderThenClosersRun(t *testing.T) {
	ev := &events{}
	var g Group
	http := g.Stage("http")
	http.Go("api", untilStopped(ev, "api"))
	jobs := g.Stage("jobs")
	jobs.Go("watcher", untilStopped(ev, "watcher"))
	jobs.Go("export", untilStopped(ev, "export"))
	g.Close("usage store", func() error { ev.add("usage store closed"); return nil })
	g.Close("ledger", func() error { ev.add("ledger closed"); return nil })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	time.Sleep(10 * time.Millisecond)
	if got := ev.get(); len(got) != 0 {
		t.Fatalf("before the stop: %q", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v (a context.Canceled of an actor told to stop is no error)", err)
	}
	got := ev.get()
	if len(got) != 5 || got[0] != "api stopped" || !slices.Contains(got[1:3], "watcher stopped") || !slices.Contains(got[1:3], "export stopped") ||
		got[3] != "usage store closed" || got[4] != "ledger closed" {
		t.Fatalf("order: %q", got)
	}
}

func TestFirstActorToReturnStopsAllAndEveryErrorIsReturned(t *testing.T) {
	ev := &events{}
	var g Group
	http := g.Stage("http")
	http.Go("api", untilStopped(ev, "api"))
	jobs := g.Stage("jobs")
	jobs.Go("watcher", func(ctx context.Context) error {
		<-ctx.Done()
		ev.add("watcher stopped")
		return errors.New("cannot release the lease")
	})
	jobs.Go("export", func(context.Context) error { return errors.New("bad interval") })
	g.Close("ledger", func() error { ev.add("ledger closed"); return errors.New("close failed") })

	// The caller's context never ends: the failing job begins the stop.
	err := g.Run(context.Background())
	if err == nil {
		t.Fatal("Run: no error")
	}
	msg := err.Error()
	for _, want := range []string{"jobs: export: bad interval", "jobs: watcher: cannot release the lease", "ledger: close failed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if i, j, k := strings.Index(msg, "bad interval"), strings.Index(msg, "cannot release"), strings.Index(msg, "close failed"); !(i < j && j < k) {
		t.Errorf("errors not in the order they happened: %q", msg)
	}
	if got := ev.get(); !slices.Equal(got, []string{"api stopped", "watcher stopped", "ledger closed"}) {
		t.Errorf("order: %q", got)
	}
}

func TestCanceledFromAnActorNotToldToStopIsAnError(t *testing.T) {
	var g Group
	g.Stage("jobs").Go("loop", func(context.Context) error { return context.Canceled })
	if err := g.Run(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want the actor's own context.Canceled", err)
	}
}

func TestNoActorsRunsTheClosers(t *testing.T) {
	var g Group
	closed := false
	g.Stage("empty")
	g.Close("store", func() error { closed = true; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Run(ctx); err != nil || !closed {
		t.Fatalf("Run: %v, closed %v", err, closed)
	}
}
