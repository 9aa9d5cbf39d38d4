package billing

import (
	"io"
	"runtime"

	"github.com/cardhour/cardhour/schemas"
)

// BillStream bills a period from a stream of JSON Lines samples. It decodes in
// parallel, one Accumulator per worker, and merges them: union is associative and
// commutative, so the split cannot change the result. Memory grows with the
// number of sessions, not of samples.
func BillStream(r io.Reader, cat *schemas.Catalog, p Period, opt schemas.ReadOptions) (*Result, schemas.ReadStats, error) {
	workers := opt.Workers
	if workers <= 0 {
		workers = defaultWorkers()
	}
	opt.Workers = workers
	accs := make([]*Accumulator, workers)
	for i := range accs {
		accs[i] = NewAccumulator(cat, p)
	}
	stats, err := schemas.ReadSamples(r, opt, func(w int, samples []schemas.Sample) error {
		acc := accs[w]
		for i := range samples {
			acc.Add(&samples[i])
		}
		return nil
	})
	if err != nil {
		return nil, stats, err
	}
	for _, a := range accs[1:] {
		accs[0].Merge(a)
	}
	return accs[0].Invoices(), stats, nil
}

func defaultWorkers() int { return max(1, runtime.GOMAXPROCS(0)) }
