package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// The primary key of raw_samples is the sample's identity, so a replay
// replaced its row: the table itself is deduplicated.
var dialect = ingest.Dialect{Samples: "raw_samples", Zero: "0"}

// UsageRows implements reads.UsageRows with one GROUP BY.
func (s *Store) UsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) error {
	query, args := ingest.UsageSQL(dialect, q)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("cannot read usage: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	var r schemas.UsageRow
	for rows.Next() {
		if err := rows.Scan(&r.Project, &r.User, &r.InstanceID, &r.Node, &r.GPUModel, &r.Profile, &r.BucketMS, &r.HeldMS, &r.IdleMS); err != nil {
			return fmt.Errorf("cannot read usage row: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// OccupancyOf implements reads.KeyedRuns: the occupancy runs of [lo, hi] of
// the keys q selects (ingest.KeyFilter), found through the indexes on
// (project, end_ms) and (user, end_ms) when q names projects or users.
func (s *Store) OccupancyOf(ctx context.Context, q schemas.UsageRowQuery, lo, hi int64, fn func([]schemas.Run) error) error {
	query, args := occupancyOfSQL(q, lo, hi)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("cannot read occupancy: %w", err)
	}
	err = ingest.ScanChunks(rows, chunk, func(r *schemas.Run) error {
		return rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.StartMS, &r.EndMS)
	}, fn)
	if err != nil {
		return fmt.Errorf("cannot read occupancy: %w", err)
	}
	return nil
}

// IdleRunsOf implements reads.KeyedRuns: IdleRuns of the keys q selects,
// through the same indexes as OccupancyOf.
func (s *Store) IdleRunsOf(ctx context.Context, q schemas.UsageRowQuery, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error {
	query, args := idleRunsOfSQL(q, from, to, maxUtil)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("cannot read idle runs: %w", err)
	}
	err = ingest.ScanChunks(rows, chunk, func(r *schemas.IdleRun) error {
		return rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.Class, &r.MinUtil, &r.MaxUtil, &r.StartMS, &r.EndMS)
	}, fn)
	if err != nil {
		return fmt.Errorf("cannot read idle runs: %w", err)
	}
	return nil
}

func occupancyOfSQL(q schemas.UsageRowQuery, lo, hi int64) (string, []any) {
	conds, args := ingest.KeyFilter(q)
	return `SELECT project, user, instance_id, gpu_model, profile, start_ms, end_ms
		FROM occupancy WHERE end_ms >= ? AND start_ms <= ? AND ` + strings.Join(conds, " AND "), append([]any{lo, hi}, args...)
}

func idleRunsOfSQL(q schemas.UsageRowQuery, from, to int64, maxUtil float64) (string, []any) {
	conds, args := ingest.KeyFilter(q)
	return `SELECT project, user, instance_id, gpu_model, profile, class, min_util, max_util, start_ms, end_ms
		FROM idle_spans WHERE end_ms > ? AND start_ms < ? AND (class = 0 OR min_util < ?) AND ` + strings.Join(conds, " AND "),
		append([]any{from, to, maxUtil}, args...)
}

// HeldSamples implements reads.HeldRows.
func (s *Store) HeldSamples(ctx context.Context, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT `+heldColumns+` FROM raw_samples WHERE start_ms >= ? AND start_ms < ? AND project != ''`, fromMS, toMS)
	if err != nil {
		return fmt.Errorf("cannot read held samples: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	for rows.Next() {
		var x schemas.Sample
		if err := scanHeld(rows, &x); err != nil {
			return fmt.Errorf("cannot read held sample: %w", err)
		}
		if err := fn(&x); err != nil {
			return err
		}
	}
	return rows.Err()
}

// heldColumns are the raw_samples columns scanHeld reads, in its order.
const heldColumns = `instance_id, start_ms, project, user, interval_ms, node, gpu_uuid, gpu_model, profile,
		util, processes, holder_ref, share_kind, share_mem, share_cores`

// scanHeld reads a row of heldColumns into x.
func scanHeld(rows *sql.Rows, x *schemas.Sample) error { return scanSample(rows, x, false) }

// scanSample reads a row of heldColumns (whole: followed by mem_used_bytes,
// mem_total_bytes, util_source) into x.
func scanSample(rows *sql.Rows, x *schemas.Sample, whole bool) error {
	var util, mem, cores sql.NullFloat64
	dest := []any{&x.InstanceID, &x.StartMS, &x.Project, &x.User, &x.IntervalMS, &x.Node, &x.GPUUUID, &x.GPUModel,
		&x.Profile, &util, &x.Processes, &x.HolderRef, &x.ShareKind, &mem, &cores}
	if whole {
		dest = append(dest, &x.MemUsed, &x.MemTotal, &x.UtilSource)
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	x.Util, x.UtilKnown = util.Float64, util.Valid
	x.ShareMem, x.ShareCores = mem.Float64, cores.Float64
	return nil
}

// LatestSamples implements reads.LatestRows: one row per instance already.
func (s *Store) LatestSamples(ctx context.Context, fromMS int64, fn func(*schemas.Sample) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT instance_id, start_ms, interval_ms, node, gpu_uuid, gpu_model, profile, project, user,
		util, util_known, processes, holder_ref, share_kind, share_mem, share_cores FROM latest_samples WHERE start_ms >= ? AND project != ''`, fromMS)
	if err != nil {
		return fmt.Errorf("cannot read latest samples: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	for rows.Next() {
		var x schemas.Sample
		if err := rows.Scan(&x.InstanceID, &x.StartMS, &x.IntervalMS, &x.Node, &x.GPUUUID, &x.GPUModel, &x.Profile,
			&x.Project, &x.User, &x.Util, &x.UtilKnown, &x.Processes, &x.HolderRef, &x.ShareKind, &x.ShareMem, &x.ShareCores); err != nil {
			return fmt.Errorf("cannot read latest sample: %w", err)
		}
		if !x.UtilKnown {
			x.Util = 0
		}
		if err := fn(&x); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot read latest samples: %w", err)
	}
	return nil
}

// Rejects implements reads.QualityRows.
func (s *Store) Rejects(ctx context.Context, fromMS, toMS int64, first int) (int64, []schemas.RejectRow, error) {
	sum, err := s.RejectSummary(ctx, fromMS, toMS, first)
	return sum.Count, ingest.RejectRows(sum.First), err
}

// NodeBuckets implements reads.QualityRows from node_minutes (the rollup
// written with the samples); the raw samples answer only the parts of the
// range that are not whole minutes (ingest.MinuteSpan), on raw_samples_start.
func (s *Store) NodeBuckets(ctx context.Context, fromMS, toMS, bucketMS int64, fn func(schemas.NodeBucketRow) error) error {
	const raw = `SELECT node, start_ms - start_ms % ? AS b FROM raw_samples WHERE start_ms >= ? AND start_ms < ? GROUP BY node, b`
	lo, hi, ok := ingest.MinuteSpan(fromMS, toMS, bucketMS)
	if !ok {
		return s.nodeBuckets(ctx, raw, bucketMS, fromMS, toMS, fn)
	}
	if err := s.nodeBuckets(ctx, raw, bucketMS, fromMS, lo, fn); err != nil {
		return err
	}
	// Minutes are the primary key: one row each, read in its order (a
	// GROUP BY would sort them again); longer buckets come once per minute.
	if err := s.nodeBuckets(ctx, `SELECT node, minute_ms - minute_ms % ? FROM node_minutes
		WHERE minute_ms >= ? AND minute_ms < ?`, bucketMS, lo, hi, fn); err != nil {
		return err
	}
	return s.nodeBuckets(ctx, raw, bucketMS, hi, toMS, fn)
}

// nodeBuckets runs one query of (node, bucket) rows over [fromMS, toMS).
func (s *Store) nodeBuckets(ctx context.Context, query string, bucketMS, fromMS, toMS int64, fn func(schemas.NodeBucketRow) error) error {
	if fromMS >= toMS {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, query, bucketMS, fromMS, toMS)
	if err != nil {
		return fmt.Errorf("cannot read node activity: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	for rows.Next() {
		var r schemas.NodeBucketRow
		if err := rows.Scan(&r.Node, &r.BucketMS); err != nil {
			return fmt.Errorf("cannot read node activity: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// NodeLatest implements reads.NodeLatestRows from node_minutes, the raw
// samples answering only the parts of the range that are not whole minutes
// (ingest.MinuteSpan), as NodeBuckets does: one row per node and part.
func (s *Store) NodeLatest(ctx context.Context, fromMS, toMS int64, fn func(schemas.NodeBucketRow) error) error {
	const raw = `SELECT node, max(start_ms) FROM raw_samples WHERE start_ms >= ? AND start_ms < ? GROUP BY node`
	newest := map[string]int64{}
	read := func(query string, from, to int64) error {
		if from >= to {
			return nil
		}
		rows, err := s.db.QueryContext(ctx, query, from, to)
		if err != nil {
			return fmt.Errorf("cannot read node activity: %w", err)
		}
		defer rows.Close() //nolint:errcheck // errors surface on Next/Err
		for rows.Next() {
			var node string
			var ms int64
			if err := rows.Scan(&node, &ms); err != nil {
				return fmt.Errorf("cannot read node activity: %w", err)
			}
			if b, ok := newest[node]; !ok || ingest.MinuteOf(ms) > b {
				newest[node] = ingest.MinuteOf(ms)
			}
		}
		return rows.Err()
	}
	lo, hi, ok := ingest.MinuteSpan(fromMS, toMS, ingest.ActivityMinuteMS)
	if !ok {
		lo, hi = toMS, toMS
	}
	for _, part := range []struct {
		query    string
		from, to int64
	}{
		{raw, hi, toMS},
		{`SELECT node, max(minute_ms) FROM node_minutes WHERE minute_ms >= ? AND minute_ms < ? GROUP BY node`, lo, hi},
		{raw, fromMS, lo},
	} {
		if err := read(part.query, part.from, part.to); err != nil {
			return err
		}
	}
	for node, b := range newest {
		if err := fn(schemas.NodeBucketRow{Node: node, BucketMS: b}); err != nil {
			return err
		}
	}
	return nil
}

// Unattributed implements reads.QualityRows from unheld_busy (the rollup
// written with the samples); a threshold of 0, which calls every unheld
// sample of known util busy, from raw_samples.
func (s *Store) Unattributed(ctx context.Context, fromMS, toMS int64, minUtil float64, fn func(schemas.UnattributedUsage) error) error {
	query := `SELECT node, instance_id, sum(interval_ms) FROM unheld_busy
		WHERE start_ms >= ? AND start_ms < ? AND (processes > 0 OR (util IS NOT NULL AND util >= ?))
		GROUP BY node, instance_id`
	if minUtil <= 0 {
		query = `SELECT node, instance_id, sum(interval_ms) FROM raw_samples
		WHERE start_ms >= ? AND start_ms < ? AND project = '' AND (processes > 0 OR (util IS NOT NULL AND util >= ?))
		GROUP BY node, instance_id`
	}
	rows, err := s.db.QueryContext(ctx, query, fromMS, toMS, minUtil)
	if err != nil {
		return fmt.Errorf("cannot read unattributed usage: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	for rows.Next() {
		var u schemas.UnattributedUsage
		if err := rows.Scan(&u.Node, &u.InstanceID, &u.Seconds); err != nil {
			return fmt.Errorf("cannot read unattributed usage: %w", err)
		}
		if err := fn(u); err != nil {
			return err
		}
	}
	return rows.Err()
}
