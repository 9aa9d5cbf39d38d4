package clickhouse

import (
	"context"
	"fmt"

	"github.com/cardhour/cardhour/schemas"
)

// SampleSpan implements ingest.SampleSource.
func (s *Store) SampleSpan(ctx context.Context) (firstMS, lastMS int64, ok bool, err error) {
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count(), min(start_ms), max(start_ms) FROM "+s.table("raw_samples")).Scan(&n, &firstMS, &lastMS); err != nil {
		return 0, 0, false, classify(fmt.Errorf("cannot read the span of the raw samples: %w", err))
	}
	return firstMS, lastMS, n > 0, nil
}

// AllSamples implements ingest.SampleSource from raw_samples FINAL.
func (s *Store) AllSamples(ctx context.Context, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	rows, err := s.conn.Query(ctx, "SELECT "+heldColumns+", mem_used_bytes, mem_total_bytes, util_source FROM "+
		s.samples(fromMS, toMS)+" WHERE start_ms >= "+itoa(fromMS)+" AND start_ms < "+itoa(toMS))
	if err != nil {
		return classify(fmt.Errorf("cannot read raw samples: %w", err))
	}
	return scanSamples(rows, true, fn)
}
