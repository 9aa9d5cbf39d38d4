package sqlite

import (
	"context"
	"database/sql"
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
	rows, err := s.db.QueryContext(ctx, `SELECT instance_id, start_ms, project, user, interval_ms, node, gpu_uuid, gpu_model, profile,
		util, processes, holder_ref FROM raw_samples WHERE instance_id = ? AND start_ms >= ? AND start_ms < ? AND project != ''`, inst, fromMS, toMS)
	if err != nil {
		return fmt.Errorf("cannot read the samples of %s: %w", inst, err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	var buf []schemas.Sample
	for rows.Next() {
		var x schemas.Sample
		var util sql.NullFloat64
		if err := rows.Scan(&x.InstanceID, &x.StartMS, &x.Project, &x.User, &x.IntervalMS, &x.Node, &x.GPUUUID, &x.GPUModel,
			&x.Profile, &util, &x.Processes, &x.HolderRef); err != nil {
			return fmt.Errorf("cannot read a sample of %s: %w", inst, err)
		}
		x.Util, x.UtilKnown = util.Float64, util.Valid
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
