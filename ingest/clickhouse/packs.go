package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// writePacks inserts a batch's run packs (schemas.PackRuns): one INSERT.
func (s *Store) writePacks(ctx context.Context, packs []schemas.RunPack) error {
	n := len(packs)
	if n == 0 {
		return nil
	}
	day, project, lo, hi, runs := make([]time.Time, n), make([]string, n), make([]int64, n), make([]int64, n), make([]string, n)
	for i := range packs {
		p := &packs[i]
		day[i], project[i], lo[i], hi[i], runs[i] = time.UnixMilli(p.DayMS).UTC(), p.Project, p.MinMS, p.MaxMS, string(p.Data)
	}
	return s.insert(ctx, "run_packs", "day, project, min_ms, max_ms, runs", n, day, project, lo, hi, runs)
}

// RunPacks implements reads.PackedRuns: the packs of the projects (all when
// none is named) that may hold a run overlapping [lo, hi], found by the
// table's order (project, day). Runs never cross a UTC month boundary, so a
// run ending at or after lo starts in lo's UTC month or later. Every store
// of this schema has its packs (migration 0015 filled them).
func (s *Store) RunPacks(ctx context.Context, projects []string, lo, hi int64, fn func(pack []byte) error) (bool, error) {
	q := "SELECT runs FROM " + s.table("run_packs") + " WHERE day >= toDate(toDateTime(" + itoa(ingest.MonthStartMS(lo-1)/1000) +
		")) AND day <= toDate(toDateTime(" + itoa(max(hi, 0)/1000) + ")) AND max_ms >= " + itoa(lo) + " AND min_ms <= " + itoa(hi)
	var args []any
	if len(projects) > 0 {
		q += " AND project IN (?" + strings.Repeat(", ?", len(projects)-1) + ")"
		for _, p := range projects {
			args = append(args, p)
		}
	}
	// A project's packs are a few hundred rows of one part: one thread reads
	// them sooner than a pipeline of as many threads as cores is set up.
	rows, err := s.conn.Query(ch.Context(ctx, ch.WithSettings(ch.Settings{"max_threads": 1})), q, args...)
	if err != nil {
		return true, classify(fmt.Errorf("cannot read run packs: %w", err))
	}
	defer func() { _ = rows.Close() }()
	var b []byte
	for rows.Next() {
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

// packGranule is the index granularity of run_packs (migration 0018).
const packGranule = 16

// regranulePacks is migration 0018: run_packs recreated with granules of
// packGranule rows, so that a read of one project reads that project's
// packs only. Each step can be repeated: a crash leaves either the old
// table in place (and a partial copy, dropped and made again) or the new
// one (and perhaps the old beside it, whose packs not yet copied are copied
// before it is dropped). A pack written to the old table between the copy
// and the rename is copied after the rename; copies are harmless repeats.
func (s *Store) regranulePacks(ctx context.Context) error {
	next, old := s.table("run_packs_regranule"), s.table("run_packs_before_regranule")
	var create string
	if err := s.conn.QueryRow(ctx, "SELECT create_table_query FROM system.tables WHERE database = ? AND name = 'run_packs'", s.cfg.Database).Scan(&create); err != nil {
		return classify(fmt.Errorf("cannot read the definition of run_packs: %w", err))
	}
	if !strings.Contains(create, "index_granularity = "+itoa(packGranule)) {
		steps := []string{
			"DROP TABLE IF EXISTS " + next,
			packsTable(next),
			"INSERT INTO " + next + " SELECT day, project, min_ms, max_ms, runs FROM " + s.table("run_packs"),
			"RENAME TABLE " + s.table("run_packs") + " TO " + old + ", " + next + " TO " + s.table("run_packs"),
		}
		for _, q := range steps {
			if err := s.conn.Exec(ctx, q); err != nil {
				return classify(fmt.Errorf("cannot recreate run_packs: %w", err))
			}
		}
	}
	if left, err := s.tableExists(ctx, "run_packs_before_regranule"); err != nil || !left {
		return err
	}
	packID := "project, day, min_ms, max_ms, cityHash64(runs)"
	for _, q := range []string{
		"INSERT INTO " + s.table("run_packs") + " SELECT day, project, min_ms, max_ms, runs FROM " + old +
			" WHERE (" + packID + ") NOT IN (SELECT " + packID + " FROM " + s.table("run_packs") + ")",
		"DROP TABLE " + old,
	} {
		if err := s.conn.Exec(ctx, q); err != nil {
			return classify(fmt.Errorf("cannot finish recreating run_packs: %w", err))
		}
	}
	return nil
}

// packsTable is the definition of run_packs since migration 0018, for a
// table of that (qualified) name.
func packsTable(name string) string {
	return "CREATE TABLE " + name + " (day Date, project String, min_ms Int64, max_ms Int64, runs String) ENGINE = MergeTree" +
		" PARTITION BY toYYYYMM(day) ORDER BY (project, day) SETTINGS index_granularity = " + itoa(packGranule)
}

// resealPacks is migration 0019: every version-1 pack sealed
// (schemas.Reseal). Like regranulePacks, each step can be repeated: until
// the rename, a crash leaves the old table in place and a partial copy that
// is made again; after it, the old table (with the packs written to it
// during the copy) is sealed into a side table, whose packs the new table
// lacks are copied over, and both are dropped. Sealing is deterministic, so
// a pack copied twice is the same row twice, a harmless repeat.
func (s *Store) resealPacks(ctx context.Context) error {
	packs, next, old, gap := s.table("run_packs"), s.table("run_packs_sealing"), s.table("run_packs_before_sealing"), s.table("run_packs_sealing_gap")
	left, err := s.tableExists(ctx, "run_packs_before_sealing")
	if err != nil {
		return err
	}
	if !left {
		if err := s.sealInto(ctx, "run_packs", "run_packs_sealing"); err != nil {
			return err
		}
		if err := s.conn.Exec(ctx, "RENAME TABLE "+packs+" TO "+old+", "+next+" TO "+packs); err != nil {
			return classify(fmt.Errorf("cannot put the sealed run_packs in place: %w", err))
		}
	}
	if err := s.sealInto(ctx, "run_packs_before_sealing", "run_packs_sealing_gap"); err != nil {
		return err
	}
	packID := "project, day, min_ms, max_ms, cityHash64(runs)"
	for _, q := range []string{
		"INSERT INTO " + packs + " SELECT day, project, min_ms, max_ms, runs FROM " + gap +
			" WHERE (" + packID + ") NOT IN (SELECT " + packID + " FROM " + packs + ")",
		"DROP TABLE " + old,
		"DROP TABLE " + gap,
	} {
		if err := s.conn.Exec(ctx, q); err != nil {
			return classify(fmt.Errorf("cannot finish sealing run_packs: %w", err))
		}
	}
	return nil
}

// tableExists reports whether the store's database has the table.
func (s *Store) tableExists(ctx context.Context, name string) (bool, error) {
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", s.cfg.Database, name).Scan(&n); err != nil {
		return false, classify(fmt.Errorf("cannot read the tables of %s: %w", s.cfg.Database, err))
	}
	return n > 0, nil
}

// sealInto makes table to afresh (a table of packs) and copies every pack of
// table from into it, sealed, sealBatch packs per insert.
func (s *Store) sealInto(ctx context.Context, from, to string) error {
	for _, q := range []string{"DROP TABLE IF EXISTS " + s.table(to), packsTable(s.table(to))} {
		if err := s.conn.Exec(ctx, q); err != nil {
			return classify(fmt.Errorf("cannot make %s: %w", to, err))
		}
	}
	rows, err := s.conn.Query(ctx, "SELECT day, project, min_ms, max_ms, runs FROM "+s.table(from))
	if err != nil {
		return classify(fmt.Errorf("cannot read %s: %w", from, err))
	}
	defer func() { _ = rows.Close() }()
	var day []time.Time
	var project, runs []string
	var lo, hi []int64
	flush := func() error {
		if len(day) == 0 {
			return nil
		}
		err := s.insert(ctx, to, "day, project, min_ms, max_ms, runs", len(day), day, project, lo, hi, runs)
		day, project, lo, hi, runs = day[:0], project[:0], lo[:0], hi[:0], runs[:0]
		return err
	}
	for rows.Next() {
		var d time.Time
		var p string
		var a, b int64
		var pack []byte
		if err := rows.Scan(&d, &p, &a, &b, &pack); err != nil {
			return classify(fmt.Errorf("cannot read a pack of %s: %w", from, err))
		}
		sealed, _ := schemas.Reseal(pack)
		day, project, lo, hi, runs = append(day, d), append(project, p), append(lo, a), append(hi, b), append(runs, string(sealed))
		if len(day) == sealBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return classify(fmt.Errorf("cannot read %s: %w", from, err))
	}
	return flush()
}

// sealBatch is how many sealed packs one insert of resealPacks carries.
const sealBatch = 2000

// fillPacks is migration 0015: the packs of the runs written before run_packs
// existed, one UTC month at a time, from the runs as Occupancy and IdleRuns
// read them (replays merged per start).
func (s *Store) fillPacks(ctx context.Context) error {
	var lo, hi int64
	if err := s.conn.QueryRow(ctx, "SELECT min(s), max(s) FROM (SELECT start_ms AS s FROM "+s.table("occupancy")+
		" UNION ALL SELECT start_ms AS s FROM "+s.table("idle_spans")+")").Scan(&lo, &hi); err != nil {
		return classify(fmt.Errorf("cannot read the runs' range: %w", err))
	}
	if lo == 0 && hi == 0 {
		return nil // no runs (min and max of nothing are 0)
	}
	for m := ingest.MonthStartMS(lo); m <= hi; m = ingest.MonthStartMS(m + 32*schemas.DayMS) {
		next := ingest.MonthStartMS(m + 32*schemas.DayMS)
		var occ []schemas.Run
		if err := s.Occupancy(ctx, m, next-1, func(rs []schemas.Run) error {
			for _, r := range rs {
				if r.StartMS >= m && r.StartMS < next {
					occ = append(occ, r)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		var idle []schemas.IdleRun
		if err := s.IdleRuns(ctx, m, next, 2, func(rs []schemas.IdleRun) error {
			for _, r := range rs {
				if r.StartMS >= m && r.StartMS < next {
					idle = append(idle, r)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		if err := s.writePacks(ctx, schemas.PackRuns(occ, idle)); err != nil {
			return err
		}
	}
	return nil
}
