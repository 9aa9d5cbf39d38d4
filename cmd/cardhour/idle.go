//go:build !collector

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

func runIdle(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	catalogPath := fs.String("catalog", "", "price catalog (YAML) with the idle policies")
	samplesPath := fs.String("samples", "", "samples in JSON Lines ('-' for standard input)")
	format := fs.String("format", "table", "output: table | json (one alert per line)")
	skipInvalid := fs.Bool("skip-invalid", false, "count and report invalid lines instead of stopping at the first")
	bounds := addSampleBounds(fs, false)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour idle --catalog FILE --samples FILE.jsonl [--format table|json]")
		fmt.Fprintln(stderr, "Lists the idle warnings and releases the catalog's idle policies call for.")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var problems []string
	if *catalogPath == "" {
		problems = append(problems, "--catalog is required")
	}
	if *samplesPath == "" {
		problems = append(problems, "--samples is required")
	}
	if *format != "table" && *format != "json" {
		problems = append(problems, fmt.Sprintf("--format %q: want table or json", *format))
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "cardhour idle: "+strings.Join(problems, "; "))
		fs.Usage()
		return 2
	}
	if p := bounds.problems(); len(p) > 0 {
		fmt.Fprintln(stderr, "cardhour idle: "+strings.Join(p, "; "))
		fs.Usage()
		return 2
	}
	cat, err := schemas.LoadCatalog(*catalogPath)
	if err != nil {
		fmt.Fprintf(stderr, "cardhour idle: invalid catalog:\n%v\n", err)
		return 1
	}
	var in io.Reader = os.Stdin
	if *samplesPath != "-" {
		f, err := os.Open(*samplesPath)
		if err != nil {
			fmt.Fprintf(stderr, "cardhour idle: %v\n", err)
			return 1
		}
		defer f.Close() //nolint:errcheck // read-only
		in = f
	}
	opt := schemas.ReadOptions{SkipInvalid: *skipInvalid, Workers: 2, DecoderOptions: bounds.options()}
	dets := []*billing.IdleDetector{billing.NewIdleDetector(cat), billing.NewIdleDetector(cat)}
	stats, err := schemas.ReadSamples(in, opt, func(w int, samples []schemas.Sample) error {
		for i := range samples {
			dets[w].Add(&samples[i])
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "cardhour idle: %s: %v\n", *samplesPath, err)
		return 1
	}
	if stats.InvalidCount > 0 {
		fmt.Fprintf(stderr, "cardhour idle: skipped %d invalid line(s)\n", stats.InvalidCount)
	}
	dets[0].Merge(dets[1])
	alerts := billing.Alerts(dets[0].Streaks(0), cat.Location)

	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		for _, a := range alerts {
			s := a.Streak
			if err := enc.Encode(map[string]any{
				"kind": a.Kind, "at": time.UnixMilli(a.At).UTC().Format(time.RFC3339),
				"project": s.Key.Project, "user": s.Key.User, "instance_id": s.Key.InstanceID,
				"gpu_model": s.Key.GPUModel, "profile": s.Key.Profile,
				"idle_since":   time.UnixMilli(s.Start).UTC().Format(time.RFC3339),
				"idle_until":   time.UnixMilli(s.End).UTC().Format(time.RFC3339),
				"idle_seconds": json.Number(billing.FormatSeconds(s.End - s.Start)),
				"message_en":   a.English, "message_zh": a.Chinese,
			}); err != nil {
				return 1
			}
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "due (%s)\tkind\tproject\tuser\tinstance\tidle\n", cat.Location)
	for _, a := range alerts {
		s := a.Streak
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", time.UnixMilli(a.At).In(cat.Location).Format("2006-01-02 15:04"),
			a.Kind, s.Key.Project, s.Key.User, s.Key.InstanceID, s.Duration().Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	for _, a := range alerts {
		fmt.Fprintf(stdout, "\n%s\n%s\n", a.English, a.Chinese)
	}
	return 0
}
