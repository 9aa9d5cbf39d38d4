// Package sqlite is the embedded (pure Go, modernc.org/sqlite) implementation of
// ingest.Store and of the rows billing reads (ingest.Backend), for standalone and demo deployments and
// for tests. It keeps the same tables and the same semantics as the ClickHouse
// store: raw samples, occupancy runs and idle-candidate runs, where a run written
// again with the same start keeps its longest end.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"modernc.org/sqlite"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storefail"
	"github.com/cardhour/cardhour/schemas"
)

// Config configures a Store.
type Config struct {
	Path   string // database file
	Logger *slog.Logger
	// ReadOnly opens an existing store for reading (billing): the file must
	// exist and hold this build's schema, and nothing is created or migrated.
	// Otherwise the file is created if needed and migrated (ingest, migrate).
	ReadOnly bool
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
	// Idle runs by utilisation class (schemas.IdleRun); see the ClickHouse
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
	// Input rejected at ingest (ingest.Reject), one row per source: see the
	// ClickHouse migration 0006.
	`CREATE TABLE IF NOT EXISTS rejects (
		source TEXT NOT NULL PRIMARY KEY, ts_ms INTEGER NOT NULL, reason TEXT NOT NULL, error TEXT NOT NULL,
		ingested_ms INTEGER NOT NULL) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS rejects_ts ON rejects (ts_ms)`,
	// Reads by time over the whole fleet (usage, held now, data quality).
	`CREATE INDEX IF NOT EXISTS raw_samples_start ON raw_samples (start_ms)`,
	// A counter every batch bumps in its transaction: readers that cache
	// usage reports (reads.UsageCache) know from it whether data changed.
	`CREATE TABLE IF NOT EXISTS data_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)`,
	`INSERT OR IGNORE INTO data_version (id, version) VALUES (1, 0)`,
	// The sample's holder_ref (see the ClickHouse migration 0007); older rows read ''.
	`ALTER TABLE raw_samples ADD COLUMN holder_ref TEXT NOT NULL DEFAULT ''`,
	// The latest held sample of every instance (see the ClickHouse migrations
	// 0008 and 0009): one row per instance, replaced only by a sample starting
	// at or after it. util is 0 when util_known = 0.
	`CREATE TABLE IF NOT EXISTS latest_samples (
		instance_id TEXT NOT NULL PRIMARY KEY, start_ms INTEGER NOT NULL, interval_ms INTEGER NOT NULL, node TEXT NOT NULL,
		gpu_uuid TEXT NOT NULL, gpu_model TEXT NOT NULL, profile TEXT NOT NULL, project TEXT NOT NULL, user TEXT NOT NULL,
		util REAL NOT NULL, util_known INTEGER NOT NULL, processes INTEGER NOT NULL, holder_ref TEXT NOT NULL) WITHOUT ROWID`,
	// Filled from the raw samples written before: per instance its held
	// sample with the greatest start (SQLite takes the bare columns from the
	// row of max()).
	`INSERT INTO latest_samples (` + latestColumns + `)
		SELECT instance_id, max(start_ms), interval_ms, node, gpu_uuid, gpu_model, profile, project, user,
			coalesce(util, 0), util IS NOT NULL, processes, holder_ref
		FROM raw_samples WHERE project != '' GROUP BY instance_id
		ON CONFLICT (instance_id) DO UPDATE SET ` + latestUpdate,
	// Usage reads of some projects or users (reads.KeyedRuns, ingest.KeyFilter):
	// their runs by key and end, the node filter's raw samples by node and start.
	`CREATE INDEX IF NOT EXISTS occupancy_project_end ON occupancy (project, end_ms)`,
	`CREATE INDEX IF NOT EXISTS occupancy_user_end ON occupancy (user, end_ms)`,
	`CREATE INDEX IF NOT EXISTS idle_spans_project_end ON idle_spans (project, end_ms)`,
	`CREATE INDEX IF NOT EXISTS idle_spans_user_end ON idle_spans (user, end_ms)`,
	`CREATE INDEX IF NOT EXISTS raw_samples_node_start ON raw_samples (node, start_ms)`,
	// The data-quality rollup (ingest.Activity, see the ClickHouse migrations
	// 0010 to 0013), written in each batch's transaction: every (UTC minute,
	// node) in which a sample of the node starts, and the unheld samples that
	// an idle threshold above 0 may call busy, with the raw sample's identity.
	// Both are filled once from the raw samples written before.
	`CREATE TABLE IF NOT EXISTS node_minutes (
		minute_ms INTEGER NOT NULL, node TEXT NOT NULL, PRIMARY KEY (minute_ms, node)) WITHOUT ROWID`,
	`INSERT OR IGNORE INTO node_minutes (minute_ms, node)
		SELECT start_ms - start_ms % 60000 AS m, node FROM raw_samples GROUP BY m, node`,
	`CREATE TABLE IF NOT EXISTS unheld_busy (
		instance_id TEXT NOT NULL, start_ms INTEGER NOT NULL, user TEXT NOT NULL, node TEXT NOT NULL,
		interval_ms INTEGER NOT NULL, processes INTEGER NOT NULL, util REAL,
		PRIMARY KEY (instance_id, start_ms, user)) WITHOUT ROWID`,
	// By start, covering what the check reads (no lookup per row).
	`CREATE INDEX IF NOT EXISTS unheld_busy_start ON unheld_busy (start_ms, processes, util, node, instance_id, interval_ms)`,
	`INSERT OR REPLACE INTO unheld_busy (instance_id, start_ms, user, node, interval_ms, processes, util)
		SELECT instance_id, start_ms, user, node, interval_ms, processes, util FROM raw_samples
		WHERE project = '' AND (processes > 0 OR util > 0)`,
	// Run packs (schemas.RunPack): the occupancy and idle runs of one project
	// whose start falls on one UTC day, as one batch wrote them, in one
	// binary value, written in the batch's transaction next to the run rows.
	// A usage read of a project decodes its few dozen packs instead of
	// reading its thousands of run rows (reads.PackedRuns). Filled once from
	// the runs written before, in Go (backfillPacks).
	`CREATE TABLE IF NOT EXISTS run_packs (
		project TEXT NOT NULL, day_ms INTEGER NOT NULL, min_ms INTEGER NOT NULL, max_ms INTEGER NOT NULL, runs BLOB NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS run_packs_project_max ON run_packs (project, max_ms)`,
	backfillPacks,
	// A share of a card (schemas.Sample: share_kind, share_mem, share_cores;
	// see the ClickHouse migrations 0016 and 0017): the kind, '' on whole
	// cards and MIG slices, and the fractions, NULL when absent in
	// raw_samples (as util) and 0 in latest_samples (as its util). Rows
	// written before read as no share.
	`ALTER TABLE raw_samples ADD COLUMN share_kind TEXT NOT NULL DEFAULT ''`,
	`ALTER TABLE raw_samples ADD COLUMN share_mem REAL`,
	`ALTER TABLE raw_samples ADD COLUMN share_cores REAL`,
	`ALTER TABLE latest_samples ADD COLUMN share_kind TEXT NOT NULL DEFAULT ''`,
	`ALTER TABLE latest_samples ADD COLUMN share_mem REAL NOT NULL DEFAULT 0`,
	`ALTER TABLE latest_samples ADD COLUMN share_cores REAL NOT NULL DEFAULT 0`,
	// Each batch writes a pack per project and day it touched; when a project
	// and day has more than packMergeAt of them, the batch merges them into
	// one (mergePacks), found through this index.
	`CREATE INDEX IF NOT EXISTS run_packs_project_day ON run_packs (project, day_ms)`,
	// Packs are written sealed (schemas.RunPack, version 2: LZ4, about a
	// fifth of the bytes); the packs written before are sealed in Go
	// (sealPacks).
	resealPacks,
}

// latestColumns and latestUpdate are the columns of latest_samples as
// migration 14 created them, which that migration's back-fill names: frozen
// with it (a migration never changes). Writers use latestWriteColumns and
// latestWriteUpdate.
const latestColumns = `instance_id, start_ms, interval_ms, node, gpu_uuid, gpu_model, profile, project, user, util, util_known, processes, holder_ref`

// latestUpdate replaces a latest sample by one starting at or after it.
const latestUpdate = `start_ms = excluded.start_ms, interval_ms = excluded.interval_ms,
	node = excluded.node, gpu_uuid = excluded.gpu_uuid, gpu_model = excluded.gpu_model, profile = excluded.profile,
	project = excluded.project, user = excluded.user, util = excluded.util, util_known = excluded.util_known,
	processes = excluded.processes, holder_ref = excluded.holder_ref
	WHERE excluded.start_ms >= latest_samples.start_ms`

// latestWriteColumns are the columns ingest writes to latest_samples.
const latestWriteColumns = latestColumns + `, share_kind, share_mem, share_cores`

// latestWriteUpdate is latestUpdate with the share fields.
const latestWriteUpdate = `share_kind = excluded.share_kind, share_mem = excluded.share_mem, share_cores = excluded.share_cores,
	` + latestUpdate

// SchemaVersion is the schema version this build writes and reads (PRAGMA
// user_version once every migration ran).
var SchemaVersion = len(migrations)

// Store is an SQLite database file.
type Store struct {
	cfg            Config
	db             *sql.DB
	migFrom, migTo int // schema versions before and after Open
}

// Open opens the database. Read-only, the file and its schema must exist;
// otherwise the file is created if needed and pending migrations are applied.
// Errors name the path and the reason, and those no retry cures (a missing
// store, a read-only file or directory, a schema newer than this build) are
// ingest.Permanent.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dsn := "file:" + (&url.URL{Path: cfg.Path}).EscapedPath() + "?_pragma=busy_timeout(10000)"
	if cfg.ReadOnly {
		if err := checkReadable(cfg.Path); err != nil {
			return nil, ingest.Permanent(err)
		}
		dsn += "&mode=ro"
	} else {
		if err := checkWritable(cfg.Path); err != nil {
			return nil, ingest.Permanent(err)
		}
		dsn += "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	}
	db, err := openDB(dsn, cfg.Path)
	if err != nil {
		return nil, classify(fmt.Errorf("cannot open SQLite store %s: %w", cfg.Path, err))
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serializes writes anyway
	s := &Store{cfg: cfg, db: db}
	if cfg.ReadOnly {
		err = s.checkSchema(ctx)
		if isCode(err, sqliteReadOnlyCantInit) || isCode(err, sqliteReadOnlyDirectory) {
			// A WAL database in a directory this process cannot write: SQLite
			// cannot create the shared-memory file a reader needs. With no
			// write-ahead log to fold in, the file alone is the whole store
			// and can be read as immutable.
			if fi, werr := os.Stat(cfg.Path + "-wal"); werr == nil && fi.Size() > 0 {
				_ = db.Close()
				return nil, ingest.Permanent(fmt.Errorf("cannot read SQLite store %s: its directory is not writable and its write-ahead log %s-wal holds changes only a writer can fold in: %w", cfg.Path, cfg.Path, err))
			}
			_ = db.Close()
			if db, err = openDB(dsn+"&immutable=1", cfg.Path); err != nil {
				return nil, classify(fmt.Errorf("cannot open SQLite store %s: %w", cfg.Path, err))
			}
			db.SetMaxOpenConns(1)
			s.db = db
			err = s.checkSchema(ctx)
		}
	} else {
		err = s.migrate(ctx)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// openDB opens the database with its errors classified: those of a store
// that cannot answer for now (disk full, read-only, locked, I/O) wrap
// storefail.ErrUnavailable and name the cause, so that the API answers 503.
func openDB(dsn, path string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(storefail.Connector(c, storefail.SQLite(path))), nil
}

// checkReadable says why path cannot be a store to read, if it cannot.
func checkReadable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no store at %s: run `cardhour ingest` or `cardhour migrate` first", path)
	case err != nil:
		return fmt.Errorf("cannot read SQLite store %s: %w", path, err)
	case fi.IsDir():
		return fmt.Errorf("SQLite store %s is a directory, not a database file", path)
	}
	// access(2), never open(2): closing a descriptor of the file drops every
	// POSIX lock this process holds on it, SQLite's included (serve keeps
	// the state store in this very file by default), and another client
	// would then take the database for unused and delete its WAL.
	if err := syscall.Access(path, accessR); err != nil {
		return fmt.Errorf("cannot read SQLite store %s: %w", path, &fs.PathError{Op: "access", Path: path, Err: err})
	}
	return nil
}

// Modes of access(2).
const (
	accessR = 0x4
	accessW = 0x2
)

// checkWritable says why SQLite could not create or write path, if it could
// not: SQLite itself only says "unable to open database file". The directory
// must exist and be writable (the journal lives next to the database), and an
// existing file must be writable.
func checkWritable(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot create SQLite store %s: directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("cannot create SQLite store %s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("cannot create SQLite store %s: %s is not a directory", path, dir)
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("SQLite store %s is a directory, not a database file", path)
		}
		// access(2), not open(2): see checkReadable.
		if err := syscall.Access(path, accessR|accessW); err != nil {
			return fmt.Errorf("cannot write SQLite store %s: %w", path, &fs.PathError{Op: "access", Path: path, Err: err})
		}
	}
	probe, err := os.CreateTemp(dir, ".cardhour-probe-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the reason; the probe's name means nothing to the reader
		}
		return fmt.Errorf("cannot write SQLite store %s: directory %s is not writable (SQLite keeps its journal next to the database): %w", path, dir, err)
	}
	_ = probe.Close()
	_ = os.Remove(probe.Name())
	return nil
}

func (s *Store) version(ctx context.Context) (int, error) {
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, classify(fmt.Errorf("cannot read the schema version of SQLite store %s: %w", s.cfg.Path, err))
	}
	if v > SchemaVersion {
		return v, ingest.Permanent(fmt.Errorf("SQLite store %s has schema version %d, newer than this build of cardhour knows (%d): upgrade cardhour", s.cfg.Path, v, SchemaVersion))
	}
	return v, nil
}

// checkSchema fails unless the store holds this build's schema.
func (s *Store) checkSchema(ctx context.Context) error {
	v, err := s.version(ctx)
	switch {
	case err != nil:
		return err
	case v == 0:
		return ingest.Permanent(fmt.Errorf("%s holds no cardhour store (schema missing): run `cardhour ingest` or `cardhour migrate --store sqlite://%s` first", s.cfg.Path, s.cfg.Path))
	case v < SchemaVersion:
		return ingest.Permanent(fmt.Errorf("SQLite store %s has schema version %d, this build needs %d: run `cardhour migrate --store sqlite://%s`", s.cfg.Path, v, SchemaVersion, s.cfg.Path))
	}
	return nil
}

// Migrate applies pending migrations and returns the schema versions before
// and after.
func (s *Store) Migrate(ctx context.Context) (from, to int, err error) {
	v, err := s.version(ctx)
	if err != nil {
		return v, v, err
	}
	for i := v; i < len(migrations); i++ {
		present, err := s.columnPresent(ctx, migrations[i])
		if err != nil {
			return v, i, classify(fmt.Errorf("SQLite migration %d of %s: %w", i+1, s.cfg.Path, err))
		}
		// An ADD COLUMN already applied is skipped (SQLite has no ADD COLUMN IF NOT EXISTS).
		if !present {
			if err := s.applyMigration(ctx, migrations[i]); err != nil {
				return v, i, classify(fmt.Errorf("SQLite migration %d of %s failed: %w", i+1, s.cfg.Path, err))
			}
		}
		if _, err := s.db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			return v, i, classify(fmt.Errorf("cannot record SQLite migration %d of %s: %w", i+1, s.cfg.Path, err))
		}
	}
	return v, len(migrations), nil
}

// applyMigration runs one migration: SQL, or a migration done in Go.
func (s *Store) applyMigration(ctx context.Context, m string) error {
	switch m {
	case backfillPacks:
		return s.inTx(ctx, func(tx *sql.Tx) error { return fillPacks(ctx, tx) })
	case resealPacks:
		return s.inTx(ctx, func(tx *sql.Tx) error { return sealPacks(ctx, tx) })
	}
	_, err := s.db.ExecContext(ctx, m)
	return err
}

var addColumn = regexp.MustCompile(`^ALTER TABLE (\w+) ADD COLUMN (\w+) `)

// columnPresent reports whether the migration adds a column the table
// already has, so that a migration applied again is harmless.
func (s *Store) columnPresent(ctx context.Context, migration string) (bool, error) {
	m := addColumn.FindStringSubmatch(migration)
	if m == nil {
		return false, nil
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, m[1], m[2]).Scan(&n); err != nil {
		return false, fmt.Errorf("cannot read the columns of %s: %w", m[1], err)
	}
	return n > 0, nil
}

func (s *Store) migrate(ctx context.Context) (err error) {
	s.migFrom, s.migTo, err = s.Migrate(ctx)
	return err
}

// Migrated returns the schema versions before and after Open (equal when
// nothing was migrated or the store was opened read-only).
func (s *Store) Migrated() (from, to int) { return s.migFrom, s.migTo }

// Path is the database file.
func (s *Store) Path() string { return s.cfg.Path }

// SQLite primary result codes that no retry cures.
const (
	sqlitePerm     = 3
	sqliteReadOnly = 8
	sqliteCorrupt  = 11
	sqliteFull     = 13
	sqliteCantOpen = 14
	sqliteNotADB   = 26
)

// SQLITE_READONLY_CANTINIT and SQLITE_READONLY_DIRECTORY: a read-only
// connection cannot create the shared-memory file of a WAL database.
const (
	sqliteReadOnlyCantInit  = sqliteReadOnly | 5<<8
	sqliteReadOnlyDirectory = sqliteReadOnly | 6<<8
)

func isCode(err error, code int) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == code
}

// classify marks err permanent when SQLite says the store is read-only,
// cannot be opened, denies access, is full, or is not a database.
func classify(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlitePerm, sqliteReadOnly, sqliteCorrupt, sqliteFull, sqliteCantOpen, sqliteNotADB:
			return ingest.Permanent(err)
		}
	}
	return err
}

// Close implements ingest.Store.
func (s *Store) Close() error { return s.db.Close() }

// inTx runs fn in one transaction, committed when fn returns nil and rolled
// back otherwise; an error names the store and is classified (permanent or
// transient) for the writer's retries.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	defer func() {
		if err != nil {
			err = classify(fmt.Errorf("SQLite store %s: %w", s.cfg.Path, err))
		}
	}()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("cannot begin SQLite transaction: %w", err)
	}
	if err = fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("cannot commit SQLite transaction: %w", err)
	}
	return nil
}

// Write implements ingest.Store in one transaction.
func (s *Store) Write(ctx context.Context, b *ingest.Batch) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := writeBatch(ctx, tx, b); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE data_version SET version = version + 1 WHERE id = 1`); err != nil {
			return fmt.Errorf("cannot bump the data version: %w", err)
		}
		return nil
	})
}

// DataVersion implements reads.DataVersioner: the number of batches
// written, counted in each batch's transaction.
func (s *Store) DataVersion(ctx context.Context) (string, error) {
	var v int64
	if err := s.db.QueryRowContext(ctx, `SELECT version FROM data_version WHERE id = 1`).Scan(&v); err != nil {
		return "", classify(fmt.Errorf("cannot read the data version of SQLite store %s: %w", s.cfg.Path, err))
	}
	return strconv.FormatInt(v, 10), nil
}

func writeBatch(ctx context.Context, tx *sql.Tx, b *ingest.Batch) error {
	raw, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO raw_samples (instance_id, start_ms, project, user,
		interval_ms, node, gpu_uuid, gpu_model, profile, util, mem_used_bytes, mem_total_bytes, processes, util_source, holder_ref,
		share_kind, share_mem, share_cores)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
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
			x.GPUModel, x.Profile, util, x.MemUsed, x.MemTotal, x.Processes, x.UtilSource, x.HolderRef,
			x.ShareKind, fraction(x.ShareMem), fraction(x.ShareCores)); err != nil {
			return fmt.Errorf("cannot insert raw sample: %w", err)
		}
	}
	if err := writeActivity(ctx, tx, ingest.ActivityOf(b.Samples)); err != nil {
		return err
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
	packs := schemas.PackRuns(b.Occupancy, b.Idle)
	if err := writePacks(ctx, tx, packs); err != nil {
		return err
	}
	if err := mergePacks(ctx, tx, packs); err != nil {
		return err
	}
	if len(b.Latest) == 0 {
		return nil
	}
	latest, err := tx.PrepareContext(ctx, `INSERT INTO latest_samples (`+latestWriteColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (instance_id) DO UPDATE SET `+latestWriteUpdate)
	if err != nil {
		return fmt.Errorf("cannot prepare latest sample upsert: %w", err)
	}
	defer latest.Close() //nolint:errcheck // statement/rows close after use; errors surface on Exec/Next
	for i := range b.Latest {
		x := &b.Latest[i]
		if x.Project == "" {
			continue // held samples only (no compactor emits another)
		}
		util, known := 0.0, 0
		if x.UtilKnown {
			util, known = x.Util, 1
		}
		if _, err = latest.ExecContext(ctx, x.InstanceID, x.StartMS, x.IntervalMS, x.Node, x.GPUUUID, x.GPUModel, x.Profile,
			x.Project, x.User, util, known, x.Processes, x.HolderRef, x.ShareKind, x.ShareMem, x.ShareCores); err != nil {
			return fmt.Errorf("cannot upsert latest sample: %w", err)
		}
	}
	return nil
}

// fraction is a share fraction as raw_samples keeps it: NULL when absent
// (0 in schemas.Sample).
func fraction(f float64) any {
	if f == 0 {
		return nil
	}
	return f
}

// writeActivity writes the data-quality rollup of a batch's samples: a node
// minute already stored is kept, a busy unheld sample replaces its row (as
// its raw sample does).
func writeActivity(ctx context.Context, tx *sql.Tx, a *ingest.Activity) error {
	if a.Empty() {
		return nil
	}
	nodes, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO node_minutes (minute_ms, node) VALUES (?, ?)`)
	if err != nil {
		return fmt.Errorf("cannot prepare node activity insert: %w", err)
	}
	defer nodes.Close() //nolint:errcheck // statement/rows close after use; errors surface on Exec/Next
	for _, n := range a.Nodes {
		if _, err := nodes.ExecContext(ctx, n.MinuteMS, n.Node); err != nil {
			return fmt.Errorf("cannot insert node activity: %w", err)
		}
	}
	if len(a.Unheld) == 0 {
		return nil
	}
	unheld, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO unheld_busy (instance_id, start_ms, user, node, interval_ms, processes, util)
		VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("cannot prepare unheld usage insert: %w", err)
	}
	defer unheld.Close() //nolint:errcheck // statement/rows close after use; errors surface on Exec/Next
	for i := range a.Unheld {
		x := &a.Unheld[i]
		var util any
		if x.UtilKnown {
			util = x.Util
		}
		if _, err := unheld.ExecContext(ctx, x.InstanceID, x.StartMS, x.User, x.Node, x.IntervalMS, x.Processes, util); err != nil {
			return fmt.Errorf("cannot insert unheld usage: %w", err)
		}
	}
	return nil
}

// WriteRejects implements ingest.Rejects in one transaction; a source already
// stored keeps its first row.
func (s *Store) WriteRejects(ctx context.Context, rs []ingest.Reject) error {
	return s.inTx(ctx, func(tx *sql.Tx) error { return writeRejects(ctx, tx, rs) })
}

func writeRejects(ctx context.Context, tx *sql.Tx, rs []ingest.Reject) error {
	ins, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO rejects (source, ts_ms, reason, error, ingested_ms) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("cannot prepare reject insert: %w", err)
	}
	defer ins.Close() //nolint:errcheck // statement/rows close after use; errors surface on Exec/Next
	now := time.Now().UnixMilli()
	for _, r := range rs {
		if _, err = ins.ExecContext(ctx, r.Source, r.TimeMS, string(r.Reason), r.Error, now); err != nil {
			return fmt.Errorf("cannot insert reject: %w", err)
		}
	}
	return nil
}

// RejectSummary implements ingest.Rejects.
func (s *Store) RejectSummary(ctx context.Context, fromMS, toMS int64, first int) (ingest.RejectSummary, error) {
	var sum ingest.RejectSummary
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM rejects WHERE ts_ms >= ? AND ts_ms < ?`, fromMS, toMS).Scan(&sum.Count); err != nil {
		return sum, fmt.Errorf("cannot read rejects: %w", err)
	}
	if sum.Count == 0 || first <= 0 {
		return sum, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT source, ts_ms, reason, error FROM rejects WHERE ts_ms >= ? AND ts_ms < ?
		ORDER BY ts_ms, source LIMIT ?`, fromMS, toMS, first)
	if err != nil {
		return sum, fmt.Errorf("cannot read rejects: %w", err)
	}
	defer rows.Close() //nolint:errcheck // statement/rows close after use; errors surface on Exec/Next
	for rows.Next() {
		var r ingest.Reject
		var reason string
		if err := rows.Scan(&r.Source, &r.TimeMS, &reason, &r.Error); err != nil {
			return sum, fmt.Errorf("cannot read reject: %w", err)
		}
		r.Reason = schemas.RejectReason(reason)
		sum.First = append(sum.First, r)
	}
	return sum, rows.Err()
}

// chunk is how many rows a read hands to billing at a time.
const chunk = 8192

// Occupancy implements reads.UsageSource: runs of equal key and start are
// one row already (the primary key keeps the longest end).
func (s *Store) Occupancy(ctx context.Context, lo, hi int64, fn func([]schemas.Run) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT project, user, instance_id, gpu_model, profile, start_ms, end_ms
		FROM occupancy WHERE end_ms >= ? AND start_ms <= ? ORDER BY project, user, instance_id, gpu_model, profile, start_ms`, lo, hi)
	if err != nil {
		return fmt.Errorf("cannot read occupancy: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	buf := make([]schemas.Run, 0, chunk)
	for rows.Next() {
		var r schemas.Run
		if err := rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.StartMS, &r.EndMS); err != nil {
			return fmt.Errorf("cannot read occupancy row: %w", err)
		}
		if buf = append(buf, r); len(buf) == chunk {
			if err := fn(buf); err != nil {
				return err
			}
			buf = make([]schemas.Run, 0, chunk)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot read occupancy: %w", err)
	}
	if len(buf) > 0 {
		return fn(buf)
	}
	return nil
}

// IdleRuns implements reads.UsageSource.
func (s *Store) IdleRuns(ctx context.Context, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT project, user, instance_id, gpu_model, profile, class, min_util, max_util, start_ms, end_ms
		FROM idle_spans WHERE end_ms > ? AND start_ms < ? AND (class = 0 OR min_util < ?)
		ORDER BY project, user, instance_id, gpu_model, profile, start_ms`, from, to, maxUtil)
	if err != nil {
		return fmt.Errorf("cannot read idle runs: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	buf := make([]schemas.IdleRun, 0, chunk)
	for rows.Next() {
		var r schemas.IdleRun
		if err := rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.Class, &r.MinUtil, &r.MaxUtil, &r.StartMS, &r.EndMS); err != nil {
			return fmt.Errorf("cannot read idle run: %w", err)
		}
		if buf = append(buf, r); len(buf) == chunk {
			if err := fn(buf); err != nil {
				return err
			}
			buf = make([]schemas.IdleRun, 0, chunk)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot read idle runs: %w", err)
	}
	if len(buf) > 0 {
		return fn(buf)
	}
	return nil
}

// RawIdle implements reads.UsageSource: one query per instance, each on the
// primary key's prefix (instance_id, start_ms).
func (s *Store) RawIdle(ctx context.Context, instances []string, from, to int64, utilBelow float64, fn func([]schemas.RawPoint) error) error {
	for _, inst := range instances {
		if err := s.rawIdle(ctx, inst, from, to, utilBelow, fn); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) rawIdle(ctx context.Context, inst string, from, to int64, utilBelow float64, fn func([]schemas.RawPoint) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT project, user, gpu_model, profile, start_ms, interval_ms, util FROM raw_samples
		WHERE instance_id = ? AND start_ms >= ? AND start_ms < ? AND project != '' AND util IS NOT NULL AND util < ?`,
		inst, from, to, utilBelow)
	if err != nil {
		return fmt.Errorf("cannot read raw samples for idle time: %w", err)
	}
	defer rows.Close() //nolint:errcheck // errors surface on Next/Err
	var buf []schemas.RawPoint
	for rows.Next() {
		pt := schemas.RawPoint{Key: schemas.Key{InstanceID: inst}}
		var interval int64
		if err := rows.Scan(&pt.Key.Project, &pt.Key.User, &pt.Key.GPUModel, &pt.Key.Profile, &pt.StartMS, &interval, &pt.Util); err != nil {
			return fmt.Errorf("cannot read raw sample: %w", err)
		}
		pt.EndMS = pt.StartMS + interval
		buf = append(buf, pt)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot read raw samples for idle time: %w", err)
	}
	if len(buf) > 0 {
		return fn(buf)
	}
	return nil
}
