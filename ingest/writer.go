package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// DefaultAttemptTimeout is WriterConfig.AttemptTimeout's default.
const DefaultAttemptTimeout = 60 * time.Second

// WriterConfig configures a Writer.
type WriterConfig struct {
	Store       Store
	Logger      *slog.Logger
	Metrics     *Metrics // nil: metrics are not recorded
	MaxOpenRuns int      // Compactor bound (0: DefaultMaxOpenRuns)
	RetryMin    time.Duration
	RetryMax    time.Duration
	// AttemptTimeout bounds each store write attempt, and a streamed insert
	// beyond the time its batch takes to be read (default
	// DefaultAttemptTimeout): a store that hangs instead of failing is retried
	// like one that fails.
	AttemptTimeout time.Duration
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
	if c.AttemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("writer: attempt timeout %v is negative", c.AttemptTimeout))
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
	// Runs completed by staged batches (FinishRaw), written by FlushRuns, and
	// the number of samples staged since the last flush.
	pending Batch
	staged  int
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
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
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
	return w.write(ctx, w.c.Build(samples), len(samples))
}

// write stores b with retries; samples is the batch's size for the metrics.
func (w *Writer) write(ctx context.Context, b *Batch, samples int) error {
	m := w.cfg.Metrics
	return Retry(ctx, w.cfg.Logger, w.cfg.RetryMin, w.cfg.RetryMax, m, w.cfg.OnPause, "store write", func(ctx context.Context) error {
		t0 := time.Now()
		actx, cancel := context.WithTimeout(ctx, w.cfg.AttemptTimeout)
		defer cancel()
		if err := w.cfg.Store.Write(actx, b); err != nil {
			m.WriteErrors.Inc()
			return err
		}
		m.WriteSeconds.Observe(time.Since(t0).Seconds())
		m.Batches.Inc()
		m.BatchSamples.Observe(float64(samples))
		m.SamplesWritten.Add(float64(len(b.Samples)))
		m.RowsWritten.WithLabelValues("raw_samples").Add(float64(len(b.Samples)))
		m.RowsWritten.WithLabelValues("occupancy").Add(float64(len(b.Occupancy)))
		m.RowsWritten.WithLabelValues("idle_spans").Add(float64(len(b.Idle)))
		return nil
	})
}

// Stream is one batch written while it is still being read: Add hands the
// store each piece of raw samples as soon as it is decoded (stores that
// implement RawStreamer; for others Add does nothing), Finish ends the raw
// insert and writes the batch's intervals. If the streamed insert fails at any
// point, Finish writes the whole batch again through Write, with its retries:
// the outcome is the same as Write's, only earlier.
type Stream struct {
	w      *Writer
	cancel context.CancelFunc
	rs     RawStream
	err    error // first failure of the streamed insert (then Finish falls back)
	n      int   // samples appended
}

// BeginStream starts a batch that may take up to fill to be read completely
// (the worker's batch age); the streamed insert then has AttemptTimeout more to
// finish. It never fails: a store that cannot open a streamed insert gets the
// batch whole in Finish.
func (w *Writer) BeginStream(ctx context.Context, fill time.Duration) *Stream {
	st := &Stream{w: w}
	if rs, ok := w.cfg.Store.(RawStreamer); ok {
		var sctx context.Context
		sctx, st.cancel = context.WithTimeout(ctx, fill+w.cfg.AttemptTimeout)
		st.rs, st.err = rs.BeginRaw(sctx)
	}
	return st
}

// Add sends samples of the batch to the open insert, in order. The caller must
// pass the same samples again, with all others of the batch, to Finish.
func (st *Stream) Add(samples []schemas.Sample) {
	if st.rs == nil || st.err != nil || len(samples) == 0 {
		return
	}
	if st.err = st.rs.Append(samples); st.err == nil {
		st.n += len(samples)
	}
}

// addEarly is Add for a piece of a batch still being read (counted as such).
func (st *Stream) addEarly(samples []schemas.Sample) {
	st.Add(samples)
	if st.err == nil && st.rs != nil {
		st.w.cfg.Metrics.SamplesEarly.Add(float64(len(samples)))
	}
}

// Abort discards the streamed insert, if any (the batch was not finished).
func (st *Stream) Abort() {
	if st.rs != nil {
		st.rs.Abort()
	}
	if st.cancel != nil {
		st.cancel()
	}
}

// Finish stores the batch: all of its samples (those passed to Add and the
// rest) and the intervals built from them. Like Write, it returns nil once the
// store accepted everything, or ctx's error. It is FinishRaw then FlushRuns.
func (st *Stream) Finish(ctx context.Context, samples []schemas.Sample) error {
	if err := st.FinishRaw(ctx, samples); err != nil {
		return err
	}
	return st.w.FlushRuns(ctx)
}

// FinishRaw stores the batch's raw samples (all of them: those passed to Add
// and the rest) and stages the batch: its samples are folded into the open
// runs, and the runs they complete wait in the writer. Only after FlushRuns are
// the staged samples covered by stored intervals, so only then may their
// offsets be committed. It returns nil once the raw samples are stored, or
// ctx's error. If the streamed insert failed at any point, the samples are
// written again whole, with retries.
func (st *Stream) FinishRaw(ctx context.Context, samples []schemas.Sample) error {
	w := st.w
	defer st.Abort()
	if st.rs != nil && st.err == nil && st.n < len(samples) {
		st.Add(samples[st.n:]) // the tail not yet handed over
	}
	if st.rs != nil && st.err == nil {
		st.err = st.rs.Finish()
	}
	switch {
	case st.rs != nil && st.err == nil:
		w.cfg.Metrics.SamplesWritten.Add(float64(len(samples)))
		w.cfg.Metrics.RowsWritten.WithLabelValues("raw_samples").Add(float64(len(samples)))
	case len(samples) > 0:
		if st.rs != nil {
			w.cfg.Metrics.WriteErrors.Inc()
			if ctx.Err() == nil {
				w.cfg.Logger.Warn("streamed insert failed; writing the batch again", "samples", len(samples), "err", st.err)
			}
		}
		if err := w.write(ctx, &Batch{Samples: samples}, len(samples)); err != nil {
			return err
		}
	}
	w.c.Add(&w.pending, samples)
	w.staged += len(samples)
	return nil
}

// FlushRuns writes the runs of the batches staged since the last flush and
// every open run that grew meanwhile, with retries. Once it returns nil, every
// staged sample is covered by stored rows (raw and intervals).
func (w *Writer) FlushRuns(ctx context.Context) error {
	w.c.EmitOpen(&w.pending)
	b := &Batch{Occupancy: w.pending.Occupancy, Idle: w.pending.Idle}
	if len(b.Occupancy)+len(b.Idle) > 0 {
		if err := w.write(ctx, b, w.staged); err != nil {
			return err
		}
	}
	clear(w.pending.Occupancy) // drop key strings
	clear(w.pending.Idle)
	w.pending.Occupancy, w.pending.Idle = w.pending.Occupancy[:0], w.pending.Idle[:0]
	w.staged = 0
	return nil
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
