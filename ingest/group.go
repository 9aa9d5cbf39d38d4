package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// groupReader is one member of the consumer group: it reads the partitions
// assigned to it in the group's current generation, and commits offsets only
// in the generation that fetched them, only while it lasts.
//
// kafka-go's Reader cannot promise that: its commits go to whichever
// generation is current when they are sent, so offsets fetched before a
// rebalance, committed after it, land on partitions another member now owns,
// moving their committed offsets back (segmentio/kafka-go#1308). Here every
// fetched message carries its generation, and a commit of a generation that
// ended is dropped: the partitions' owners in the new generation consume
// those messages again from the offsets committed before the rebalance.
type groupReader struct {
	topic string
	log   *slog.Logger
	cg    *kafka.ConsumerGroup
	// part configures the reader of one assigned partition (Partition and
	// QueueCapacity are set per generation).
	part kafka.ReaderConfig
	msgs chan fetched // from every partition reader of the current generation
	errs chan error   // from joining the group, for FetchMessage
	stop context.CancelFunc
	done chan struct{} // closed when run returns
	// mu is held (read) by a commit and (write) by a generation's end, which
	// therefore waits for a commit under way: no commit of a generation is
	// sent once the member moves on to the next one.
	mu sync.RWMutex
}

// generation is a group generation this member took part in.
type generation struct {
	g     *kafka.Generation
	ended bool // set under groupReader.mu once the generation ends
}

// fetched is a message of a partition reader, with its generation, or that
// reader's error.
type fetched struct {
	msg kafka.Message
	gen *generation
	err error
}

// joinFailuresReported: failures to join the group in a row before
// FetchMessage reports them (a rebalance's first attempts often fail), as
// kafka-go's Reader does.
const joinFailuresReported = 3

// newGroupReader joins the group (in the background) as a new member.
func (w *Worker) newGroupReader(log *slog.Logger) (*groupReader, error) {
	cfg := &w.cfg
	errLog := kafka.LoggerFunc(func(f string, a ...any) { log.Debug("kafka: " + fmt.Sprintf(f, a...)) })
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:      cfg.GroupID,
		Brokers: cfg.Brokers,
		Dialer:  cfg.Dialer,
		Topics:  []string{cfg.Topic},
		// A partition without a committed offset (a new group) is read from
		// its first message.
		StartOffset:    kafka.FirstOffset,
		SessionTimeout: cfg.SessionTimeout,
		// Rebalances wait at most this long for members to rejoin.
		RebalanceTimeout: cfg.SessionTimeout,
		// Members learn of a rebalance from a heartbeat: short heartbeats make a
		// group of several consumers settle in well under a second.
		HeartbeatInterval: min(cfg.SessionTimeout/4, 500*time.Millisecond),
		JoinGroupBackoff:  time.Second,
		ErrorLogger:       errLog,
	})
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &groupReader{topic: cfg.Topic, log: log, cg: cg, stop: stop, done: make(chan struct{}),
		msgs: make(chan fetched, readerQueue/2), errs: make(chan error, 1),
		part: kafka.ReaderConfig{
			Brokers:  cfg.Brokers,
			Topic:    cfg.Topic,
			MinBytes: 1,
			MaxBytes: 16 << 20,
			MaxWait:  250 * time.Millisecond,
			Dialer:   cfg.Dialer,
			// The log messages of a partition reader are those a group Reader logs.
			ErrorLogger: errLog,
		}}
	go r.run(ctx)
	return r, nil
}

// run takes part in each generation of the group in turn until ctx ends or
// the group is closed.
func (r *groupReader) run(ctx context.Context) {
	defer close(r.done)
	failures := 0
	for {
		g, err := r.cg.Next(ctx)
		switch {
		case ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed):
			return
		case err != nil:
			if failures++; failures >= joinFailuresReported {
				select {
				case r.errs <- fmt.Errorf("joining the consumer group: %w", err):
				default:
				}
			}
			continue
		}
		failures = 0
		r.startGeneration(g)
	}
}

// startGeneration starts a reader for each partition assigned in g, from its
// committed offset, and marks g ended when it ends.
func (r *groupReader) startGeneration(g *kafka.Generation) {
	gen := &generation{g: g}
	assigned := g.Assignments[r.topic]
	parts := make([]int, 0, len(assigned))
	for _, a := range assigned {
		parts = append(parts, a.ID)
	}
	r.log.Info("group generation", "generation", g.ID, "member", g.MemberID, "partitions", parts)
	// Each partition reader's queue is a share of readerQueue: the member
	// holds about as many fetched messages as one Reader would.
	queue := max(1, readerQueue/2/max(1, len(assigned)))
	g.Start(func(ctx context.Context) {
		<-ctx.Done()
		r.mu.Lock()
		gen.ended = true
		r.mu.Unlock()
	})
	for _, a := range assigned {
		g.Start(func(ctx context.Context) { r.readPartition(ctx, gen, a, queue) })
	}
}

// readPartition hands the messages of one assigned partition to FetchMessage
// until the generation ends. It returns only then: a function started in a
// generation that returns ends the generation.
func (r *groupReader) readPartition(ctx context.Context, gen *generation, a kafka.PartitionAssignment, queue int) {
	cfg := r.part
	cfg.Partition, cfg.QueueCapacity = a.ID, queue
	rd := kafka.NewReader(cfg)
	defer func() { _ = rd.Close() }()
	if err := rd.SetOffset(a.Offset); err != nil { // FirstOffset when none is committed
		r.log.Error("cannot set a partition reader's offset", "partition", a.ID, "offset", a.Offset, "err", err)
		<-ctx.Done()
		return
	}
	for {
		m, err := rd.FetchMessage(ctx)
		if ctx.Err() != nil {
			return
		}
		f := fetched{msg: m, gen: gen, err: err}
		if err != nil {
			f.err = fmt.Errorf("partition %d: %w", a.ID, err)
		}
		select {
		case r.msgs <- f:
		case <-ctx.Done():
			return
		}
	}
}

// FetchMessage returns the next message of a generation that has not ended,
// with its generation.
func (r *groupReader) FetchMessage(ctx context.Context) (kafka.Message, *generation, error) {
	for {
		select {
		case <-ctx.Done():
			return kafka.Message{}, nil, ctx.Err()
		case err := <-r.errs:
			return kafka.Message{}, nil, err
		case f := <-r.msgs:
			if f.err != nil {
				return kafka.Message{}, nil, f.err
			}
			if r.ended(f.gen) {
				continue // read before a rebalance: the partition's owner reads it again
			}
			return f.msg, f.gen, nil
		}
	}
}

func (r *groupReader) ended(gen *generation) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return gen.ended
}

// Commit commits offsets (partition -> the next offset to read) of
// generation gen. It returns false, and no error, when gen has ended, before
// or during the commit: the offsets are not committed then, and the
// partitions' owners in the new generation read from the offsets committed
// before it.
func (r *groupReader) Commit(gen *generation, offsets map[int]int64) (bool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if gen.ended {
		return false, nil
	}
	err := gen.g.CommitOffsets(map[string]map[int]int64{r.topic: offsets})
	if errors.Is(err, kafka.IllegalGeneration) || errors.Is(err, kafka.RebalanceInProgress) ||
		errors.Is(err, kafka.UnknownMemberId) || errors.Is(err, kafka.FencedInstanceID) {
		return false, nil // the coordinator moved on: the heartbeat ends gen
	}
	return err == nil, err
}

// Close leaves the group: the current generation ends, its partition readers
// stop.
func (r *groupReader) Close() error {
	err := r.cg.Close()
	r.stop()
	<-r.done
	return err
}
