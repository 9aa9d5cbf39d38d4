package advice

import (
	"context"
	"testing"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/schemas"
)

// BenchmarkAdviseFleet prices the advice for a generated fleet of 7 000
// instances over September to November 2026 (16 M samples, fed to the
// accumulators directly): the part of `cardhour advise` after the months are
// billed, without a store.
//
//	go test -run '^$' -bench AdviseFleet -benchtime 3x ./billing/advice
func BenchmarkAdviseFleet(b *testing.B) {
	cat, err := schemas.LoadCatalog("../../schemas/examples/catalog.yaml")
	if err != nil {
		b.Fatal(err)
	}
	periods := Window(cat, now, 3)
	from, to := periods[0].StartMS(), periods[2].EndMS()
	const instances, samples = 7000, 16_000_000
	interval := (to - from) / (samples / instances) / 1000 * 1000
	accs := make([]*billing.Accumulator, len(periods))
	for i, p := range periods {
		accs[i] = billing.NewAccumulator(cat, p)
	}
	_, err = gen.Each(gen.Config{Samples: samples, StartMS: from, IntervalMS: interval, Instances: instances, Seed: 1}, func(s *schemas.Sample) error {
		for _, a := range accs {
			a.Add(s)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	results := make([]*billing.Result, len(periods))
	for i, a := range accs {
		results[i] = a.Invoices()
	}
	var bills int64
	b.ResetTimer()
	for b.Loop() {
		rep, err := Advise(context.Background(), cat, FromResults(results), Options{Now: now, MinCoverage: DefaultMinCoverage})
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Advice) == 0 {
			b.Fatal("no advice")
		}
		bills = int64(len(rep.Advice))
	}
	b.ReportMetric(float64(bills), "pairs")
}
