package billing

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// Shuffling, duplicating, replaying and splitting the input across accumulators
// never changes an invoice, byte for byte.
func TestInvoicesInvariantUnderReorderDuplicationAndSplit(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	p := NewPeriod(2026, time.November, loc)
	for seed := 0; seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		cat := randomCatalog(t, rng)
		samples := randomTrace(rng, p, cat.Defaults.GapToleranceMS)

		want := render(t, billSamples(cat, p, samples))

		// Shuffled.
		shuffled := append([]schemas.Sample(nil), samples...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		require.Equal(t, want, render(t, billSamples(cat, p, shuffled)), "seed %d: shuffled", seed)

		// Every sample replayed, and a random subset three times.
		replayed := append(append([]schemas.Sample(nil), samples...), shuffled...)
		for i := range samples {
			if rng.IntN(3) == 0 {
				replayed = append(replayed, samples[i])
			}
		}
		require.Equal(t, want, render(t, billSamples(cat, p, replayed)), "seed %d: replayed", seed)

		// Split across accumulators at random and merged.
		parts := []*Accumulator{NewAccumulator(cat, p), NewAccumulator(cat, p), NewAccumulator(cat, p)}
		for i := range shuffled {
			parts[rng.IntN(len(parts))].Add(&shuffled[i])
		}
		parts[1].Merge(parts[2])
		parts[0].Merge(parts[1])
		require.Equal(t, want, render(t, parts[0].Invoices()), "seed %d: split and merged", seed)

		// Computing twice from the same accumulator gives the same bytes.
		acc := NewAccumulator(cat, p)
		for i := range samples {
			acc.Add(&samples[i])
		}
		require.Equal(t, render(t, acc.Invoices()), render(t, acc.Invoices()), "seed %d: recomputed", seed)
	}
}

// The streaming reader with several workers gives the same invoices as one
// accumulator fed in order.
func TestBillStreamMatchesSequential(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	p := NewPeriod(2026, time.November, loc)
	for seed := 0; seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		cat := randomCatalog(t, rng)
		var samples []schemas.Sample
		for len(samples) < 20_000 {
			samples = append(samples, randomTrace(rng, p, cat.Defaults.GapToleranceMS)...)
		}
		var buf bytes.Buffer
		for i := range samples {
			buf.Write(samples[i].AppendJSON(nil))
			buf.WriteByte('\n')
		}
		want := render(t, billSamples(cat, p, samples))
		for _, workers := range []int{1, 2, 5} {
			res, stats, err := BillStream(bytes.NewReader(buf.Bytes()), cat, p, schemas.ReadOptions{Workers: workers})
			require.NoError(t, err)
			require.EqualValues(t, len(samples), stats.Valid)
			require.Equal(t, want, render(t, res), fmt.Sprintf("seed %d, %d workers", seed, workers))
		}
	}
}

func billSamples(cat *schemas.Catalog, p Period, samples []schemas.Sample) *Result {
	acc := NewAccumulator(cat, p)
	for i := range samples {
		acc.Add(&samples[i])
	}
	return acc.Invoices()
}

func render(t *testing.T, r *Result) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, r))
	return buf.String()
}
