package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cardhour/cardhour/schemas"
)

// SampleSpan implements ingest.SampleSource.
func (s *Store) SampleSpan(ctx context.Context) (firstMS, lastMS int64, ok bool, err error) {
	var first, last sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT min(start_ms), max(start_ms) FROM raw_samples`).Scan(&first, &last); err != nil {
		return 0, 0, false, fmt.Errorf("cannot read the span of the raw samples: %w", err)
	}
	return first.Int64, last.Int64, first.Valid, nil
}

// AllSamples implements ingest.SampleSource.
func (s *Store) AllSamples(ctx context.Context, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT `+heldColumns+`, mem_used_bytes, mem_total_bytes, util_source
		FROM raw_samples WHERE start_ms >= ? AND start_ms < ?`, fromMS, toMS)
	if err != nil {
		return fmt.Errorf("cannot read raw samples: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	for rows.Next() {
		var x schemas.Sample
		if err := scanSample(rows, &x, true); err != nil {
			return fmt.Errorf("cannot read raw sample: %w", err)
		}
		if err := fn(&x); err != nil {
			return err
		}
	}
	return rows.Err()
}
