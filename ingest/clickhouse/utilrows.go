package clickhouse

import (
	"context"
	"fmt"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// UtilRows implements reads.UtilRows with one GROUP BY over raw_samples
// FINAL (held and unheld alike), the ts range pruning partitions.
func (s *Store) UtilRows(ctx context.Context, q schemas.UtilRowQuery, fn func(schemas.UtilRow) error) error {
	d := ingest.Dialect{Samples: s.samples(q.FromMS, q.ToMS), Zero: "toInt64(0)", UtilOrZero: "ifNull(util, toFloat64(0))"}
	rows, err := s.conn.Query(ctx, ingest.UtilSQL(d, q))
	if err != nil {
		return classify(fmt.Errorf("cannot read utilisation: %w", err))
	}
	defer func() { _ = rows.Close() }()
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
