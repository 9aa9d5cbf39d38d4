package ingest_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

// A back-fill decodes with several workers by default, and the store gets
// what one worker gives: the raw samples in file order, and the same
// occupancy and idle runs (the compactor sees the same stream).
func TestBackfillParallelKeepsFileOrder(t *testing.T) {
	data := storetest.Trace(t, 20_000, 3) // about 7 MB: several chunks for each worker
	want := storetest.Samples(t, data)
	run := func(workers int) *ingest.MemStore {
		store := ingest.NewMemStore()
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger()})
		require.NoError(t, err)
		stats, err := ingest.Backfill(context.Background(), bytes.NewReader(data), ingest.FileConfig{Writer: w, BatchSize: 700, Workers: workers})
		require.NoError(t, err)
		require.EqualValues(t, len(want), stats.Valid)
		return store
	}
	sameOrder := func(got []schemas.Sample, workers int) {
		t.Helper()
		require.Len(t, got, len(want))
		for i := range want {
			if got[i] != want[i] { // not require.Equal: its diff of 20 000 samples takes minutes
				t.Fatalf("workers %d: stored sample %d is %+v, line %d of the file is %+v", workers, i, got[i], i+1, want[i])
			}
		}
	}
	one := run(1)
	sameOrder(one.Samples(), 1)
	for _, workers := range []int{0, 4} { // 0: GOMAXPROCS
		many := run(workers)
		sameOrder(many.Samples(), workers)
		s1, o1, i1, _ := one.Counts()
		s2, o2, i2, _ := many.Counts()
		require.Equal(t, [3]int{s1, o1, i1}, [3]int{s2, o2, i2}, "workers %d: samples, occupancy and idle runs", workers)
	}
}
