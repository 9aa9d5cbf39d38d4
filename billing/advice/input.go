package advice

import (
	"io"
	"runtime"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// BillSamples bills every month of periods from one pass over a stream of
// JSON Lines samples: one accumulator per month and decoding goroutine,
// merged at the end, as billing.BillStream does for one month.
func BillSamples(r io.Reader, cat *schemas.Catalog, periods []billing.Period, opt schemas.ReadOptions) ([]*billing.Result, schemas.ReadStats, error) {
	if opt.Workers <= 0 {
		opt.Workers = max(1, runtime.GOMAXPROCS(0))
	}
	accs := make([][]*billing.Accumulator, opt.Workers)
	for w := range accs {
		accs[w] = make([]*billing.Accumulator, len(periods))
		for i, p := range periods {
			accs[w][i] = billing.NewAccumulator(cat, p)
		}
	}
	stats, err := schemas.ReadSamples(r, opt, func(w int, samples []schemas.Sample) error {
		for i := range samples {
			for _, acc := range accs[w] {
				acc.Add(&samples[i])
			}
		}
		return nil
	})
	if err != nil {
		return nil, stats, err
	}
	out := make([]*billing.Result, len(periods))
	for i := range periods {
		for w := 1; w < len(accs); w++ {
			accs[0][i].Merge(accs[w][i])
		}
		out[i] = accs[0][i].Invoices()
	}
	return out, stats, nil
}
