package clickhouse

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// CompactUsageRows implements reads.CompactUsage: the whole usage GROUP BY
// over occupancy and idle_spans in ClickHouse (tens of thousands of rows
// instead of millions of raw samples). Per key, runs are deduplicated to the
// longest per start (replays), clipped to [FromMS, ToMS) and unioned: sorted
// by start, a run adds only its part after the largest end before it. The
// pieces are split at bucket boundaries (arrayJoin over the bucket indexes).
// Idle time is the union of the idle runs under the project's threshold. It
// declines (false) queries by node (occupancy has none) and thresholds that
// can cut through an idle run (not a class bound), which need raw samples.
// It also declines reads of some projects, users or SKUs: Usage reads their
// runs alone (OccupancyOf, IdleRunsOf) in two plain queries, which cost less
// than this query's analysis, spent by 18.16 whatever the rows (150–350 ms
// under load for a project selecting none, against 50–200 ms for both plain
// queries and Go's unions; docs/benchmarks.md).
func (s *Store) CompactUsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) (bool, error) {
	if q.ByNode || len(q.Nodes) > 0 || !atClassBound(q.IdleDefault) {
		return false, nil
	}
	if len(q.Projects) > 0 || len(q.Users) > 0 || q.Models != nil {
		return false, nil
	}
	for _, t := range q.IdleByProject {
		if !atClassBound(t) {
			return false, nil
		}
	}
	query, args := compactUsageSQL(s, q)
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return true, classify(fmt.Errorf("cannot read usage: %w", err))
	}
	defer func() { _ = rows.Close() }()
	// Rows are per group and bucket index: direct parts and difference-array
	// entries, held and idle; a group's buckets are their prefix sums.
	sums := schemas.NewBucketSums(q)
	for rows.Next() {
		var g schemas.UsageRow
		var idx, h, hd, i, id int64
		if err := rows.Scan(&g.Project, &g.User, &g.InstanceID, &g.GPUModel, &g.Profile, &idx, &h, &hd, &i, &id); err != nil {
			return true, fmt.Errorf("cannot read usage row: %w", err)
		}
		if err := sums.Add(g, idx, h, hd, i, id); err != nil {
			return true, fmt.Errorf("cannot read usage row: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return true, fmt.Errorf("cannot read usage: %w", err)
	}
	return true, sums.Emit(fn)
}

// OccupancyOf implements reads.KeyedRuns: Occupancy of the keys q selects
// (ingest.KeyFilter), which the table's order (project, user, ...) finds
// without reading other projects' rows. Usage reads through it when
// CompactUsageRows declines (a threshold inside an idle class).
func (s *Store) OccupancyOf(ctx context.Context, q schemas.UsageRowQuery, lo, hi int64, fn func([]schemas.Run) error) error {
	conds, args := ingest.KeyFilter(q)
	query := "SELECT " + keyColumns + ", start_ms, max(end_ms) AS e FROM " + s.table("occupancy") +
		" WHERE start >= toDateTime(" + itoa(ingest.MonthStartMS(lo-1)/1000) + ") AND start_ms <= " + itoa(hi) + " AND " + strings.Join(conds, " AND ") +
		" GROUP BY " + keyColumns + ", start_ms HAVING e >= " + itoa(lo)
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return classify(fmt.Errorf("cannot read occupancy: %w", err))
	}
	in := interner{}
	err = ingest.ScanChunks(rows, chunk, func(r *schemas.Run) error {
		err := rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.StartMS, &r.EndMS)
		in.key(&r.Key)
		return err
	}, fn)
	if err != nil {
		return fmt.Errorf("cannot read occupancy: %w", err)
	}
	return nil
}

// IdleRunsOf implements reads.KeyedRuns: IdleRuns of the keys q selects.
func (s *Store) IdleRunsOf(ctx context.Context, q schemas.UsageRowQuery, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error {
	conds, args := ingest.KeyFilter(q)
	query := "SELECT " + keyColumns + ", class, start_ms, max(end_ms) AS e, min(min_util), max(max_util) FROM " + s.table("idle_spans") +
		" WHERE start >= toDateTime(" + itoa(ingest.MonthStartMS(from-1)/1000) + ") AND start_ms < " + itoa(to) +
		" AND (class = 0 OR min_util < " + strconv.FormatFloat(maxUtil, 'g', -1, 64) + ") AND " + strings.Join(conds, " AND ") +
		" GROUP BY " + keyColumns + ", class, start_ms HAVING e > " + itoa(from)
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return classify(fmt.Errorf("cannot read idle runs: %w", err))
	}
	in := interner{}
	err = ingest.ScanChunks(rows, chunk, func(r *schemas.IdleRun) error {
		err := rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.Class,
			&r.StartMS, &r.EndMS, &r.MinUtil, &r.MaxUtil)
		in.key(&r.Key)
		return err
	}, fn)
	if err != nil {
		return fmt.Errorf("cannot read idle runs: %w", err)
	}
	return nil
}

// atClassBound reports whether no idle run can straddle threshold t.
func atClassBound(t float64) bool {
	if t <= 0 || t >= 1 {
		return true
	}
	for _, b := range schemas.IdleClassBounds() {
		if t == b {
			return true
		}
	}
	return false
}

func compactUsageSQL(s *Store, q schemas.UsageRowQuery) (string, []any) {
	from, to := itoa(q.FromMS), itoa(q.ToMS)
	monthFrom := "toDateTime(" + itoa(ingest.MonthStartMS(q.FromMS-1)/1000) + ")"
	// Filters on the key.
	w, args := ingest.KeyFilter(q)
	filter := strings.Join(w, " AND ")
	fargs := args
	// The threshold of a row's project (class bounds only, see CompactUsageRows).
	thr := strconv.FormatFloat(q.IdleDefault, 'g', -1, 64)
	if len(q.IdleByProject) > 0 {
		var b strings.Builder
		b.WriteString("multiIf(")
		for p, t := range q.IdleByProject {
			b.WriteString("project = " + quote(p) + ", " + strconv.FormatFloat(t, 'g', -1, 64) + ", ")
		}
		b.WriteString(thr + ")")
		thr = b.String()
	}
	// runs: the rows of the range, clipped. Replays (rows of equal key and
	// start) need no deduplication here: the union below absorbs them.
	runs := func(table, extra string) string {
		return "SELECT " + keyColumns + ", greatest(start_ms, " + from + ") AS s, least(end_ms, " + to + ") AS e FROM " + s.table(table) +
			" WHERE start >= " + monthFrom + " AND start_ms < " + to + " AND end_ms > " + from + " AND " + filter + extra
	}
	// pieces: per key, the union of its runs as disjoint pieces (a, b).
	pieces := func(kind, inner string) string {
		return "SELECT " + keyColumns + ", " + kind + " AS kind, arrayJoin(arrayFilter(x -> x.2 > x.1, arrayMap(i -> (greatest(r[i].1, " +
			"arrayReduce('max', arrayMap(x -> x.2, arraySlice(r, 1, i - 1)))), r[i].2), arrayEnumerate(r)))) AS p FROM (SELECT " + keyColumns +
			", arraySort(groupArray((s, e))) AS r FROM (" + inner + ") GROUP BY " + keyColumns + ")"
	}
	col := func(on bool, name string) string {
		if on {
			return name
		}
		return "''"
	}
	cols := col(q.ByProject, "project") + ", " + col(q.ByUser, "user") + ", " + col(q.ByInstance, "instance_id") + ", gpu_model, profile"
	var group []string
	for i, on := range []bool{q.ByProject, q.ByUser, q.ByInstance} {
		if on {
			group = append(group, []string{"project", "user", "instance_id"}[i])
		}
	}
	group = append(group, "gpu_model", "profile")
	// Per piece (a, b): the buckets it touches partly get their part directly,
	// the whole buckets between them a difference array (+B at the first, -B
	// after the last), so a month-long run is 4 rows, not 720 hourly ones; the
	// prefix sums are taken in Go (CompactUsageRows).
	bw, base := int64(1)<<62, int64(0)
	if q.BucketMS > 0 {
		bw = q.BucketMS
		base = schemas.NewBucketSums(q).Base()
	}
	b, bs := itoa(bw), itoa(base)
	i0 := "intDiv(p.1 - " + bs + ", " + b + ")"
	i1 := "intDiv(p.2 - 1 - " + bs + ", " + b + ")"
	parts := "arrayJoin(if(" + i0 + " = " + i1 + ", [(" + i0 + ", p.2 - p.1, toInt64(0))], [(" + i0 + ", " + bs + " + (" + i0 + " + 1) * " + b + " - p.1, toInt64(0)), (" +
		i1 + ", p.2 - (" + bs + " + " + i1 + " * " + b + "), toInt64(0)), (" + i0 + " + 1, toInt64(0), toInt64(" + b + ")), (" + i1 + ", toInt64(0), toInt64(-" + b + "))])) AS x"
	group = append(group, "idx")
	all := pieces("1", runs("occupancy", "")) + " UNION ALL " +
		pieces("2", runs("idle_spans", " AND (class = 0 OR max_util < "+thr+")"))
	args = append(append([]any{}, fargs...), fargs...)
	return "SELECT " + cols + ", toInt64(x.1) AS idx, toInt64(sumIf(x.2, kind = 1)), toInt64(sumIf(x.3, kind = 1)), toInt64(sumIf(x.2, kind = 2)), toInt64(sumIf(x.3, kind = 2)) FROM (SELECT *, " +
		parts + " FROM (" + all + ")) GROUP BY " + strings.Join(group, ", "), args
}

func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// DataVersion implements reads.DataVersioner from the metadata of the
// database's active parts, without reading data: every insert makes a part
// whose block number is the table's newest, and dropping a partition changes
// the table's count of partitions. Merges change neither (a merged part
// keeps the highest block number of its sources), so a background merge
// costs no recomputation.
func (s *Store) DataVersion(ctx context.Context) (string, error) {
	if s.cluster != nil {
		return s.dataVersionCluster(ctx)
	}
	return dataVersionOn(ctx, s.conn, s.cfg.Database)
}

// dataVersionOn is DataVersion of one server's parts of database db.
func dataVersionOn(ctx context.Context, conn driver.Conn, db string) (string, error) {
	var blocks, partitions uint64
	err := conn.QueryRow(ctx, `SELECT toUInt64(sum(b)), toUInt64(sum(p)) FROM (
		SELECT table, max(max_block_number) AS b, uniqExact(partition_id) AS p
		FROM system.parts WHERE database = ? AND active GROUP BY table)`, db).Scan(&blocks, &partitions)
	if err != nil {
		return "", classify(fmt.Errorf("cannot read the data version from system.parts: %w", err))
	}
	return strconv.FormatUint(blocks, 10) + "/" + strconv.FormatUint(partitions, 10), nil
}
