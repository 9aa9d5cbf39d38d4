package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/fleet"
)

func runSimulate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fleetPath := fs.String("fleet", "", "simulated fleet (YAML), e.g. collector/testdata/fleet.example.yaml")
	from := fs.String("from", "", "start of the simulation, RFC 3339 (e.g. 2026-11-01T00:00:00+08:00)")
	to := fs.String("to", "", "end of the simulation, RFC 3339 (exclusive)")
	interval := fs.Duration("interval", 0, "sampling interval (0: the fleet file's interval, default 60s)")
	outPath := fs.String("out", "-", "output file, JSON Lines ('-' for standard output)")
	validate := fs.Bool("validate", false, "only check the fleet file and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour simulate --fleet FLEET.yaml --from RFC3339 --to RFC3339 [--interval 60s] > samples.jsonl")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var problems []string
	if *fleetPath == "" {
		problems = append(problems, "--fleet is required")
	}
	var t0, t1 time.Time
	if !*validate {
		var err error
		if t0, err = time.Parse(time.RFC3339, *from); err != nil {
			problems = append(problems, fmt.Sprintf("--from %q: want RFC 3339, e.g. 2026-11-01T00:00:00+08:00", *from))
		}
		if t1, err = time.Parse(time.RFC3339, *to); err != nil {
			problems = append(problems, fmt.Sprintf("--to %q: want RFC 3339", *to))
		} else if !t1.After(t0) {
			problems = append(problems, "--to must be after --from")
		}
	}
	if *interval != 0 && (*interval < time.Second || *interval > time.Hour) {
		problems = append(problems, "--interval: want 1s..1h")
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "cardhour simulate: "+strings.Join(problems, "; "))
		fs.Usage()
		return 2
	}
	spec, err := fleet.Load(*fleetPath)
	if err != nil {
		fmt.Fprintf(stderr, "cardhour simulate: %v\n", err)
		return 1
	}
	if *validate {
		fmt.Fprintf(stderr, "cardhour simulate: %s is valid (%d nodes, %d holders)\n", *fleetPath, len(spec.Nodes), len(spec.Holders))
		return 0
	}
	w := stdout
	var out *os.File
	if *outPath != "-" {
		if out, err = os.Create(*outPath); err != nil {
			fmt.Fprintf(stderr, "cardhour simulate: %v\n", err)
			return 1
		}
		w = out
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pub := collector.NewJSONLPublisher(w)
	began := time.Now()
	err = fleet.Simulate(ctx, fleet.SimulateConfig{Spec: spec, From: t0, To: t1, Interval: *interval,
		Publisher: pub, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if ferr := pub.Flush(); err == nil {
		err = ferr
	}
	if out != nil {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "cardhour simulate: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "cardhour simulate: %d samples in %.1fs\n", pub.Count(), time.Since(began).Seconds())
	return 0
}
