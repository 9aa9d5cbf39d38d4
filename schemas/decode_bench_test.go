package schemas_test

import (
	"bytes"
	"testing"

	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/schemas"
)

// generatedLines is a trace as `cardhour generate` writes it (64 instances
// sampled in turn, sessions, idle stretches, lost samples), cut into lines.
func generatedLines(b *testing.B, n int64) ([]byte, [][]byte) {
	b.Helper()
	var buf bytes.Buffer
	if _, err := gen.Write(&buf, gen.Config{Samples: n, StartMS: 1_793_462_400_000, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	var lines [][]byte
	for rest := data; len(rest) > 0; {
		var l []byte
		l, rest = schemas.NextLine(rest)
		lines = append(lines, l)
	}
	return data, lines
}

// BenchmarkDecodeGenerated is the decoder on a generated trace (one op: one
// sample), with the repetition of a real file: instances in turn, each with
// its own node, GPU, profile, project and user, and timestamps shared by the
// samples of one tick. BenchmarkDecodeSample decodes one line over and over.
func BenchmarkDecodeGenerated(b *testing.B) {
	data, lines := generatedLines(b, 100_000)
	dec := schemas.NewDecoder()
	var s schemas.Sample
	b.SetBytes(int64(len(data) / len(lines)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := dec.Decode(lines[i], &s); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(lines) {
			i = 0
		}
	}
}

// BenchmarkReadSamples is ReadSamples over a generated trace from memory: the
// chunking and the parallel decode, without accumulation (one op: the trace).
func BenchmarkReadSamples(b *testing.B) {
	data, lines := generatedLines(b, 200_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		stats, err := schemas.ReadSamples(bytes.NewReader(data), schemas.ReadOptions{}, func(int, []schemas.Sample) error { return nil })
		if err != nil || stats.Valid != int64(len(lines)) {
			b.Fatal(err, stats.Valid)
		}
	}
	b.ReportMetric(float64(len(lines)*b.N)/b.Elapsed().Seconds(), "samples/s")
}
