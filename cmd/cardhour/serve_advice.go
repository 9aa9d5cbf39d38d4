//go:build !collector

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/internal/advicerun"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// adviceReads answers the advice route from the usage store: the window's
// months billed with reads.BillFrom, then billing/advice (internal/advicerun).
// With memo, an answer is kept while the store's data version and the
// catalog stay the same (the advice is a function of the window's usage and
// the catalog): the monthly review, its exports and the advice page of one
// window then search the reservations once.
type adviceReads struct {
	st   reads.UsageSource
	memo *adviceMemo // nil: every read computes
}

func (a adviceReads) Advise(ctx context.Context, cat *schemas.Catalog, opt advice.Options) (*advice.Report, error) {
	compute := func(ctx context.Context) (*advice.Report, error) {
		return advicerun.Advise(ctx, cat, reads.Biller(a.st, cat), opt, advicerun.Config{})
	}
	if a.memo == nil {
		return compute(ctx)
	}
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	if opt.Months == 0 {
		opt.Months = advice.DefaultMonths
	}
	// The window, not the moment, decides the advice.
	key := adviceKey{cat: cat, q: fmt.Sprintf("%s|%d|%q|%s|%d", advice.Window(cat, opt.Now, opt.Months)[0], opt.Months, opt.Project,
		opt.MinCoverage.String(), opt.ExhaustiveUpTo)}
	return a.memo.get(ctx, key, compute)
}

// adviceMemoSize bounds the answers kept (windows × projects × options).
const adviceMemoSize = 64

type adviceKey struct {
	cat *schemas.Catalog
	q   string
}

// adviceMemo keeps advice answers by key and data version; concurrent
// reads of one key at one version share a computation.
type adviceMemo struct {
	ver reads.DataVersioner

	mu      sync.Mutex
	entries map[adviceKey]*adviceEntry
}

type adviceEntry struct {
	version string
	done    chan struct{} // closed when rep and err are set
	rep     *advice.Report
	err     error
	used    time.Time
}

func newAdviceMemo(st any) *adviceMemo {
	ver, ok := st.(reads.DataVersioner)
	if !ok {
		return nil
	}
	return &adviceMemo{ver: ver, entries: map[adviceKey]*adviceEntry{}}
}

func (m *adviceMemo) get(ctx context.Context, key adviceKey, compute func(context.Context) (*advice.Report, error)) (*advice.Report, error) {
	v, err := m.ver.DataVersion(ctx)
	if err != nil {
		return compute(ctx)
	}
	m.mu.Lock()
	e := m.entries[key]
	if e == nil || e.version != v || e.failed() {
		e = &adviceEntry{version: v, done: make(chan struct{})}
		m.evict()
		m.entries[key] = e
		go func(ctx context.Context) {
			e.rep, e.err = compute(ctx)
			close(e.done)
		}(context.WithoutCancel(ctx))
	}
	e.used = time.Now()
	m.mu.Unlock()
	select {
	case <-e.done:
		return e.rep, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// evict makes room for one entry (the least recently used goes); m.mu held.
func (m *adviceMemo) evict() {
	if len(m.entries) < adviceMemoSize {
		return
	}
	var oldest adviceKey
	var at time.Time
	for k, e := range m.entries {
		if at.IsZero() || e.used.Before(at) {
			oldest, at = k, e.used
		}
	}
	delete(m.entries, oldest)
}

func (e *adviceEntry) failed() bool {
	select {
	case <-e.done:
		return e.err != nil
	default:
		return false
	}
}
