// Command bench-reads fills a store with a generated fleet and times the
// reads of the service: reads.Usage grouped by project and day over a month
// (p50, p99, max of sequential calls) and a full-month reads.BillFrom.
//
//	go run ./scripts/bench-reads -store clickhouse://127.0.0.1:19000/bench -load 10000000 -instances 7000
//	go run ./scripts/bench-reads -store sqlite:///tmp/bench.db -load 1000000 -instances 7000
//	go run ./scripts/bench-reads -store clickhouse://127.0.0.1:19000/bench   # reads only, store already filled
//
// The fleet spans November 2026 in the catalog's zone: the sampling interval
// is chosen so that load/instances samples per instance cover the month.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-reads:", err)
		os.Exit(1)
	}
}

func run() error {
	dsn := flag.String("store", "", "store DSN (clickhouse://host:port/db or sqlite:///path)")
	catalog := flag.String("catalog", "schemas/examples/catalog.yaml", "price catalog")
	load := flag.Int64("load", 0, "generate and write this many samples first (0: read only)")
	instances := flag.Int("instances", 7000, "fleet size when loading")
	queries := flag.Int("queries", 200, "sequential usage queries to time")
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
	p := billing.NewPeriod(2026, time.November, cat.Location)
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
	q := reads.UsageQuery{From: p.Start, To: p.End, GroupBy: []string{reads.ByProject, reads.ByDay}}
	var lat []time.Duration
	var rows int
	for range *queries {
		t0 := time.Now()
		rep, err := reads.Usage(ctx, st, cat, q)
		if err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		rows = len(rep.Rows)
	}
	slices.Sort(lat)
	pct := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	fmt.Printf("usage by project,day over %s: %d rows; %d sequential calls: p50 %v p99 %v max %v\n",
		p, rows, len(lat), pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	var bills []time.Duration
	for range 3 {
		t0 := time.Now()
		if _, err := reads.BillFrom(ctx, st, cat, p); err != nil {
			return err
		}
		bills = append(bills, time.Since(t0))
	}
	slices.Sort(bills)
	fmt.Printf("full-month BillFrom %s: median %v (of %v)\n", p, bills[1].Round(time.Millisecond), bills)
	return nil
}
