//go:build !collector

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/catalogs"
	"github.com/cardhour/cardhour/internal/watch"
)

// The notify: and release: sections of the watch file are read by their
// own packages; these turn a section's YAML into the watcher's notifier
// and releaser. A build whose hooks are unset refuses a file that has the
// section rather than ignoring it.
var (
	watchNotifier func(section []byte) (watch.Notifier, error)
	watchReleaser func(section []byte) (watch.Releaser, error)
)

// watchOptions are serve's --watch flags, read.
type watchOptions struct {
	File   string
	Every  time.Duration
	Config watch.Config // from the file; the stores are added by watchActor
}

// loadWatch reads the watch file and builds the watcher's configuration
// (its notifier and releaser from their sections).
func loadWatch(path string, every time.Duration) (watchOptions, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return watchOptions{}, fmt.Errorf("watch configuration: %w", err)
	}
	f, err := watch.LoadFile(data, path)
	if err != nil {
		return watchOptions{}, err
	}
	cfg := watch.Config{Admins: f.Admins, Leads: f.Leads, ExemptionHint: f.ExemptionHint, DashboardURL: f.DashboardURL, BudgetEvery: f.BudgetEvery,
		DeliveryRetryFor: f.DeliveryRetryFor}
	if cfg.BudgetEvery == 0 {
		cfg.BudgetEvery = 5 * time.Minute
	}
	var errs []error
	if f.Notify != nil {
		if watchNotifier == nil {
			errs = append(errs, fmt.Errorf("%s: notify: this build has no notification channels", path))
		} else if cfg.Notifier, err = watchNotifier(f.Notify); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	if f.Release != nil {
		if watchReleaser == nil {
			errs = append(errs, fmt.Errorf("%s: release: this build has no releasers", path))
		} else if cfg.Releaser, err = watchReleaser(f.Release); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	if f.Interval > 0 {
		every = f.Interval
	}
	return watchOptions{File: path, Every: every, Config: cfg}, errors.Join(errs...)
}

// watchActor builds the watcher of this replica as an actor: it runs while
// it holds the watch lease, until its context ends, and then gives the
// lease up (the state store is still open: the stores close after every
// actor returned); a failed release is its error, as watch.Run returns
// it. Its metrics go to reg (served at /metrics).
func watchActor(led *leaseLedger, st ingest.Backend, cats *catalogs.Cache, wo watchOptions, reg prometheus.Registerer, log *slog.Logger) (actor, error) {
	cfg, every := wo.Config, wo.Every
	cfg.Ledger, cfg.Usage, cfg.Catalog, cfg.Logger = led, st, cats.Current, log
	cfg.Registerer = reg
	if c, ok := cfg.Notifier.(interface{ Collectors() []prometheus.Collector }); ok && reg != nil {
		reg.MustRegister(c.Collectors()...)
	}
	w, err := watch.New(cfg)
	if err != nil {
		return actor{}, err
	}
	holder := serveHolder()
	return actor{name: "watcher", run: func(ctx context.Context) error {
		log.Info("watcher started", "file", wo.File, "every", every.String())
		err := w.Run(ctx, holder, every, time.Now)
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Error("watcher stopped", "err", err)
		}
		return stopped(ctx, err)
	}}, nil
}
