// Package sqlite is the ledger on one machine: ledger.Store in an SQLite
// file (modernc.org/sqlite, pure Go). Its tables are named ledger_…, and
// its schema version is kept in ledger_schema_migrations (not in PRAGMA
// user_version, which the usage store uses), so the usage store's file can
// hold the ledger too.
//
// Writes are serialised: every transaction begins IMMEDIATE (it takes the
// database's write lock at BEGIN and waits up to 10 s for it), so a
// read-modify-write such as numbering an invoice cannot interleave with
// another connection's, in this process or another.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cardhour/cardhour/billing/ledger"
	"github.com/cardhour/cardhour/billing/ledger/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Config configures a Store.
type Config struct {
	Path  string           // database file; created when missing
	Clock func() time.Time // the store never reads the time otherwise
}

// Open opens (creating if needed) the database and applies pending
// migrations.
func Open(ctx context.Context, cfg Config) (ledger.Store, error) {
	var errs []error
	if cfg.Path == "" {
		errs = append(errs, errors.New("sqlite ledger: path is required"))
	}
	if cfg.Clock == nil {
		errs = append(errs, errors.New("sqlite ledger: clock is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ms, err := sqlstore.LoadMigrations(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	dsn := "file:" + (&url.URL{Path: cfg.Path}).EscapedPath() +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("cannot open SQLite database %s: %w", cfg.Path, err)
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises writes anyway
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("cannot open SQLite database %s: %w", cfg.Path, err)
	}
	return sqlstore.New(ctx, sqlstore.Config{DB: db, Dialect: Dialect, Clock: cfg.Clock, Migrations: ms})
}

// Dialect is SQLite's: ?-placeholders as they are, no migration lock
// (BEGIN IMMEDIATE is the lock).
var Dialect = sqlstore.Dialect{
	Name:     "sqlite",
	Rebind:   func(q string) string { return q },
	IsUnique: isUnique,
}

func isUnique(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}
