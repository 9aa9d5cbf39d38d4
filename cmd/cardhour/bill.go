//go:build !collector

package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

func runBill(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	catalogPath := fs.String("catalog", "", "price catalog (YAML)")
	samplesPath := fs.String("samples", "", "samples in JSON Lines, cardhour.sample.v1 ('-' for standard input)")
	period := fs.String("period", "", "billing period YYYY-MM (a calendar month in the catalog's time zone)")
	format := fs.String("format", "json", "output format: json | table | csv")
	skipInvalid := fs.Bool("skip-invalid", false, "count and report invalid lines instead of stopping at the first")
	workers := fs.Int("workers", 0, "decoding goroutines (0: one per CPU)")
	store := fs.String("store", "", "bill from a store written by 'cardhour ingest' instead of --samples: clickhouse://host:port/db or sqlite:///path.db")
	user := fs.String("user", "", "print only this user's statement (their usage lines on each invoice)")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile to this file until exit (for benchmarks)")
	bounds := addSampleBounds(fs, false)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour bill --catalog FILE --samples FILE.jsonl --period YYYY-MM [--format json|table|csv]")
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
		problems = append(problems, "--samples is required")
	}
	if *samplesPath != "" && *store != "" {
		problems = append(problems, "--samples and --store are exclusive")
	}
	if *period == "" {
		problems = append(problems, "--period is required")
	}
	switch *format {
	case "json", "table", "csv":
	default:
		problems = append(problems, fmt.Sprintf("--format %q: want json, table or csv", *format))
	}
	problems = append(problems, bounds.problems()...)
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "cardhour bill: "+strings.Join(problems, "; "))
		fs.Usage()
		return 2
	}

	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		fmt.Fprintf(stderr, "cardhour bill: --cpu-profile: %v\n", err)
		return 1
	}
	defer stopProfile()

	cat, err := schemas.LoadCatalog(*catalogPath)
	if err != nil {
		fmt.Fprintf(stderr, "cardhour bill: invalid catalog:\n%v\n", err)
		return 1
	}
	p, err := billing.ParsePeriod(*period, cat.Location)
	if err != nil {
		fmt.Fprintf(stderr, "cardhour bill: %v\n", err)
		return 2
	}

	var res *billing.Result
	var stats schemas.ReadStats
	if *store != "" {
		res, err = billFromStore(context.Background(), *store, cat, p)
	} else {
		var in io.Reader = os.Stdin
		if *samplesPath != "-" {
			f, err := os.Open(*samplesPath)
			if err != nil {
				fmt.Fprintf(stderr, "cardhour bill: %v\n", err)
				return 1
			}
			defer f.Close() //nolint:errcheck // read-only
			in = f
		}

		res, stats, err = billing.BillStream(in, cat, p, schemas.ReadOptions{SkipInvalid: *skipInvalid, Workers: *workers, DecoderOptions: bounds.options()})
	}
	if err != nil && *store != "" {
		fmt.Fprintf(stderr, "cardhour bill: %v\n", err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "cardhour bill: %s: %v\n", *samplesPath, err)
		if !*skipInvalid && stats.InvalidCount > 0 {
			fmt.Fprintln(stderr, "cardhour bill: no invoice written; fix the line or rerun with --skip-invalid to bill the valid lines")
		}
		return 1
	}
	if stats.InvalidCount > 0 {
		fmt.Fprintf(stderr, "cardhour bill: skipped %d invalid line(s) of %d; the first:\n", stats.InvalidCount, stats.Lines)
		for _, le := range stats.Invalid {
			fmt.Fprintf(stderr, "  %s:%d: %v\n", *samplesPath, le.Line, le.Err)
		}
	}
	if *store == "" {
		addInputWarnings(res, stats)
	}
	if *user != "" {
		res = res.StatementFor(*user)
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(stderr, "cardhour bill: warning:", w)
	}

	// bill writes the billing contract's formats (billing.WriteJSON and
	// its CSV and table), not the invoice documents a billing run freezes
	// (billing/export): one object for the period, reproducible byte for
	// byte; docs/billing.md, "Output formats", says why the two differ.
	out := bufio.NewWriterSize(stdout, 64<<10)
	switch *format {
	case "json":
		err = billing.WriteJSON(out, res)
	case "table":
		err = billing.WriteTable(out, res)
	case "csv":
		err = billing.WriteCSV(out, res)
	}
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		fmt.Fprintf(stderr, "cardhour bill: cannot write output: %v\n", err)
		return 1
	}
	return 0
}

// addInputWarnings puts what the samples file looked like into the result, so that
// every output format says it: an input without samples, and invalid lines that
// were skipped (how many, of how many, and where the first was).
func addInputWarnings(res *billing.Result, stats schemas.ReadStats) {
	res.SkippedLines = stats.InvalidCount
	switch {
	case stats.Lines == 0:
		res.AddWarning(billing.WarnInput, "the input has no sample lines: nothing was billed from it (输入中没有样本)")
	case stats.Valid == 0:
		res.AddWarning(billing.WarnInput, fmt.Sprintf(
			"all %d sample line(s) were invalid and skipped: nothing was billed from the input, first at line %d "+
				"(全部 %d 行样本无效，已跳过，未计费)", stats.Lines, firstInvalidLine(stats), stats.Lines))
	case stats.InvalidCount > 0:
		res.AddWarning(billing.WarnInput, fmt.Sprintf(
			"%d of %d sample line(s) were invalid and skipped: they are not billed and this bill may be incomplete, first at line %d "+
				"(%d 行样本中有 %d 行无效，已跳过，未计费；账单可能不完整)",
			stats.InvalidCount, stats.Lines, firstInvalidLine(stats), stats.Lines, stats.InvalidCount))
	}
}

func firstInvalidLine(stats schemas.ReadStats) int64 {
	first := int64(0)
	for _, le := range stats.Invalid {
		if first == 0 || le.Line < first {
			first = le.Line
		}
	}
	return first
}
