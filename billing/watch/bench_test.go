package watch

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/cardhour/cardhour/billing/ledger"
	"github.com/cardhour/cardhour/billing/ledger/ledgertest"
	"github.com/cardhour/cardhour/billing/ledger/sqlite"
	"github.com/cardhour/cardhour/ingest"
	ingestsqlite "github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/schemas"
)

// BenchmarkCycle is one watch cycle over held instances (samples every
// 300 s for the last 2 hours, every other instance idle for the last 70
// minutes) and student budgets, on an SQLite ledger, after a first cycle
// that recorded what was due (first_cycle_s): the steady state, where
// nothing new is decided, is what every interval costs.
//
//	go test -run '^$' -bench Cycle -benchtime=1x ./billing/watch/
func BenchmarkCycle(b *testing.B) {
	for _, c := range []struct {
		store              string
		instances, budgets int
	}{{"mem", 1000, 500}, {"mem", 7000, 5000}, {"sqlite", 7000, 0}, {"sqlite", 7000, 5000}} {
		b.Run(fmt.Sprintf("%s/held=%d/budgets=%d", c.store, c.instances, c.budgets), func(b *testing.B) {
			benchCycle(b, c.store, c.instances, c.budgets)
		})
	}
}

func benchCycle(b *testing.B, store string, instances, budgets int) {
	ctx := context.Background()
	cat, err := schemas.ParseCatalog([]byte(testCatalog), "catalog")
	if err != nil {
		b.Fatal(err)
	}
	now := at("12:00")
	var ss []schemas.Sample
	for i := range instances {
		for t := now.Add(-2 * time.Hour); t.Before(now); t = t.Add(5 * time.Minute) {
			util := 0.8
			if i%2 == 0 && !t.Before(now.Add(-70*time.Minute)) {
				util = 0
			}
			ss = append(ss, schemas.Sample{StartMS: t.UnixMilli(), IntervalMS: 300_000, Node: fmt.Sprintf("node-%d", i/8),
				GPUUUID: fmt.Sprintf("GPU-%d", i/8), GPUModel: "A100", InstanceID: fmt.Sprintf("mig-%d", i), Profile: "1g.10gb",
				Project: fmt.Sprintf("p%d", i%50), User: fmt.Sprintf("s%d", i%5000), Util: util, UtilKnown: true, Processes: 1})
		}
	}
	batch := ingest.NewCompactor(0).Build(ss)
	var usage Usage
	switch store {
	case "mem":
		m := ingest.NewMemStore()
		if err := m.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
		usage = m
	default:
		st, err := ingestsqlite.Open(ctx, ingestsqlite.Config{Path: filepath.Join(b.TempDir(), "usage.db"), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		if err := st.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
		usage = st
	}
	clock := ledgertest.NewClock(now)
	led, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "ledger.db"), Clock: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = led.Close() })
	for i := range budgets {
		if _, err := led.PutBudget(ctx, "bench", ledger.Budget{Scope: ledger.BudgetStudent, Project: fmt.Sprintf("p%d", i%50),
			User: fmt.Sprintf("s%d", i), Period: ledger.BudgetMonth, Unit: ledger.BudgetMoney, Limit: "1000"}); err != nil {
			b.Fatal(err)
		}
	}
	w, err := New(Config{Ledger: led, Usage: usage, Catalog: func(context.Context) (*schemas.Catalog, error) { return cat, nil },
		Notifier: &fakeNotifier{}, Releaser: &fakeReleaser{}, Admins: []Person{{Email: "ops@example.edu"}}, MaxReleasesPerCycle: instances})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	rep, err := w.Cycle(ctx, now)
	if err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	b.ResetTimer()
	for range b.N {
		if rep, err = w.Cycle(ctx, now); err != nil {
			b.Fatal(err)
		}
		if rep.Alerts != 0 || rep.Releases != 0 {
			b.Fatalf("a steady cycle decided something new: %+v", rep)
		}
	}
	b.ReportMetric(first.Seconds(), "first_cycle_s")
	b.ReportMetric(float64(rep.Held), "held")
	b.ReportMetric(float64(rep.Budgets), "budgets")
}
