package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	Store       Store
	Logger      *slog.Logger
	Metrics     *Metrics // nil: metrics are not recorded
	MaxOpenRuns int      // Compactor bound (0: DefaultMaxOpenRuns)
	RetryMin    time.Duration
	RetryMax    time.Duration
	// OnPause, when set, is told when writes start failing (true, the error) and
	// when they succeed again (false, nil).
	OnPause func(paused bool, err error)
}

// Validate reports every problem of the configuration at once.
func (c *WriterConfig) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("writer: store is required"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("writer: logger is required"))
	}
	if c.RetryMin < 0 || c.RetryMax < 0 || (c.RetryMax > 0 && c.RetryMin > c.RetryMax) {
		errs = append(errs, fmt.Errorf("writer: retry backoff %v..%v is not a range", c.RetryMin, c.RetryMax))
	}
	return errors.Join(errs...)
}

// Writer is the one path from decoded samples to the store, shared by the Kafka
// worker and the file back-fill: it compacts a batch and writes it, retrying with
// exponential backoff while the store fails, until it succeeds or ctx ends.
// Not safe for concurrent use (one per worker goroutine).
type Writer struct {
	cfg WriterConfig
	c   *Compactor
}

// NewWriter validates cfg and returns a Writer.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RetryMin == 0 {
		cfg.RetryMin = 100 * time.Millisecond
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 10 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Writer{cfg: cfg, c: NewCompactor(cfg.MaxOpenRuns)}, nil
}

// Write stores samples (which the caller must not modify until Write returns).
// It returns nil once the store accepted them, or ctx's error if ctx ended first:
// then nothing may be assumed stored and the caller must not commit.
func (w *Writer) Write(ctx context.Context, samples []schemas.Sample) error {
	if len(samples) == 0 {
		return nil
	}
	b := w.c.Build(samples)
	m := w.cfg.Metrics
	return Retry(ctx, w.cfg.Logger, w.cfg.RetryMin, w.cfg.RetryMax, m, w.cfg.OnPause, "store write", func(ctx context.Context) error {
		t0 := time.Now()
		if err := w.cfg.Store.Write(ctx, b); err != nil {
			m.WriteErrors.Inc()
			return err
		}
		m.WriteSeconds.Observe(time.Since(t0).Seconds())
		m.Batches.Inc()
		m.BatchSamples.Observe(float64(len(b.Samples)))
		m.SamplesWritten.Add(float64(len(b.Samples)))
		m.RowsWritten.WithLabelValues("raw_samples").Add(float64(len(b.Samples)))
		m.RowsWritten.WithLabelValues("occupancy").Add(float64(len(b.Occupancy)))
		m.RowsWritten.WithLabelValues("idle_spans").Add(float64(len(b.Idle)))
		return nil
	})
}

// Retry calls op until it succeeds or ctx ends, sleeping between attempts with
// exponential backoff from lo to hi. While it waits, the Paused gauge is up and
// one warning per attempt is logged (attempts are spaced by the backoff, so the
// log is throttled by construction).
func Retry(ctx context.Context, log *slog.Logger, lo, hi time.Duration, m *Metrics, notify func(bool, error), what string, op func(context.Context) error) error {
	delay := lo
	paused := false
	defer func() {
		if paused {
			if m != nil {
				m.Paused.Dec()
			}
			if notify != nil {
				notify(false, nil)
			}
		}
	}()
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			if attempt > 1 {
				log.Info("recovered", "op", what, "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s abandoned: %w", what, ctx.Err())
		}
		if !paused {
			paused = true
			if m != nil {
				m.Paused.Inc()
			}
		}
		if notify != nil {
			notify(true, err)
		}
		log.Warn("failed, retrying", "op", what, "attempt", attempt, "retry_in", delay, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s abandoned after %d attempts (last error: %w): %w", what, attempt, err, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, hi)
	}
}

// Reason classifies a decoding error for the dead-letter header and the metric
// label: malformed_json, unknown_schema, too_large or invalid_field.
func Reason(err error) string {
	var fe *schemas.FieldError
	switch {
	case errors.Is(err, errTooLarge):
		return "too_large"
	case errors.Is(err, errUnknownSchema):
		return "unknown_schema"
	case errors.Is(err, schemas.ErrSyntax):
		return "malformed_json"
	case errors.As(err, &fe) && fe.Field == "schema":
		return "unknown_schema"
	}
	return "invalid_field"
}

var (
	errTooLarge      = errors.New("message too large")
	errUnknownSchema = errors.New("unknown schema version")
)
