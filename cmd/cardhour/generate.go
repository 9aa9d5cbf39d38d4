//go:build !collector

package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/schemas"
)

func runGenerate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	samples := fs.Int64("samples", 1_000_000, "number of sample lines to write")
	start := fs.String("start", "2026-11", "first month of the trace (YYYY-MM, starts at 00:00 Asia/Shanghai)")
	interval := fs.Float64("interval", 10, "sampling interval in seconds")
	instances := fs.Int("instances", 64, "number of GPU instances in the fleet")
	users := fs.Int("users", 8, "users (students) per project; the trace has 5 projects")
	seed := fs.Uint64("seed", 1, "random seed (same seed, same file)")
	until := fs.String("until", "", "end the trace before this month (YYYY-MM, 00:00 Asia/Shanghai), even short of --samples: the instances' latest samples then start in the last step before it")
	dup := fs.Int("duplicate-every", 0, "write every n-th sample twice, as a replay would (0: never)")
	outPath := fs.String("out", "-", "output file ('-' for standard output)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	loc, err := loadShanghai()
	if err != nil {
		fmt.Fprintln(stderr, "cardhour generate:", err)
		return 1
	}
	startMS, endMS, err := generateSpan(*start, *until, loc)
	if err != nil {
		fmt.Fprintln(stderr, "cardhour generate:", err)
		return 2
	}
	var problems []string
	// !(x >= lo) also catches NaN, which every comparison answers false.
	if !(*interval >= 0.001 && *interval <= maxGenerateIntervalS) {
		problems = append(problems, fmt.Sprintf("--interval %v: want seconds between 0.001 and %d", *interval, maxGenerateIntervalS))
	}
	if *samples <= 0 {
		problems = append(problems, fmt.Sprintf("--samples %d: want a positive count", *samples))
	}
	if *instances <= 0 {
		problems = append(problems, fmt.Sprintf("--instances %d: want a positive count", *instances))
	}
	if *users <= 0 {
		problems = append(problems, fmt.Sprintf("--users %d: want a positive count", *users))
	}
	if *dup < 0 {
		problems = append(problems, fmt.Sprintf("--duplicate-every %d: want 0 (never) or a positive n", *dup))
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "cardhour generate: "+strings.Join(problems, "; "))
		return 2
	}
	w := stdout
	var f *os.File
	if *outPath != "-" {
		if f, err = os.Create(*outPath); err != nil {
			fmt.Fprintln(stderr, "cardhour generate:", err)
			return 1
		}
		w = f
	}
	n, err := gen.Write(w, gen.Config{Samples: *samples, StartMS: startMS, IntervalMS: int64(*interval * 1000),
		Instances: *instances, Users: *users, Seed: *seed, DuplicateEvery: *dup, EndMS: endMS})
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "cardhour generate:", err)
		return 1
	}
	fmt.Fprintf(stderr, "cardhour generate: wrote %d samples (%s)\n", n, schemas.SampleSchemaV1)
	return 0
}

// maxGenerateIntervalS is the longest sampling interval generate writes: the
// collector never covers more than an hour with one sample.
const maxGenerateIntervalS = 3600

func loadShanghai() (*time.Location, error) { return time.LoadLocation("Asia/Shanghai") }

// generateSpan is the trace's first moment (the start of month start) and,
// with until, the moment it ends before (the start of month until; 0 none).
func generateSpan(start, until string, loc *time.Location) (startMS, endMS int64, err error) {
	p, err := billing.ParsePeriod(start, loc)
	if err != nil {
		return 0, 0, fmt.Errorf("--start: %w", err)
	}
	if until == "" {
		return p.StartMS(), 0, nil
	}
	e, err := billing.ParsePeriod(until, loc)
	if err != nil {
		return 0, 0, fmt.Errorf("--until: %w", err)
	}
	if e.StartMS() <= p.StartMS() {
		return 0, 0, fmt.Errorf("--until %s: want a month after --start %s", until, start)
	}
	return p.StartMS(), e.StartMS(), nil
}
