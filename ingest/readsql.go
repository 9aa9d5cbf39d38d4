package ingest

import (
	"slices"
	"strconv"
	"strings"

	"github.com/cardhour/cardhour/schemas"
)

// Dialect is what differs between the SQL of the stores' reads.
type Dialect struct {
	// Samples is the FROM expression of raw samples, one row per identity
	// (instance, start, holder), with at least the columns start_ms,
	// interval_ms, node, instance_id, gpu_model, profile, project, user, util
	// (NULL when unknown) and processes; it may use the placeholders
	// {FROM} and {TO} (replaced by the query's range in ms).
	Samples string
	// Zero is an Int64 zero literal.
	Zero string
	// UtilOrZero is util, 0 where it is NULL, as a non-nullable float
	// (UtilSQL); empty: coalesce(util, 0).
	UtilOrZero string
}

// UsageSQL is the GROUP BY that answers a schemas.UsageRowQuery, with its
// arguments. Columns: project, user, instance_id, node, gpu_model, profile,
// bucket, held_ms, idle_ms (grouped-out fields are ” or 0).
func UsageSQL(d Dialect, q schemas.UsageRowQuery) (string, []any) {
	var args []any
	col := func(on bool, name string) string {
		if on {
			return name
		}
		return "''"
	}
	cols := []string{col(q.ByProject, "project"), col(q.ByUser, "user"), col(q.ByInstance, "instance_id"), col(q.ByNode, "node"), "gpu_model", "profile"}
	bucket := d.Zero
	if q.BucketMS > 0 {
		bucket = "(start_ms - (start_ms - " + itoa(q.BucketOffsetMS) + ") % " + itoa(q.BucketMS) + ")"
	}
	// The idle threshold of the row's project.
	thr := "?"
	if len(q.IdleByProject) > 0 {
		var b strings.Builder
		b.WriteString("CASE project")
		for p, t := range q.IdleByProject {
			b.WriteString(" WHEN ? THEN ?")
			args = append(args, p, t)
		}
		b.WriteString(" ELSE ? END")
		thr = b.String()
	}
	args = append(args, q.IdleDefault)
	sel := strings.Join(cols, ", ") + ", " + bucket + " AS bucket, sum(interval_ms), sum(CASE WHEN (util IS NOT NULL AND util < " + thr +
		") OR (util IS NULL AND processes = 0) THEN interval_ms ELSE 0 END)"
	where, wargs := sampleFilter(q)
	args = append(args, wargs...)
	var group []string
	for i, on := range []bool{q.ByProject, q.ByUser, q.ByInstance, q.ByNode} {
		if on {
			group = append(group, cols[i])
		}
	}
	group = append(group, "gpu_model", "profile")
	if q.BucketMS > 0 {
		group = append(group, "bucket")
	}
	from := strings.NewReplacer("{FROM}", itoa(q.FromMS), "{TO}", itoa(q.ToMS)).Replace(d.Samples)
	return "SELECT " + sel + " FROM " + from + " WHERE " + where + " GROUP BY " + strings.Join(group, ", "), args
}

func sampleFilter(q schemas.UsageRowQuery) (string, []any) {
	w := []string{"start_ms >= " + itoa(q.FromMS), "start_ms < " + itoa(q.ToMS)}
	keys, args := KeyFilter(q)
	w = append(w, keys...)
	if len(q.Nodes) > 0 {
		w = append(w, "node IN ("+placeholders(len(q.Nodes))+")")
		for _, v := range q.Nodes {
			args = append(args, v)
		}
	}
	return strings.Join(w, " AND "), args
}

// KeyFilter is the part of q's filter on the key columns (held rows only,
// projects, users, SKUs as (gpu_model, profile) pairs), as conditions to AND
// and their arguments, for every table keyed like occupancy or raw samples.
func KeyFilter(q schemas.UsageRowQuery) (conds []string, args []any) {
	conds = []string{"project != ''"}
	in := func(col string, vals []string) {
		if len(vals) == 0 {
			return
		}
		conds = append(conds, col+" IN ("+placeholders(len(vals))+")")
		for _, v := range vals {
			args = append(args, v)
		}
	}
	in("project", q.Projects)
	in("user", q.Users)
	if q.Models != nil {
		if len(q.Models) == 0 {
			conds = append(conds, "1 = 0")
		} else {
			var alt []string
			for _, m := range q.Models {
				alt = append(alt, "(gpu_model = ? AND profile = ?)")
				args = append(args, m[0], m[1])
			}
			conds = append(conds, "("+strings.Join(alt, " OR ")+")")
		}
	}
	return conds, args
}

// KeySelected reports whether a row of key k passes KeyFilter(q): the same
// filter, for the stores that filter in Go (MemStore).
func KeySelected(q schemas.UsageRowQuery, k schemas.Key) bool {
	return k.Project != "" && inList(q.Projects, k.Project) && inList(q.Users, k.User) &&
		(q.Models == nil || slices.Contains(q.Models, [2]string{k.GPUModel, k.Profile}))
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// Rows are what ScanChunks reads: database/sql's rows and clickhouse-go's.
type Rows interface {
	Next() bool
	Err() error
	Close() error
}

// ScanChunks scans each row of rows with scan and hands them to fn in chunks
// of size rows (each chunk a new slice, fn owns it); it closes rows.
func ScanChunks[T any](rows Rows, size int, scan func(*T) error, fn func([]T) error) error {
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	var buf []T        // grown by append: a read of a few rows allocates little
	for rows.Next() {
		var zero T
		buf = append(buf, zero)
		if err := scan(&buf[len(buf)-1]); err != nil {
			return err
		}
		if len(buf) == size {
			if err := fn(buf); err != nil {
				return err
			}
			buf = nil
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(buf) > 0 {
		return fn(buf)
	}
	return nil
}

// UtilSQL is the GROUP BY that answers a schemas.UtilRowQuery over every
// raw sample, held or not. Columns: node, gpu_model, bucket, seen_ms,
// held_ms, measured_ms, held_unmeasured_ms, util_ms (node and gpu_model
// are ” and bucket 0 when not grouped by them).
func UtilSQL(d Dialect, q schemas.UtilRowQuery) string {
	node, model := "''", "gpu_model"
	group := []string{"gpu_model"}
	if q.AllModels {
		model, group = "''", nil
	}
	if q.ByNode {
		node = "node"
		group = append(group, "node")
	}
	bucket := d.Zero
	if q.BucketMS > 0 {
		bucket = "(start_ms - start_ms % " + itoa(q.BucketMS) + ")"
		group = append(group, "bucket")
	}
	utilOrZero := d.UtilOrZero
	if utilOrZero == "" {
		utilOrZero = "coalesce(util, 0)"
	}
	from := strings.NewReplacer("{FROM}", itoa(q.FromMS), "{TO}", itoa(q.ToMS)).Replace(d.Samples)
	groupBy := ""
	if len(group) > 0 {
		groupBy = " GROUP BY " + strings.Join(group, ", ")
	}
	return "SELECT " + node + ", " + model + ", " + bucket + " AS bucket, sum(interval_ms)" +
		", sum(CASE WHEN project != '' THEN interval_ms ELSE " + d.Zero + " END)" +
		", sum(CASE WHEN util IS NOT NULL THEN interval_ms ELSE " + d.Zero + " END)" +
		", sum(CASE WHEN project != '' AND util IS NULL THEN interval_ms ELSE " + d.Zero + " END)" +
		", sum(" + utilOrZero + " * interval_ms)" +
		" FROM " + from + " WHERE start_ms >= " + itoa(q.FromMS) + " AND start_ms < " + itoa(q.ToMS) +
		groupBy
}
