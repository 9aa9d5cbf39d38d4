package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cardhour/cardhour/schemas"
)

// FileConfig configures a back-fill from JSON Lines.
type FileConfig struct {
	Writer    *Writer
	BatchSize int // samples per store write (0: 50 000)
	Workers   int // decoding goroutines (0: GOMAXPROCS)
	// MaxReported bounds the invalid lines kept in the stats (0: 100).
	MaxReported int
}

// Backfill reads cardhour.sample.v1 JSON Lines from r and writes them through
// the same Writer as the Kafka worker. Invalid lines are not written; they are
// counted and the first MaxReported are returned with their line numbers in the
// stats (never dropped silently: the caller reports them and exits non-zero).
// The back-fill is idempotent: running it again, whole or in part, changes no
// invoice, so after a failure the fix is to run it again.
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
	var (
		mu  sync.Mutex
		buf = make([]schemas.Sample, 0, cfg.BatchSize)
	)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		err := cfg.Writer.Write(ctx, buf)
		// The batch keeps a reference to buf only during Write.
		buf = buf[:0]
		return err
	}
	m := cfg.Writer.cfg.Metrics
	stats, err := schemas.ReadSamples(r, schemas.ReadOptions{SkipInvalid: true, MaxReported: cfg.MaxReported, Workers: cfg.Workers},
		func(_ int, samples []schemas.Sample) error {
			mu.Lock()
			defer mu.Unlock()
			m.Messages.WithLabelValues("valid").Add(float64(len(samples)))
			for _, s := range samples {
				buf = append(buf, s)
				if len(buf) >= cfg.BatchSize {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			return ctx.Err()
		})
	if err == nil {
		mu.Lock()
		err = flush()
		mu.Unlock()
	}
	m.Messages.WithLabelValues("invalid").Add(float64(stats.InvalidCount))
	if err != nil {
		return stats, fmt.Errorf("backfill stopped: %w", err)
	}
	return stats, nil
}
