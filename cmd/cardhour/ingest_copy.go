//go:build !collector

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/schemas"
)

// count is how many of the conditions hold.
func count(conds ...bool) int {
	n := 0
	for _, c := range conds {
		if c {
			n++
		}
	}
	return n
}

// copyStore back-fills st with every raw sample of the store at dsn, one UTC
// month at a time, through the same writer as a file's back-fill: st's runs,
// rollups and rejects are built anew by this build, as if the samples had
// arrived again (a copy run twice stores nothing twice). The source is opened
// read-only.
func copyStore(ctx context.Context, log *slog.Logger, st ingest.Store, metrics *ingest.Metrics, dsn string,
	fcfg ingest.FileConfig, storeTimeout time.Duration, stdout, stderr io.Writer) int {
	src, err := storedsn.Open(ctx, dsn, storedsn.Options{Logger: log, Mode: storedsn.Read})
	if err != nil {
		fmt.Fprintln(stderr, "cardhour ingest:", err)
		return 1
	}
	defer src.Close() //nolint:errcheck // read-only
	samples, ok := src.(ingest.SampleSource)
	if !ok {
		fmt.Fprintf(stderr, "cardhour ingest: the store %s cannot hand its raw samples back\n", redact(dsn))
		return 2
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(streamSamples(ctx, log, samples, pw)) }()
	defer pr.Close() //nolint:errcheck // ends the writer when the back-fill stops early
	name := redact(dsn)
	return backfillFrom(ctx, log, st, metrics, pr, name, "store:"+name, fcfg, storeTimeout, stdout, stderr)
}

// streamSamples writes every sample of src as JSON Lines to w, a UTC month
// at a time, and logs each month's count.
func streamSamples(ctx context.Context, log *slog.Logger, src ingest.SampleSource, w io.Writer) error {
	first, last, ok, err := src.SampleSpan(ctx)
	if err != nil || !ok {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var line []byte
	for lo := ingest.MonthStartMS(first); lo <= last; {
		t := time.UnixMilli(lo).UTC()
		hi := time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
		n := 0
		err := src.AllSamples(ctx, lo, hi, func(s *schemas.Sample) error {
			line = append(s.AppendJSON(line[:0]), '\n')
			n++
			_, err := bw.Write(line)
			return err
		})
		if err != nil {
			return fmt.Errorf("reading %s: %w", t.Format("2006-01"), err)
		}
		log.Info("copying samples", "month", t.Format("2006-01"), "samples", n)
		lo = hi
	}
	return bw.Flush()
}

// redact is a store URL without its password.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "the store"
	}
	return u.Redacted()
}
