//go:build !collector

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/catalogs"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
)

// jobOptions are serve's background jobs: automatic finalization after the
// grace period, and the export of finalized periods to a directory and a
// finance webhook. Each runs on one replica at a time (a ledger lease).
type jobOptions struct {
	Grace        time.Duration
	AutoFinalize bool
	LeadApproval bool // finalizing waits for the lead's sign-off
	ExportDir    string
	Webhook      invoicing.Webhook
	Every        time.Duration
	// UsageCache answers usage reads through reads.UsageCache when the
	// usage store tells its data version; UsageMaxStale is its MaxStale.
	UsageCache    bool
	UsageMaxStale time.Duration
	Watch         watchOptions // File "": no watcher
	// PDFFont is a TrueType font tried before the default font set for
	// every PDF (API exports and the export job); "": the default set.
	PDFFont string
	// Clock is the time of the usage reads (what is held now) and of the
	// invoice flow; nil: time.Now (cardhour demo runs a simulated clock).
	Clock func() time.Time
}

// serveBackends builds what the API reads and does besides the state store:
// the usage reads (reads.Usage, reads.HeldNow over the usage store) and
// the invoice flow (internal/invoicing with the billing/export documents);
// it returns the background jobs (auto-finalize, export, the watcher) as
// actors for the caller's rungroup, started by nothing else.
func serveBackends(led ledger.Store, st ingest.Backend, jo jobOptions, log *slog.Logger) (api.Config, []actor, error) {
	cats := catalogs.New(led)
	// The jobs and the watcher give their leases up at their stop through
	// leases: an error there is logged and returned by their actor.
	leases := &leaseLedger{Store: led, log: log}
	now := time.Now
	if jo.Clock != nil {
		now = jo.Clock
	}
	docs := invoicing.ExportDocuments{PDF: export.PDFOptions{FontPath: jo.PDFFont}}
	if jo.PDFFont != "" {
		// A font named and unusable is said at start, not at the first PDF.
		if _, err := docs.PDF.FindFonts(); err != nil {
			return api.Config{}, nil, fmt.Errorf("--pdf-font: %w", err)
		}
	}
	svc, err := invoicing.New(invoicing.Config{Ledger: leases, Usage: st, Grace: jo.Grace, Documents: docs, LeadApproval: jo.LeadApproval,
		ExportDir: jo.ExportDir, Webhook: jo.Webhook, Logger: log, Clock: now, Catalogs: cats})
	if err != nil {
		return api.Config{}, nil, err
	}
	holder := serveHolder()
	var jobs []actor
	loop := func(name, lease string, f func(context.Context, string, time.Duration) error) {
		jobs = append(jobs, actor{name: name, run: func(ctx context.Context) error {
			err := f(ctx, holder, jo.Every)
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Error("background job stopped", "job", name, "err", err)
			}
			return errors.Join(stopped(ctx, err), leases.releaseError(lease))
		}})
	}
	if jo.AutoFinalize {
		loop("auto-finalize", invoicing.LeaseAutoFinalize, svc.AutoFinalizeLoop)
	}
	if jo.ExportDir != "" || jo.Webhook.URL != "" {
		loop("export", invoicing.LeaseExport, svc.ExportLoop)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	ur := &usageReads{cats: cats, st: st, now: now}
	if ver, ok := st.(reads.DataVersioner); ok && jo.UsageCache {
		if rows, ok := st.(reads.UsageRows); ok {
			ur.cache = reads.NewUsageCache(rows, ver, reads.UsageCacheConfig{MaxStale: jo.UsageMaxStale})
			registerUsageCacheMetrics(reg, ur.cache)
		}
	}
	if jo.Watch.File != "" {
		w, err := watchActor(leases, st, cats, jo.Watch, reg, log)
		if err != nil {
			return api.Config{}, nil, err
		}
		jobs = append(jobs, w)
	}
	return api.Config{
		// The Now page polls at the watcher's interval (the watcher's, or
		// --watch-every's when none runs; 0: the API's default).
		RefreshInterval: jo.Watch.Every,
		Registry:        reg,
		Catalogs:        cats,
		Usage:           ur,
		Invoicing:       &flow{svc: svc, led: led, docs: docs},
		Advice:          adviceReads{st: st, memo: newAdviceMemo(st)},
		PDF:             docs.PDF,
		Releases:        newHeldReleases(leases.Store, jo.Watch.Config.Releaser, now),
		UsagePing: func(ctx context.Context) error {
			_, err := st.RejectSummary(ctx, 0, 1, 0)
			return err
		},
	}, jobs, nil
}

// serveHolder names this replica in the ledger's leases.
func serveHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("serve:%s:%d", host, os.Getpid())
}

// stopped is a loop's error with the context.Canceled of its stop removed:
// a loop told to stop that gives its leases up has not failed.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// leaseLedger is the state store as the background jobs and the watcher
// use it. Their loops give their leases up as they stop; leaseLedger logs
// a failed release and keeps it for the job's actor to return (another
// replica could not take the lease until it expired). The jobs' loops
// return that error joined with the stop's context.Canceled, which stopped
// takes for a clean stop, so the job actor returns the kept one; the
// watcher returns it alone (watch.Run) and its actor needs none kept.
type leaseLedger struct {
	ledger.Store
	log    *slog.Logger
	mu     sync.Mutex
	failed map[string]error
}

// leaseReleasing, when set (tests), is called before each release: a slow
// stop of a job or the watcher must still find the state store open.
var leaseReleasing func(name string)

func (l *leaseLedger) ReleaseLease(ctx context.Context, name, holder string) error {
	if leaseReleasing != nil {
		leaseReleasing(name)
	}
	err := l.Store.ReleaseLease(ctx, name, holder)
	if err != nil {
		l.log.Error("cannot give the lease up", "lease", name, "holder", holder, "err", err)
		l.mu.Lock()
		if l.failed == nil {
			l.failed = map[string]error{}
		}
		l.failed[name] = err
		l.mu.Unlock()
	}
	return err
}

// releaseError is the error of lease name's last failed release, if any.
func (l *leaseLedger) releaseError(name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.failed[name]; err != nil {
		return fmt.Errorf("cannot give the %s lease up: %w", name, err)
	}
	return nil
}

// usageReads answers the usage routes with the one read algorithm
// (reads.Usage, reads.HeldNow) over the store's grouped rows.
type usageReads struct {
	cats  *catalogs.Cache
	st    ingest.Backend
	now   func() time.Time
	cache *reads.UsageCache // nil: every read computes
	held  reads.HeldShare   // what is held now, read once per tick for /held and /nodes
}

// registerUsageCacheMetrics exports the usage cache's counters.
func registerUsageCacheMetrics(reg *prometheus.Registry, c *reads.UsageCache) {
	counter := func(outcome string, f func(reads.UsageCacheStats) uint64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "cardhour_usage_cache_requests_total",
			Help:        "Usage reads by how the report cache answered them: hit (current report), stale (superseded report served while it is recomputed), miss (computed for the request), bypass (no data version: computed).",
			ConstLabels: prometheus.Labels{"outcome": outcome},
		}, func() float64 { return float64(f(c.Stats())) }))
	}
	counter("hit", func(s reads.UsageCacheStats) uint64 { return s.Hits })
	counter("stale", func(s reads.UsageCacheStats) uint64 { return s.Stale })
	counter("miss", func(s reads.UsageCacheStats) uint64 { return s.Misses })
	counter("bypass", func(s reads.UsageCacheStats) uint64 { return s.Bypassed })
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cardhour_usage_cache_rows",
		Help: "Rows of usage reports kept by the report cache.",
	}, func() float64 { return float64(c.Stats().Rows) }))
}

func (u *usageReads) Usage(ctx context.Context, q reads.UsageQuery) (*reads.UsageReport, error) {
	rows, ok := u.st.(reads.UsageRows)
	if !ok {
		return nil, fmt.Errorf("%w: this usage store cannot group usage", api.ErrUnavailable)
	}
	cat, err := u.cats.Current(ctx)
	if err != nil {
		return nil, err
	}
	for _, id := range q.SKUs {
		if _, ok := cat.SKUByID(id); !ok {
			return nil, fmt.Errorf("%w: sku %q is not in the catalog", ledger.ErrInvalidArgument, id)
		}
	}
	if u.cache != nil {
		return u.cache.Usage(ctx, cat, q)
	}
	return reads.Usage(ctx, rows, cat, q)
}

// Savings is reads.AddSavings over the store's runs, at the clock of HeldNow.
func (u *usageReads) Savings(ctx context.Context, q reads.UsageQuery, rep *reads.UsageReport, rels []reads.Released) (*reads.UsageReport, error) {
	runs, ok := u.st.(reads.KeyedRuns)
	if !ok {
		return nil, fmt.Errorf("%w: this usage store cannot read its runs by key", api.ErrUnavailable)
	}
	cat, err := u.cats.Current(ctx)
	if err != nil {
		return nil, err
	}
	return reads.AddSavings(ctx, runs, cat, q, rep, rels, u.now())
}

func (u *usageReads) HeldNow(ctx context.Context) ([]reads.Held, error) {
	held, _, err := u.heldNow(ctx)
	return held, err
}

// heldNow is what is held at the clock, priced, and the clock it was read
// at: one read per tick (reads.HeldShare), shared by the calls within it.
func (u *usageReads) heldNow(ctx context.Context) ([]reads.Held, time.Time, error) {
	rows, ok := u.st.(reads.HeldRows)
	if !ok {
		return nil, time.Time{}, fmt.Errorf("%w: this usage store cannot say what is held", api.ErrUnavailable)
	}
	cat, err := u.cats.Current(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	return u.held.Get(ctx, cat, u.now(), func(ctx context.Context, now time.Time) ([]reads.Held, error) {
		held, err := reads.HeldNow(ctx, rows, cat, now)
		if err == nil {
			reads.PriceHeld(cat, held, now)
		}
		return held, err
	})
}

// Nodes is reads.NodesNow at the clock of HeldNow, with what is held then.
func (u *usageReads) Nodes(ctx context.Context, q reads.NodeQuery) (*reads.NodeReport, error) {
	rows, ok := u.st.(interface {
		reads.HeldRows
		reads.NodeBucketRows
		reads.LatestRows
	})
	if !ok {
		return nil, fmt.Errorf("%w: this usage store cannot say how fresh its nodes are", api.ErrUnavailable)
	}
	// The nodes' activity is read while what is held is (or while the
	// read of it that this call shares runs), at this call's clock: at
	// most a tick after the held read's, whose clock the answer takes.
	var newest map[string]int64
	var errNewest error
	var wg sync.WaitGroup
	wg.Go(func() { newest, errNewest = reads.NodesNewest(ctx, rows, u.now()) })
	held, now, err := u.heldNow(ctx)
	wg.Wait()
	if err = cmp.Or(err, errNewest); err != nil {
		return nil, err
	}
	nodes, err := reads.NodesFrom(ctx, newest, rows, held, now, q)
	if err != nil {
		return nil, err
	}
	return &reads.NodeReport{At: now, Nodes: nodes}, nil
}

// flow is the invoice flow as the API sees it.
type flow struct {
	svc  *invoicing.Service
	led  ledger.Store
	docs invoicing.ExportDocuments
}

func (f *flow) Run(ctx context.Context, actor, period string) (*invoicing.RunReport, error) {
	return f.svc.Run(ctx, actor, period)
}

func (f *flow) Finalize(ctx context.Context, actor string, id int64, ifSHA256 string) (ledger.Invoice, error) {
	inv, err := f.svc.Finalize(ctx, actor, id, ifSHA256)
	if errors.Is(err, invoicing.ErrGracePeriod) {
		err = graceError{err}
	}
	return inv, err
}

// graceError is the flow's grace-period error as the API's: it is
// api.ErrGracePeriod too, and says what the flow said, once.
type graceError struct{ error }

func (e graceError) Unwrap() []error { return []error{api.ErrGracePeriod, e.error} }

// FinalizableFrom implements api.GraceReporter.
func (f *flow) FinalizableFrom(ctx context.Context, inv ledger.Invoice) (time.Time, error) {
	return f.svc.FinalizableFrom(ctx, inv)
}

func (f *flow) Void(ctx context.Context, actor string, id int64, reason string) (ledger.Voided, error) {
	return f.svc.Void(ctx, actor, id, reason)
}

func (f *flow) LeadApproval() bool { return f.svc.LeadApproval() }

func (f *flow) Approve(ctx context.Context, actor string, id int64, ifSHA256 string) (invoicing.Approval, error) {
	return f.svc.Approve(ctx, actor, id, ifSHA256)
}

func (f *flow) ApprovalOf(ctx context.Context, inv ledger.Invoice) (invoicing.Approval, bool, error) {
	return f.svc.ApprovalOf(ctx, inv)
}

func (f *flow) PeriodSummary(ctx context.Context, period, project string) (*invoicing.PeriodSummary, error) {
	return f.svc.PeriodSummary(ctx, period, project)
}

func (f *flow) Statement(ctx context.Context, id int64, user string) ([]byte, error) {
	return f.svc.Statement(ctx, id, user)
}

func (f *flow) ImportRoster(ctx context.Context, actor string, r io.Reader, project string) (invoicing.RosterResult, error) {
	return f.svc.ImportRoster(ctx, actor, r, project)
}

func (f *flow) Students(ctx context.Context, project, user, cursor string, limit int) ([]ledger.Student, string, error) {
	return f.led.Students(ctx, ledger.StudentFilter{Project: project, User: user, Cursor: cursor, Limit: limit})
}

func (f *flow) Render(_ context.Context, w io.Writer, format string, docs ...[]byte) error {
	return f.docs.Render(w, invoicing.Format(format), docs...)
}

func (f *flow) CreditNote(ctx context.Context, id int64) (ledger.CreditNote, error) {
	return f.svc.CreditNote(ctx, id)
}

// RenderVoid renders a voided invoice's exports with its void mark.
func (f *flow) RenderVoid(_ context.Context, w io.Writer, format string, m export.VoidMark, doc []byte) error {
	return f.docs.RenderVoided(w, invoicing.Format(format), doc, m)
}
