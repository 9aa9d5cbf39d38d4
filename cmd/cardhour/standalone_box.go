//go:build !collector

package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
	"github.com/cardhour/cardhour/internal/rungroup"
	"github.com/cardhour/cardhour/schemas"
)

// box is the whole product in one process, as cardhour demo and cardhour
// standalone run it: collectors publish into a channel (where a cluster has
// Kafka), the ingest writer stores what arrives in a SQLite usage store
// (where a cluster has ClickHouse), and the API with the dashboard and the
// watcher read it, as cardhour serve does. open opens it; run runs its
// actors in one rungroup, the caller's stages (the collectors, the ingest
// loop) first, then the HTTP server, then the watcher, then the stores
// close.
type box struct {
	UsagePath   string // SQLite usage store (created and migrated)
	StatePath   string // SQLite state store (created and migrated)
	CatalogPath string // stored as the current catalog version when it differs
	Addr        string
	Clock       func() time.Time // time of the state store, the reads and the API
	Log         *slog.Logger
	Watch       watchOptions // File "": serveBackends starts no watcher; Every: the Now page's refresh (0: 30 s)
	// Tee, when set, also receives every sample ingested.
	Tee collector.Publisher
	// FlushEvery is how long the ingest loop gathers samples before a
	// store write (default 1 s); BatchSize bounds a write (default 20 000).
	FlushEvery time.Duration
	BatchSize  int
	// SignIn, when set, makes the API's sign-in over the state store.
	SignIn func(api.SignInStore) (*api.SignIn, error)
	// LeadApproval: a draft is finalized only after its lead's sign-off
	// (serve --lead-approval).
	LeadApproval bool

	led    ledger.Store
	usage  ingest.Backend // read handle (what serve opens)
	writer *sqlite.Store  // write handle
	srv    *api.Server
	hs     *http.Server
	ln     net.Listener
	url    string // http://host:port of the listener, reachable from this host
	ch     chan []schemas.Sample
	iw     *ingest.Writer
	jobs   []actor // serveBackends' (the watcher)
	// releases carries out the releases people ask for; the demo gives
	// it its releaser once the server is open.
	releases *heldReleases
	g        rungroup.Group
	ran      bool // run was called: it closes the stores
}

// stage is actors a caller of run puts before the box's own.
type stage struct {
	name   string
	actors []actor
}

// chanPublisher is the collectors' publisher: a copy of each tick's
// samples goes into the ingest loop's channel.
type chanPublisher struct{ ch chan<- []schemas.Sample }

func (p chanPublisher) Publish(ctx context.Context, s []schemas.Sample) error {
	if len(s) == 0 {
		return nil
	}
	c := slices.Clone(s) // the collector reuses its buffer
	select {
	case p.ch <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// open opens the stores, seeds the catalog, builds the API and listens;
// nothing runs until run. When open or what the caller does before run
// fails, close closes what was opened.
func (b *box) open(ctx context.Context) error {
	if b.Clock == nil {
		b.Clock = time.Now
	}
	if b.FlushEvery <= 0 {
		b.FlushEvery = time.Second
	}
	if b.BatchSize <= 0 {
		b.BatchSize = 20_000
	}
	var err error
	for _, p := range []*string{&b.UsagePath, &b.StatePath} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(*p), 0o750); err != nil {
			return err
		}
	}
	if b.led, err = ledgerdsn.Open(ctx, "sqlite://"+b.StatePath, ledgerdsn.Options{Clock: b.Clock}); err != nil {
		return err
	}
	b.g.Close("state store", b.led.Close)
	if b.CatalogPath != "" {
		if err := seedCatalog(ctx, b.led, b.CatalogPath, discardWriter{}); err != nil {
			return err
		}
	}
	w, err := sqlite.Open(ctx, sqlite.Config{Path: b.UsagePath, Logger: b.Log})
	if err != nil {
		return err
	}
	b.writer = w
	b.g.Close("usage store (writer)", w.Close)
	if b.usage, err = storedsn.Open(ctx, "sqlite://"+b.UsagePath, storedsn.Options{Logger: b.Log, Mode: storedsn.Read}); err != nil {
		return err
	}
	b.g.Close("usage store", b.usage.Close)
	cfg, jobs, err := serveBackends(b.led, b.usage, jobOptions{Grace: defaultGrace, Every: 5 * time.Minute,
		UsageCache: true, UsageMaxStale: 10 * time.Second, Watch: b.Watch, Clock: b.Clock, LeadApproval: b.LeadApproval}, b.Log)
	if err != nil {
		return err
	}
	b.jobs = jobs
	b.releases, _ = cfg.Releases.(*heldReleases)
	cfg.Ledger, cfg.Logger, cfg.Version, cfg.Clock = b.led, b.Log, version, b.Clock
	if b.SignIn != nil {
		if cfg.SignIn, err = b.SignIn(b.led); err != nil {
			return err
		}
	}
	if b.srv, err = api.New(cfg); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", b.Addr)
	if err != nil {
		return err
	}
	b.ln = ln
	b.url = "http://" + reachable(ln.Addr())
	b.hs = &http.Server{Handler: b.srv.Handler(), ReadHeaderTimeout: api.DefaultReadHeaderTimeout,
		ReadTimeout: api.DefaultReadTimeout, WriteTimeout: api.DefaultWriteTimeout, IdleTimeout: api.DefaultIdleTimeout,
		MaxHeaderBytes: 1 << 20, ErrorLog: slog.NewLogLogger(b.Log.Handler(), slog.LevelWarn)}
	b.ch = make(chan []schemas.Sample, 64)
	if b.iw, err = ingest.NewWriter(ingest.WriterConfig{Store: w, Logger: b.Log, Metrics: ingest.NewMetrics(cfg.Registry)}); err != nil {
		return err
	}
	return nil
}

// run runs the caller's stages (in order), then the HTTP server, then the
// watcher, until ctx ends or one actor returns, stopping them in that
// order, and then closes the stores. It returns every error.
func (b *box) run(ctx context.Context, first ...stage) error {
	b.ran = true
	for _, st := range first {
		s := b.g.Stage(st.name)
		for _, a := range st.actors {
			s.Go(a.name, a.run)
		}
	}
	b.g.Stage("http").Go("dashboard and API", b.serveHTTP)
	jobs := b.g.Stage("jobs")
	for _, a := range b.jobs {
		jobs.Go(a.name, a.run)
	}
	return b.g.Run(ctx)
}

// serveHTTP serves the API until ctx ends, then lets in-flight requests
// finish (10 s at most).
func (b *box) serveHTTP(ctx context.Context) error {
	return serveUntil(ctx, b.hs, b.ln, 10*time.Second, func() { b.srv.MarkServing(false) })
}

// ingestActor is the ingest loop as an actor of the stage after the
// collectors'.
func (b *box) ingestActor() actor {
	return actor{name: "writer", run: func(ctx context.Context) error { return b.ingest(ctx, b.iw) }}
}

// engine is the API's router, for routes of the caller's own.
func (b *box) engine() *gin.Engine { return b.srv.Engine() }

// Publisher is what the collectors publish to.
func (b *box) Publisher() collector.Publisher { return chanPublisher{ch: b.ch} }

// ingest writes what the collectors publish, gathered for FlushEvery or
// BatchSize samples, through the Writer that cardhour ingest uses, until
// stop ends; then it stores what the channel still holds (the collectors,
// stopped before it, publish no more) and returns. Writes are never
// cancelled: a sample taken is a sample stored.
func (b *box) ingest(stop context.Context, w *ingest.Writer) error {
	ctx := context.Background()
	var buf []schemas.Sample
	t := time.NewTicker(b.FlushEvery)
	defer t.Stop()
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if err := w.Write(ctx, buf); err != nil {
			return err
		}
		if b.Tee != nil {
			if err := b.Tee.Publish(ctx, buf); err != nil {
				return err
			}
		}
		buf = nil // the batch keeps the slice until written; start a new one
		return nil
	}
	for {
		select {
		case <-stop.Done():
			for {
				select {
				case s := <-b.ch:
					buf = append(buf, s...)
				default:
					return flush()
				}
			}
		case s := <-b.ch:
			buf = append(buf, s...)
			if len(buf) >= b.BatchSize {
				if err := flush(); err != nil {
					return err
				}
			}
		case <-t.C:
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// markServing makes /healthz answer 200.
func (b *box) markServing() { b.srv.MarkServing(true) }

// close closes what open opened when run was not reached (a failed
// start); run closes the stores itself.
func (b *box) close() {
	if b.ran {
		return
	}
	b.ran = true
	var errs []error
	if b.ln != nil {
		errs = append(errs, b.ln.Close())
	}
	errs = append(errs, b.g.Run(context.Background())) // no actors: the closers
	if err := errors.Join(errs...); err != nil {
		b.Log.Warn("closing after a failed start", "err", err)
	}
}

// reachable is a listener address as a client on this host dials it: an
// unspecified IP (0.0.0.0, ::) becomes loopback.
func reachable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// discardWriter swallows seedCatalog's notice (the box logs instead).
type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
