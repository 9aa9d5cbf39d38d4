package ingest_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/schemas"
)

// countStore is a Store that keeps nothing and counts the rows written.
type countStore struct{ samples, runs int64 }

func (s *countStore) Write(ctx context.Context, b *ingest.Batch) error {
	s.samples += int64(len(b.Samples))
	s.runs += int64(len(b.Occupancy) + len(b.Idle))
	return ctx.Err()
}

func (s *countStore) Close() error { return nil }

// cpuNow is the CPU time (user and system) this process has used.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBackfillScale: a back-fill's writer path (Writer.Write with the
// back-fill's OpenRunsEvery, then FlushRuns: the compactor and its rows, into a
// store that only counts them) at 7 000, 70 000
// and 100 000 instances at 300 s, in batches of BACKFILL_BATCH samples (default
// 50 000, the back-fill's), BACKFILL_STEPS samples per instance (default 96:
// eight hours), so that every scale has the same share of first samples.
// The samples are generated batch by batch outside the timer. Reports CPU ns
// per sample (process CPU around the writes), run rows written per sample and
// the open runs the compactor forgot. BACKFILL_SHUFFLE=1 shuffles the samples of
// each step (of one timestamp; outside the timer): every key's samples stay in
// time order, but the keys no longer come in the same order at every step, so
// the compactor's guess of the next key fails (nearly) every time.
func BenchmarkBackfillScale(b *testing.B) {
	batch := envInt(b, "BACKFILL_BATCH", 50_000)
	steps := envInt(b, "BACKFILL_STEPS", 96)
	shuffle := envInt(b, "BACKFILL_SHUFFLE", 0) != 0
	start := billing.NewPeriod(2026, time.November, time.UTC).StartMS()
	for _, instances := range []int{7000, 70_000, 100_000} {
		b.Run(fmt.Sprintf("instances=%d", instances), func(b *testing.B) {
			var cpu time.Duration
			var n int64
			var st *countStore
			var w *ingest.Writer
			total := steps * instances
			for b.Loop() {
				b.StopTimer()
				st = &countStore{}
				var err error
				w, err = ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: quietLogger(),
					OpenRunsEvery: ingest.BackfillRunsEvery, // as Backfill writes (the line to drop for older trees)
				})
				require.NoError(b, err)
				buf := make([]schemas.Sample, 0, batch)
				rng := rand.New(rand.NewPCG(1, 2))
				flush := func() {
					for i := 0; shuffle && i < len(buf); { // the samples of one step
						j := i + 1
						for j < len(buf) && buf[j].StartMS == buf[i].StartMS {
							j++
						}
						step := buf[i:j]
						rng.Shuffle(len(step), func(a, b int) { step[a], step[b] = step[b], step[a] })
						i = j
					}
					b.StartTimer()
					c0 := cpuNow()
					require.NoError(b, w.Write(context.Background(), buf))
					cpu += cpuNow() - c0
					b.StopTimer()
					n += int64(len(buf))
					clear(buf)
					buf = buf[:0]
				}
				left := total
				_, err = gen.Each(gen.Config{Samples: int64(total) + int64(instances), StartMS: start, IntervalMS: 300_000, Instances: instances, Seed: 42},
					func(s *schemas.Sample) error {
						if left == 0 {
							return io.EOF
						}
						left--
						buf = append(buf, *s)
						if len(buf) == batch {
							flush()
						}
						return nil
					})
				require.ErrorIs(b, err, io.EOF)
				if len(buf) > 0 {
					flush()
				}
				b.StartTimer()
				c0 := cpuNow()
				require.NoError(b, w.FlushRuns(context.Background()))
				cpu += cpuNow() - c0
				b.StopTimer()
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/sample")
			b.ReportMetric(float64(st.runs)/float64(st.samples), "runrows/sample")
			b.ReportMetric(float64(w.CompactorStats().Forgotten), "forgotten")
		})
	}
}

func envInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err, name)
		return n
	}
	return def
}
