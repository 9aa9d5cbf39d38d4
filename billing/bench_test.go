package billing

import (
	"bytes"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/schemas"
)

func benchTrace(b *testing.B, n int64) ([]byte, *schemas.Catalog, Period) {
	b.Helper()
	cat, err := schemas.LoadCatalog("../schemas/examples/catalog.yaml")
	if err != nil {
		b.Fatal(err)
	}
	p := NewPeriod(2026, time.November, cat.Location)
	var buf bytes.Buffer
	if _, err := gen.Write(&buf, gen.Config{Samples: n, StartMS: p.StartMS(), Seed: 1}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes(), cat, p
}

// BenchmarkBillStream is `cardhour bill` minus the file system: decode, accumulate
// and invoice 200 000 samples from memory.
func BenchmarkBillStream(b *testing.B) {
	data, cat, p := benchTrace(b, 200_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := BillStream(bytes.NewReader(data), cat, p, schemas.ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(200_000*b.N)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkAccumulatorAdd is the per-sample cost of the engine alone.
func BenchmarkAccumulatorAdd(b *testing.B) {
	data, cat, p := benchTrace(b, 100_000)
	var samples []schemas.Sample
	if _, err := schemas.ReadSamples(bytes.NewReader(data), schemas.ReadOptions{Workers: 1}, func(_ int, s []schemas.Sample) error {
		samples = append(samples, s...)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		acc := NewAccumulator(cat, p)
		for j := range samples {
			acc.Add(&samples[j])
		}
	}
	b.ReportMetric(float64(len(samples)*b.N)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkInvoices is the month close after accumulation.
func BenchmarkInvoices(b *testing.B) {
	data, cat, p := benchTrace(b, 200_000)
	acc := NewAccumulator(cat, p)
	if _, err := schemas.ReadSamples(bytes.NewReader(data), schemas.ReadOptions{Workers: 1}, func(_ int, s []schemas.Sample) error {
		for i := range s {
			acc.Add(&s[i])
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		acc.Invoices()
	}
}
