package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// FileConfig configures a back-fill from JSON Lines.
type FileConfig struct {
	Writer    *Writer
	BatchSize int // samples per store write (0: 50 000)
	// Workers is the number of decoding goroutines (0: GOMAXPROCS). They
	// decode chunks of the file in parallel, and the chunks reach the writer
	// in file order (schemas.ReadOptions.Ordered), as with one worker: the
	// compactor sees the same stream whatever the number.
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
// decoded into a second buffer, by Workers goroutines in parallel.
func Backfill(ctx context.Context, r io.Reader, cfg FileConfig) (schemas.ReadStats, error) {
	if cfg.Writer == nil {
		return schemas.ReadStats{}, errors.New("backfill: writer is required")
	}
	cfg.setDefaults()
	// The open runs are written every BackfillRunsEvery samples per key and
	// at the end (writeBatches), not after every batch.
	defer cfg.Writer.deferOpenRuns(BackfillRunsEvery)()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := &backfill{cfg: &cfg, ctx: ctx, cancel: cancel,
		buf:   make([]schemas.Sample, 0, cfg.BatchSize),
		free:  make(chan []schemas.Sample, 1),
		full:  make(chan []schemas.Sample),
		wdone: make(chan struct{}),
	}
	b.free <- make([]schemas.Sample, 0, cfg.BatchSize)
	go b.writeBatches()
	m := cfg.Writer.cfg.Metrics
	stats, err := schemas.ReadSamples(r, schemas.ReadOptions{SkipInvalid: true, MaxReported: cfg.MaxReported, Workers: cfg.Workers, Ordered: true,
		DecoderOptions: cfg.DecoderOptions, Now: cfg.Now, OnInvalid: b.reject},
		func(_ int, samples []schemas.Sample) error {
			m.Messages.WithLabelValues("valid").Add(float64(len(samples)))
			return b.add(samples)
		})
	err = b.finish(err)
	m.Messages.WithLabelValues("invalid").Add(float64(stats.InvalidCount))
	if err != nil {
		return stats, fmt.Errorf("backfill stopped: %w", err)
	}
	return stats, nil
}

func (cfg *FileConfig) setDefaults() {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 50_000
	}
	if cfg.MaxReported <= 0 {
		cfg.MaxReported = 100
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Source == "" {
		cfg.Source = "input"
	}
}

// backfill is one Backfill's state: the decoders fill buf, which goes to the
// writer goroutine (full) while decoding goes on in the other buffer (free).
// The first error of a write (werr) cancels ctx, which stops the decoding.
type backfill struct {
	cfg    *FileConfig
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex // buf: the decoding workers add to it
	buf  []schemas.Sample
	free chan []schemas.Sample
	full chan []schemas.Sample

	wdone   chan struct{} // the writer goroutine is done
	writeMu sync.Mutex
	werr    error

	// Rejects are stored in pieces as they come (WriteRejects may run beside
	// the writer goroutine's writes), the rest at the end.
	rejMu   sync.Mutex
	rejects []Reject
}

// writeBatches writes the batches from full until it is closed; after the
// first failure it only gives their buffers back.
func (b *backfill) writeBatches() {
	defer close(b.wdone)
	for batch := range b.full {
		if b.writeErr() == nil {
			if err := b.cfg.Writer.Write(b.ctx, batch); err != nil {
				b.writeMu.Lock()
				b.werr = err
				b.writeMu.Unlock()
				b.cancel()
			}
		}
		clear(batch) // drop string references
		b.free <- batch[:0]
	}
	if b.writeErr() == nil && b.ctx.Err() == nil {
		if err := b.cfg.Writer.FlushRuns(b.ctx); err != nil {
			b.writeMu.Lock()
			b.werr = err
			b.writeMu.Unlock()
		}
	}
}

func (b *backfill) writeErr() error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	return b.werr
}

// add appends decoded samples to the batch, handing each full batch to the
// writer.
func (b *backfill) add(samples []schemas.Sample) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(samples) > 0 {
		n := min(len(samples), b.cfg.BatchSize-len(b.buf))
		b.buf = append(b.buf, samples[:n]...)
		samples = samples[n:]
		if len(b.buf) >= b.cfg.BatchSize {
			if err := b.hand(); err != nil {
				return err
			}
		}
	}
	return cmp.Or(b.writeErr(), b.ctx.Err())
}

// hand passes the filled buffer to the writer and takes the other one.
func (b *backfill) hand() error {
	select {
	case b.full <- b.buf:
	case <-b.ctx.Done():
		return cmp.Or(b.writeErr(), b.ctx.Err())
	}
	select {
	case b.buf = <-b.free:
	case <-b.ctx.Done():
		return cmp.Or(b.writeErr(), b.ctx.Err())
	}
	return nil
}

// reject records an invalid line, storing the rejects once rejectFlush have
// come; a failure to store them stops the back-fill like a failed write.
func (b *backfill) reject(line int64, text []byte, err error) {
	b.rejMu.Lock()
	defer b.rejMu.Unlock()
	b.rejects = append(b.rejects, NewReject(fmt.Sprintf("%s:%d", b.cfg.Source, line), text, err, b.cfg.Now()))
	if err := b.flushRejects(rejectFlush); err != nil {
		b.writeMu.Lock()
		if b.werr == nil {
			b.werr = err
		}
		b.writeMu.Unlock()
		b.cancel()
	}
}

// flushRejects stores the buffered rejects when there are at least atLeast
// (and any). The caller holds rejMu.
func (b *backfill) flushRejects(atLeast int) error {
	if len(b.rejects) < atLeast || len(b.rejects) == 0 {
		return nil
	}
	err := b.cfg.Writer.WriteRejects(b.ctx, b.rejects)
	b.rejects = b.rejects[:0]
	return err
}

// finish, once reading ended with err, hands the last batch to the writer,
// waits for the writes and stores the rejects left; it returns the first
// error.
func (b *backfill) finish(err error) error {
	if err == nil && len(b.buf) > 0 {
		err = b.hand()
	}
	close(b.full)
	<-b.wdone
	if err == nil && b.writeErr() == nil {
		b.rejMu.Lock()
		err = b.flushRejects(1)
		b.rejMu.Unlock()
	}
	return cmp.Or(b.writeErr(), err)
}
