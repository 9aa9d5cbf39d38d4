package kafkapub_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cardhour/cardhour/collector/kafkapub"
	"github.com/cardhour/cardhour/collector/spool"
	"github.com/cardhour/cardhour/schemas"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// kafka-go's transport keeps idle connections and a metadata goroutine
		// around briefly after Close.
		goleak.IgnoreTopFunction("github.com/segmentio/kafka-go.(*conn).run"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreAnyFunction("github.com/segmentio/kafka-go.(*connPool).discover"),
		goleak.IgnoreAnyFunction("github.com/segmentio/kafka-go.(*Writer).produce"),
	)
}

func sample(inst, tick int) schemas.Sample {
	return schemas.Sample{StartMS: 1793462400000 + int64(tick)*1000, IntervalMS: 1000, Node: "n1",
		GPUUUID: "GPU-1", GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: fmt.Sprintf("MIG-%03d", inst),
		Profile: "1g.10gb", Project: "nlp-lab", User: "u", MemTotal: 10 << 30, UtilSource: "none"}
}

// decodeMessage decodes every line of a message value; each must be a sample.
func decodeMessage(t testing.TB, dec *schemas.Decoder, value []byte) []schemas.Sample {
	t.Helper()
	var out []schemas.Sample
	for rest := value; len(rest) > 0; {
		var line []byte
		line, rest = schemas.NextLine(rest)
		var s schemas.Sample
		require.NoError(t, dec.Decode(line, &s), "%q", line)
		out = append(out, s)
	}
	require.NotEmpty(t, out)
	return out
}

func tickSamples(n, tick int) []schemas.Sample {
	out := make([]schemas.Sample, n)
	for i := range out {
		out[i] = sample(i, tick)
	}
	return out
}

func TestOutageSpoolsThenReplaysInOrder(t *testing.T) {
	sp, err := spool.Open(spool.Config{Dir: t.TempDir(), MaxBytes: 64 << 20})
	require.NoError(t, err)
	defer sp.Close()
	sink := &kafkapub.MemorySink{}
	p, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink, BatchRecords: 50, BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()

	for tick := 0; tick < 300; tick++ {
		switch tick {
		case 100:
			sink.SetFail(errors.New("broker down"))
		case 200:
			require.Positive(t, sp.Pending(), "samples wait in the spool during the outage")
			sink.SetFail(nil)
		}
		require.NoError(t, p.Publish(ctx, tickSamples(5, tick)))
		time.Sleep(100 * time.Microsecond)
	}
	require.Eventually(t, func() bool { return sp.Pending() == 0 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	<-done

	dec := schemas.NewDecoder()
	last := map[string]int64{}
	count := map[string]int{}
	for _, r := range sink.Records() {
		for _, s := range decodeMessage(t, dec, r.Value) {
			require.Equal(t, s.Node, string(r.Key), "keyed by node")
			require.Greater(t, s.StartMS, last[s.InstanceID], "in order per instance, no duplicates with a fake sink")
			last[s.InstanceID] = s.StartMS
			count[s.InstanceID]++
		}
	}
	require.Len(t, count, 5)
	for id, n := range count {
		require.Equal(t, 300, n, id)
	}
}

func TestConfigValidate(t *testing.T) {
	_, err := kafkapub.New(kafkapub.Config{})
	require.ErrorContains(t, err, "spool is required")
	require.ErrorContains(t, err, "sink is required")
	kc := kafkapub.KafkaConfig{Compression: "brotli", SASLMechanism: "kerberos", TLSCertFile: "x"}
	err = kc.Validate()
	require.ErrorContains(t, err, "at least one broker")
	require.ErrorContains(t, err, "compression")
	require.ErrorContains(t, err, "SASL mechanism")
	require.ErrorContains(t, err, "certificate and key")
}

// With Linger, a trickle of samples is written in few, larger batches, and
// nothing is left behind.
func TestLingerBatchesTheTrickle(t *testing.T) {
	sp, err := spool.Open(spool.Config{Dir: t.TempDir(), MaxBytes: 64 << 20})
	require.NoError(t, err)
	defer sp.Close()
	sink := &kafkapub.MemorySink{}
	p, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink, Linger: 300 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()

	for tick := 0; tick < 20; tick++ {
		require.NoError(t, p.Publish(ctx, tickSamples(3, tick)))
		time.Sleep(20 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return sp.Pending() == 0 }, 10*time.Second, 5*time.Millisecond)
	require.Len(t, sink.Records(), 20, "one message per node and tick")
	n := 0
	for _, r := range sink.Records() {
		n += len(decodeMessage(t, schemas.NewDecoder(), r.Value))
	}
	require.Equal(t, 60, n)
	require.Less(t, sink.Writes(), 20, "fewer writes than ticks")
	cancel()
	<-done
}

// Cancelling does not wait out a linger.
func TestLingerEndsOnCancel(t *testing.T) {
	sp, err := spool.Open(spool.Config{Dir: t.TempDir(), MaxBytes: 64 << 20})
	require.NoError(t, err)
	defer sp.Close()
	sink := &kafkapub.MemorySink{}
	p, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink, Linger: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	require.NoError(t, p.Publish(ctx, tickSamples(3, 0)))
	require.Eventually(t, func() bool { return sp.Pending() == 0 }, 10*time.Second, 5*time.Millisecond)
	cancel() // the publisher is now lingering for an hour
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept lingering after cancel")
	}
}
