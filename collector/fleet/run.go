package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/nvmlsource"
)

// NodeCollectors builds one real collector per simulated node: the NVML source
// over the node's mock, the fleet's resolver first and then extra (if any), and
// base's publisher, clock, interval, logger and registerer. close releases the
// NVML sources.
func (f *Fleet) NodeCollectors(base collector.Config, extra ...collector.Resolver) (cs []*collector.Collector, closeAll func(), err error) {
	var srcs []*nvmlsource.Source
	closeAll = func() {
		for _, s := range srcs {
			_ = s.Close()
		}
	}
	models := f.ModelNames()
	for k, v := range base.ModelNames {
		models[k] = v
	}
	for _, n := range f.Nodes {
		src, err := nvmlsource.New(nvmlsource.Config{Lib: n.Lib, Logger: base.Logger, Registerer: base.Registerer,
			VGPU: n.hasVGPU(), VMName: n.vmName, ProcessUtilization: n.hasShares()})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("node %q: %w", n.Name, err)
		}
		srcs = append(srcs, src)
		cfg := base
		cfg.Node = n.Name
		cfg.Source = src
		cfg.ModelNames = models
		cfg.Resolvers = append([]collector.Resolver{f.Resolver(n)}, extra...)
		if n.hasShares() {
			cfg.Splitters = append([]collector.Splitter{f.Splitter(n)}, base.Splitters...)
		}
		c, err := collector.New(cfg)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("node %q: %w", n.Name, err)
		}
		cs = append(cs, c)
	}
	return cs, closeAll, nil
}

// SimulateConfig configures Simulate.
type SimulateConfig struct {
	Spec      *Spec
	From, To  time.Time
	Interval  time.Duration // 0: the fleet file's interval (default 60 s)
	Publisher collector.Publisher
	Logger    *slog.Logger
}

// Simulate fast-forwards the fleet from From to To with a fake clock (no
// sleeping) through the real collector code, one node after the other, and
// publishes every sample.
func Simulate(ctx context.Context, cfg SimulateConfig) error {
	if cfg.Spec == nil || cfg.Publisher == nil {
		return errors.New("simulate: spec and publisher are required")
	}
	if !cfg.To.After(cfg.From) {
		return fmt.Errorf("simulate: --to %s must be after --from %s", cfg.To.Format(time.RFC3339), cfg.From.Format(time.RFC3339))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	clock := collector.NewFastForwardClock(cfg.From)
	f, err := Build(cfg.Spec, clock, cfg.From)
	if err != nil {
		return err
	}
	iv := cfg.Interval
	if iv == 0 {
		iv = f.Interval
	}
	cs, closeAll, err := f.NodeCollectors(collector.Config{Interval: iv, Clock: clock, StopAt: cfg.To,
		Publisher: cfg.Publisher, Logger: cfg.Logger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return err
	}
	defer closeAll()
	for i, c := range cs {
		clock.Set(cfg.From)
		if err := c.Run(ctx); err != nil {
			return fmt.Errorf("node %q: %w", f.Nodes[i].Name, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}
