package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/cardhour/cardhour/internal/retry"
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
	// OpenRunsEvery, when positive, makes Write emit the open runs once every
	// that many samples per open key instead of after every Write: the
	// caller must FlushRuns after its last Write, and until then the latest
	// samples are stored raw but not covered by intervals. Backfill sets
	// BackfillRunsEvery for its writes.
	OpenRunsEvery int
	RetryMin      time.Duration
	RetryMax      time.Duration
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
	if c.OpenRunsEvery < 0 {
		errs = append(errs, fmt.Errorf("writer: open runs every %d samples is negative", c.OpenRunsEvery))
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
// worker and the file back-fill. Write compacts a batch and writes it whole,
// retrying with exponential backoff while the store fails, until it succeeds or
// ctx ends (the back-fill). A Stream writes a batch piece by piece and
// FlushRuns its intervals later (the worker, which consumes again instead of
// retrying). Not safe for concurrent use (one per worker goroutine).
type Writer struct {
	cfg WriterConfig
	c   *Compactor
	// Runs completed by the pieces streamed since the last FlushRuns.
	pending Batch
	// What the compactor had counted at the last noteCompactor.
	last CompactorStats
	// Forgotten runs not yet logged, and when they last were.
	unlogged int64
	loggedAt time.Time
	// While deferEvery > 0 (a back-fill), Write emits the open runs only
	// once every deferEvery samples per open key, after untilEmit more
	// samples (FlushRuns emits the rest).
	deferEvery, untilEmit int
}

// BackfillRunsEvery is how many samples per open key a back-fill adds between
// two writes of the open runs: a run that grows is written once per that many
// of its key's samples, whatever the batch size and the fleet's size.
const BackfillRunsEvery = 32

// deferOpenRuns sets OpenRunsEvery to every (restore: the configured one)
// and returns the function that restores it. The back-fill FlushRuns after
// its last Write and, since a back-fill that fails is run again, needs no
// cover in between; its rows then depend on the samples, not on its batch size.
func (w *Writer) deferOpenRuns(every int) (restore func()) {
	w.deferEvery, w.untilEmit = every, 0
	return func() { w.deferEvery, w.untilEmit = w.cfg.OpenRunsEvery, 0 }
}

// forgetLogEvery spaces the writer's log lines about forgotten runs.
const forgetLogEvery = time.Minute

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
	return &Writer{cfg: cfg, c: NewCompactor(cfg.MaxOpenRuns), deferEvery: cfg.OpenRunsEvery}, nil
}

// Write stores samples (which the caller must not modify until Write returns).
// It returns nil once the store accepted them, or ctx's error if ctx ended first:
// then nothing may be assumed stored and the caller must not commit. Once it
// returns nil, the rows stored cover every sample written so far, unless
// OpenRunsEvery is set (a back-fill): then only once FlushRuns returns nil.
func (w *Writer) Write(ctx context.Context, samples []schemas.Sample) error {
	if len(samples) == 0 {
		return nil
	}
	if w.deferEvery <= 0 {
		b := w.c.Build(samples)
		w.noteCompactor()
		return w.write(ctx, b)
	}
	b := &Batch{Samples: samples}
	for rest := samples; len(rest) > 0; {
		if w.untilEmit <= 0 {
			w.untilEmit = w.deferEvery * max(1, len(w.c.keys))
		}
		n := min(len(rest), w.untilEmit)
		w.c.Add(b, rest[:n])
		rest, w.untilEmit = rest[n:], w.untilEmit-n
		if w.untilEmit == 0 {
			w.c.EmitOpen(b)
			w.noteCompactor()
		}
	}
	return w.write(ctx, b)
}

// noteCompactor counts the runs the compactor forgot since the last call
// (after an EmitOpen), and logs them at most once per forgetLogEvery.
func (w *Writer) noteCompactor() {
	s, m := w.c.Stats(), w.cfg.Metrics
	if n := s.Forgotten - w.last.Forgotten; n > 0 {
		m.RunsForgotten.Add(float64(n))
		w.unlogged += n
	}
	w.last = s
	if w.unlogged > 0 && time.Since(w.loggedAt) >= forgetLogEvery {
		w.cfg.Logger.Warn("compactor forgot the open runs of the keys seen least recently, to stay within its max open runs: later samples of those keys start new rows (more rows, same bills)",
			"forgotten", w.unlogged, "forgotten_total", s.Forgotten, "max_open_runs", w.c.maxOpen,
			"open_occupancy_runs", s.OpenOcc, "open_idle_runs", s.OpenIdle)
		w.unlogged, w.loggedAt = 0, time.Now()
	}
}

// write stores b with retries.
func (w *Writer) write(ctx context.Context, b *Batch) error {
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
		if n := len(b.Samples); n > 0 { // a batch of samples, not only runs
			m.Batches.Inc()
			m.BatchSamples.Observe(float64(n))
		}
		m.SamplesWritten.Add(float64(len(b.Samples)))
		m.RowsWritten.WithLabelValues("raw_samples").Add(float64(len(b.Samples)))
		m.RowsWritten.WithLabelValues("occupancy").Add(float64(len(b.Occupancy)))
		m.RowsWritten.WithLabelValues("idle_spans").Add(float64(len(b.Idle)))
		m.RowsWritten.WithLabelValues("latest_samples").Add(float64(len(b.Latest)))
		return nil
	})
}

// Stream is one batch's raw samples written piece by piece while the batch is
// still being read: each Write sends a piece to the store (a block of one open
// insert for stores that implement RawStreamer, a write of its own for others)
// and folds it into the writer's runs; Close ends the insert. The runs wait in
// the writer until FlushRuns. A Stream does not keep the samples: when a write
// fails, the caller gives the batch up, with every batch it has not committed,
// and consumes them again (the Kafka worker rejoins its group from the committed
// offsets) with a fresh Writer.
type Stream struct {
	w      *Writer
	cancel context.CancelFunc
	rs     RawStream
	err    error // first failure: the batch cannot be stored by this stream
	n      int   // samples written
}

// BeginStream starts a batch that may take up to fill to be read completely
// (the worker's batch age); the streamed insert then has AttemptTimeout more to
// finish. A store that cannot open a streamed insert makes the first Write fail.
func (w *Writer) BeginStream(ctx context.Context, fill time.Duration) *Stream {
	st := &Stream{w: w}
	var sctx context.Context
	sctx, st.cancel = context.WithTimeout(ctx, fill+w.cfg.AttemptTimeout)
	if rs, ok := w.cfg.Store.(RawStreamer); ok {
		st.rs, st.err = rs.BeginRaw(sctx)
	}
	return st
}

// Write sends a piece of the batch's raw samples to the store, in order, and
// folds it into the writer's runs. The caller may reuse samples once it returns.
// An error means the batch cannot be stored by this stream.
func (st *Stream) Write(ctx context.Context, samples []schemas.Sample) error {
	w := st.w
	if st.err == nil && len(samples) > 0 {
		if st.rs != nil {
			st.err = st.rs.Append(samples)
		} else {
			actx, cancel := context.WithTimeout(ctx, w.cfg.AttemptTimeout)
			t0 := time.Now()
			st.err = w.cfg.Store.Write(actx, &Batch{Samples: samples})
			cancel()
			if st.err == nil {
				w.cfg.Metrics.WriteSeconds.Observe(time.Since(t0).Seconds())
			}
		}
		if st.err == nil {
			if st.rs != nil {
				w.cfg.Metrics.SamplesEarly.Add(float64(len(samples)))
			}
			st.n += len(samples)
			w.c.Add(&w.pending, samples)
		}
	}
	if st.err != nil {
		w.cfg.Metrics.WriteErrors.Inc()
	}
	return st.err
}

// Close ends the batch's raw insert: once it returns nil, every sample passed
// to Write is stored.
func (st *Stream) Close() error {
	defer st.Abort()
	w := st.w
	if st.err == nil && st.rs != nil {
		t0 := time.Now()
		if st.err = st.rs.Finish(); st.err == nil {
			w.cfg.Metrics.WriteSeconds.Observe(time.Since(t0).Seconds())
		}
	}
	if st.err != nil {
		w.cfg.Metrics.WriteErrors.Inc()
		return st.err
	}
	w.cfg.Metrics.Batches.Inc()
	w.cfg.Metrics.BatchSamples.Observe(float64(st.n))
	w.cfg.Metrics.SamplesWritten.Add(float64(st.n))
	w.cfg.Metrics.RowsWritten.WithLabelValues("raw_samples").Add(float64(st.n))
	return nil
}

// Abort discards the streamed insert, if any (the batch was not finished).
func (st *Stream) Abort() {
	if st.rs != nil {
		st.rs.Abort()
		st.rs = nil
	}
	if st.cancel != nil {
		st.cancel()
	}
}

// FlushRuns writes the runs completed by the pieces streamed since the last
// flush, every open run that grew meanwhile and the keys' latest samples
// (Batch.Latest), with retries. Once it returns
// nil, every sample of every closed Stream is covered by stored rows (raw and
// intervals), and the offsets of their batches may be committed.
func (w *Writer) FlushRuns(ctx context.Context) error {
	w.c.EmitOpen(&w.pending)
	w.noteCompactor()
	b := &Batch{Occupancy: w.pending.Occupancy, Idle: w.pending.Idle, Latest: w.pending.Latest}
	if b.Rows() > 0 {
		if err := w.write(ctx, b); err != nil {
			return err
		}
	}
	// Dropped, not kept for the next flush: a flush while catching up holds
	// tens of thousands of runs and a latest sample per key (5–7 MB that would
	// stay live between flushes); allocating them again once per
	// --commit-interval is a small share of what ingest allocates.
	w.pending.Occupancy, w.pending.Idle, w.pending.Latest = nil, nil, nil
	return nil
}

// Retry calls op until it succeeds, fails permanently (IsPermanent: returned at
// once, after one attempt) or ctx ends, sleeping between attempts with the
// jittered exponential backoff of retry.Backoff from lo to hi. While it waits, the
// Paused gauge is up and one warning per attempt is logged (attempts are spaced
// by the backoff, so the log is throttled by construction).
func Retry(ctx context.Context, log *slog.Logger, lo, hi time.Duration, m *Metrics, notify func(bool, error), what string, op func(context.Context) error) error {
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
	attempt := 0
	var last error
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		attempt++
		err := op(ctx)
		if err == nil {
			return struct{}{}, nil
		}
		last = err
		if IsPermanent(err) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(retry.Backoff(lo, hi)), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, next time.Duration) {
			if !paused {
				paused = true
				if m != nil {
					m.Paused.Inc()
				}
			}
			if notify != nil {
				notify(true, err)
			}
			log.Warn("failed, retrying", "op", what, "attempt", attempt, "retry_in", next.Round(time.Millisecond), "err", err)
		}))
	switch {
	case err == nil:
		if attempt > 1 {
			log.Info("recovered", "op", what, "attempts", attempt)
		}
		return nil
	case IsPermanent(err):
		return fmt.Errorf("%s failed permanently: %w", what, err)
	case ctx.Err() != nil && last != nil:
		return fmt.Errorf("%s abandoned after %d attempts (last error: %w): %w", what, attempt, last, ctx.Err())
	case ctx.Err() != nil:
		return fmt.Errorf("%s abandoned: %w", what, ctx.Err())
	}
	return err
}

// Reason classifies a decoding error for the dead-letter header, the stored
// reject and the metric label: one of schemas.RejectReasons.
func Reason(err error) schemas.RejectReason {
	var fe *schemas.FieldError
	switch {
	case errors.Is(err, errUnknownSchema):
		return schemas.RejectUnknownSchema
	case errors.Is(err, schemas.ErrSyntax):
		return schemas.RejectMalformedJSON
	case errors.As(err, &fe) && fe.Field == "schema":
		return schemas.RejectUnknownSchema
	case errors.Is(err, schemas.ErrIntervalTooLong):
		return schemas.RejectIntervalTooLong
	case errors.Is(err, schemas.ErrFutureSample):
		return schemas.RejectFutureTS
	}
	return schemas.RejectInvalidField
}

var (
	errUnknownSchema = errors.New("unknown schema version")
)
