// Command bench-advise fills a store with a generated fleet over three months
// and times the advice over them (internal/advicerun over reads.BillFrom).
//
//	go run ./scripts/bench-advise -store clickhouse://127.0.0.1:19000/bench_advise -load 16000000 -instances 7000
//	go run ./scripts/bench-advise -store clickhouse://127.0.0.1:19000/bench_advise   # advice only, store already filled
//
// The fleet spans September to November 2026 in the catalog's zone: the
// sampling interval is chosen so that load/instances samples per instance
// cover the three months. The advice is given as on 2026-12-01.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/advicerun"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-advise:", err)
		os.Exit(1)
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run() error {
	dsn := flag.String("store", "", "store DSN (clickhouse://host:port/db or sqlite:///path)")
	catalog := flag.String("catalog", "schemas/examples/catalog.yaml", "price catalog")
	load := flag.Int64("load", 0, "generate and write this many samples first (0: read only)")
	instances := flag.Int("instances", 7000, "fleet size when loading")
	runs := flag.Int("runs", 3, "advice runs to time")
	verbose := flag.Bool("v", false, "print the advice's progress lines")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the advice runs to this file")
	flag.Parse()
	if *dsn == "" {
		return fmt.Errorf("-store is required")
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cat, err := schemas.LoadCatalog(*catalog)
	if err != nil {
		return err
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, cat.Location)
	periods := advice.Window(cat, now, 3)
	from, to := periods[0].StartMS(), periods[2].EndMS()
	mode := storedsn.Read
	if *load > 0 {
		mode = storedsn.Write
	}
	st, err := storedsn.Open(ctx, *dsn, storedsn.Options{Logger: log, Mode: mode, Migrate: true, RawRetentionDays: 3650})
	if err != nil {
		return err
	}
	defer st.Close() //nolint:errcheck // benchmark exit
	if *load > 0 {
		steps := *load / int64(*instances)
		interval := (to - from) / max(steps, 1) / 1000 * 1000
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
		if err != nil {
			return err
		}
		t0 := time.Now()
		n, err := gen.Load(ctx, w, gen.Config{Samples: *load, StartMS: from, IntervalMS: interval, Instances: *instances, Seed: 1}, 200_000)
		if err != nil {
			return err
		}
		if err := w.FlushRuns(ctx); err != nil {
			return err
		}
		fmt.Printf("loaded %d samples over %d instances (interval %d s) in %.1f s\n", n, *instances, interval/1000, time.Since(t0).Seconds())
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var took []time.Duration
	var rep *advice.Report
	for range *runs {
		t0, cpu0 := time.Now(), cpuTime()
		var bill time.Duration
		opt := advice.Options{Now: now, MinCoverage: advice.DefaultMinCoverage}
		var cfg advicerun.Config
		if *verbose {
			cfg.Progress = func(msg string) { fmt.Fprintf(os.Stderr, "  %.2f s %s\n", time.Since(t0).Seconds(), msg) }
		}
		src := reads.Biller(st, cat)
		var mu sync.Mutex
		timed := func(ctx context.Context, p billing.Period) (*billing.Result, error) {
			t := time.Now()
			defer func() { mu.Lock(); bill += time.Since(t); mu.Unlock() }()
			return src(ctx, p)
		}
		rep, err = advicerun.Advise(ctx, cat, timed, opt, cfg)
		if err != nil {
			return err
		}
		took = append(took, time.Since(t0))
		fmt.Printf("advice %s..%s: %d project and SKU pairs, %d under-used reservations, saving %s; %v wall, %v CPU in this process (BillFrom of the 3 months, at once: %v summed)\n",
			rep.From, rep.To, len(rep.Advice), len(rep.Underused), rep.Saving, took[len(took)-1].Round(time.Millisecond),
			(cpuTime() - cpu0).Round(time.Millisecond), bill.Round(time.Millisecond))
	}
	slices.Sort(took)
	fmt.Printf("advice over 3 months: median %v (of %v)\n", took[len(took)/2].Round(time.Millisecond), took)
	var peak int64
	for _, a := range rep.Advice {
		peak = max(peak, a.Peak)
	}
	fmt.Printf("largest peak of one project and SKU: %d instances at once\n", peak)
	return nil
}
