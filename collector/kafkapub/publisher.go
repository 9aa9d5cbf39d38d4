// Package kafkapub publishes samples through the on-disk spool to a Sink
// (Kafka, or the in-memory fake). Every sample is appended to the spool first
// and a sender goroutine ships the spool in order, acknowledging records only
// after the sink accepted them. An outage of Kafka, or a slow Kafka, only makes
// the spool grow; when Kafka comes back the backlog is replayed in order. Delivery
// is at least once: a batch that failed half way is sent again whole, and the
// duplicates are harmless because billing unions intervals.
package kafkapub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/collector/spool"
	"github.com/cardhour/cardhour/schemas"
)

// Sink writes a batch of records and returns nil only when all of them are
// acknowledged. A record is one message of the sample topic (schemas.AppendMessages):
// key = node, value = the node's samples of one tick, one JSON object per line.
type Sink interface {
	Write(ctx context.Context, recs []spool.Record) error
}

// Config configures a Publisher.
type Config struct {
	Spool        *spool.Spool // required
	Sink         Sink         // required
	BatchRecords int          // records per write (default 5000)
	BatchBytes   int          // bytes per write (default 4 MiB)
	// MessageBytes bounds one record (Kafka message); a tick's samples of one
	// node that need more are split over several (default schemas.DefaultMessageBytes).
	MessageBytes int
	BackoffMin   time.Duration
	BackoffMax   time.Duration
	// Linger, when set, waits this long after a write that was not a full batch
	// before reading the spool again, so that a 1 Hz collector writes to Kafka a few
	// times a minute instead of every second. Samples are in the spool meanwhile.
	Linger     time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Spool == nil {
		errs = append(errs, errors.New("publisher: spool is required"))
	}
	if c.Sink == nil {
		errs = append(errs, errors.New("publisher: sink is required"))
	}
	if c.BatchRecords < 0 || c.BatchBytes < 0 || c.MessageBytes < 0 || c.BackoffMin < 0 || c.BackoffMax < c.BackoffMin || c.Linger < 0 {
		errs = append(errs, errors.New("publisher: batch sizes and backoffs must be positive, backoff max >= min"))
	}
	return errors.Join(errs...)
}

// DefaultBackoffMax bounds the wait between failed writes: Kafka's return is
// noticed within it (the Java producer's reconnect.backoff.max.ms is 1 s too).
const DefaultBackoffMax = time.Second

// failLogEvery spaces the warnings about failing writes during an outage.
const failLogEvery = 30 * time.Second

// Publisher implements collector.Publisher.
type Publisher struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	buf   []byte
	spans []schemas.MessageSpan
	rec   []spool.Record

	sent, errs prometheus.Counter
	sendDur    prometheus.Histogram
}

// New returns a Publisher; call Run to start sending.
func New(cfg Config) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BatchRecords == 0 {
		cfg.BatchRecords = 5000
	}
	if cfg.BatchBytes == 0 {
		cfg.BatchBytes = 4 << 20
	}
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin = 100 * time.Millisecond
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = max(DefaultBackoffMax, cfg.BackoffMin)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{cfg: cfg, log: cfg.Logger.With("component", "publisher"),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_published_samples_total",
			Help: "Samples acknowledged by Kafka (replays count again)."}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_kafka_write_errors_total",
			Help: "Batches Kafka did not acknowledge (they stay in the spool and are retried)."}),
		sendDur: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cardhour_collector_kafka_write_duration_seconds",
			Help: "Time to write one batch to Kafka.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{p.sent, p.errs, p.sendDur} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// Publish encodes the samples as messages (one per node, see
// schemas.AppendMessages) and appends them to the spool.
func (p *Publisher) Publish(_ context.Context, samples []schemas.Sample) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf, p.spans = schemas.AppendMessages(p.buf[:0], p.spans[:0], samples, p.cfg.MessageBytes)
	p.rec = p.rec[:0]
	for _, m := range p.spans {
		p.rec = append(p.rec, spool.Record{Key: []byte(m.Key), Value: p.buf[m.Start:m.End]})
	}
	return p.cfg.Spool.Append(p.rec)
}

// samplesIn counts the samples of records: one per line, a last line without
// a newline included (spools written before messages held several samples).
func samplesIn(recs []spool.Record) int {
	n := 0
	for _, r := range recs {
		n += bytes.Count(r.Value, []byte{'\n'})
		if len(r.Value) > 0 && r.Value[len(r.Value)-1] != '\n' {
			n++
		}
	}
	return n
}

// Run sends the spool to the sink until ctx ends. On the way out it keeps
// sending for up to drainTimeout so that a clean shutdown leaves little behind
// (what is left is sent after the next start).
func (p *Publisher) Run(ctx context.Context) error {
	// Exponential from BackoffMin to BackoffMax, each wait randomised by ±50 %
	// so that the collectors of a cluster do not all knock at once when Kafka
	// comes back.
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.Multiplier, bo.RandomizationFactor = p.cfg.BackoffMin, p.cfg.BackoffMax, 2, 0.5
	bo.Reset()
	var failedSince, lastWarn time.Time
	failed := 0 // writes failed since failedSince
	for {
		recs, cur, err := p.cfg.Spool.Read(p.cfg.BatchRecords, p.cfg.BatchBytes)
		if err != nil {
			p.log.Error("cannot read the spool", "err", err)
		}
		if len(recs) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-p.cfg.Spool.Notify():
			case <-time.After(time.Second):
			}
			continue
		}
		t0 := time.Now()
		if err := p.cfg.Sink.Write(ctx, recs); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.errs.Inc()
			wait := bo.NextBackOff()
			if failed == 0 {
				failedSince = time.Now()
			}
			failed++
			if failed == 1 || time.Since(lastWarn) >= failLogEvery {
				p.log.Warn("Kafka write failed; samples stay in the spool", "records", len(recs),
					"pending", p.cfg.Spool.Pending(), "failed_writes", failed, "failing_for", time.Since(failedSince).Round(time.Second).String(),
					"retry_in", wait.String(), "err", err)
				lastWarn = time.Now()
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			continue
		}
		p.sendDur.Observe(time.Since(t0).Seconds())
		if failed > 0 {
			p.log.Info("Kafka writes succeed again; replaying the spool", "pending", p.cfg.Spool.Pending(),
				"failed_writes", failed, "failed_for", time.Since(failedSince).Round(time.Millisecond).String())
			failed = 0
		}
		bo.Reset()
		p.sent.Add(float64(samplesIn(recs)))
		if err := p.cfg.Spool.Commit(cur); err != nil {
			p.log.Error("cannot persist the spool cursor (records may be sent twice)", "err", err)
		}
		if p.cfg.Linger > 0 && len(recs) < p.cfg.BatchRecords {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(p.cfg.Linger):
			}
		}
	}
}

// Drain sends until the spool is empty or ctx ends; it is for shutdown and
// tests, not to be run beside Run.
func (p *Publisher) Drain(ctx context.Context) error {
	for p.cfg.Spool.Pending() > 0 {
		recs, cur, err := p.cfg.Spool.Read(p.cfg.BatchRecords, p.cfg.BatchBytes)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		if err := p.cfg.Sink.Write(ctx, recs); err != nil {
			return fmt.Errorf("cannot drain the spool: %w", err)
		}
		p.sent.Add(float64(samplesIn(recs)))
		if err := p.cfg.Spool.Commit(cur); err != nil {
			return err
		}
	}
	return nil
}

// MemorySink is the in-memory fake of Sink. Fail, when set, makes Write fail.
type MemorySink struct {
	mu     sync.Mutex
	recs   []spool.Record
	writes int
	Fail   error
}

// Write keeps copies of the records.
func (m *MemorySink) Write(_ context.Context, recs []spool.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	m.writes++
	for _, r := range recs {
		m.recs = append(m.recs, spool.Record{Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...)})
	}
	return nil
}

// SetFail sets or clears the failure.
func (m *MemorySink) SetFail(err error) {
	m.mu.Lock()
	m.Fail = err
	m.mu.Unlock()
}

// Writes is the number of successful writes.
func (m *MemorySink) Writes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

// Records returns everything written.
func (m *MemorySink) Records() []spool.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]spool.Record(nil), m.recs...)
}
