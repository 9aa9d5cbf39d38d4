//go:build !collector

package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/advicerun"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

func runAdvise(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("advise", flag.ContinueOnError)
	fs.SetOutput(stderr)
	catalogPath := fs.String("catalog", "", "price catalog (YAML)")
	samplesPath := fs.String("samples", "", "samples in JSON Lines, cardhour.sample.v1 ('-' for standard input)")
	store := fs.String("store", "", "read usage from a store written by 'cardhour ingest' instead of --samples: clickhouse://host:port/db or sqlite:///path.db")
	months := fs.Int("months", advice.DefaultMonths, fmt.Sprintf("whole calendar months before --now's month to look at (1..%d)", advice.MaxMonths))
	project := fs.String("project", "", "advise this project only")
	format := fs.String("format", "table", "output format: json | table | csv")
	nowFlag := fs.String("now", "", "the moment the advice is given (RFC 3339, YYYY-MM-DD or YYYY-MM in the catalog's zone; default: now): the window is the --months whole months before its month")
	minCov := fs.String("min-coverage", advice.DefaultMinCoverage.String(), "report an active reservation whose covered hours are below this share of its reserved hours")
	skipInvalid := fs.Bool("skip-invalid", false, "count and report invalid sample lines instead of stopping at the first")
	workers := fs.Int("workers", 0, "goroutines decoding samples and pricing project and SKU pairs (0: one per CPU)")
	bounds := addSampleBounds(fs, false)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour advise --catalog FILE (--samples FILE.jsonl | --store DSN) [--months 3] [--project P] [--format json|table|csv] [--now T]")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var problems []string
	if *catalogPath == "" {
		problems = append(problems, "--catalog is required")
	}
	if *samplesPath == "" && *store == "" {
		problems = append(problems, "--samples or --store is required")
	}
	if *samplesPath != "" && *store != "" {
		problems = append(problems, "--samples and --store are exclusive")
	}
	if *months < 1 || *months > advice.MaxMonths {
		problems = append(problems, fmt.Sprintf("--months %d: want 1 to %d", *months, advice.MaxMonths))
	}
	switch *format {
	case "json", "table", "csv":
	default:
		problems = append(problems, fmt.Sprintf("--format %q: want json, table or csv", *format))
	}
	cov, err := decimal.NewFromString(strings.TrimSpace(*minCov))
	if err != nil || cov.Sign() < 0 || cov.GreaterThan(decimal.NewFromInt(1)) {
		problems = append(problems, fmt.Sprintf("--min-coverage %q: want a share in [0, 1], e.g. 0.5", *minCov))
	}
	problems = append(problems, bounds.problems()...)
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "cardhour advise: "+strings.Join(problems, "; "))
		fs.Usage()
		return 2
	}
	cat, err := schemas.LoadCatalog(*catalogPath)
	if err != nil {
		fmt.Fprintf(stderr, "cardhour advise: invalid catalog:\n%v\n", err)
		return 1
	}
	now, err := parseNow(*nowFlag, cat.Location)
	if err != nil {
		fmt.Fprintf(stderr, "cardhour advise: --now: %v\n", err)
		return 2
	}
	if *project != "" {
		if _, ok := cat.Project(*project); !ok {
			fmt.Fprintf(stderr, "cardhour advise: warning: project %q is not in the catalog: its usage is priced with the catalog defaults\n", *project)
		}
	}
	ctx := context.Background()
	start := time.Now()
	opt := advice.Options{Months: *months, Now: now, Project: *project, MinCoverage: cov}
	cfg := advicerun.Config{Workers: *workers, Progress: func(msg string) {
		fmt.Fprintf(stderr, "cardhour advise: %s (%.1f s)\n", msg, time.Since(start).Seconds())
	}}
	periods := advice.Window(cat, now, *months)
	fmt.Fprintf(stderr, "cardhour advise: %s to %s\n", periods[0], periods[len(periods)-1])
	var bill advicerun.Biller
	if *store != "" {
		st, err := storedsn.Open(ctx, *store, storedsn.Options{Logger: slog.New(slog.DiscardHandler), Mode: storedsn.Read})
		if err != nil {
			fmt.Fprintf(stderr, "cardhour advise: %v\n", err)
			return 1
		}
		defer st.Close() //nolint:errcheck // read-only
		bill = reads.Biller(st, cat)
	} else {
		var in io.Reader = os.Stdin
		if *samplesPath != "-" {
			f, err := os.Open(*samplesPath)
			if err != nil {
				fmt.Fprintf(stderr, "cardhour advise: %v\n", err)
				return 1
			}
			defer f.Close() //nolint:errcheck // read-only
			in = f
		}
		results, stats, err := advice.BillSamples(in, cat, periods, schemas.ReadOptions{SkipInvalid: *skipInvalid, Workers: *workers, DecoderOptions: bounds.options()})
		if err != nil {
			fmt.Fprintf(stderr, "cardhour advise: %s: %v\n", *samplesPath, err)
			return 1
		}
		if stats.InvalidCount > 0 {
			fmt.Fprintf(stderr, "cardhour advise: skipped %d invalid line(s) of %d; the first:\n", stats.InvalidCount, stats.Lines)
			for _, le := range stats.Invalid {
				fmt.Fprintf(stderr, "  %s:%d: %v\n", *samplesPath, le.Line, le.Err)
			}
		}
		fmt.Fprintf(stderr, "cardhour advise: read %d sample line(s) (%.1f s)\n", stats.Lines, time.Since(start).Seconds())
		bill = advicerun.FromResults(results)
	}
	rep, err := advicerun.Advise(ctx, cat, bill, opt, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "cardhour advise: %v\n", err)
		return 1
	}
	out := bufio.NewWriterSize(stdout, 64<<10)
	switch *format {
	case "json":
		err = advice.WriteJSON(out, rep)
	case "table":
		err = advice.WriteTable(out, rep)
	case "csv":
		err = advice.WriteCSV(out, rep)
	}
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		fmt.Fprintf(stderr, "cardhour advise: cannot write output: %v\n", err)
		return 1
	}
	return 0
}

// parseNow reads --now: RFC 3339, or a day or a month in the catalog's zone.
func parseNow(s string, loc *time.Location) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
		return t, nil
	}
	if p, err := billing.ParsePeriod(s, loc); err == nil {
		return p.Start, nil
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2026-12-01T09:00:00+08:00), YYYY-MM-DD or YYYY-MM", s)
}
