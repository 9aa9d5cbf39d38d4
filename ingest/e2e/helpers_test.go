package e2e

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// env is one test's private topic, dead-letter topic, group and database.
type env struct {
	brokers               []string
	chAddr                string
	topic, dlq, group, db string
	client                *kafka.Client
}

func newEnv(t *testing.T, partitions int) *env {
	t.Helper()
	e := &env{brokers: testenv.KafkaBrokers(t), chAddr: testenv.ClickHouseAddr(t)}
	e.topic = testenv.UniqueName(t, "samples")
	e.dlq = e.topic + "_dlq"
	e.group = e.topic + "_group"
	e.db = testenv.UniqueName(t, "e2e")
	e.client = &kafka.Client{Addr: kafka.TCP(e.brokers...), Timeout: 10 * time.Second}
	ctx := context.Background()
	res, err := e.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: e.topic, NumPartitions: partitions, ReplicationFactor: 1},
		{Topic: e.dlq, NumPartitions: 1, ReplicationFactor: 1},
	}})
	require.NoError(t, err)
	for topic, err := range res.Errors {
		require.NoError(t, err, topic)
	}
	t.Cleanup(func() {
		_, _ = e.client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{e.topic, e.dlq}})
	})
	return e
}

// store opens the test database at addr (the server, or a proxy in front of it).
func (e *env) store(t *testing.T, addr string) *clickhouse.Store {
	t.Helper()
	st, err := clickhouse.Open(context.Background(), clickhouse.Config{Addr: addr, Database: e.db, Logger: quiet(),
		Migrate: true, DialTimeout: time.Second, ReadTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		if addr == e.chAddr {
			_ = st.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS `"+e.db+"`")
		}
		_ = st.Close()
	})
	return st
}

// produce publishes JSON Lines framed as the collector frames them (consecutive
// samples of a node share a message, keyed by the node), with the schema
// header. It returns the number of samples.
func (e *env) produce(t *testing.T, data []byte) int {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(e.brokers...), Topic: e.topic, Balancer: &kafka.Hash{},
		BatchSize: 2000, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	hdr := []kafka.Header{{Key: "schema", Value: []byte(schemas.SampleSchemaV1)}}
	dec := schemas.NewDecoder()
	var samples []schemas.Sample
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var s schemas.Sample
		require.NoError(t, dec.Decode(line, &s))
		samples = append(samples, s)
	}
	// Small messages (4 KiB, about ten samples), so that a batch ends inside a
	// node's run of samples as it does under load.
	buf, spans := schemas.AppendMessages(nil, nil, samples, 4<<10)
	msgs := make([]kafka.Message, 0, len(spans))
	for _, m := range spans {
		msgs = append(msgs, kafka.Message{Key: []byte(m.Key), Value: buf[m.Start:m.End], Headers: hdr})
	}
	e.write(t, w, msgs)
	return len(samples)
}

func (e *env) write(t *testing.T, w *kafka.Writer, msgs []kafka.Message) {
	t.Helper()
	for i := 0; i < len(msgs); i += 5000 {
		require.NoError(t, w.WriteMessages(context.Background(), msgs[i:min(i+5000, len(msgs))]...))
	}
}

// lag is the group's uncommitted messages summed over partitions.
func (e *env) lag(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	meta, err := e.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{e.topic}})
	require.NoError(t, err)
	var parts []int
	var reqs []kafka.OffsetRequest
	for _, p := range meta.Topics[0].Partitions {
		parts = append(parts, p.ID)
		reqs = append(reqs, kafka.LastOffsetOf(p.ID))
	}
	lo, err := e.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{e.topic: reqs}})
	require.NoError(t, err)
	of, err := e.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: e.group, Topics: map[string][]int{e.topic: parts}})
	require.NoError(t, err)
	committed := map[int]int64{}
	for _, p := range of.Topics[e.topic] {
		committed[p.Partition] = max(p.CommittedOffset, 0)
	}
	var lag int64
	for _, p := range lo.Topics[e.topic] {
		lag += p.LastOffset - committed[p.Partition]
	}
	return lag
}

func (e *env) waitCommitted(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		lag := e.lag(t)
		if lag == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s still has %d uncommitted messages after %v", e.group, lag, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *env) workerConfig(st ingest.Store, m *ingest.Metrics) ingest.WorkerConfig {
	return ingest.WorkerConfig{Brokers: e.brokers, Topic: e.topic, GroupID: e.group, DLQTopic: e.dlq,
		BatchSize: 4000, StreamPiece: 700, BatchAge: 300 * time.Millisecond, RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
		SessionTimeout: 6 * time.Second, Store: st, Logger: quiet(), Metrics: m}
}

// start runs a worker until the test ends or stop is called.
func start(t *testing.T, cfg ingest.WorkerConfig) (stop func() error) {
	t.Helper()
	w, err := ingest.NewWorker(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = context.DeadlineExceeded
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// countRaw is the number of distinct samples stored raw.
func countRaw(t *testing.T, st *clickhouse.Store) uint64 {
	t.Helper()
	var n uint64
	require.NoError(t, st.Conn().QueryRow(context.Background(), "SELECT count() FROM (SELECT DISTINCT instance_id, start_ms, project, user FROM `"+
		st.Database()+"`.raw_samples)").Scan(&n))
	return n
}

func distinctSamples(t *testing.T, data []byte) uint64 {
	t.Helper()
	type k struct {
		inst, project, user string
		start               int64
	}
	seen := map[k]bool{}
	for _, s := range storetest.Samples(t, data) {
		seen[k{s.InstanceID, s.Project, s.User, s.StartMS}] = true
	}
	return uint64(len(seen))
}

// Gate is a kafka.Dialer whose connections a test can cut: while closed it
// drops every open connection and refuses new ones, as a Kafka outage would.
type gate struct {
	mu     sync.Mutex
	closed bool
	conns  []net.Conn
}

func (g *gate) dialer() *kafka.Dialer {
	return &kafka.Dialer{Timeout: 2 * time.Second, DialFunc: func(ctx context.Context, network, addr string) (net.Conn, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.closed {
			return nil, &net.OpError{Op: "dial", Net: network, Err: io.ErrClosedPipe}
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			g.conns = append(g.conns, c)
		}
		return c, err
	}}
}

func (g *gate) set(closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = closed
	if closed {
		for _, c := range g.conns {
			_ = c.Close()
		}
		g.conns = nil
	}
}
