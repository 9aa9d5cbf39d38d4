package kafkapub

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go/compress"
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

func roundTrip(t *testing.T, codec compress.Codec, in []byte, chunk int) []byte {
	t.Helper()
	var z bytes.Buffer
	w := codec.NewWriter(&z)
	for p := in; len(p) > 0; {
		n := min(chunk, len(p))
		_, err := w.Write(p[:n])
		require.NoError(t, err)
		p = p[n:]
	}
	require.NoError(t, w.Close())
	r := codec.NewReader(&z)
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, len(in), len(out))
	require.True(t, bytes.Equal(in, out))
	return z.Bytes()
}

func TestLeanZstdRoundTrip(t *testing.T) {
	require.NoError(t, installZstd())
	codec := compress.Zstd.Codec()
	require.IsType(t, &leanZstd{}, codec)
	require.Equal(t, int8(4), codec.Code())
	require.Equal(t, "zstd", codec.Name())

	batch := jsonBatch(280) // five seconds of 56 instances
	z := roundTrip(t, codec, batch, 333)
	require.Less(t, len(z), len(batch)/10, "JSON samples compress well")
	roundTrip(t, codec, nil, 1)
	roundTrip(t, codec, jsonBatch(12_000), 64<<10) // a replay batch, larger than the window

	// kafka-go writes partitions concurrently: they share the one encoder.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				roundTrip(t, codec, jsonBatch(50+g*10+i), 100)
			}
		})
	}
	wg.Wait()

	// Frames written by kafka-go's own zstd writer still decode.
	var z2 bytes.Buffer
	w := compress.ZstdCodec.NewWriter(&z2)
	_, err := w.Write(batch)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	r := codec.NewReader(&z2)
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, batch, out)
}

func TestLeanZstdWriterAfterClose(t *testing.T) {
	require.NoError(t, installZstd())
	w := compress.Zstd.Codec().NewWriter(io.Discard)
	require.NoError(t, w.Close())
	require.NoError(t, w.Close())
	_, err := w.Write([]byte("x"))
	require.ErrorIs(t, err, io.ErrClosedPipe)
}
