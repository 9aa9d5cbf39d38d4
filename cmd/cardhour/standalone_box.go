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
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
	"github.com/cardhour/cardhour/schemas"
)

// box is the whole product in one process, as cardhour demo and cardhour
// standalone run it: collectors publish into a channel (where a cluster has
// Kafka), the ingest writer stores what arrives in a SQLite usage store
// (where a cluster has ClickHouse), and the API with the dashboard and the
// watcher read it, as cardhour serve does.
type box struct {
	UsagePath   string // SQLite usage store (created and migrated)
	StatePath   string // SQLite state store (created and migrated)
	CatalogPath string // stored as the current catalog version when it differs
	Addr        string
	Clock       func() time.Time // time of the state store, the reads and the API
	Log         *slog.Logger
	Watch       watchOptions // File "": serveBackends starts no watcher
	// Tee, when set, also receives every sample ingested.
	Tee collector.Publisher
	// FlushEvery is how long the ingest loop gathers samples before a
	// store write (default 1 s); BatchSize bounds a write (default 20 000).
	FlushEvery time.Duration
	BatchSize  int

	led    ledger.Store
	usage  ingest.Backend // read handle (what serve opens)
	writer *sqlite.Store  // write handle
	srv    *api.Server
	hs     *http.Server
	url    string // http://host:port of the listener, reachable from this host
	ch     chan []schemas.Sample
	done   chan error // the ingest loop's result
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

// open opens the stores, seeds the catalog, builds the API and listens; the
// collectors are started by the caller with Publisher(), and Serve marks the
// API as serving.
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
	if b.usage, err = storedsn.Open(ctx, "sqlite://"+b.UsagePath, storedsn.Options{Logger: b.Log, Mode: storedsn.Read}); err != nil {
		return err
	}
	cfg, err := serveBackends(ctx, b.led, b.usage, jobOptions{Grace: defaultGrace, Every: 5 * time.Minute,
		UsageCache: true, UsageMaxStale: 10 * time.Second, Watch: b.Watch, Clock: b.Clock}, b.Log)
	if err != nil {
		return err
	}
	cfg.Ledger, cfg.Logger, cfg.Version, cfg.Clock = b.led, b.Log, version, b.Clock
	if b.srv, err = api.New(cfg); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", b.Addr)
	if err != nil {
		return err
	}
	b.url = "http://" + reachable(ln.Addr())
	b.hs = &http.Server{Handler: b.srv.Handler(), ReadHeaderTimeout: api.DefaultReadHeaderTimeout,
		ReadTimeout: api.DefaultReadTimeout, WriteTimeout: api.DefaultWriteTimeout, IdleTimeout: api.DefaultIdleTimeout,
		MaxHeaderBytes: 1 << 20, ErrorLog: slog.NewLogLogger(b.Log.Handler(), slog.LevelWarn)}
	go func() {
		if err := b.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.Log.Error("HTTP server stopped", "err", err)
		}
	}()
	b.ch = make(chan []schemas.Sample, 64)
	b.done = make(chan error, 1)
	iw, err := ingest.NewWriter(ingest.WriterConfig{Store: w, Logger: b.Log, Metrics: ingest.NewMetrics(cfg.Registry)})
	if err != nil {
		return err
	}
	go func() { b.done <- b.ingest(iw) }()
	return nil
}

// engine is the API's router, for routes of the caller's own.
func (b *box) engine() *gin.Engine { return b.srv.Engine() }

// Publisher is what the collectors publish to.
func (b *box) Publisher() collector.Publisher { return chanPublisher{ch: b.ch} }

// ingest writes what the collectors publish, gathered for FlushEvery or
// BatchSize samples, through the Writer that cardhour ingest uses, until
// the channel is closed and drained. Writes are never cancelled: a sample
// taken is a sample stored.
func (b *box) ingest(w *ingest.Writer) error {
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
		case s, ok := <-b.ch:
			if !ok {
				return flush()
			}
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

// drain closes the channel once the collectors have returned and waits for
// the ingest loop to store the rest.
func (b *box) drain() error {
	close(b.ch)
	return <-b.done
}

// markServing makes /healthz answer 200.
func (b *box) markServing() { b.srv.MarkServing(true) }

// close stops the HTTP server (in-flight requests may finish) and closes
// the stores.
func (b *box) close() {
	if b.srv != nil {
		b.srv.MarkServing(false)
	}
	if b.hs != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = b.hs.Shutdown(sctx)
		cancel()
	}
	if b.usage != nil {
		_ = b.usage.Close()
	}
	if b.writer != nil {
		_ = b.writer.Close()
	}
	if b.led != nil {
		_ = b.led.Close()
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

// runCollectors runs cs until ctx ends (or their StopAt), each taking its
// final sample, and returns when all have.
func runCollectors(ctx context.Context, cs []*collector.Collector, log *slog.Logger) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			if err := c.Run(ctx); err != nil {
				log.Error("collector stopped", "err", err)
			}
		})
	}
	wg.Wait()
}
