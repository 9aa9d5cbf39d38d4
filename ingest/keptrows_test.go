package ingest_test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

// keptRows reads back every run the store holds and collapses them as the
// stores do (collapsed): what a store keeps of the rows written.
func keptRows(t *testing.T, st *ingest.MemStore) collapsed {
	t.Helper()
	ctx := context.Background()
	var b ingest.Batch
	require.NoError(t, st.Occupancy(ctx, math.MinInt64, math.MaxInt64, func(rs []schemas.Run) error {
		b.Occupancy = append(b.Occupancy, rs...)
		return nil
	}))
	require.NoError(t, st.IdleRuns(ctx, math.MinInt64, math.MaxInt64, 2, func(rs []schemas.IdleRun) error {
		b.Idle = append(b.Idle, rs...)
		return nil
	}))
	var c collapsed
	c.add(&b)
	return c
}

// writeSplit writes samples, in their order, through a fresh writer into a
// fresh MemStore in random batches (sizes from 1 to most, the whole trace in
// one when most is 0), each written whole (Writer.Write) or, when streamed,
// in pieces of a random size with the runs flushed after the batch (the Kafka
// worker's path).
func writeSplit(t *testing.T, samples []schemas.Sample, rng *rand.Rand, most int, streamed bool) (*ingest.MemStore, int) {
	t.Helper()
	ctx := context.Background()
	st := ingest.NewMemStore()
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: quietLogger()})
	require.NoError(t, err)
	batches := 0
	for i := 0; i < len(samples); batches++ {
		n := len(samples)
		if most > 0 {
			n = 1 + rng.IntN(most)
		}
		batch := samples[i:min(i+n, len(samples))]
		i += len(batch)
		if !streamed {
			require.NoError(t, w.Write(ctx, batch))
			continue
		}
		piece := 1 + rng.IntN(len(batch))
		s := w.BeginStream(ctx, 0)
		for j := 0; j < len(batch); j += piece {
			require.NoError(t, s.Write(ctx, batch[j:min(j+piece, len(batch))]))
		}
		require.NoError(t, s.Close())
		require.NoError(t, w.FlushRuns(ctx))
	}
	require.Zero(t, w.CompactorStats().Forgotten)
	return st, batches
}

// The rows a store keeps (occupancy per key and start, idle runs per key,
// class, start and utilisation range, each with its longest end) do not
// depend on how the same samples were cut into batches: whole, in batches of
// one sample, of random sizes, written whole or streamed. The trace has late
// and duplicated samples, class switches, and crosses a UTC month.
func TestKeptRowsDoNotDependOnBatches(t *testing.T) {
	data := storetest.Trace(t, 20_000, 29)
	samples := storetest.Samples(t, data)
	rng := rand.New(rand.NewPCG(7, 8))
	ref, _ := writeSplit(t, samples, rng, 0, false)
	want := keptRows(t, ref)
	require.NotEmpty(t, want.occ)
	require.NotEmpty(t, want.idle)
	classes := map[uint8]bool{}
	for k := range want.idle {
		classes[k.class] = true
	}
	require.GreaterOrEqual(t, len(classes), 3, "the trace has idle runs of several classes")
	for _, split := range []struct {
		most     int
		streamed bool
	}{{1, false}, {7, true}, {300, false}, {300, true}, {5000, false}, {5000, true}, {20, false}} {
		st, batches := writeSplit(t, samples, rng, split.most, split.streamed)
		got := keptRows(t, st)
		_, occ, idle, _ := st.Counts()
		t.Logf("batches of 1..%d (streamed %v): %d batches, rows written %d + %d, kept %d + %d",
			split.most, split.streamed, batches, occ, idle, len(got.occ), len(got.idle))
		require.Equal(t, want.occ, got.occ, "occupancy rows kept, batches of 1..%d", split.most)
		require.Equal(t, want.idle, got.idle, "idle rows kept, batches of 1..%d", split.most)
	}
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), ref)
}

// A back-fill writes its open runs every ingest.BackfillRunsEvery samples per
// key and at its end, not after every batch: the rows it writes, not only
// those kept, are the same whatever its batch size, far fewer than with a run
// written after every batch, and it bills like the file.
func TestBackfillRowsWrittenDoNotDependOnBatchSize(t *testing.T) {
	data := storetest.Trace(t, 30_000, 37)
	rows := func(batch int) (int, *ingest.MemStore) {
		st := ingest.NewMemStore()
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: quietLogger()})
		require.NoError(t, err)
		_, err = ingest.Backfill(context.Background(), bytes.NewReader(data), ingest.FileConfig{Writer: w, BatchSize: batch})
		require.NoError(t, err)
		_, occ, idle, _ := st.Counts()
		return occ + idle, st
	}
	want, st := rows(50_000)
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
	for _, batch := range []int{1, 300, 4000} {
		got, st := rows(batch)
		t.Logf("batch %d: %d run rows written", batch, got)
		require.Equal(t, want, got, "rows written in batches of %d", batch)
		require.Equal(t, keptRows(t, st), func() collapsed { _, s := rows(50_000); return keptRows(t, s) }())
	}
	// The same samples through Writer.Write, which covers every batch.
	samples := storetest.Samples(t, data)
	st2, _ := writeSplit(t, samples, rand.New(rand.NewPCG(1, 1)), 300, false)
	_, occ, idle, _ := st2.Counts()
	t.Logf("back-fill: %d run rows written; Writer.Write in batches of 1..300: %d", want, occ+idle)
	require.Less(t, want*3, occ+idle)
}
