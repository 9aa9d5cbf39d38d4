// Package sqlite is the embedded (pure Go, modernc.org/sqlite) implementation of
// ingest.Store and billing.UsageSource, for standalone and demo deployments and
// for tests. It keeps the same tables and the same semantics as the ClickHouse
// store: raw samples, occupancy runs and idle-candidate runs, where a run written
// again with the same start keeps its longest end.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// Config configures a Store.
type Config struct {
	Path   string // database file
	Logger *slog.Logger
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("sqlite: path is required"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("sqlite: logger is required"))
	}
	return errors.Join(errs...)
}

// migrations are applied in order; PRAGMA user_version records how many ran.
var migrations = []string{
	`CREATE TABLE IF NOT EXISTS raw_samples (
		instance_id TEXT NOT NULL, start_ms INTEGER NOT NULL, project TEXT NOT NULL, user TEXT NOT NULL,
		interval_ms INTEGER NOT NULL, node TEXT NOT NULL, gpu_uuid TEXT NOT NULL, gpu_model TEXT NOT NULL,
		profile TEXT NOT NULL, util REAL, mem_used_bytes INTEGER NOT NULL, mem_total_bytes INTEGER NOT NULL,
		processes INTEGER NOT NULL, util_source TEXT NOT NULL,
		PRIMARY KEY (instance_id, start_ms, project, user)) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS occupancy (
		project TEXT NOT NULL, user TEXT NOT NULL, instance_id TEXT NOT NULL, gpu_model TEXT NOT NULL,
		profile TEXT NOT NULL, start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL,
		PRIMARY KEY (project, user, instance_id, gpu_model, profile, start_ms)) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS occupancy_end ON occupancy (end_ms)`,
	`CREATE TABLE IF NOT EXISTS idle_runs (
		project TEXT NOT NULL, user TEXT NOT NULL, instance_id TEXT NOT NULL, gpu_model TEXT NOT NULL,
		profile TEXT NOT NULL, util_known INTEGER NOT NULL, util REAL NOT NULL,
		start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL,
		PRIMARY KEY (project, user, instance_id, gpu_model, profile, util_known, util, start_ms)) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS idle_runs_end ON idle_runs (end_ms)`,
	// Idle runs by utilisation class (ingest.IdleRun); see the ClickHouse
	// migrations 0004 and 0005. The old idle_runs rows are carried over (a run of
	// one utilisation is a class run with min_util = max_util) and the table is
	// no longer written or read.
	`CREATE TABLE IF NOT EXISTS idle_spans (
		project TEXT NOT NULL, user TEXT NOT NULL, instance_id TEXT NOT NULL, gpu_model TEXT NOT NULL,
		profile TEXT NOT NULL, class INTEGER NOT NULL, min_util REAL NOT NULL, max_util REAL NOT NULL,
		start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL,
		PRIMARY KEY (project, user, instance_id, gpu_model, profile, class, start_ms, min_util, max_util)) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS idle_spans_end ON idle_spans (end_ms)`,
	`INSERT INTO idle_spans (project, user, instance_id, gpu_model, profile, class, min_util, max_util, start_ms, end_ms)
		SELECT project, user, instance_id, gpu_model, profile,
			CASE WHEN util_known = 0 THEN 0 WHEN util < 0.05 THEN 1 WHEN util < 0.10 THEN 2 WHEN util < 0.20 THEN 3 WHEN util < 0.50 THEN 4 ELSE 5 END,
			util, util, start_ms, end_ms FROM idle_runs WHERE util_known = 0 OR util < 1
		ON CONFLICT (project, user, instance_id, gpu_model, profile, class, start_ms, min_util, max_util) DO UPDATE SET end_ms = max(end_ms, excluded.end_ms)`,
}

// Store is an SQLite database file.
type Store struct {
	cfg Config
	db  *sql.DB
}

// Open opens (creating if needed) the database and applies pending migrations.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dsn := "file:" + (&url.URL{Path: cfg.Path}).EscapedPath() +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("cannot open SQLite database %s: %w", cfg.Path, err)
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serializes writes anyway
	s := &Store{cfg: cfg, db: db}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("cannot read SQLite schema version of %s: %w", s.cfg.Path, err)
	}
	for i := v; i < len(migrations); i++ {
		if _, err := s.db.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("SQLite migration %d failed: %w", i+1, err)
		}
		if _, err := s.db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			return fmt.Errorf("cannot record SQLite migration %d: %w", i+1, err)
		}
	}
	return nil
}

// Close implements ingest.Store.
func (s *Store) Close() error { return s.db.Close() }

// Write implements ingest.Store in one transaction.
func (s *Store) Write(ctx context.Context, b *ingest.Batch) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("cannot begin SQLite transaction: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	raw, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO raw_samples (instance_id, start_ms, project, user,
		interval_ms, node, gpu_uuid, gpu_model, profile, util, mem_used_bytes, mem_total_bytes, processes, util_source)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("cannot prepare raw insert: %w", err)
	}
	defer raw.Close() //nolint:errcheck // statement/rows close after use; errors surface on Exec/Next
	for i := range b.Samples {
		x := &b.Samples[i]
		var util any
		if x.UtilKnown {
			util = x.Util
		}
		if _, err = raw.ExecContext(ctx, x.InstanceID, x.StartMS, x.Project, x.User, x.IntervalMS, x.Node, x.GPUUUID,
			x.GPUModel, x.Profile, util, x.MemUsed, x.MemTotal, x.Processes, x.UtilSource); err != nil {
			return fmt.Errorf("cannot insert raw sample: %w", err)
		}
	}
	occ, err := tx.PrepareContext(ctx, `INSERT INTO occupancy (project, user, instance_id, gpu_model, profile, start_ms, end_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (project, user, instance_id, gpu_model, profile, start_ms) DO UPDATE SET end_ms = max(end_ms, excluded.end_ms)`)
	if err != nil {
		return fmt.Errorf("cannot prepare occupancy insert: %w", err)
	}
	defer occ.Close() //nolint:errcheck // statement/rows close after use; errors surface on Exec/Next
	for _, r := range b.Occupancy {
		k := r.Key
		if _, err = occ.ExecContext(ctx, k.Project, k.User, k.InstanceID, k.GPUModel, k.Profile, r.StartMS, r.EndMS); err != nil {
			return fmt.Errorf("cannot insert occupancy run: %w", err)
		}
	}
	idle, err := tx.PrepareContext(ctx, `INSERT INTO idle_spans (project, user, instance_id, gpu_model, profile, class, min_util, max_util, start_ms, end_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (project, user, instance_id, gpu_model, profile, class, start_ms, min_util, max_util) DO UPDATE SET end_ms = max(end_ms, excluded.end_ms)`)
	if err != nil {
		return fmt.Errorf("cannot prepare idle insert: %w", err)
	}
	defer idle.Close() //nolint:errcheck // statement/rows close after use; errors surface on Exec/Next
	for _, r := range b.Idle {
		k := r.Key
		if _, err = idle.ExecContext(ctx, k.Project, k.User, k.InstanceID, k.GPUModel, k.Profile, int(r.Class), r.MinUtil, r.MaxUtil, r.StartMS, r.EndMS); err != nil {
			return fmt.Errorf("cannot insert idle run: %w", err)
		}
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("cannot commit SQLite transaction: %w", err)
	}
	return nil
}

// Scan implements billing.UsageSource (see the ClickHouse store for the rules).
func (s *Store) Scan(ctx context.Context, cat *schemas.Catalog, p billing.Period, acc *billing.Accumulator) error {
	lo, hi := billing.ScanWindow(cat, p)
	rows, err := s.db.QueryContext(ctx, `SELECT project, user, instance_id, gpu_model, profile, start_ms, end_ms
		FROM occupancy WHERE end_ms >= ? AND start_ms <= ? ORDER BY project, user, instance_id, gpu_model, profile, start_ms`, lo, hi)
	if err != nil {
		return fmt.Errorf("cannot read occupancy: %w", err)
	}
	var k billing.Key
	var st, en int64
	for rows.Next() {
		if err := rows.Scan(&k.Project, &k.User, &k.InstanceID, &k.GPUModel, &k.Profile, &st, &en); err != nil {
			_ = rows.Close()
			return fmt.Errorf("cannot read occupancy row: %w", err)
		}
		acc.AddOccupancy(k, st, en, false)
	}
	if err := rows.Err(); err != nil {
		_ = rows.Close()
		return fmt.Errorf("cannot read occupancy: %w", err)
	}
	_ = rows.Close()
	rows, err = s.db.QueryContext(ctx, `SELECT project, user, instance_id, gpu_model, profile, class, min_util, max_util, start_ms, end_ms
		FROM idle_spans WHERE end_ms > ? AND start_ms < ? AND (class = 0 OR min_util < ?)
		ORDER BY project, user, instance_id, gpu_model, profile, start_ms`, p.StartMS(), p.EndMS(), billing.MaxIdleThreshold(cat)+1e-9)
	if err != nil {
		return fmt.Errorf("cannot read idle runs: %w", err)
	}
	feed := ingest.NewIdleFeeder(acc, cat, p)
	var r ingest.IdleRun
	for rows.Next() {
		if err := rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.Class, &r.MinUtil, &r.MaxUtil, &r.StartMS, &r.EndMS); err != nil {
			_ = rows.Close()
			return fmt.Errorf("cannot read idle run: %w", err)
		}
		feed.Add(&r)
	}
	if err := rows.Err(); err != nil {
		_ = rows.Close()
		return fmt.Errorf("cannot read idle runs: %w", err)
	}
	_ = rows.Close()
	if !feed.Pending() {
		return nil
	}
	// Exact fallback for runs the threshold cuts through: their raw samples.
	var pending []ingest.IdleRun
	_ = feed.PendingRuns(func(r *ingest.IdleRun) error { pending = append(pending, *r); return nil })
	for _, r := range pending {
		if err := s.rawIdle(ctx, feed, &r); err != nil {
			return err
		}
	}
	return feed.Resolve()
}

func (s *Store) rawIdle(ctx context.Context, feed *ingest.IdleFeeder, r *ingest.IdleRun) error {
	rows, err := s.db.QueryContext(ctx, `SELECT start_ms, interval_ms, util FROM raw_samples
		WHERE instance_id = ? AND start_ms >= ? AND start_ms < ? AND project = ? AND user = ? AND gpu_model = ? AND profile = ?
		AND util IS NOT NULL`, r.Key.InstanceID, r.StartMS, r.EndMS, r.Key.Project, r.Key.User, r.Key.GPUModel, r.Key.Profile)
	if err != nil {
		return fmt.Errorf("cannot read raw samples for idle time: %w", err)
	}
	defer rows.Close() //nolint:errcheck // statement/rows close after use; errors surface on Exec/Next
	pt := ingest.RawPoint{Key: r.Key}
	var interval int64
	for rows.Next() {
		if err := rows.Scan(&pt.StartMS, &interval, &pt.Util); err != nil {
			return fmt.Errorf("cannot read raw sample: %w", err)
		}
		pt.EndMS = pt.StartMS + interval
		feed.Raw(&pt)
	}
	return rows.Err()
}
