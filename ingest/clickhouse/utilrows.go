package clickhouse

import (
	"context"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// UtilRows implements reads.UtilRows: the whole UTC hours of the range whose
// hourly sums are fresh from util_hours (see utilhours.go), the rest with a
// GROUP BY over raw_samples FINAL (held and unheld alike), the ts range
// pruning partitions; one query, grouped as q asks.
func (s *Store) UtilRows(ctx context.Context, q schemas.UtilRowQuery, fn func(schemas.UtilRow) error) error {
	p, ok, err := s.planUtil(ctx, q)
	if err != nil {
		return err
	}
	if !ok {
		d := ingest.Dialect{Samples: s.samples(q.FromMS, q.ToMS), Zero: "toInt64(0)", UtilOrZero: "ifNull(util, toFloat64(0))"}
		return s.scanUtil(ctx, ingest.UtilSQL(d, q), fn)
	}
	query := p.sql(s, q, nil)
	if query == "" {
		return nil
	}
	return s.scanUtil(ctx, query, fn)
}
