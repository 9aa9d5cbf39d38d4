package advicerun

import (
	"context"
	"testing"

	"github.com/cardhour/cardhour/billing/advice"
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
	cat, now, results := fleet(b, 7000, 16_000_000, 1)
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
