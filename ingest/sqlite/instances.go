package sqlite

import (
	"context"
	"fmt"

	"github.com/cardhour/cardhour/schemas"
)

// InstanceSamples implements reads.InstanceRows: one range of the
// primary key (instance_id, start_ms, …) per instance.
func (s *Store) InstanceSamples(ctx context.Context, instances []string, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	for _, inst := range instances {
		if err := s.instanceSamples(ctx, inst, fromMS, toMS, fn); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) instanceSamples(ctx context.Context, inst string, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT `+heldColumns+` FROM raw_samples WHERE instance_id = ? AND start_ms >= ? AND start_ms < ? AND project != ''`, inst, fromMS, toMS)
	if err != nil {
		return fmt.Errorf("cannot read the samples of %s: %w", inst, err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	var buf []schemas.Sample
	for rows.Next() {
		var x schemas.Sample
		if err := scanHeld(rows, &x); err != nil {
			return fmt.Errorf("cannot read a sample of %s: %w", inst, err)
		}
		buf = append(buf, x)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot read the samples of %s: %w", inst, err)
	}
	_ = rows.Close() // read to the end: fn may query the store
	for i := range buf {
		if err := fn(&buf[i]); err != nil {
			return err
		}
	}
	return nil
}
