// Command bench-reads fills a store with a generated fleet and times the
// reads of the service: reads.Usage grouped by project and day over a month
// (p50, p99, max of sequential calls) and a full-month reads.BillFrom; or,
// with -rate, cold usage reads started at a fixed rate (open loop), e.g. per
// project by user and day:
//
//	go run ./scripts/bench-reads -store sqlite:///tmp/bench.db -rate 200 -duration 20s \
//	  -group user,day -projects nlp-lab,cv-lab,ai101,thesis-h100,guest-lab
//
//	go run ./scripts/bench-reads -store clickhouse://127.0.0.1:19000/bench -load 10000000 -instances 7000
//	go run ./scripts/bench-reads -store sqlite:///tmp/bench.db -load 1000000 -instances 7000
//	go run ./scripts/bench-reads -store clickhouse://127.0.0.1:19000/bench   # reads only, store already filled
//
// The fleet spans November 2026 in the catalog's zone: the sampling interval
// is chosen so that load/instances samples per instance cover the month.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
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
	group := flag.String("group", "project,day", "the usage queries' group_by")
	projects := flag.String("projects", "", "with -rate: comma-separated projects, one per query in turn (empty: no project filter)")
	rate := flag.Float64("rate", 0, "instead of sequential calls: start this many usage queries a second, open loop (each cold: no report cache)")
	duration := flag.Duration("duration", 20*time.Second, "with -rate: how long to start queries")
	timeout := flag.Duration("timeout", 10*time.Second, "with -rate: a query still running after this is abandoned and counted as such")
	inflight := flag.Int("inflight", 32, "with -rate: at most this many queries at once; a query due when as many run is shed (counted, not run), as a server at its limit would answer 503")
	bill := flag.Bool("bill", true, "after the sequential calls, time three full-month BillFrom")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the timed reads to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile to this file at the end")
	flag.Parse()
	if *memprofile != "" {
		runtime.MemProfileRate = 64 << 10
		defer writeAllocs(*memprofile)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
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
	if *rate > 0 {
		return openLoop(ctx, st, cat, p, *group, *projects, *rate, *duration, *timeout, *inflight)
	}
	q := reads.UsageQuery{From: p.Start, To: p.End, GroupBy: strings.Split(*group, ",")}
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
	fmt.Printf("usage by %s over %s: %d rows; %d sequential calls: p50 %v p99 %v max %v\n",
		*group, p, rows, len(lat), pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	if !*bill {
		return nil
	}
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

// openLoop starts usage queries at rate a second for d, whether or not the
// earlier ones have answered (open loop: a store too slow shows as latency,
// not as a lower rate), each query for the next of projects in turn, and
// prints p50, p90, p99 and max latency of the queries run (one that failed,
// abandoned at the timeout or refused by an overloaded store, counts with the
// time it took), the rate queries were due at,
// the rate they were answered at, and how many were shed: at most inflight
// run at once, as in a server with a bound on concurrent requests, so that a
// store too slow for the rate is not buried under thousands of queries. No
// report cache: every query reads the store.
func openLoop(ctx context.Context, st reads.UsageRows, cat *schemas.Catalog, p billing.Period, group, projects string, rate float64, d, timeout time.Duration, inflight int) error {
	var ps [][]string
	for _, v := range strings.Split(projects, ",") {
		if v != "" {
			ps = append(ps, []string{v})
		}
	}
	if len(ps) == 0 {
		ps = [][]string{nil}
	}
	query := func(i int) reads.UsageQuery {
		return reads.UsageQuery{From: p.Start, To: p.End, GroupBy: strings.Split(group, ","), Projects: ps[i%len(ps)]}
	}
	for i := range ps { // warm up: one query per project, not counted
		if _, err := reads.Usage(ctx, st, cat, query(i)); err != nil {
			return err
		}
	}
	n := int(d.Seconds() * rate)
	interval := time.Duration(float64(time.Second) / rate)
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	shed := make([]bool, n)
	slots := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		select {
		case slots <- struct{}{}:
		default:
			shed[i] = true // as a server at its limit answers 503 at once
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			qctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			t0 := time.Now()
			_, errs[i] = reads.Usage(qctx, st, cat, query(i))
			lat[i] = time.Since(t0)
		})
	}
	sent := time.Since(start)
	wg.Wait()
	done := time.Since(start)
	failed, nshed := 0, 0
	var firstErr error
	var ok []time.Duration
	for i, err := range errs {
		switch {
		case shed[i]:
			nshed++
		case err != nil:
			failed++
			firstErr = cmp.Or(firstErr, err)
			ok = append(ok, lat[i]) // counts with the time it waited
		default:
			ok = append(ok, lat[i])
		}
	}
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "bench-reads: first failed query:", firstErr)
	}
	lat = ok
	slices.Sort(lat)
	pct := func(f float64) string {
		if len(lat) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f ms", float64(lat[min(len(lat)-1, int(f*float64(len(lat))))])/float64(time.Millisecond))
	}
	answered := n - failed - nshed
	fmt.Printf("usage by %s over %s, %d projects in turn, open loop: %d queries due in %s (%.1f/s); %d answered (%.1f/s over the %s until the last ended), %d failed (timeout %s), %d shed (%d in flight); of those run: p50 %s, p90 %s, p99 %s, max %s\n",
		group, p, len(ps), n, sent.Round(time.Millisecond), float64(n)/sent.Seconds(), answered, float64(answered)/done.Seconds(), done.Round(time.Millisecond),
		failed, timeout, nshed, inflight, pct(0.5), pct(0.9), pct(0.99), pct(1))
	return nil
}

// writeAllocs writes the allocation profile to path (errors go to stderr:
// the benchmark's figures are printed already).
func writeAllocs(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "memprofile:", err)
	}
}
