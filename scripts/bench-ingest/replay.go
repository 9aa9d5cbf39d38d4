package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// replay writes a generated month into one running writer (the path of
// `cardhour ingest`, worker and back-fill alike) several times over, in time
// order each time, as a replay after an outage or a topic holding the month
// several times would, and compares what the store keeps and how long the month
// close takes after the first pass and after the last.
//
// Rows kept are counted by the stores' own keys: occupancy per (key, start),
// idle runs per (key, class, start, min_util, max_util), the rows SQLite keeps
// and ClickHouse keeps once its parts are merged. Rows written counts every row
// sent (ClickHouse holds that many until merges, ingest.MemStore for good: with
// --store memory the month close reads them all). Raw samples are not stored
// unless --raw: a month close on thresholds at class bounds never reads them.
func replay(args []string) error {
	fs := flag.NewFlagSet("replay", flag.ExitOnError)
	dsn := fs.String("store", "", "store DSN, or 'memory': ingest.MemStore, which keeps every row written (default: a new SQLite file in a temporary directory)")
	instances := fs.Int("instances", 7000, "instances in the fleet")
	interval := fs.Int64("interval", 300, "sampling interval in seconds")
	month := fs.String("month", "2026-11", "the month generated and closed (Asia/Shanghai, as the example catalog)")
	passes := fs.Int("passes", 3, "times the month is written")
	batch := fs.Int("batch-size", 500_000, "samples per store write")
	repeat := fs.Int("repeat", 3, "month closes timed after the first and after the last pass (median of wall and of CPU seconds)")
	catalog := fs.String("catalog", "schemas/examples/catalog.yaml", "catalog of the month close")
	raw := fs.Bool("raw", false, "store the raw samples too")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile to this file")
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("replay: unexpected argument %q", fs.Arg(0))
	}
	if *passes < 1 || *repeat < 1 || *instances < 1 || *interval < 1 {
		return fmt.Errorf("replay: --passes, --repeat, --instances and --interval must be positive")
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
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cat, err := schemas.LoadCatalog(*catalog)
	if err != nil {
		return err
	}
	p, err := billing.ParsePeriod(*month, cat.Location)
	if err != nil {
		return err
	}
	if *dsn == "" {
		dir, err := os.MkdirTemp("", "bench-replay")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir) //nolint:errcheck // a temporary directory
		*dsn = "sqlite://" + filepath.Join(dir, "replay.db")
	}
	var st ingest.Backend = ingest.NewMemStore()
	if *dsn != "memory" {
		if st, err = storedsn.Open(ctx, *dsn, storedsn.Options{Logger: log, Mode: storedsn.Write, Migrate: true}); err != nil {
			return err
		}
	}
	defer st.Close() //nolint:errcheck // nothing written is pending at close
	kept := &keptRows{Backend: st, raw: *raw, occ: map[occRow]struct{}{}, idle: map[idleRow]struct{}{}}
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: kept, Logger: log})
	if err != nil {
		return err
	}
	steps := (p.EndMS() - p.StartMS()) / (*interval * 1000)
	fmt.Printf("store %s, %d instances at %d s, %s (%d steps), batches of %d, raw samples stored: %v\n",
		*dsn, *instances, *interval, *month, steps, *batch, *raw)
	fmt.Printf("%-6s %11s %9s %9s %13s %13s %11s %11s %8s %8s  %s\n", "after", "samples", "ingest_s", "ingest_cpu",
		"occ_written", "idle_written", "occ_kept", "idle_kept", "close_s", "close_cpu", "compactor")
	var first struct {
		occ, idle     int
		close, closeC float64
		invoices      []byte
	}
	firstW := 0
	for pass := 1; pass <= *passes; pass++ {
		t0, c0 := time.Now(), cpuSeconds()
		n, err := writeMonth(ctx, w, gen.Config{Samples: math.MaxInt64, StartMS: p.StartMS(), IntervalMS: *interval * 1000,
			Instances: *instances, Seed: 42}, p.EndMS(), *batch)
		if err != nil {
			return err
		}
		ingestS, ingestC := time.Since(t0).Seconds(), cpuSeconds()-c0
		if pass != 1 && pass != *passes {
			fmt.Printf("%-6d %11d %9.1f %9.1f\n", pass, n, ingestS, ingestC)
			continue
		}
		var times, cpus []float64
		var inv []byte
		for range *repeat {
			t0, c0 := time.Now(), cpuSeconds()
			res, err := reads.BillFrom(ctx, st, cat, p)
			if err != nil {
				return err
			}
			times, cpus = append(times, time.Since(t0).Seconds()), append(cpus, cpuSeconds()-c0)
			var b bytes.Buffer
			if err := billing.WriteJSON(&b, res); err != nil {
				return err
			}
			inv = b.Bytes()
		}
		slices.Sort(times)
		slices.Sort(cpus)
		closeS, closeC := times[len(times)/2], cpus[len(cpus)/2]
		occ, idle, occW, idleW := kept.counts()
		fmt.Printf("%-6d %11d %9.1f %9.1f %13d %13d %11d %11d %8.3f %8.3f  %+v\n", pass, n, ingestS, ingestC, occW, idleW, occ, idle,
			closeS, closeC, w.CompactorStats())
		if pass == 1 {
			first.occ, first.idle, first.close, first.closeC, first.invoices = occ, idle, closeS, closeC, inv
			firstW = occW + idleW
			continue
		}
		fmt.Printf("ratio %d passes / 1: rows kept %.3f (occupancy %.3f, idle %.3f), rows written %.2f, month close %.2f (CPU %.2f); invoices identical: %v\n",
			*passes, float64(occ+idle)/float64(first.occ+first.idle), float64(occ)/float64(first.occ),
			float64(idle)/float64(first.idle), float64(occW+idleW)/float64(firstW), closeS/first.close, closeC/first.closeC,
			bytes.Equal(inv, first.invoices))
		if !bytes.Equal(inv, first.invoices) {
			return fmt.Errorf("replay: the invoices after %d passes differ from those after one", *passes)
		}
	}
	return nil
}

var errMonthDone = errors.New("month done")

// writeMonth writes the samples cfg generates that start before end through w,
// batch samples per write, and returns how many it wrote.
func writeMonth(ctx context.Context, w *ingest.Writer, cfg gen.Config, end int64, batch int) (int64, error) {
	buf := make([]schemas.Sample, 0, batch)
	var n int64
	flush := func() error {
		if err := w.Write(ctx, buf); err != nil {
			return err
		}
		n += int64(len(buf))
		clear(buf)
		buf = buf[:0]
		return nil
	}
	_, err := gen.Each(cfg, func(s *schemas.Sample) error {
		if s.StartMS >= end {
			return errMonthDone
		}
		buf = append(buf, *s)
		if len(buf) == batch {
			return flush()
		}
		return nil
	})
	if err != nil && !errors.Is(err, errMonthDone) {
		return n, err
	}
	return n, flush()
}

type occRow struct {
	k     schemas.Key
	start int64
}

type idleRow struct {
	occRow
	class    uint8
	min, max float64
}

// keptRows passes runs and latest samples (and raw samples with raw) to the
// store and counts the rows written and the distinct rows the store keeps of
// them.
type keptRows struct {
	ingest.Backend
	raw         bool
	mu          sync.Mutex
	occ         map[occRow]struct{}
	idle        map[idleRow]struct{}
	occW, idleW int
}

func (s *keptRows) Write(ctx context.Context, b *ingest.Batch) error {
	if !s.raw {
		if len(b.Occupancy)+len(b.Idle)+len(b.Latest) == 0 {
			return nil
		}
		b = &ingest.Batch{Occupancy: b.Occupancy, Idle: b.Idle, Latest: b.Latest}
	}
	if err := s.Backend.Write(ctx, b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.occW += len(b.Occupancy)
	s.idleW += len(b.Idle)
	for _, r := range b.Occupancy {
		s.occ[occRow{r.Key, r.StartMS}] = struct{}{}
	}
	for _, r := range b.Idle {
		s.idle[idleRow{occRow{r.Key, r.StartMS}, r.Class, r.MinUtil, r.MaxUtil}] = struct{}{}
	}
	return nil
}

func (s *keptRows) counts() (occ, idle, occW, idleW int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.occ), len(s.idle), s.occW, s.idleW
}
