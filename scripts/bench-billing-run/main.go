// Command bench-billing-run times a billing run (invoicing.Service.Run, what
// POST /api/v1/billing-runs does: bill, check data quality, save drafts,
// record the run) against `cardhour bill --store` of the same month on the
// same store, interleaved in each round, and prints their ratio.
//
//	go run ./scripts/bench-billing-run -store sqlite:///tmp/bench.db -load 1000000 -instances 7000 -cardhour bin/cardhour
//	go run ./scripts/bench-billing-run -store sqlite:///tmp/bench.db -cardhour bin/cardhour   # store already filled
//
// The store is filled like scripts/bench-reads fills it (a fleet over
// November 2026 in the catalog's zone). Each round times, in turns: the
// `cardhour bill --store` process (-cardhour; skipped when empty), BillFrom
// with its JSON in this process on the open store, and a billing run on a
// fresh SQLite ledger (the drafts of a first run already saved, so each run
// compares and keeps them, as a rerun does). The run's data-quality check is
// also timed alone. Opening the store migrates it (a store of an older schema
// gets its rollups then; the time is printed).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger/sqlite"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-billing-run:", err)
		os.Exit(1)
	}
}

func run() error {
	dsn := flag.String("store", "", "store DSN (sqlite:///path or clickhouse://host:port/db)")
	catalog := flag.String("catalog", "schemas/examples/catalog.yaml", "price catalog")
	load := flag.Int64("load", 0, "generate and write this many samples first (0: the store is filled)")
	instances := flag.Int("instances", 7000, "fleet size when loading")
	rounds := flag.Int("rounds", 5, "interleaved rounds")
	bin := flag.String("cardhour", "", "cardhour binary for `bill --store` (empty: not timed)")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the rounds to this file")
	flag.Parse()
	if *dsn == "" {
		return fmt.Errorf("-store is required")
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	catYAML, err := os.ReadFile(*catalog)
	if err != nil {
		return err
	}
	cat, err := schemas.ParseCatalog(catYAML, *catalog)
	if err != nil {
		return err
	}
	p := billing.NewPeriod(2026, time.November, cat.Location)
	t0 := time.Now()
	st, err := storedsn.Open(ctx, *dsn, storedsn.Options{Logger: log, Mode: storedsn.Write, Migrate: true, RawRetentionDays: 3650})
	if err != nil {
		return err
	}
	defer st.Close() //nolint:errcheck // benchmark exit
	fmt.Printf("opened (and migrated) %s in %.2f s\n", *dsn, time.Since(t0).Seconds())
	if *load > 0 {
		steps := *load / int64(*instances)
		interval := (p.EndMS() - p.StartMS()) / max(steps, 1) / 1000 * 1000
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
		if err != nil {
			return err
		}
		t0 := time.Now()
		n, err := gen.Load(ctx, w, gen.Config{Samples: *load, StartMS: p.StartMS(), IntervalMS: interval, Instances: *instances, Seed: 1}, 200_000)
		if err != nil {
			return err
		}
		if err := w.FlushRuns(ctx); err != nil {
			return err
		}
		fmt.Printf("loaded %d samples over %d instances (interval %d s) in %.1f s\n", n, *instances, interval/1000, time.Since(t0).Seconds())
	}

	dir, err := os.MkdirTemp("", "bench-billing-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)     //nolint:errcheck // benchmark exit
	now := p.End.Add(time.Hour) // the month is over: a full month's run
	led, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "ledger.db"), Clock: func() time.Time { return now }})
	if err != nil {
		return err
	}
	defer led.Close() //nolint:errcheck // benchmark exit
	if _, _, err := led.PutCatalog(ctx, "bench", catYAML); err != nil {
		return err
	}
	svc, err := invoicing.New(invoicing.Config{Ledger: led, Usage: st, Clock: func() time.Time { return now }})
	if err != nil {
		return err
	}
	q, ok := st.(reads.QualityRows)
	if !ok {
		return fmt.Errorf("%s cannot check data quality", *dsn)
	}
	first, err := svc.Run(ctx, "bench", p.String())
	if err != nil {
		return err
	}
	fmt.Printf("billing run %s: %d drafts, %d silent nodes, %d unattributed\n", p, len(first.Drafts),
		len(first.DataQuality.Silent), len(first.DataQuality.Unattributed))

	type timing struct {
		name string
		fn   func() error
		took []time.Duration
	}
	bills := []*timing{
		{name: "billing run (invoicing.Run)", fn: func() error { _, err := svc.Run(ctx, "bench", p.String()); return err }},
		{name: "BillFrom + JSON in process", fn: func() error {
			res, err := reads.BillFrom(ctx, st, cat, p)
			if err != nil {
				return err
			}
			return billing.WriteJSON(io.Discard, res)
		}},
		{name: "data-quality check alone", fn: func() error { _, err := reads.CheckDataQuality(ctx, q, cat, p, now); return err }},
	}
	if *bin != "" {
		bills = append(bills, &timing{name: "cardhour bill --store", fn: func() error {
			cmd := exec.Command(*bin, "bill", "--catalog", *catalog, "--store", *dsn, "--period", p.String(), "--format", "json") //nolint:gosec // G204: the binary to time is the flag's point
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = io.Discard, &stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s: %w: %s", cmd, err, strings.TrimSpace(stderr.String()))
			}
			return nil
		}})
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for r := range *rounds {
		// Turns rotate each round so that none always runs first.
		for i := range bills {
			b := bills[(i+r)%len(bills)]
			t0 := time.Now()
			if err := b.fn(); err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
			b.took = append(b.took, time.Since(t0))
		}
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	load1, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("%d rounds, load %s", *rounds, load1)
	for _, b := range bills {
		fmt.Printf("  %-30s median %8.1f ms  (%v)\n", b.name, float64(median(b.took).Microseconds())/1000, roundAll(b.took))
	}
	// Ratios paired by round (the two timed within the same round), then
	// their median.
	ratio := func(a, b *timing) float64 {
		rs := make([]float64, len(a.took))
		for i := range rs {
			rs[i] = a.took[i].Seconds() / b.took[i].Seconds()
		}
		slices.Sort(rs)
		return rs[len(rs)/2]
	}
	fmt.Printf("ratio billing run / BillFrom in process: %.2f (median of rounds)\n", ratio(bills[0], bills[1]))
	if *bin != "" {
		fmt.Printf("ratio billing run / cardhour bill --store: %.2f (median of rounds; goal <= 2)\n", ratio(bills[0], bills[3]))
	}
	return nil
}

func roundAll(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, x := range d {
		out[i] = x.Round(time.Millisecond)
	}
	return out
}
