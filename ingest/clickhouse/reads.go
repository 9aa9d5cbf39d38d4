package clickhouse

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// samples is the FROM expression of raw samples in [fromMS, toMS), one row
// per identity: FINAL collapses replays that no merge has collapsed yet, and
// the ts range prunes partitions.
func (s *Store) samples(fromMS, toMS int64) string {
	return "(SELECT * FROM " + s.table("raw_samples") + " FINAL WHERE ts >= toDateTime(" + itoa(max(fromMS/1000, 0)) +
		") AND ts < toDateTime(" + itoa(toMS/1000+1) + "))"
}

// UsageRows implements reads.UsageRows with one GROUP BY.
func (s *Store) UsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) error {
	query, args := ingest.UsageSQL(ingest.Dialect{Samples: s.samples(q.FromMS, q.ToMS), Zero: "toInt64(0)"}, q)
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return classify(fmt.Errorf("cannot read usage: %w", err))
	}
	defer func() { _ = rows.Close() }()
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

// HeldSamples implements reads.HeldRows.
func (s *Store) HeldSamples(ctx context.Context, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	rows, err := s.conn.Query(ctx, "SELECT "+heldColumns+" FROM "+
		s.samples(fromMS, toMS)+" WHERE start_ms >= "+itoa(fromMS)+" AND start_ms < "+itoa(toMS)+" AND project != ''")
	if err != nil {
		return classify(fmt.Errorf("cannot read held samples: %w", err))
	}
	return scanHeld(rows, fn)
}

// heldColumns are the columns scanHeld reads, in its order.
const heldColumns = "instance_id, start_ms, project, user, interval_ms, node, gpu_uuid, gpu_model, profile, util, processes, holder_ref, share_kind, share_mem, share_cores"

// scanHeld hands each row of heldColumns to fn as a sample, and closes rows.
func scanHeld(rows driver.Rows, fn func(*schemas.Sample) error) error {
	return scanSamples(rows, false, fn)
}

// scanSamples hands each row of heldColumns (whole: followed by
// mem_used_bytes, mem_total_bytes, util_source) to fn as a sample, and
// closes rows.
func scanSamples(rows driver.Rows, whole bool, fn func(*schemas.Sample) error) error {
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var x schemas.Sample
		var util, mem, cores *float64
		dest := []any{&x.InstanceID, &x.StartMS, &x.Project, &x.User, &x.IntervalMS, &x.Node, &x.GPUUUID, &x.GPUModel,
			&x.Profile, &util, &x.Processes, &x.HolderRef, &x.ShareKind, &mem, &cores}
		if whole {
			dest = append(dest, &x.MemUsed, &x.MemTotal, &x.UtilSource)
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("cannot read sample: %w", err)
		}
		if util != nil {
			x.Util, x.UtilKnown = *util, true
		}
		if mem != nil {
			x.ShareMem = *mem
		}
		if cores != nil {
			x.ShareCores = *cores
		}
		if err := fn(&x); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Rejects implements reads.QualityRows.
func (s *Store) Rejects(ctx context.Context, fromMS, toMS int64, first int) (int64, []schemas.RejectRow, error) {
	sum, err := s.RejectSummary(ctx, fromMS, toMS, first)
	return sum.Count, ingest.RejectRows(sum.First), err
}

// NodeBuckets implements reads.QualityRows from node_minutes (the rollup
// written with the samples, replays collapsed by the GROUP BY); the raw
// samples answer only the parts of the range that are not whole minutes
// (ingest.MinuteSpan). No FINAL: a replay adds no bucket. The modulus is
// an Int64: ClickHouse 18.16 types Int64 % 60000 as Int16, which wraps
// remainders of 32 768 and more.
func (s *Store) NodeBuckets(ctx context.Context, fromMS, toMS, bucketMS int64, fn func(schemas.NodeBucketRow) error) error {
	raw := func(from, to int64) string {
		return "SELECT toString(node), start_ms - start_ms % toInt64(" + itoa(bucketMS) + ") AS b FROM " + s.table("raw_samples") +
			" WHERE ts >= toDateTime(" + itoa(max(from/1000, 0)) + ") AND ts < toDateTime(" + itoa(to/1000+1) + ") AND start_ms >= " + itoa(from) +
			" AND start_ms < " + itoa(to) + " GROUP BY node, b"
	}
	lo, hi, ok := ingest.MinuteSpan(fromMS, toMS, bucketMS)
	if !ok {
		return s.nodeBuckets(ctx, raw(fromMS, toMS), fn)
	}
	if fromMS < lo {
		if err := s.nodeBuckets(ctx, raw(fromMS, lo), fn); err != nil {
			return err
		}
	}
	if err := s.nodeBuckets(ctx, "SELECT toString(node), minute_ms - minute_ms % toInt64("+itoa(bucketMS)+") AS b FROM "+s.table("node_minutes")+
		" WHERE ts >= toDateTime("+itoa(lo/1000)+") AND ts < toDateTime("+itoa(hi/1000)+") AND minute_ms >= "+itoa(lo)+
		" AND minute_ms < "+itoa(hi)+" GROUP BY node, b", fn); err != nil {
		return err
	}
	if hi < toMS {
		return s.nodeBuckets(ctx, raw(hi, toMS), fn)
	}
	return nil
}

// nodeBuckets runs one query of (node, bucket) rows.
func (s *Store) nodeBuckets(ctx context.Context, q string, fn func(schemas.NodeBucketRow) error) error {
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return classify(fmt.Errorf("cannot read node activity: %w", err))
	}
	defer func() { _ = rows.Close() }()
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

// NodeLatest implements reads.NodeLatestRows from node_minutes (max per
// node: a replay adds no newer minute), the raw samples answering only the
// parts of the range that are not whole minutes (ingest.MinuteSpan), as
// NodeBuckets does.
func (s *Store) NodeLatest(ctx context.Context, fromMS, toMS int64, fn func(schemas.NodeBucketRow) error) error {
	raw := func(from, to int64) string {
		return "SELECT toString(node), max(start_ms) FROM " + s.table("raw_samples") +
			" WHERE ts >= toDateTime(" + itoa(max(from/1000, 0)) + ") AND ts < toDateTime(" + itoa(to/1000+1) + ") AND start_ms >= " + itoa(from) +
			" AND start_ms < " + itoa(to) + " GROUP BY node"
	}
	var queries []string
	if lo, hi, ok := ingest.MinuteSpan(fromMS, toMS, ingest.ActivityMinuteMS); ok {
		if hi < toMS {
			queries = append(queries, raw(hi, toMS))
		}
		queries = append(queries, "SELECT toString(node), max(minute_ms) FROM "+s.table("node_minutes")+
			" WHERE ts >= toDateTime("+itoa(lo/1000)+") AND ts < toDateTime("+itoa(hi/1000)+") AND minute_ms >= "+itoa(lo)+
			" AND minute_ms < "+itoa(hi)+" GROUP BY node")
		if fromMS < lo {
			queries = append(queries, raw(fromMS, lo))
		}
	} else {
		queries = append(queries, raw(fromMS, toMS))
	}
	newest := map[string]int64{}
	for _, q := range queries {
		err := s.nodeBuckets(ctx, q, func(r schemas.NodeBucketRow) error {
			if b, ok := newest[r.Node]; !ok || ingest.MinuteOf(r.BucketMS) > b {
				newest[r.Node] = ingest.MinuteOf(r.BucketMS)
			}
			return nil
		})
		if err != nil {
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
// written with the samples, replays collapsed by FINAL); a threshold of 0,
// which calls every unheld sample of known util busy, from raw_samples.
func (s *Store) Unattributed(ctx context.Context, fromMS, toMS int64, minUtil float64, fn func(schemas.UnattributedUsage) error) error {
	from := "(SELECT * FROM " + s.table("unheld_busy") + " FINAL WHERE ts >= toDateTime(" + itoa(max(fromMS/1000, 0)) +
		") AND ts < toDateTime(" + itoa(toMS/1000+1) + ")) WHERE"
	if minUtil <= 0 {
		from = s.samples(fromMS, toMS) + " WHERE project = '' AND"
	}
	rows, err := s.conn.Query(ctx, "SELECT toString(node), instance_id, sum(interval_ms) FROM "+from+
		" start_ms >= "+itoa(fromMS)+" AND start_ms < "+itoa(toMS)+" AND (processes > 0 OR (util IS NOT NULL AND util >= ?))"+
		" GROUP BY node, instance_id", minUtil)
	if err != nil {
		return classify(fmt.Errorf("cannot read unattributed usage: %w", err))
	}
	defer func() { _ = rows.Close() }()
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
