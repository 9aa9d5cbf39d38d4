// Package rungroup runs a long-running command's actors together and stops
// them in the order the command states, so that nothing outlives what it
// uses: an HTTP server drains before the jobs behind it stop, and the
// stores close only after every actor has returned. It is modelled on
// oklog/run: the first actor to return, or the caller's context ending,
// begins the shutdown; unlike it, the order is explicit (stages, each
// waited for before the next is told to stop) and every actor's error is
// returned, not only the first.
package rungroup

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Group is a command's actors in stages, and the closers that run after
// them. The zero value is ready; a Group runs once.
type Group struct {
	stages  []*Stage
	closers []closer
}

// Stage is actors told to stop together. Stages stop in the order they
// were made.
type Stage struct {
	name   string
	actors []actor
}

type actor struct {
	name string
	run  func(context.Context) error
}

type closer struct {
	name  string
	close func() error
}

// Stage adds a stage after the ones already made: its actors are told to
// stop only once every actor of the earlier stages has returned.
func (g *Group) Stage(name string) *Stage {
	s := &Stage{name: name}
	g.stages = append(g.stages, s)
	return s
}

// Go adds an actor. run gets a context that ends when the shutdown reaches
// its stage (not before, whatever the caller's context does) and should
// return soon after; its returning, with or without an error, begins the
// shutdown.
func (s *Stage) Go(name string, run func(ctx context.Context) error) {
	s.actors = append(s.actors, actor{name: s.name + ": " + name, run: run})
}

// Close adds a closer: closers run, in the order added, after every actor
// of every stage has returned (and also when Run starts no actor).
func (g *Group) Close(name string, close func() error) {
	g.closers = append(g.closers, closer{name: name, close: close})
}

// Run starts every actor and waits until ctx ends or one returns; then it
// stops the stages in order, waiting for each, runs the closers, and
// returns every error: the actors' in the order they returned (a
// context.Canceled from an actor told to stop is not an error), then the
// closers', each named.
func (g *Group) Run(ctx context.Context) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	record := func(name string, err error) {
		mu.Lock()
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
		mu.Unlock()
	}
	returned := make(chan struct{}, 1)
	type running struct {
		cancel context.CancelFunc
		wg     sync.WaitGroup
	}
	rs := make([]*running, len(g.stages))
	n := 0
	for i, s := range g.stages {
		n += len(s.actors)
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r := &running{cancel: cancel}
		rs[i] = r
		for _, a := range s.actors {
			r.wg.Go(func() {
				err := a.run(sctx)
				if err != nil && !(errors.Is(err, context.Canceled) && sctx.Err() != nil) {
					record(a.name, err)
				}
				select {
				case returned <- struct{}{}:
				default:
				}
			})
		}
	}
	if n > 0 {
		select {
		case <-ctx.Done():
		case <-returned:
		}
	}
	for _, r := range rs {
		r.cancel()
		r.wg.Wait()
	}
	for _, c := range g.closers {
		if err := c.close(); err != nil {
			record(c.name, err)
		}
	}
	return errors.Join(errs...)
}
