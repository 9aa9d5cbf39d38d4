package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
)

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string // file name, e.g. 0001_init.sql
	SQL     string
}

var migrationName = regexp.MustCompile(`^([0-9]{4})_[a-z0-9_]+\.sql$`)

// LoadMigrations reads dir of fsys: files NNNN_name.sql, numbered from 1
// without gaps. Anything else in dir is an error, so that a misnamed file
// is never silently skipped.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("cannot read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("migration file %q: want NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("cannot read migration %s: %w", e.Name(), err)
		}
		v, _ := strconv.Atoi(m[1])
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %04d (versions are 1, 2, … without gaps or repeats)", m.Name, i+1)
		}
	}
	return ms, nil
}

// migrate applies the pending migrations in one transaction, after the
// dialect's lock: two processes starting at once apply each migration once,
// and a failing migration leaves the schema as it was.
func (s *Store) migrate(ctx context.Context, ms []Migration) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: cannot begin migration transaction: %w", s.d.Name, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if s.d.MigrationLock != "" {
		if _, err = tx.ExecContext(ctx, s.d.MigrationLock); err != nil {
			return fmt.Errorf("%s: cannot take the migration lock: %w", s.d.Name, err)
		}
	}
	if _, err = tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS ledger_schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("%s: cannot create ledger_schema_migrations: %w", s.d.Name, err)
	}
	var have sql.NullInt64
	if err = tx.QueryRowContext(ctx, `SELECT MAX(version) FROM ledger_schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("%s: cannot read the ledger schema version: %w", s.d.Name, err)
	}
	if int(have.Int64) > len(ms) {
		return fmt.Errorf("%s: the ledger schema is at version %d, newer than this program knows (%d): run a newer cardhour", s.d.Name, have.Int64, len(ms))
	}
	for _, m := range ms[have.Int64:] {
		if _, err = tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("%s: ledger migration %s failed: %w", s.d.Name, m.Name, err)
		}
		if _, err = tx.ExecContext(ctx, s.d.Rebind(`INSERT INTO ledger_schema_migrations (version, name, applied_ms) VALUES (?, ?, ?)`),
			m.Version, m.Name, s.now().UnixMilli()); err != nil {
			return fmt.Errorf("%s: cannot record ledger migration %s: %w", s.d.Name, m.Name, err)
		}
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("%s: cannot commit ledger migrations: %w", s.d.Name, err)
	}
	return nil
}
