package sqlite

import (
	"context"
	"fmt"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// UtilRows implements reads.UtilRows with one GROUP BY over raw_samples
// (held and unheld alike), on raw_samples_start.
func (s *Store) UtilRows(ctx context.Context, q schemas.UtilRowQuery, fn func(schemas.UtilRow) error) error {
	rows, err := s.db.QueryContext(ctx, ingest.UtilSQL(dialect, q))
	if err != nil {
		return fmt.Errorf("cannot read utilisation: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	for rows.Next() {
		var r schemas.UtilRow
		if err := rows.Scan(&r.Node, &r.GPUModel, &r.BucketMS, &r.SeenMS, &r.HeldMS, &r.MeasuredMS, &r.HeldUnmeasuredMS, &r.UtilMS); err != nil {
			return fmt.Errorf("cannot read utilisation row: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}
