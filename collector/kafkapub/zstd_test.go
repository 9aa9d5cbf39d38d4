package kafkapub

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	kzstd "github.com/segmentio/kafka-go/compress/zstd"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"github.com/stretchr/testify/require"
)

func jsonBatch(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"schema":"cardhour.sample.v1","ts":"2026-11-30T04:33:%02d.000Z","interval_s":1,"node":"n1",`+
			`"instance_id":"MIG-%08x-9ded-55b5-a287-a51d0ef28c85","profile":"1g.10gb","project":"p%d","user":"u%d",`+
			`"util":null,"mem_used_bytes":%d,"mem_total_bytes":10334765056,"processes":%d,"util_source":"none"}`,
			i%60, i%56, i%3, i%7, 9_000_000_000+i*7919, i%3)
	}
	return b.Bytes()
}

// captureRT is the transport under leanZstd: it keeps the requests it gets.
type captureRT struct {
	mu   sync.Mutex
	reqs []kafka.Request
}

func (c *captureRT) RoundTrip(_ context.Context, _ net.Addr, req kafka.Request) (kafka.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, req)
	return &produce.Response{}, nil
}

func records(values ...[]byte) []protocol.Record {
	out := make([]protocol.Record, len(values))
	for i, v := range values {
		out[i] = protocol.Record{Offset: int64(i), Time: time.UnixMilli(1793462400000 + int64(i)), Key: protocol.NewBytes([]byte("n1")),
			Value: protocol.NewBytes(v), Headers: []protocol.Header{{Key: "schema", Value: []byte("cardhour.sample.v1")}}}
	}
	return out
}

// leanRoundTrip sends values as one produce request through leanZstd and
// returns the record set that would go on the wire.
func leanRoundTrip(t *testing.T, values ...[]byte) []byte {
	t.Helper()
	next := &captureRT{}
	lz, err := newLeanZstd(next)
	require.NoError(t, err)
	_, err = lz.RoundTrip(context.Background(), nil, &produce.Request{Acks: -1, Timeout: 1000, Topics: []produce.RequestTopic{{
		Topic: "samples", Partitions: []produce.RequestPartition{{Partition: 1,
			RecordSet: protocol.RecordSet{Records: protocol.NewRecordReader(records(values...)...)}}}}}})
	require.NoError(t, err)
	require.Len(t, next.reqs, 1)
	raw, ok := next.reqs[0].(*rawproduce.Request)
	require.True(t, ok, "sent as a raw produce request")
	require.Equal(t, int16(-1), raw.Acks)
	require.Equal(t, "samples", raw.Topics[0].Topic)
	require.EqualValues(t, 1, raw.Topics[0].Partitions[0].Partition)
	var wire bytes.Buffer
	_, err = raw.Topics[0].Partitions[0].RecordSet.WriteTo(&wire)
	require.NoError(t, err)
	return wire.Bytes()
}

// The collector's writer compresses with its own zstd encoder; the record set
// it sends is a valid zstd batch that kafka-go (any consumer) decodes, and
// kafka-go's process-wide codec table is left alone.
func TestLeanZstdBatchesDecodeWithKafkaGo(t *testing.T) {
	before := compress.Zstd.Codec()
	// Five seconds of 56 instances in two records, and a record larger than the window.
	batch := jsonBatch(280)
	values := [][]byte{batch[:len(batch)/2], batch[len(batch)/2:], []byte("{}"), jsonBatch(12_000)}
	wire := leanRoundTrip(t, values...)

	var rs protocol.RecordSet
	_, err := rs.ReadFrom(bytes.NewReader(wire)) // CRC checked, decompressed by kafka-go's own zstd codec
	require.NoError(t, err)
	require.Equal(t, compress.Zstd, rs.Attributes.Compression())
	require.EqualValues(t, 2, rs.Version)
	for i, want := range values {
		r, err := rs.Records.ReadRecord()
		require.NoError(t, err, "record %d", i)
		got, err := io.ReadAll(r.Value)
		require.NoError(t, err)
		require.Equal(t, len(want), len(got))
		require.True(t, bytes.Equal(want, got), "record %d", i)
		require.Equal(t, "cardhour.sample.v1", string(r.Headers[0].Value))
	}
	require.Less(t, len(wire), (len(batch)+len(values[3]))/10, "JSON samples compress well")

	// The frame is the lean encoder's (no content checksum; kafka-go's writer
	// adds one), and it decodes with a plain zstd decoder too.
	frame := wire[batchRecordsAt:]
	var hdr zstd.Header
	require.NoError(t, hdr.Decode(frame))
	require.False(t, hdr.HasCheckSum)
	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer dec.Close()
	_, err = dec.DecodeAll(frame, nil)
	require.NoError(t, err)

	require.Same(t, before, compress.Zstd.Codec(), "kafka-go's zstd codec is not replaced")
	_, isKafkaGo := compress.Zstd.Codec().(*kzstd.Codec)
	require.True(t, isKafkaGo, "%T", compress.Zstd.Codec())
}

// kafka-go writes partitions concurrently: they share the one encoder.
func TestLeanZstdConcurrentWriters(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				want := jsonBatch(50 + g*10 + i)
				var rs protocol.RecordSet
				_, err := rs.ReadFrom(bytes.NewReader(leanRoundTrip(t, want)))
				require.NoError(t, err)
				r, err := rs.Records.ReadRecord()
				require.NoError(t, err)
				got, err := io.ReadAll(r.Value)
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
		})
	}
	wg.Wait()
}

// Requests other than produce pass through untouched.
func TestLeanZstdPassesOtherRequests(t *testing.T) {
	next := &captureRT{}
	lz, err := newLeanZstd(next)
	require.NoError(t, err)
	req := &metadata.Request{TopicNames: []string{"samples"}}
	_, err = lz.RoundTrip(context.Background(), nil, req)
	require.NoError(t, err)
	require.Same(t, req, next.reqs[0])
}

// A sink with zstd compresses on its own writer: kafka-go's writer is told
// no compression, and its transport is leanZstd.
func TestKafkaSinkUsesLeanZstdOnItsWriterOnly(t *testing.T) {
	before := compress.Zstd.Codec()
	for _, tc := range []struct {
		compression string
		lean        bool
		codec       compress.Compression
	}{{"", true, 0}, {"zstd", true, 0}, {"lz4", false, compress.Lz4}, {"none", false, 0}} {
		k, err := NewKafkaSink(KafkaConfig{Brokers: []string{"127.0.0.1:1"}, Compression: tc.compression})
		require.NoError(t, err)
		_, lean := k.w.Transport.(*leanZstd)
		require.Equal(t, tc.lean, lean, tc.compression)
		require.Equal(t, tc.codec, k.w.Compression, tc.compression)
		require.NoError(t, k.Close())
	}
	require.Same(t, before, compress.Zstd.Codec())
}

// BenchmarkZstdBatch compresses what a collector sends every five seconds (one
// message of 56 samples a second) as one record batch: with the lean encoder
// (leanZstd, what the collector does) and with kafka-go's own zstd codec.
func BenchmarkZstdBatch(b *testing.B) {
	values := make([][]byte, 5)
	for i := range values {
		values[i] = bytes.ReplaceAll(jsonBatch(56), []byte("T04:33:"), fmt.Appendf(nil, "T04:%02d:", 34+i))
	}
	// Record values are readers, consumed by an encoding: fresh ones each time.
	b.Run("lean", func(b *testing.B) {
		lz, err := newLeanZstd(&captureRT{})
		require.NoError(b, err)
		plain, out := new([]byte), new([]byte)
		b.ReportAllocs()
		for b.Loop() {
			require.NoError(b, lz.encode(plain, out, protocol.RecordSet{Records: protocol.NewRecordReader(records(values...)...)}))
		}
		b.ReportMetric(float64(len(*out)), "wire-bytes")
	})
	b.Run("kafka-go", func(b *testing.B) {
		var w bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			w.Reset()
			rs := protocol.RecordSet{Version: 2, Attributes: protocol.Attributes(compress.Zstd), Records: protocol.NewRecordReader(records(values...)...)}
			_, err := rs.WriteTo(&w)
			require.NoError(b, err)
		}
		b.ReportMetric(float64(w.Len()), "wire-bytes")
	})
}
