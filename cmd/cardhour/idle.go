//go:build !collector

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/schemas"
)

// DefaultIdleWindow is how far back `cardhour idle --store` reads without
// --period or --from.
const DefaultIdleWindow = 7 * 24 * time.Hour

func runIdle(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	catalogPath := fs.String("catalog", "", "price catalog (YAML) with the idle policies")
	samplesPath := fs.String("samples", "", "samples in JSON Lines ('-' for standard input)")
	format := fs.String("format", "table", "output: table | json (one alert per line)")
	skipInvalid := fs.Bool("skip-invalid", false, "count and report invalid lines instead of stopping at the first")
	store := fs.String("store", "", "read held samples from a store written by 'cardhour ingest' instead of --samples: clickhouse://host:port/db or sqlite:///path.db")
	period := fs.String("period", "", "with --store: the samples of this month YYYY-MM (catalog time zone)")
	fromFlag := fs.String("from", "", "with --store: samples starting at or after this time, RFC 3339 (default: 7 days before --to)")
	toFlag := fs.String("to", "", "with --store: samples starting before this time, RFC 3339 (default: now)")
	bounds := addSampleBounds(fs, false)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour idle --catalog FILE --samples FILE.jsonl [--format table|json]")
		fmt.Fprintln(stderr, "       cardhour idle --catalog FILE --store DSN [--period YYYY-MM | --from T --to T] [--format table|json]")
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
	switch {
	case *samplesPath == "" && *store == "":
		problems = append(problems, "--samples or --store is required")
	case *samplesPath != "" && *store != "":
		problems = append(problems, "--samples and --store are exclusive")
	case *store == "" && (*period != "" || *fromFlag != "" || *toFlag != ""):
		problems = append(problems, "--period, --from and --to go with --store (a file is read whole)")
	case *period != "" && (*fromFlag != "" || *toFlag != ""):
		problems = append(problems, "give --period or --from/--to, not both")
	}
	var from, to time.Time
	for _, f := range []struct {
		name, v string
		t       *time.Time
	}{{"--from", *fromFlag, &from}, {"--to", *toFlag, &to}} {
		if f.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, f.v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %q: want an RFC 3339 time such as 2026-12-01T00:00:00+08:00", f.name, f.v))
		}
		*f.t = t
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
	var det *billing.IdleDetector
	if *store != "" {
		if *period != "" {
			p, err := billing.ParsePeriod(*period, cat.Location)
			if err != nil {
				fmt.Fprintf(stderr, "cardhour idle: --period: %v\n", err)
				return 2
			}
			from, to = p.Start, p.End
		}
		if to.IsZero() {
			to = time.Now()
		}
		if from.IsZero() {
			from = to.Add(-DefaultIdleWindow)
		}
		if !to.After(from) {
			fmt.Fprintf(stderr, "cardhour idle: --to %s is not after --from %s\n", to.Format(time.RFC3339), from.Format(time.RFC3339))
			return 2
		}
		if det, err = idleFromStore(context.Background(), *store, cat, from, to); err != nil {
			fmt.Fprintf(stderr, "cardhour idle: %v\n", err)
			return 1
		}
	} else {
		if det = idleFromFile(*samplesPath, *skipInvalid, bounds, cat, stderr); det == nil {
			return 1
		}
	}
	alerts := billing.Alerts(det.Streaks(0), cat.Location)

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

// idleFromFile feeds the samples of a JSON Lines file ("-": standard input)
// to the idle detector; nil after an error it reported.
func idleFromFile(path string, skipInvalid bool, bounds *sampleBounds, cat *schemas.Catalog, stderr io.Writer) *billing.IdleDetector {
	var in io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "cardhour idle: %v\n", err)
			return nil
		}
		defer f.Close() //nolint:errcheck // read-only
		in = f
	}
	opt := schemas.ReadOptions{SkipInvalid: skipInvalid, Workers: 2, DecoderOptions: bounds.options()}
	dets := []*billing.IdleDetector{billing.NewIdleDetector(cat), billing.NewIdleDetector(cat)}
	stats, err := schemas.ReadSamples(in, opt, func(w int, samples []schemas.Sample) error {
		for i := range samples {
			dets[w].Add(&samples[i])
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "cardhour idle: %s: %v\n", path, err)
		return nil
	}
	if stats.InvalidCount > 0 {
		fmt.Fprintf(stderr, "cardhour idle: skipped %d invalid line(s)\n", stats.InvalidCount)
	}
	dets[0].Merge(dets[1])
	return dets[0]
}

// idleFromStore feeds the held samples that start in [from, to) of a store
// written by `cardhour ingest` to the same idle detector as a file's (a
// replayed sample read twice changes nothing: streaks are unions). The store
// is opened read-only; a missing store or schema is an error.
func idleFromStore(ctx context.Context, dsn string, cat *schemas.Catalog, from, to time.Time) (*billing.IdleDetector, error) {
	st, err := storedsn.Open(ctx, dsn, storedsn.Options{Logger: slog.New(slog.DiscardHandler), Mode: storedsn.Read})
	if err != nil {
		return nil, err
	}
	defer st.Close() //nolint:errcheck // read-only
	det := billing.NewIdleDetector(cat)
	err = st.HeldSamples(ctx, from.UnixMilli(), to.UnixMilli(), func(s *schemas.Sample) error {
		det.Add(s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read held samples from %s: %w", dsn, err)
	}
	return det, nil
}
