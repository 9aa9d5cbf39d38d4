package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// backfillPacks is the migration that fills run_packs from the runs written
// before it, done in Go (fillPacks): SQL cannot encode a pack.
const backfillPacks = `-- go: fill run_packs from occupancy and idle_spans`

// resealPacks is the migration that seals the packs written before packs
// were sealed (schemas.Reseal), done in Go (sealPacks).
const resealPacks = `-- go: seal the version-1 packs of run_packs`

// sealPacks rewrites each version-1 pack of run_packs sealed, in the
// migration's transaction, a thousand rows at a time in rowid order.
func sealPacks(ctx context.Context, tx *sql.Tx) error {
	type row struct {
		id   int64
		pack []byte
	}
	for after := int64(-1 << 63); ; {
		rows, err := tx.QueryContext(ctx, `SELECT rowid, runs FROM run_packs WHERE rowid > ? ORDER BY rowid LIMIT 1000`, after)
		if err != nil {
			return fmt.Errorf("cannot read run packs: %w", err)
		}
		var page []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.pack); err != nil {
				_ = rows.Close()
				return fmt.Errorf("cannot read run pack: %w", err)
			}
			page = append(page, r)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("cannot read run packs: %w", err)
		}
		if len(page) == 0 {
			return nil
		}
		for _, r := range page {
			if sealed, ok := schemas.Reseal(r.pack); ok {
				if _, err := tx.ExecContext(ctx, `UPDATE run_packs SET runs = ? WHERE rowid = ?`, sealed, r.id); err != nil {
					return fmt.Errorf("cannot seal run pack: %w", err)
				}
			}
		}
		after = page[len(page)-1].id
	}
}

// fillPacks writes the packs of every stored run, in the migration's
// transaction: what was in run_packs before (an attempt that crashed
// before recording its version) is replaced, so that it is safe to run
// again. Runs are read and packed one UTC month at a time (a run never
// crosses a month boundary).
func fillPacks(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM run_packs`); err != nil {
		return fmt.Errorf("cannot empty run_packs: %w", err)
	}
	var lo, hi sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(s), max(s) FROM (SELECT min(start_ms) AS s FROM occupancy UNION ALL SELECT max(start_ms) FROM occupancy
		UNION ALL SELECT min(start_ms) FROM idle_spans UNION ALL SELECT max(start_ms) FROM idle_spans)`).Scan(&lo, &hi); err != nil {
		return fmt.Errorf("cannot read the runs' range: %w", err)
	}
	if !lo.Valid {
		return nil
	}
	for m := ingest.MonthStartMS(lo.Int64); m <= hi.Int64; m = ingest.MonthStartMS(m + 32*schemas.DayMS) {
		occ, idle, err := monthRuns(ctx, tx, m, ingest.MonthStartMS(m+32*schemas.DayMS))
		if err != nil {
			return err
		}
		if err := writePacks(ctx, tx, schemas.PackRuns(occ, idle)); err != nil {
			return err
		}
	}
	return nil
}

// monthRuns reads every run starting in [from, to), as stored.
func monthRuns(ctx context.Context, tx *sql.Tx, from, to int64) ([]schemas.Run, []schemas.IdleRun, error) {
	var occ []schemas.Run
	rows, err := tx.QueryContext(ctx, `SELECT project, user, instance_id, gpu_model, profile, start_ms, end_ms FROM occupancy
		WHERE start_ms >= ? AND start_ms < ? AND project != ''`, from, to)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read occupancy: %w", err)
	}
	if err := ingest.ScanChunks(rows, chunk, func(r *schemas.Run) error {
		return rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.StartMS, &r.EndMS)
	}, func(rs []schemas.Run) error { occ = append(occ, rs...); return nil }); err != nil {
		return nil, nil, fmt.Errorf("cannot read occupancy: %w", err)
	}
	var idle []schemas.IdleRun
	rows, err = tx.QueryContext(ctx, `SELECT project, user, instance_id, gpu_model, profile, class, min_util, max_util, start_ms, end_ms
		FROM idle_spans WHERE start_ms >= ? AND start_ms < ? AND project != ''`, from, to)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read idle runs: %w", err)
	}
	if err := ingest.ScanChunks(rows, chunk, func(r *schemas.IdleRun) error {
		return rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.Class, &r.MinUtil, &r.MaxUtil, &r.StartMS, &r.EndMS)
	}, func(rs []schemas.IdleRun) error { idle = append(idle, rs...); return nil }); err != nil {
		return nil, nil, fmt.Errorf("cannot read idle runs: %w", err)
	}
	return occ, idle, nil
}

// writePacks inserts a batch's run packs.
func writePacks(ctx context.Context, tx *sql.Tx, packs []schemas.RunPack) error {
	if len(packs) == 0 {
		return nil
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO run_packs (project, day_ms, min_ms, max_ms, runs) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("cannot prepare run pack insert: %w", err)
	}
	defer ins.Close() //nolint:errcheck // statement/rows close after use; errors surface on Exec/Next
	for i := range packs {
		p := &packs[i]
		if _, err := ins.ExecContext(ctx, p.Project, p.DayMS, p.MinMS, p.MaxMS, p.Data); err != nil {
			return fmt.Errorf("cannot insert run pack: %w", err)
		}
	}
	return nil
}

// packMergeAt is the most packs a project and day keeps: a batch that
// leaves more merges them into one, so that a usage read decodes at most
// packMergeAt+1 packs per project and day however small the batches were,
// and each run is rewritten about once per packMergeAt batches of its day.
const packMergeAt = 4

// mergePacks merges, for each pack the batch wrote (one per project and
// day, schemas.PackRuns), the packs of its project and day when there are
// more than packMergeAt of them (schemas.MergePacks), in the batch's
// transaction.
func mergePacks(ctx context.Context, tx *sql.Tx, written []schemas.RunPack) error {
	for i := range written {
		p := &written[i]
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM run_packs WHERE project = ? AND day_ms = ?`, p.Project, p.DayMS).Scan(&n); err != nil {
			return fmt.Errorf("cannot count the run packs of %s: %w", p.Project, err)
		}
		if n > packMergeAt {
			if err := mergeDay(ctx, tx, p.Project, p.DayMS); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergeDay replaces the packs of one project and day by their merge.
func mergeDay(ctx context.Context, tx *sql.Tx, project string, day int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT runs FROM run_packs WHERE project = ? AND day_ms = ?`, project, day)
	if err != nil {
		return fmt.Errorf("cannot read the run packs of %s: %w", project, err)
	}
	var packs [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			_ = rows.Close()
			return fmt.Errorf("cannot read a run pack of %s: %w", project, err)
		}
		packs = append(packs, b)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("cannot read the run packs of %s: %w", project, err)
	}
	merged, err := schemas.MergePacks(packs)
	if err != nil {
		return fmt.Errorf("cannot merge the run packs of %s: %w", project, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM run_packs WHERE project = ? AND day_ms = ?`, project, day); err != nil {
		return fmt.Errorf("cannot replace the run packs of %s: %w", project, err)
	}
	return writePacks(ctx, tx, merged)
}

// RunPacks implements reads.PackedRuns: the packs of the projects (all when
// none is named) holding a run that may overlap [lo, hi], through the index
// on (project, max_ms). Every store of this schema has its packs.
func (s *Store) RunPacks(ctx context.Context, projects []string, lo, hi int64, fn func(pack []byte) error) (bool, error) {
	query := `SELECT runs FROM run_packs WHERE max_ms >= ? AND min_ms <= ?`
	args := []any{lo, hi}
	if len(projects) > 0 {
		query += ` AND project IN (?` + strings.Repeat(`, ?`, len(projects)-1) + `)`
		for _, p := range projects {
			args = append(args, p)
		}
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return true, fmt.Errorf("cannot read run packs: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	for rows.Next() {
		var b sql.RawBytes
		if err := rows.Scan(&b); err != nil {
			return true, fmt.Errorf("cannot read run pack: %w", err)
		}
		if err := fn(b); err != nil {
			return true, err
		}
	}
	if err := rows.Err(); err != nil {
		return true, fmt.Errorf("cannot read run packs: %w", err)
	}
	return true, nil
}
