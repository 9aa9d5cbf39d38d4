package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// FileConfig configures a back-fill from JSON Lines.
type FileConfig struct {
	Writer    *Writer
	BatchSize int // samples per store write (0: 50 000)
	// Workers is the number of decoding goroutines (0: 1). With more than one,
	// chunks of the file reach the compactor out of order, which costs
	// compaction (more, shorter runs), never correctness.
	Workers int
	// MaxReported bounds the invalid lines kept in the stats (0: 100).
	MaxReported int
	// DecoderOptions bound interval_s and how far after Now a sample may end;
	// a line outside them is invalid (reported, not stored).
	schemas.DecoderOptions
	// Now is the ingest clock MaxClockSkew is checked against, read once per
	// chunk of the file (default time.Now).
	Now func() time.Time
	// Source names the input in the rejects recorded for its invalid lines
	// (Reject.Source is Source:LINE), e.g. file:/abs/path.jsonl. Reading the
	// same input again must give the same name, so that a repeated back-fill
	// does not count its rejects twice (0: "input").
	Source string
}

// rejectFlush is how many rejects a back-fill buffers before storing them.
const rejectFlush = 10_000

// Backfill reads cardhour.sample.v1 JSON Lines from r and writes them through
// the same Writer as the Kafka worker. Invalid lines are not written; they are
// counted and the first MaxReported are returned with their line numbers in the
// stats (never dropped silently: the caller reports them and exits non-zero),
// and every one is recorded in the store as a Reject, so that billing can say
// that the period has rejected input.
// The back-fill is idempotent: running it again, whole or in part, changes no
// invoice, so after a failure the fix is to run it again.
//
// Decoding and writing overlap: while one batch is written, the next is
// decoded into a second buffer.
func Backfill(ctx context.Context, r io.Reader, cfg FileConfig) (schemas.ReadStats, error) {
	if cfg.Writer == nil {
		return schemas.ReadStats{}, errors.New("backfill: writer is required")
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 50_000
	}
	if cfg.MaxReported <= 0 {
		cfg.MaxReported = 100
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Source == "" {
		cfg.Source = "input"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		buf     = make([]schemas.Sample, 0, cfg.BatchSize)
		free    = make(chan []schemas.Sample, 1)
		full    = make(chan []schemas.Sample)
		writeMu sync.Mutex
		werr    error
		wdone   = make(chan struct{})
	)
	free <- make([]schemas.Sample, 0, cfg.BatchSize)
	go func() {
		defer close(wdone)
		for b := range full {
			writeMu.Lock()
			failed := werr != nil
			writeMu.Unlock()
			if !failed {
				if err := cfg.Writer.Write(ctx, b); err != nil {
					writeMu.Lock()
					werr = err
					writeMu.Unlock()
					cancel()
				}
			}
			clear(b) // drop string references
			free <- b[:0]
		}
	}()
	writeErr := func() error {
		writeMu.Lock()
		defer writeMu.Unlock()
		return werr
	}
	// hand passes the filled buffer to the writer and takes the other one.
	hand := func() error {
		select {
		case full <- buf:
		case <-ctx.Done():
			return cmp.Or(writeErr(), ctx.Err())
		}
		select {
		case buf = <-free:
		case <-ctx.Done():
			return cmp.Or(writeErr(), ctx.Err())
		}
		return nil
	}
	// Rejects are stored in pieces as they come (WriteRejects may run beside
	// the writer goroutine's writes), the rest at the end.
	var (
		rejMu   sync.Mutex
		rejects []Reject
	)
	flushRejects := func(atLeast int) error {
		if len(rejects) < atLeast || len(rejects) == 0 {
			return nil
		}
		err := cfg.Writer.WriteRejects(ctx, rejects)
		rejects = rejects[:0]
		return err
	}
	onInvalid := func(line int64, text []byte, err error) {
		rejMu.Lock()
		defer rejMu.Unlock()
		rejects = append(rejects, NewReject(fmt.Sprintf("%s:%d", cfg.Source, line), text, err, cfg.Now()))
		if err := flushRejects(rejectFlush); err != nil {
			writeMu.Lock()
			if werr == nil {
				werr = err
			}
			writeMu.Unlock()
			cancel()
		}
	}
	m := cfg.Writer.cfg.Metrics
	stats, err := schemas.ReadSamples(r, schemas.ReadOptions{SkipInvalid: true, MaxReported: cfg.MaxReported, Workers: cfg.Workers,
		DecoderOptions: cfg.DecoderOptions, Now: cfg.Now, OnInvalid: onInvalid},
		func(_ int, samples []schemas.Sample) error {
			mu.Lock()
			defer mu.Unlock()
			m.Messages.WithLabelValues("valid").Add(float64(len(samples)))
			for len(samples) > 0 {
				n := min(len(samples), cfg.BatchSize-len(buf))
				buf = append(buf, samples[:n]...)
				samples = samples[n:]
				if len(buf) >= cfg.BatchSize {
					if err := hand(); err != nil {
						return err
					}
				}
			}
			return cmp.Or(writeErr(), ctx.Err())
		})
	if err == nil && len(buf) > 0 {
		err = hand()
	}
	close(full)
	<-wdone
	if err == nil && writeErr() == nil {
		rejMu.Lock()
		err = flushRejects(1)
		rejMu.Unlock()
	}
	err = cmp.Or(writeErr(), err)
	m.Messages.WithLabelValues("invalid").Add(float64(stats.InvalidCount))
	if err != nil {
		return stats, fmt.Errorf("backfill stopped: %w", err)
	}
	return stats, nil
}
