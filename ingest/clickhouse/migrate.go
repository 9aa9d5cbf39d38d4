package clickhouse

import (
	"context"
	"fmt"
	"regexp"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/cardhour/cardhour/ingest"
	chschema "github.com/cardhour/cardhour/schemas/clickhouse"
)

// MigrationResult says what Migrate did.
type MigrationResult struct {
	ServerVersion string
	Features      chschema.Features
	Applied       []int // versions applied by this call
	Current       int   // highest version recorded after the call
}

// Migrate creates the database if needed and applies the embedded migrations not
// yet recorded in schema_migrations, in order. Every migration is written to be
// safe to apply again (CREATE … IF NOT EXISTS), so a crash between a migration
// and its record, or two processes migrating at once, is harmless.
func (s *Store) Migrate(ctx context.Context) (MigrationResult, error) {
	var res MigrationResult
	var version string
	if err := s.conn.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		return res, classify(fmt.Errorf("cannot read the ClickHouse version: %w", err))
	}
	f, err := chschema.FeaturesFor(version)
	if err != nil {
		return res, err
	}
	res.ServerVersion, res.Features = version, f
	if s.cluster != nil {
		if err := s.checkReplicas(ctx); err != nil {
			return res, err
		}
		ctx = ch.Context(ctx, ch.WithSettings(ch.Settings{"distributed_ddl_task_timeout": 120, "insert_distributed_sync": 1}))
	}
	if err := s.createVersionTable(ctx); err != nil {
		return res, err
	}
	applied, err := s.appliedVersions(ctx)
	if err != nil {
		return res, err
	}
	for v := range applied {
		res.Current = max(res.Current, v)
	}
	ms, err := chschema.Migrations()
	if err != nil {
		return res, err
	}
	if latest := ms[len(ms)-1].Version; res.Current > latest {
		return res, ingest.Permanent(fmt.Errorf("database %s has schema version %d, newer than this build of cardhour knows (%d): upgrade cardhour", s.cfg.Database, res.Current, latest))
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if err := s.migrateOne(ctx, m, f); err != nil {
			return res, fmt.Errorf("migration %04d_%s failed on ClickHouse %s: %w", m.Version, m.Name, version, err)
		}
		if err := s.recordMigration(ctx, m); err != nil {
			return res, err
		}
		s.cfg.Logger.Info("applied migration", "database", s.cfg.Database, "version", m.Version, "name", m.Name)
		res.Applied = append(res.Applied, m.Version)
		res.Current = max(res.Current, m.Version)
	}
	return res, nil
}

// createVersionTable creates the database and schema_migrations: on a
// cluster, on every server, schema_migrations replicated to all of them (one
// ZooKeeper path for all shards), so that every server knows the version.
func (s *Store) createVersionTable(ctx context.Context) error {
	on, engine := "", "MergeTree"
	if s.cluster != nil {
		on = " ON CLUSTER " + s.cluster.name
		engine = "ReplicatedMergeTree('/clickhouse/tables/all/" + s.cfg.Database + "/schema_migrations', '{shard}-{replica}')"
	}
	if err := s.conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+s.db+on); err != nil {
		return classify(fmt.Errorf("cannot create database %s: %w", s.db, err))
	}
	if err := s.conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+s.table("schema_migrations")+on+
		" (version UInt32, name String, applied_at DateTime('UTC')) ENGINE = "+engine+" ORDER BY version"); err != nil {
		return fmt.Errorf("cannot create schema_migrations: %w", err)
	}
	return s.checkKind(ctx)
}

// appliedVersions reads schema_migrations.
func (s *Store) appliedVersions(ctx context.Context) (map[int]bool, error) {
	applied := map[int]bool{}
	rows, err := s.conn.Query(ctx, "SELECT version FROM "+s.table("schema_migrations"))
	if err != nil {
		return nil, fmt.Errorf("cannot read schema_migrations: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("cannot read schema_migrations: %w", err)
		}
		applied[int(v)] = true
	}
	return applied, rows.Err()
}

// migrateOne applies one migration: on one server its DDL, on a cluster the
// DDL's cluster form (clusterDDL).
func (s *Store) migrateOne(ctx context.Context, m chschema.Migration, f chschema.Features) error {
	ddl := chschema.Render(m.SQL, f, s.cfg.RawRetentionDays)
	if s.cluster != nil {
		return s.migrateCluster(ctx, m, ddl)
	}
	present, err := s.columnPresent(ctx, ddl, "")
	if err != nil || present {
		return err
	}
	// Tables are created in the target database: prefix CREATE TABLE names.
	return s.apply(ctx, m, qualify(ddl, s.db))
}

// recordMigration inserts m's row into schema_migrations; on a cluster with
// insert_quorum of every server, which a migration needs up anyway.
func (s *Store) recordMigration(ctx context.Context, m chschema.Migration) error {
	if s.cluster != nil {
		if n := s.cluster.replicaCount(); n > 1 {
			ctx = ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_quorum": n, "insert_quorum_timeout": int(s.cluster.quorumTimeout.Milliseconds())}))
		}
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table("schema_migrations")+" (version, name, applied_at)")
	if err != nil {
		return fmt.Errorf("cannot record migration %d: %w", m.Version, err)
	}
	if err := b.Append(uint32(m.Version), m.Name, time.Now().UTC()); err != nil {
		_ = b.Close()
		return fmt.Errorf("cannot record migration %d: %w", m.Version, err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("cannot record migration %d: %w", m.Version, err)
	}
	return nil
}

// apply runs one migration: its DDL, or the Go back-fill of run packs.
func (s *Store) apply(ctx context.Context, m chschema.Migration, ddl string) error {
	switch m.Name {
	case "run_packs_from_runs":
		return s.fillPacks(ctx)
	case "run_packs_granules":
		return s.regranulePacks(ctx)
	case "run_packs_sealed":
		return s.resealPacks(ctx)
	}
	return s.conn.Exec(ctx, ddl)
}

var addColumn = regexp.MustCompile(`(?i)^ALTER TABLE\s+([A-Za-z_][A-Za-z0-9_]*)\s+ADD COLUMN\s+([A-Za-z_][A-Za-z0-9_]*)\s`)

// columnPresent reports whether ddl adds a column (ALTER TABLE t ADD COLUMN c …)
// that the table already has: ClickHouse 18.16 knows no ADD COLUMN IF NOT
// EXISTS, so this check keeps such a migration safe to apply again.
// suffix names the table checked: m[1]+suffix (a cluster's local table).
func (s *Store) columnPresent(ctx context.Context, ddl, suffix string) (bool, error) {
	m := addColumn.FindStringSubmatch(ddl)
	if m == nil {
		return false, nil
	}
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name = ?",
		s.cfg.Database, m[1]+suffix, m[2]).Scan(&n); err != nil {
		return false, classify(fmt.Errorf("cannot read the columns of %s: %w", m[1], err))
	}
	return n > 0, nil
}

var tableRef = regexp.MustCompile(`(?i)\b(CREATE TABLE IF NOT EXISTS|CREATE TABLE|ALTER TABLE|DROP TABLE IF EXISTS|INSERT INTO|FROM)\s+([A-Za-z_][A-Za-z0-9_]*)\b`)

// qualify prefixes the table names of DDL statements (and of INSERT … SELECT
// data migrations) with the database, since the migration files name tables
// without one.
func qualify(ddl, db string) string {
	return tableRef.ReplaceAllString(ddl, "${1} "+db+".${2}")
}
