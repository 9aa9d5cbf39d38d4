package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/cardhour/cardhour/internal/retry"
	"github.com/cardhour/cardhour/schemas"
)

// Defaults of WorkerConfig.
const (
	DefaultGroupID         = "cardhour-ingest"
	DefaultDLQTopic        = "cardhour.samples.dlq"
	DefaultBatchSize       = 100_000
	DefaultBatchAge        = 2 * time.Second
	DefaultDLQMessageBytes = 1048588 // Kafka's default max.message.bytes: the largest record batch a topic takes
	DefaultShutdownGrace   = 10 * time.Second
	DefaultStreamPiece     = 4 << 10
	DefaultCommitInterval  = 2 * time.Second
)

// dlqBatchOverhead is what a record batch adds to the sizes kafka-go counts
// against BatchBytes (the batch header is 61 bytes).
const dlqBatchOverhead = 256

// Dead-letter headers.
const (
	HeaderSchema          = "schema"
	HeaderReason          = "reason" // one of schemas.RejectReasons, as Reason classifies the error
	HeaderError           = "error"  // the decoder's message
	HeaderSourceTopic     = "source_topic"
	HeaderSourcePartition = "source_partition"
	HeaderSourceOffset    = "source_offset"
	HeaderSourceLine      = "source_line" // 1-based line of the message that was invalid
	// A dead letter larger than the dead-letter topic takes is split into parts
	// (at line ends where it can be): part i (from 1) of parts n. The values of
	// parts 1..n of one source_partition, source_offset (and source_line),
	// concatenated in order, are the original bytes.
	HeaderPart  = "part"
	HeaderParts = "parts"
)

// MessageWriter writes dead letters; *kafka.Writer implements it.
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
}

// WorkerConfig configures the Kafka ingest worker.
type WorkerConfig struct {
	Brokers   []string
	Topic     string // default schemas.SampleTopicV1
	GroupID   string // default DefaultGroupID
	DLQTopic  string // default DefaultDLQTopic
	Consumers int    // group members in this process (default 1)

	BatchSize       int           // samples (message lines) per store write (default DefaultBatchSize)
	BatchAge        time.Duration // longest a fetched message waits for its batch (default DefaultBatchAge)
	DLQMessageBytes int           // the dead-letter topic's max.message.bytes, larger dead letters go in parts (0: Run asks Kafka; DefaultDLQMessageBytes if it cannot tell)
	ShutdownGrace   time.Duration // time to flush the open batch on shutdown (default DefaultShutdownGrace)
	RetryMin        time.Duration // backoff of store, dead-letter and commit retries
	RetryMax        time.Duration
	StoreTimeout    time.Duration // bound of one store write attempt (default DefaultAttemptTimeout)
	// CommitInterval: while batches come full (a backlog), their intervals are
	// written and their offsets committed at most this often; a batch that is
	// not full (the consumer has caught up) is always committed at once
	// (default DefaultCommitInterval; raw samples are written batch by batch
	// regardless).
	CommitInterval time.Duration
	SessionTimeout time.Duration // Kafka group session timeout (default 10s)
	MaxOpenRuns    int
	// StreamPiece is how many decoded samples the fetcher hands the store at a
	// time while a batch is still being read: a block of the batch's open insert
	// (stores that stream), or a write of its own (others). A consumer holds at
	// most four pieces (default DefaultStreamPiece).
	StreamPiece int
	// DecoderOptions bound interval_s (MaxInterval, 0: schemas.DefaultMaxInterval)
	// and how far after Now a sample may end (MaxClockSkew, 0: no check). A
	// sample outside them is a dead letter.
	schemas.DecoderOptions
	// Now is the ingest clock MaxClockSkew is checked against, read once per
	// message (default time.Now).
	Now func() time.Time

	Store   Store
	Logger  *slog.Logger
	Metrics *Metrics
	// DLQ overrides the dead-letter writer (tests); default a kafka.Writer.
	DLQ MessageWriter
	// Dialer overrides how the consumer connects to brokers (TLS, SASL, tests).
	Dialer *kafka.Dialer
}

// Validate reports every problem at once.
func (c *WorkerConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("ingest: at least one Kafka broker is required"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("ingest: store is required"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("ingest: logger is required"))
	}
	if c.Consumers < 0 || c.BatchSize < 0 || c.BatchAge < 0 || c.ShutdownGrace < 0 || c.StreamPiece < 0 || c.StoreTimeout < 0 || c.CommitInterval < 0 {
		errs = append(errs, errors.New("ingest: consumers, batch size, batch age, shutdown grace, stream piece, store timeout and commit interval must not be negative"))
	}
	if c.DLQMessageBytes != 0 && c.DLQMessageBytes < 16<<10 {
		errs = append(errs, fmt.Errorf("ingest: dead-letter max message bytes %d: want at least 16 KiB", c.DLQMessageBytes))
	}
	if err := c.DecoderOptions.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("ingest: %w", err))
	}
	if c.Topic != "" && c.Topic == c.DLQTopic {
		errs = append(errs, fmt.Errorf("ingest: the dead-letter topic must differ from the sample topic %q", c.Topic))
	}
	return errors.Join(errs...)
}

func (c *WorkerConfig) setDefaults() {
	if c.Topic == "" {
		c.Topic = schemas.SampleTopicV1
	}
	if c.GroupID == "" {
		c.GroupID = DefaultGroupID
	}
	if c.DLQTopic == "" {
		c.DLQTopic = DefaultDLQTopic
	}
	if c.Consumers == 0 {
		c.Consumers = 1
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchAge == 0 {
		c.BatchAge = DefaultBatchAge
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.StreamPiece == 0 {
		c.StreamPiece = DefaultStreamPiece
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = DefaultCommitInterval
	}
	if c.RetryMin == 0 {
		c.RetryMin = 100 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 10 * time.Second
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Worker consumes samples from Kafka in a consumer group and writes them to the
// store, flush-then-commit: offsets are committed only after the store (and the
// dead-letter topic, for invalid messages) accepted the whole batch. A crash at
// any point therefore loses nothing: Kafka redelivers everything after the last
// commit, and writing it again cannot change an invoice (billing unions
// intervals, stores keep the longest run per start).
type Worker struct {
	cfg       WorkerConfig
	dlq       MessageWriter
	pausedAt  atomic.Int64 // unix ms since when some consumer waits (0: none)
	running   atomic.Int32
	lastError atomic.Value // string
}

// NewWorker validates cfg and returns a Worker.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	w := &Worker{cfg: cfg, dlq: cfg.DLQ}
	if w.dlq == nil {
		// BatchBytes is set by Run, once the dead-letter topic's limit is known.
		w.dlq = &kafka.Writer{
			Addr:                   kafka.TCP(cfg.Brokers...),
			Topic:                  cfg.DLQTopic,
			Balancer:               &kafka.Hash{},
			RequiredAcks:           kafka.RequireAll,
			AllowAutoTopicCreation: true,
			BatchTimeout:           5 * time.Millisecond,
			WriteTimeout:           10 * time.Second,
			MaxAttempts:            3,
		}
	}
	return w, nil
}

// Healthy returns nil while the worker runs and no consumer has been stuck on
// the store or Kafka for longer than stuckAfter.
func (w *Worker) Healthy(stuckAfter time.Duration) error {
	if w.running.Load() == 0 {
		return errors.New("no consumer is running")
	}
	if since := w.pausedAt.Load(); since != 0 && time.Since(time.UnixMilli(since)) > stuckAfter {
		msg, _ := w.lastError.Load().(string)
		return fmt.Errorf("waiting for the store or Kafka since %s: %s", time.UnixMilli(since).UTC().Format(time.RFC3339), msg)
	}
	return nil
}

// notePause records when a consumer starts and stops waiting, for Healthy.
func (w *Worker) notePause(paused bool, err error) {
	if paused {
		w.pausedAt.CompareAndSwap(0, time.Now().UnixMilli())
		if err != nil {
			w.lastError.Store(err.Error())
		}
		return
	}
	w.pausedAt.Store(0)
}

// Run consumes until ctx ends, then flushes or abandons the open batches and
// leaves the group. It returns nil on a clean shutdown, or, at once, the first
// permanent store error (IsPermanent): every consumer stops then, and what
// was not committed is consumed again by the next run.
func (w *Worker) Run(ctx context.Context) error {
	defer func() {
		if err := w.dlq.Close(); err != nil {
			w.cfg.Logger.Warn("closing the dead-letter writer", "err", err)
		}
	}()
	// A consumer returns an error only when the store failed permanently: the
	// others stop too, and Run returns that error.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.setDLQLimit(ctx)
	var wg sync.WaitGroup
	errs := make([]error, w.cfg.Consumers)
	for i := range w.cfg.Consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = w.consume(ctx, i); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// setDLQLimit settles DLQMessageBytes (asking Kafka for the dead-letter
// topic's max.message.bytes when it is 0) and keeps the dead-letter writer's
// record batches within it.
func (w *Worker) setDLQLimit(ctx context.Context) {
	cfg := &w.cfg
	kw, own := w.dlq.(*kafka.Writer)
	if cfg.DLQMessageBytes == 0 {
		cfg.DLQMessageBytes = DefaultDLQMessageBytes
		if own && cfg.DLQ == nil {
			n, err := topicMaxMessageBytes(ctx, kw.Addr, cfg.DLQTopic)
			switch {
			case err == nil:
				cfg.DLQMessageBytes = n
			case ctx.Err() == nil:
				cfg.Logger.Warn("cannot read the dead-letter topic's max.message.bytes; assuming Kafka's default (set --dlq-max-message-bytes)",
					"topic", cfg.DLQTopic, "assumed", cfg.DLQMessageBytes, "err", err)
			}
		}
	}
	if own && cfg.DLQ == nil {
		kw.BatchBytes = int64(cfg.DLQMessageBytes - dlqBatchOverhead)
	}
	cfg.Logger.Info("dead letters", "topic", cfg.DLQTopic, "max_message_bytes", cfg.DLQMessageBytes)
}

// topicMaxMessageBytes asks Kafka for a topic's max.message.bytes. A topic
// that does not exist yet is created, with the broker's defaults (what its
// first dead letter would do, failing once on the way): so a first start says
// nothing about a topic nobody needed yet. Where the worker may not create it,
// the topic will get the broker's message.max.bytes, which is returned.
func topicMaxMessageBytes(ctx context.Context, addr net.Addr, topic string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: addr, Timeout: 10 * time.Second}
	n, err := describeMessageBytes(ctx, client, kafka.ResourceTypeTopic, topic, "max.message.bytes")
	if !errors.Is(err, kafka.UnknownTopicOrPartition) {
		return n, err
	}
	res, cerr := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: -1, ReplicationFactor: -1}}})
	if cerr == nil {
		cerr = res.Errors[topic]
	}
	if cerr == nil || errors.Is(cerr, kafka.TopicAlreadyExists) {
		// A new topic's configuration is readable once the broker applied it.
		for {
			if n, err = describeMessageBytes(ctx, client, kafka.ResourceTypeTopic, topic, "max.message.bytes"); !errors.Is(err, kafka.UnknownTopicOrPartition) {
				return n, err
			}
			select {
			case <-ctx.Done():
				return 0, err
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	meta, merr := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if merr != nil || len(meta.Brokers) == 0 {
		return 0, fmt.Errorf("the topic does not exist and cannot be created (%w), and the brokers are not listed: %w", cerr, errors.Join(err, merr))
	}
	n, berr := describeMessageBytes(ctx, client, kafka.ResourceTypeBroker, strconv.Itoa(meta.Brokers[0].ID), "message.max.bytes")
	if berr != nil {
		return 0, fmt.Errorf("the topic does not exist and cannot be created (%w); broker %d: %w", cerr, meta.Brokers[0].ID, berr)
	}
	return n, nil
}

// describeMessageBytes reads the size limit name of a topic or broker.
func describeMessageBytes(ctx context.Context, client *kafka.Client, typ kafka.ResourceType, resource, name string) (int, error) {
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: typ, ResourceName: resource, ConfigNames: []string{name}}}})
	if err != nil {
		return 0, err
	}
	for _, r := range res.Resources {
		if r.Error != nil {
			return 0, r.Error
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == name {
				n, err := strconv.Atoi(e.ConfigValue)
				if err != nil || n < 16<<10 {
					return 0, fmt.Errorf("%s=%q: want a number of at least 16 KiB", name, e.ConfigValue)
				}
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("%s not reported", name)
}

type consumer struct {
	w      *Worker
	log    *slog.Logger
	reader *groupReader
	writer *Writer
	dec    *schemas.Decoder
	// The piece being decoded into, and the pool of piece buffers.
	cur  []schemas.Sample
	pool chan []schemas.Sample
	// Offsets of the batches whose raw samples are stored but whose intervals
	// wait in the writer (staged), and when offsets were last committed.
	uncommitted []position
	lastCommit  time.Time
	onCommit    func()
	// The batch whose raw insert is being ended in the background while the
	// next batch streams (nil when none): see startClose.
	closing *closing
	// backlog: since the last batch that ended at the end of its partitions,
	// some message had backlogMessages or more behind it.
	backlog bool
}

// batch is what the fetching goroutine hands to the writing one once a batch is
// complete (its samples went ahead in pieces): the dead letters, and per
// partition the position of the last message (all that an offset commit
// needs; message values are not kept once decoded).
type batch struct {
	n       int // messages
	lines   int // samples and invalid lines (what BatchSize bounds)
	dead    []kafka.Message
	commits []position
	last    map[int]int // partition -> index in commits
}

// position is a fetched message's place in its partition, and the group
// generation it was fetched in: its offset may be committed in that
// generation only.
type position struct {
	gen           *generation
	partition     int
	offset        int64
	highWaterMark int64
}

func (b *batch) reset() {
	b.n, b.lines = 0, 0
	clear(b.dead)
	b.dead, b.commits = b.dead[:0], b.commits[:0]
	clear(b.last)
}

// add records msg's offset, fetched in generation gen, for the commit. A
// message of a later generation replaces one of an earlier generation: that
// one's offset can no longer be committed.
func (b *batch) add(m *kafka.Message, gen *generation) {
	b.n++
	c := position{gen: gen, partition: m.Partition, offset: m.Offset, highWaterMark: m.HighWaterMark}
	if i, ok := b.last[m.Partition]; ok {
		b.commits[i] = c
		return
	}
	b.last[m.Partition] = len(b.commits)
	b.commits = append(b.commits, c)
}

// piecesPerConsumer is how many piece buffers a consumer decodes into: the
// fetcher fills one while the writer sends others. Together with StreamPiece it
// bounds the decoded samples a consumer holds, whatever the batch size.
const piecesPerConsumer = 4

// caughtUpQuiet ends a batch early when its last message was the last of its
// partition, no other message follows within this time, and the batch is the
// end of a backlog: a message since the last such end had backlogMessages or
// more behind it, or the batch holds a quarter of BatchSize (at most 65 536
// samples). At steady state
// (no backlog) batches still wait for their age: ClickHouse wants few inserts.
const (
	caughtUpQuiet   = 50 * time.Millisecond
	backlogMessages = 1000
)

// consume runs sessions of one group member until ctx ends. A session ends
// early when the store fails: nothing it had not committed is kept, and the
// next session, after a backoff, consumes it again from the committed offsets
// (a fresh member rejoins the group). So no batch has to be kept in memory to be
// written again, and a batch may be large.
func (w *Worker) consume(ctx context.Context, id int) error {
	cfg := &w.cfg
	log := cfg.Logger.With("consumer", id)
	w.running.Add(1)
	cfg.Metrics.Workers.Inc()
	defer func() {
		w.running.Add(-1)
		cfg.Metrics.Workers.Dec()
	}()
	log.Info("consuming", "topic", cfg.Topic, "group", cfg.GroupID, "batch_size", cfg.BatchSize, "batch_age", cfg.BatchAge)
	bo := retry.Backoff(cfg.RetryMin, cfg.RetryMax)
	// From a failure until the next commit, the consumer counts as paused, and
	// each failure lengthens the backoff.
	paused := false
	resume := func() {
		bo.Reset()
		if paused {
			cfg.Metrics.Paused.Dec()
			paused = false
		}
	}
	defer resume()
	for {
		err := w.session(ctx, log, resume)
		if ctx.Err() != nil {
			log.Info("stopped")
			return nil
		}
		if IsPermanent(err) {
			// Consuming again would fail the same way: stop, and let the
			// operator see why (Run stops the other consumers).
			log.Error("store write failed permanently; stopping", "err", err)
			return fmt.Errorf("stopped: the store refuses writes and retrying cannot help: %w", err)
		}
		if !paused {
			cfg.Metrics.Paused.Inc()
			paused = true
		}
		w.notePause(true, err)
		delay := bo.NextBackOff()
		log.Warn("store write failed; consuming again from the last committed offsets", "retry_in", delay.Round(time.Millisecond), "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

// session consumes as a fresh group member, with a fresh writer, until ctx
// ends (nil) or the store fails (the error; what was not committed is given
// up). onCommit is called after each commit.
func (w *Worker) session(ctx context.Context, log *slog.Logger, onCommit func()) error {
	cfg := &w.cfg
	writer, err := NewWriter(WriterConfig{Store: cfg.Store, Logger: log, Metrics: cfg.Metrics,
		MaxOpenRuns: cfg.MaxOpenRuns, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, AttemptTimeout: cfg.StoreTimeout, OnPause: w.notePause})
	if err != nil {
		return err
	}
	reader, err := w.newGroupReader(log)
	if err != nil {
		return err
	}
	defer func() {
		if err := reader.Close(); err != nil {
			log.Warn("leaving the consumer group", "err", err)
		}
	}()
	c := w.newConsumer(log, reader, writer, onCommit)

	// Two goroutines: while the writer sends pieces to the store, finishes
	// batches and commits, the fetcher fetches and decodes. Batches are written
	// and committed in fetch order, each commit only after its batch was stored,
	// so the flush-then-commit rule holds as with one goroutine.
	//
	// The fetcher stops when ctx ends or the writer fails (fctx). The writer
	// works on until ctx ends and then for at most ShutdownGrace: on shutdown
	// the batches already fetched are finished within the grace period, or
	// abandoned uncommitted (Kafka redelivers them to the next owner). The
	// member stays in the group until the writer is done, so that it can
	// still commit.
	fctx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	wctx, stopWrite := withGrace(ctx, cfg.ShutdownGrace)
	defer stopWrite()
	free := make(chan *batch, 2)
	for range 2 {
		free <- &batch{last: map[int]int{}}
	}
	pieces := make(chan piece, piecesPerConsumer+2)
	fetchDone := make(chan struct{})
	go func() {
		defer close(fetchDone)
		c.fetchBatches(fctx, free, pieces)
	}()
	werr := c.writeBatches(ctx, wctx, stopFetch, free, pieces)
	<-fetchDone
	if ctx.Err() != nil {
		return nil
	}
	return werr
}

// readerQueue bounds the fetched messages a group member holds before the
// fetcher takes them (see groupReader). Messages hold many samples each (a
// node-tick, up to 64 KiB): a short queue keeps the fetched values a consumer
// holds to about a megabyte (250 held 3 MB for the 13 KB messages of 34
// samples in the benchmark).
const readerQueue = 64

// newConsumer returns a session's consumer with its pool of piece buffers
// filled.
func (w *Worker) newConsumer(log *slog.Logger, reader *groupReader, writer *Writer, onCommit func()) *consumer {
	c := &consumer{w: w, log: log, reader: reader, writer: writer, dec: schemas.NewDecoderWith(w.cfg.DecoderOptions), lastCommit: time.Now(),
		pool: make(chan []schemas.Sample, piecesPerConsumer), onCommit: onCommit}
	for range piecesPerConsumer {
		c.pool <- make([]schemas.Sample, 0, w.cfg.StreamPiece)
	}
	return c
}

// withGrace returns a context that ends at most grace after ctx ends (or when
// stop is called): the writer's, so that the batches fetched before a shutdown
// can still be finished.
func withGrace(ctx context.Context, grace time.Duration) (wctx context.Context, stop func()) {
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, wcancel)
		<-wctx.Done()
		t.Stop()
	})
	return wctx, func() {
		stopGrace()
		wcancel()
	}
}

// fetchBatches is the fetcher: it fills the free batches in turn and hands
// each that holds a message to the writer (its samples in pieces, then the
// batch), until ctx ends; it closes out when it returns.
func (c *consumer) fetchBatches(ctx context.Context, free chan *batch, out chan<- piece) {
	defer close(out)
	for {
		var b *batch
		select {
		case b = <-free:
		case <-ctx.Done():
			return
		}
		done := c.fetch(ctx, b, out)
		if b.n > 0 {
			// The writer drains pieces until it is closed. Samples fetch decoded
			// but could not hand over (ctx ended) go first: a batch is finished,
			// and committed, only with all of its samples.
			if len(c.cur) > 0 {
				out <- piece{samples: c.cur}
				c.cur = nil
			}
			out <- piece{b: b}
		} else {
			free <- b
		}
		if done {
			return
		}
	}
}

// writeBatches is the writer: it writes the pieces of the fetcher in order
// until the fetcher closes them, finishing and committing each batch at its
// end. After the first store error (returned) it stops the fetcher and only
// returns the buffers of the pieces that still come. ctx is the session's
// context, wctx the writer's (withGrace).
func (c *consumer) writeBatches(ctx, wctx context.Context, stopFetch func(), free chan<- *batch, pieces <-chan piece) error {
	cfg := &c.w.cfg
	var werr error
	var st *Stream
	// Batches staged by a full batch are committed by the next batch, or, when
	// none comes (the backlog ended exactly at a full batch), by this ticker once
	// CommitInterval has passed, between batches.
	ticker := time.NewTicker(max(cfg.CommitInterval/4, 10*time.Millisecond))
	defer ticker.Stop()
	fail := func(err error) {
		if werr = err; werr != nil {
			stopFetch()
			if ctx.Err() != nil {
				c.log.Warn("shutdown: batch abandoned uncommitted; it will be consumed again", "err", werr)
			}
		}
	}
loop:
	for {
		select {
		case p, ok := <-pieces:
			if !ok {
				break loop // the fetcher is done
			}
			if werr != nil {
				c.recycle(p, free)
				continue
			}
			var err error
			st, err = c.writePiece(wctx, st, p, free)
			fail(err)
		case err := <-c.closeDone():
			if err = c.completeClose(wctx, err, free, werr == nil); werr == nil {
				fail(err)
			}
		case <-ticker.C:
			if werr == nil && st == nil && len(c.uncommitted) > 0 && time.Since(c.lastCommit) >= cfg.CommitInterval {
				if werr = c.commit(wctx); werr != nil {
					stopFetch()
				}
			}
		}
	}
	if st != nil {
		st.Abort()
	}
	if c.closing != nil {
		if err := c.completeClose(wctx, <-c.closing.done, free, werr == nil); werr == nil {
			werr = err
		}
	}
	if werr == nil && len(c.uncommitted) > 0 {
		// Stored batches that waited for the commit interval: write their
		// intervals and commit them within the grace period.
		if werr = c.commit(wctx); werr != nil {
			c.log.Warn("shutdown: stored batches left uncommitted; they will be consumed again", "err", werr)
		}
	}
	return werr
}

// writePiece writes p's samples to the open stream of its batch (begun by the
// batch's first piece) and gives p's buffer back, or, p being the batch's end,
// completes the batch before it (awaitClose) and starts ending this one's
// stream in the background (startClose); it returns the stream still open
// (nil after a batch's end).
func (c *consumer) writePiece(ctx context.Context, st *Stream, p piece, free chan<- *batch) (*Stream, error) {
	if st == nil {
		st = c.writer.BeginStream(ctx, c.w.cfg.BatchAge)
	}
	if p.b == nil {
		defer c.recycle(p, free)
		return st, st.Write(ctx, p.samples)
	}
	if err := c.awaitClose(ctx, free); err != nil {
		st.Abort()
		c.recycle(p, free)
		return nil, err
	}
	c.startClose(p.b, st)
	return nil, nil
}

// closing is a batch whose stream is being closed in the background.
type closing struct {
	b    *batch
	done chan error // Stream.Close's result
}

// startClose ends st, the stream of batch b, in the background. The server
// writes a batch's rows when its insert ends, which takes a good part of the
// time the batch took to stream: meanwhile the fetcher and the writer go on
// with the next batch, on another connection. Batches are still completed,
// and committed, in fetch order: the next batch's end, the writer's
// shutdown, or the result itself (closeDone) completes b first.
func (c *consumer) startClose(b *batch, st *Stream) {
	done := make(chan error, 1)
	go func() { done <- st.Close() }()
	c.closing = &closing{b: b, done: done}
}

// closeDone is the channel of the background close's result (nil, which
// blocks, when none).
func (c *consumer) closeDone() <-chan error {
	if c.closing == nil {
		return nil
	}
	return c.closing.done
}

// awaitClose waits for the background close, if any, and completes its batch.
func (c *consumer) awaitClose(ctx context.Context, free chan<- *batch) error {
	if c.closing == nil {
		return nil
	}
	return c.completeClose(ctx, <-c.closing.done, free, true)
}

// completeClose completes the batch of the background close, whose result is
// err: when finish is set and the close succeeded, its dead letters and
// offsets (finish); then its buffer goes back to the fetcher.
func (c *consumer) completeClose(ctx context.Context, err error, free chan<- *batch, finish bool) error {
	b := c.closing.b
	c.closing = nil
	defer c.recycle(piece{b: b}, free)
	if err != nil || !finish {
		return err
	}
	return c.finish(ctx, b)
}

// recycle gives p's buffer back: its samples' to the pool, or its batch to
// the fetcher.
func (c *consumer) recycle(p piece, free chan<- *batch) {
	if p.b == nil {
		c.pool <- p.samples[:0]
		return
	}
	p.b.reset()
	free <- p.b
}

// piece is a run of decoded samples (b nil), or batch b complete (its samples
// went ahead).
type piece struct {
	b       *batch
	samples []schemas.Sample
}

// fetch fills b until it holds BatchSize samples, its first message is
// BatchAge old, or ctx ends (done=true). Each message is decoded as it arrives,
// line by line (a message holds one sample per line), into piece buffers that
// go to out once they hold StreamPiece samples and at the batch's end.
func (c *consumer) fetch(ctx context.Context, b *batch, out chan<- piece) (done bool) {
	cfg := &c.w.cfg
	fctx := ctx // no deadline until the batch has a first message
	bo := retry.Backoff(cfg.RetryMin, cfg.RetryMax)
	valid := 0
	caughtUp := false // the last message was the last of its partition when fetched
	defer func() { c.countFetched(b, valid) }()
	for b.lines < cfg.BatchSize {
		if c.cur == nil {
			select {
			case c.cur = <-c.pool:
			case <-ctx.Done():
				return true
			}
		}
		// The last message reached its partition's end: a backlog was just
		// consumed. If nothing more comes at once, end the batch now rather
		// than when it is BatchAge old.
		quiet := caughtUp && (c.backlog || b.lines >= min(cfg.BatchSize/4, 1<<16))
		m, gen, err := c.fetchMessage(fctx, quiet)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return true
		case errors.Is(err, context.DeadlineExceeded):
			if quiet && fctx.Err() == nil {
				c.backlog = false // the backlog ended
			}
			return !c.send(ctx, out) // the batch is old enough, or the backlog ended
		default:
			if !c.waitRetry(ctx, bo.NextBackOff(), err) {
				return true
			}
			continue
		}
		bo.Reset()
		if b.n == 0 {
			var cancel context.CancelFunc
			fctx, cancel = context.WithTimeout(ctx, cfg.BatchAge)
			defer cancel()
		}
		b.add(&m, gen)
		caughtUp = m.HighWaterMark > 0 && m.Offset+1 >= m.HighWaterMark
		c.backlog = c.backlog || m.HighWaterMark-m.Offset > backlogMessages
		valid += c.decodeMessage(&m, b, func() {
			// A full piece inside a message: hand it over and go on in a fresh
			// one. Not abandoned when ctx ends: the writer drains pieces and
			// returns their buffers until the session ends.
			out <- piece{samples: c.cur}
			c.cur = <-c.pool
		})
		if len(c.cur) >= cfg.StreamPiece && !c.send(ctx, out) {
			return true
		}
	}
	return !c.send(ctx, out)
}

// fetchMessage fetches the next message, and the generation it was fetched
// in, waiting at most caughtUpQuiet when quiet.
func (c *consumer) fetchMessage(ctx context.Context, quiet bool) (kafka.Message, *generation, error) {
	if quiet {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, caughtUpQuiet)
		defer cancel()
	}
	return c.reader.FetchMessage(ctx)
}

// waitRetry logs a failed fetch and waits delay; false when ctx ended first.
func (c *consumer) waitRetry(ctx context.Context, delay time.Duration, err error) bool {
	c.log.Warn("fetch failed, retrying", "err", err, "retry_in", delay.Round(time.Millisecond))
	select {
	case <-ctx.Done():
		return false
	case <-time.After(delay):
		return true
	}
}

// send hands the current piece to the writer; false when ctx ended first.
func (c *consumer) send(ctx context.Context, out chan<- piece) bool {
	if len(c.cur) == 0 {
		return true
	}
	select {
	case out <- piece{samples: c.cur}:
		c.cur = nil
		return true
	case <-ctx.Done():
		return false
	}
}

// countFetched records a fetched batch in the metrics: each partition's lag
// after the batch's last message of it, the valid samples and the dead
// letters.
func (c *consumer) countFetched(b *batch, valid int) {
	m := c.w.cfg.Metrics
	for i := range b.commits {
		cm := &b.commits[i]
		if lag := cm.highWaterMark - cm.offset - 1; lag >= 0 {
			m.Lag.WithLabelValues(strconv.Itoa(cm.partition)).Set(float64(lag))
		}
	}
	m.Messages.WithLabelValues("valid").Add(float64(valid))
	m.Messages.WithLabelValues("invalid").Add(float64(len(b.dead)))
}

// decodeMessage appends the samples of msg (one per line) to the current piece
// and a dead letter to b.dead for each invalid line, or for the whole message
// when its header or its lack of any sample makes it invalid; it returns the
// number of valid samples. A message is decoded whatever its size: it is in
// memory once fetched, and its valid lines are samples like any other (a large
// message is a large tick, or several). When the piece is full, next hands it
// over and takes a fresh one, so a piece never grows past its capacity.
func (c *consumer) decodeMessage(msg *kafka.Message, b *batch, next func()) (valid int) {
	limit := c.w.cfg.DLQMessageBytes - dlqBatchOverhead
	if err := c.checkMessage(msg); err != nil {
		b.lines++
		b.dead = appendDeadLetters(b.dead, msg, msg.Value, 0, err, limit)
		return 0
	}
	c.dec.SetNow(c.w.cfg.Now())
	lineNo, samples := 0, 0
	for rest := msg.Value; len(rest) > 0; {
		var line []byte
		line, rest = schemas.NextLine(rest)
		lineNo++
		if schemas.BlankLine(line) {
			continue
		}
		samples++
		n := len(c.cur)
		if n > 0 && n == cap(c.cur) {
			next()
			n = len(c.cur)
		}
		if n < cap(c.cur) {
			c.cur = c.cur[:n+1] // Decode overwrites every field
		} else {
			c.cur = append(c.cur, schemas.Sample{})
		}
		if err := c.dec.Decode(line, &c.cur[n]); err != nil {
			c.cur = c.cur[:n]
			b.dead = appendDeadLetters(b.dead, msg, line, lineNo, err, limit)
			continue
		}
		valid++
	}
	if samples == 0 {
		samples = 1
		b.dead = appendDeadLetters(b.dead, msg, msg.Value, 0, fmt.Errorf("%w: the message holds no sample", schemas.ErrSyntax), limit)
	}
	b.lines += samples
	return valid
}

// finish completes a batch whose raw insert has ended: it writes its invalid
// messages to the dead-letter topic and records them in the store as rejects,
// and then, if the batch is not full or CommitInterval has passed, writes the
// intervals of this and the batches staged before it and commits their
// offsets. The intervals written then may also cover samples of the batch
// streaming meanwhile: a row that outruns its raw samples, which are consumed
// again if they fail, and absorbed like any repeat.
func (c *consumer) finish(ctx context.Context, b *batch) error {
	cfg := &c.w.cfg
	m := cfg.Metrics
	if len(b.dead) > 0 {
		err := Retry(ctx, c.log, cfg.RetryMin, cfg.RetryMax, m, c.w.notePause, "dead-letter write", func(ctx context.Context) error {
			if err := c.w.dlq.WriteMessages(ctx, b.dead...); err != nil {
				m.DLQErrors.Inc()
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := c.writer.WriteRejects(ctx, deadRejects(b.dead, c.w.cfg.Now())); err != nil {
			return err
		}
		for i := range b.dead {
			if part := headerValue(&b.dead[i], HeaderPart); part != "" && part != "1" {
				continue // one dead letter in parts counts and logs once
			}
			m.DLQ.WithLabelValues(headerValue(&b.dead[i], HeaderReason)).Inc()
			c.log.Warn("invalid message sent to the dead-letter topic", "topic", cfg.DLQTopic,
				"reason", headerValue(&b.dead[i], HeaderReason), "error", headerValue(&b.dead[i], HeaderError),
				"partition", headerValue(&b.dead[i], HeaderSourcePartition), "offset", headerValue(&b.dead[i], HeaderSourceOffset),
				"line", headerValue(&b.dead[i], HeaderSourceLine), "parts", headerValue(&b.dead[i], HeaderParts))
		}
	}
	c.uncommitted = append(c.uncommitted, b.commits...)
	if b.lines < cfg.BatchSize || time.Since(c.lastCommit) >= cfg.CommitInterval {
		return c.commit(ctx)
	}
	return nil
}

// commit writes the intervals of the staged batches and then commits their
// offsets: everything in them is stored (or dead-lettered), so now, and only
// now, the offsets may be committed: for each partition the offset after its
// last message, in the group generation that fetched it. Offsets of a
// generation that has ended are not committed (groupReader.Commit): the
// partitions' owners in the new generation consume those messages again, from
// the offsets committed before it. A failed commit is retried; if the process
// dies first, the batches are consumed again, which is harmless.
func (c *consumer) commit(ctx context.Context) error {
	cfg := &c.w.cfg
	m := cfg.Metrics
	if err := c.writer.FlushRuns(ctx); err != nil {
		return err
	}
	for _, g := range byGeneration(c.uncommitted) {
		committed := false
		err := Retry(ctx, c.log, cfg.RetryMin, cfg.RetryMax, m, c.w.notePause, "offset commit", func(context.Context) error {
			ok, err := c.reader.Commit(g.gen, g.offsets)
			if err != nil {
				m.CommitErrors.Inc()
				return err
			}
			committed = ok
			return nil
		})
		if err != nil {
			return err
		}
		if committed {
			m.Commits.Inc()
			continue
		}
		c.log.Info("offsets fetched before a rebalance left uncommitted; the partitions' owners consume them again",
			"generation", g.gen.g.ID, "partitions", len(g.offsets))
	}
	c.uncommitted = c.uncommitted[:0]
	c.lastCommit = time.Now()
	c.w.notePause(false, nil)
	c.onCommit()
	return nil
}

// genOffsets are the offsets to commit in one generation: partition -> the
// offset after the last message stored.
type genOffsets struct {
	gen     *generation
	offsets map[int]int64
}

// byGeneration groups positions, given in fetch order, by the generation
// that fetched them, keeping each partition's last position (within a
// generation, a partition's messages come in offset order).
func byGeneration(ps []position) []genOffsets {
	var out []genOffsets
	for i := range ps {
		p := &ps[i]
		j := slices.IndexFunc(out, func(g genOffsets) bool { return g.gen == p.gen })
		if j < 0 {
			j = len(out)
			out = append(out, genOffsets{gen: p.gen, offsets: map[int]int64{}})
		}
		out[j].offsets[p.partition] = p.offset + 1
	}
	return out
}

// checkMessage rejects a message as a whole: an unknown schema header.
func (c *consumer) checkMessage(msg *kafka.Message) error {
	for _, h := range msg.Headers {
		if h.Key == HeaderSchema && string(h.Value) != schemas.SampleSchemaV1 {
			return fmt.Errorf("%w: header schema=%q (this build reads %s)", errUnknownSchema, h.Value, schemas.SampleSchemaV1)
		}
	}
	return nil
}

// appendDeadLetters appends the dead letters for value (the whole message, or
// its invalid line lineNo >= 1) of msg: one message with the value whole, or,
// when that would be larger than limit bytes (what kafka-go counts against
// the dead-letter writer's BatchBytes), several, each with a part of the value
// (HeaderPart, HeaderParts). The value is copied: msg's buffer is not kept once
// decoded.
func appendDeadLetters(dead []kafka.Message, msg *kafka.Message, value []byte, lineNo int, err error, limit int) []kafka.Message {
	headers := make([]kafka.Header, 0, len(msg.Headers)+8)
	for _, h := range msg.Headers {
		switch h.Key {
		case HeaderReason, HeaderError, HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset, HeaderSourceLine, HeaderPart, HeaderParts:
			continue // ours win
		}
		headers = append(headers, h)
	}
	if lineNo > 0 {
		headers = append(headers, kafka.Header{Key: HeaderSourceLine, Value: []byte(strconv.Itoa(lineNo))})
	}
	errText := err.Error()
	if len(errText) > 1024 {
		errText = errText[:1024]
	}
	headers = append(headers,
		kafka.Header{Key: HeaderReason, Value: []byte(string(Reason(err)))},
		kafka.Header{Key: HeaderError, Value: []byte(errText)},
		kafka.Header{Key: HeaderSourceTopic, Value: []byte(msg.Topic)},
		kafka.Header{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(msg.Partition))},
		kafka.Header{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))},
	)
	// What a part may hold: the limit less the key, the headers (with the part
	// numbers) and kafka-go's per-message framing.
	room := limit - len(msg.Key) - 64
	for _, h := range headers {
		room -= len(h.Key) + len(h.Value) + 10
	}
	room -= 2*len(HeaderPart) + 2*20 + 10
	parts := splitParts(value, max(room, 1024))
	if len(parts) == 1 {
		return append(dead, kafka.Message{Key: bytes.Clone(msg.Key), Value: bytes.Clone(value), Headers: headers})
	}
	n := strconv.Itoa(len(parts))
	for i, p := range parts {
		h := append(headers[:len(headers):len(headers)],
			kafka.Header{Key: HeaderPart, Value: []byte(strconv.Itoa(i + 1))},
			kafka.Header{Key: HeaderParts, Value: []byte(n)})
		dead = append(dead, kafka.Message{Key: bytes.Clone(msg.Key), Value: bytes.Clone(p), Headers: h})
	}
	return dead
}

// splitParts cuts value into consecutive parts of at most room bytes, after a
// line end where the part holds one, else at room bytes (a line longer than
// room). The parts concatenated are value.
func splitParts(value []byte, room int) [][]byte {
	if len(value) <= room {
		return [][]byte{value}
	}
	var parts [][]byte
	for len(value) > room {
		cut := bytes.LastIndexByte(value[:room], '\n') + 1
		if cut == 0 {
			cut = room
		}
		parts = append(parts, value[:cut])
		value = value[cut:]
	}
	if len(value) > 0 {
		parts = append(parts, value)
	}
	return parts
}

// deadRejects are the rejects recorded in the store for dead letters: one per
// invalid line or message, its source the position in the sample topic, so
// that a batch consumed again records the same rejects.
func deadRejects(dead []kafka.Message, now time.Time) []Reject {
	rs := make([]Reject, 0, len(dead))
	for i := range dead {
		d := &dead[i]
		if part := headerValue(d, HeaderPart); part != "" && part != "1" {
			continue // a dead letter in parts is one reject
		}
		src := "kafka:" + headerValue(d, HeaderSourceTopic) + "/" + headerValue(d, HeaderSourcePartition) + "/" + headerValue(d, HeaderSourceOffset)
		if line := headerValue(d, HeaderSourceLine); line != "" {
			src += "#" + line
		}
		rs = append(rs, Reject{TimeMS: rejectTime(d.Value, now), Source: src, Reason: schemas.RejectReason(headerValue(d, HeaderReason)), Error: clipError(headerValue(d, HeaderError))})
	}
	return rs
}

func headerValue(m *kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
