package kafkapub_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector/kafkapub"
	"github.com/cardhour/cardhour/collector/spool"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
)

// gate stands between the publisher and the broker: every connection kafka-go
// opens goes through it (kafka-go dials the broker's advertised address, so a
// plain TCP proxy in front of the bootstrap address would be bypassed). Closing
// the gate cuts every open connection and refuses new ones, as a dead broker or
// a network partition would.
type gate struct {
	mu    sync.Mutex
	open  bool
	conns []net.Conn
}

func (g *gate) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open {
		return nil, errors.New("gate closed: broker unreachable")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		g.conns = append(g.conns, c)
	}
	return c, err
}

func (g *gate) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = open
	if !open {
		for _, c := range g.conns {
			_ = c.Close()
		}
		g.conns = nil
	}
}

func createTopic(t testing.TB, broker, topic string, partitions int) {
	t.Helper()
	conn, err := kafka.Dial("tcp", broker)
	require.NoError(t, err)
	defer conn.Close()
	ctrl, err := conn.Controller()
	require.NoError(t, err)
	cc, err := kafka.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	require.NoError(t, err)
	defer cc.Close()
	require.NoError(t, cc.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}))
	t.Cleanup(func() {
		if c, err := kafka.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port))); err == nil {
			_ = c.DeleteTopics(topic)
			_ = c.Close()
		}
	})
}

// lastOffset is the offset after partition p's last message.
func lastOffset(t testing.TB, broker, topic string, p int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lc, err := kafka.DialLeader(ctx, "tcp", broker, topic, p)
	require.NoError(t, err)
	defer lc.Close()
	last, err := lc.ReadLastOffset()
	require.NoError(t, err)
	return last
}

// lastOffsets sums the partitions' last offsets: the messages the topic holds.
func lastOffsets(t testing.TB, broker, topic string, partitions int) int64 {
	t.Helper()
	var n int64
	for p := 0; p < partitions; p++ {
		n += lastOffset(t, broker, topic, p)
	}
	return n
}

// readAll reads every message of every partition.
func readAll(t testing.TB, broker, topic string, partitions int) []kafka.Message {
	t.Helper()
	var out []kafka.Message
	for p := 0; p < partitions; p++ {
		last := lastOffset(t, broker, topic, p)
		if last == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, Partition: p, MaxBytes: 10 << 20, MaxWait: 100 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			require.NoError(t, err)
			out = append(out, m)
			if m.Offset >= last-1 {
				break
			}
		}
		_ = r.Close()
		cancel()
	}
	return out
}

func TestKafkaBrokerOutageLosesNothing(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.UniqueName(t, "samples")
	const partitions, instances, ticks = 3, 20, 600
	createTopic(t, brokers[0], topic, partitions)

	g := &gate{open: true}
	sink, err := kafkapub.NewKafkaSink(kafkapub.KafkaConfig{Brokers: brokers, Topic: topic, Dial: g.Dial, WriteTimeout: 2 * time.Second})
	require.NoError(t, err)
	sp, err := spool.Open(spool.Config{Dir: t.TempDir(), MaxBytes: 64 << 20})
	require.NoError(t, err)
	p, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink, BatchRecords: 500, BackoffMin: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		_ = sink.Close()
		_ = sp.Close()
	}()

	maxPending := int64(0)
	for tick := 0; tick < ticks; tick++ {
		switch tick {
		case 150:
			g.set(false) // broker gone, under load, for about 2 s
		case 550:
			g.set(true)
		}
		require.NoError(t, p.Publish(ctx, tickSamples(instances, tick)))
		maxPending = max(maxPending, sp.Pending())
		time.Sleep(5 * time.Millisecond)
	}
	require.Greater(t, maxPending, int64(100), "the outage backed ticks up in the spool (one message per tick)")
	require.Eventually(t, func() bool { return sp.Pending() == 0 }, 60*time.Second, 20*time.Millisecond,
		"the spool drains once the broker is back")

	msgs := readAll(t, brokers[0], topic, partitions)
	dec := schemas.NewDecoder()
	last := map[string]int64{}
	seen := map[string]map[int64]bool{}
	for _, m := range msgs {
		require.Equal(t, "schema", m.Headers[0].Key)
		require.Equal(t, schemas.SampleSchemaV1, string(m.Headers[0].Value))
		for _, s := range decodeMessage(t, dec, m.Value) {
			require.Equal(t, s.Node, string(m.Key))
			if seen[s.InstanceID] == nil {
				seen[s.InstanceID] = map[int64]bool{}
			}
			if seen[s.InstanceID][s.StartMS] {
				continue // at least once: a retried batch may repeat, harmlessly
			}
			require.Greater(t, s.StartMS, last[s.InstanceID], "in order per instance (%s)", s.InstanceID)
			last[s.InstanceID] = s.StartMS
			seen[s.InstanceID][s.StartMS] = true
		}
	}
	require.Len(t, seen, instances)
	for id, ts := range seen {
		require.Len(t, ts, ticks, "every sample of %s arrived", id)
	}
	t.Logf("%d messages for %d samples (max %d pending during the outage)", len(msgs), instances*ticks, maxPending)
}

// BenchmarkKafkaSpoolReplay measures how fast a backlog in the spool drains to
// the local broker (samples/s).
func BenchmarkKafkaSpoolReplay(b *testing.B) {
	brokers := testenv.KafkaBrokers(b)
	topic := testenv.UniqueName(b, "replay")
	createTopic(b, brokers[0], topic, 3)
	const backlog = 200_000
	sink, err := kafkapub.NewKafkaSink(kafkapub.KafkaConfig{Brokers: brokers, Topic: topic})
	require.NoError(b, err)
	defer sink.Close()
	total := 0
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sp, err := spool.Open(spool.Config{Dir: b.TempDir(), MaxBytes: 512 << 20, Fsync: spool.FsyncNever})
		require.NoError(b, err)
		p, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink})
		require.NoError(b, err)
		for tick := 0; tick < backlog/56; tick++ {
			require.NoError(b, p.Publish(context.Background(), tickSamples(56, tick)))
		}
		n := (backlog / 56) * 56 // samples; the spool holds one message per tick
		require.EqualValues(b, backlog/56, sp.Pending())
		b.StartTimer()
		t0 := time.Now()
		require.NoError(b, p.Drain(context.Background()))
		elapsed += time.Since(t0)
		total += int(n)
		_ = sp.Close()
	}
	require.EqualValues(b, b.N*(backlog/56), lastOffsets(b, brokers[0], topic, 3), "every spooled message reached Kafka")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "samples/s")
}

// countingSink counts the writes that failed since the last reset.
type countingSink struct {
	kafkapub.Sink
	mu       sync.Mutex
	failures int
}

func (c *countingSink) Write(ctx context.Context, recs []spool.Record) error {
	err := c.Sink.Write(ctx, recs)
	if err != nil {
		c.mu.Lock()
		c.failures++
		c.mu.Unlock()
	}
	return err
}

func (c *countingSink) failed(reset bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.failures
	if reset {
		c.failures = 0
	}
	return n
}

// A collector started while Kafka is unreachable delivers as soon as Kafka is
// back, like one whose Kafka went away while it ran: no write keeps failing on
// what the client learnt (or failed to learn) while the broker was away.
func TestKafkaBackPromptlyAfterStartingWithoutIt(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.UniqueName(t, "samples")
	createTopic(t, brokers[0], topic, 2)
	g := &gate{} // closed: the broker is unreachable from the start
	kafkaSink, err := kafkapub.NewKafkaSink(kafkapub.KafkaConfig{Brokers: brokers, Topic: topic, Dial: g.Dial, WriteTimeout: 2 * time.Second})
	require.NoError(t, err)
	sink := &countingSink{Sink: kafkaSink}
	sp, err := spool.Open(spool.Config{Dir: t.TempDir(), MaxBytes: 64 << 20})
	require.NoError(t, err)
	const backoff = 100 * time.Millisecond
	p, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink, BackoffMin: backoff, BackoffMax: backoff})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		_ = kafkaSink.Close()
		_ = sp.Close()
	}()

	for phase, name := range []string{"started without Kafka", "Kafka lost while running"} {
		tick := phase * 100
		require.NoError(t, p.Publish(ctx, tickSamples(5, tick)))
		require.Eventually(t, func() bool { return sink.failed(false) >= 3 }, 30*time.Second, 10*time.Millisecond,
			"%s: writes fail while the gate is closed", name)
		g.set(true)
		sink.failed(true)
		// Each write that fails now costs a backoff of 100 ms: allow a couple (one
		// may have been under way when the gate opened), not the many that cached
		// cluster metadata (kafka-go's MetadataTTL, 30 s here) would cost.
		require.Eventually(t, func() bool { return sp.Pending() == 0 }, 30*time.Second, 10*time.Millisecond,
			"%s: the spool drains once Kafka is back", name)
		require.LessOrEqual(t, sink.failed(false), 2, "%s: writes failed after Kafka was back", name)
		g.set(false)
	}
	require.EqualValues(t, 2, lastOffsets(t, brokers[0], topic, 2), "both ticks reached Kafka")
}
