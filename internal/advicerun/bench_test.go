package advicerun

import (
	"context"
	"testing"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/schemas"
)

// BenchmarkAdviseFleet prices the advice for a generated fleet of 7 000
// instances over September to November 2026 (16 M samples, fed to the
// accumulators directly): the part of `cardhour advise` after the months are
// billed, without a store.
//
// (It was billing/advice's until the concurrency moved here.)
//
//	go test -run '^$' -bench AdviseFleet -benchtime 3x ./internal/advicerun
func BenchmarkAdviseFleet(b *testing.B) {
	cat, err := schemas.LoadCatalog("../../schemas/examples/catalog.yaml")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, cat.Location)
	periods := advice.Window(cat, now, 3)
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
		rep, err := Advise(context.Background(), cat, FromResults(results), advice.Options{Now: now, MinCoverage: advice.DefaultMinCoverage}, Config{})
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
