// Package advicerun gives the reservation advice of billing/advice over a
// usage source: the window's months billed at once, the project and SKU pairs
// priced on several workers, with progress lines and timings. billing/advice
// stays pure (no clock, no goroutines); the concurrency and the clock live
// here, for the advise command, the API's advice route and the benchmarks.
package advicerun

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/schemas"
)

// Biller bills one month: the engine's invoices, with every session of usage
// (billing.Result.Invoices[].Sessions). reads.Biller is one over a store.
type Biller func(ctx context.Context, p billing.Period) (*billing.Result, error)

// FromResults is a Biller over months already billed (advice.BillSamples).
func FromResults(rs []*billing.Result) Biller {
	return func(_ context.Context, p billing.Period) (*billing.Result, error) {
		for _, r := range rs {
			if r.Period.Year == p.Year && r.Period.Month == p.Month {
				return r, nil
			}
		}
		return nil, fmt.Errorf("no bill of %s", p)
	}
}

// Config says how the advice is run.
type Config struct {
	// Workers bills that many months and prices that many pairs at once;
	// 0: one per CPU.
	Workers int
	// Progress, when set, receives a line about each step of a long run.
	Progress func(msg string)
}

func (c *Config) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

// Advise bills the window's months with bill and advises every project (or
// opt.Project) of the catalog and of the usage; opt.Now zero is now.
func Advise(ctx context.Context, cat *schemas.Catalog, bill Biller, opt advice.Options, cfg Config) (*advice.Report, error) {
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = max(1, runtime.GOMAXPROCS(0))
	}
	plan, err := advice.NewPlan(cat, opt)
	if err != nil {
		return nil, err
	}
	results, err := billMonths(ctx, plan.Periods(), bill, &cfg)
	if err != nil {
		return nil, err
	}
	pairs, err := plan.Pairs(results)
	if err != nil {
		return nil, err
	}
	cfg.progress("pricing %d project and SKU pairs with the billing engine", pairs.Len())
	t0 := time.Now()
	out, bills, err := price(ctx, pairs, cfg.Workers)
	if err != nil {
		return nil, err
	}
	cfg.progress("priced %d pairs in %v (%d bills of one month by the engine)", pairs.Len(), time.Since(t0).Round(time.Millisecond), bills)
	return pairs.Report(out), nil
}

// billMonths bills the months at once (a store answers each on its own), at
// most cfg.Workers at a time.
func billMonths(ctx context.Context, periods []billing.Period, bill Biller, cfg *Config) ([]*billing.Result, error) {
	results := make([]*billing.Result, len(periods))
	errs := make([]error, len(periods))
	var wg sync.WaitGroup
	sem := make(chan struct{}, cfg.Workers)
	for i, p := range periods {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			t0 := time.Now()
			res, err := bill(ctx, p)
			if err != nil {
				errs[i] = fmt.Errorf("cannot bill %s: %w", p, err)
				return
			}
			results[i] = res
			cfg.progress("billed %s (%d invoices) in %v", p, len(res.Invoices), time.Since(t0).Round(time.Millisecond))
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// price prices the pairs on workers goroutines; bills is the engine's
// one-month bills in all.
func price(ctx context.Context, pairs *advice.Pairs, workers int) ([]advice.SKUAdvice, int, error) {
	out := make([]advice.SKUAdvice, pairs.Len())
	bills := make([]int, pairs.Len())
	errs := make([]error, pairs.Len())
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					errs[i] = ctx.Err()
					continue
				}
				out[i], bills[i], errs[i] = pairs.Price(i)
			}
		})
	}
	for i := range out {
		next <- i
	}
	close(next)
	wg.Wait()
	total := 0
	for _, n := range bills {
		total += n
	}
	return out, total, errors.Join(errs...)
}
