package gen

import (
	"context"

	"github.com/cardhour/cardhour/schemas"
)

// SampleWriter takes samples in batches (ingest.Writer is one).
type SampleWriter interface {
	Write(ctx context.Context, samples []schemas.Sample) error
}

// Load writes the trace of cfg to w in batches of batch samples (default
// 100 000) and returns the number of samples written: how benchmarks fill a
// store with a fleet without a file in between.
func Load(ctx context.Context, w SampleWriter, cfg Config, batch int) (int64, error) {
	if batch <= 0 {
		batch = 100_000
	}
	buf := make([]schemas.Sample, 0, batch)
	n, err := Each(cfg, func(s *schemas.Sample) error {
		buf = append(buf, *s)
		if len(buf) < batch {
			return nil
		}
		err := w.Write(ctx, buf)
		buf = buf[:0]
		return err
	})
	if err != nil {
		return n, err
	}
	if len(buf) > 0 {
		err = w.Write(ctx, buf)
	}
	return n, err
}
