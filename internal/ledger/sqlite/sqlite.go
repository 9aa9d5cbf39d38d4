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
	"io/fs"
	"net/url"
	"os"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/internal/sqlstore"
	"github.com/cardhour/cardhour/internal/storefail"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Config configures a Store.
type Config struct {
	Path  string           // database file; created when missing unless Existing
	Clock func() time.Time // the store never reads the time otherwise
	// Existing opens only a file that exists and holds the ledger or the
	// usage store (serve keeps the state there by default); it never
	// creates one. Commands other than migrate, serve and demo set it, so
	// that a typo in a path is an error rather than a new, empty store.
	Existing bool
}

// Open opens (creating if needed, unless cfg.Existing) the database and
// applies pending migrations. Errors of a database that cannot answer for
// now (a full disk, a read-only file system, a file locked by another
// writer) wrap ledger.ErrUnavailable and name the cause, at start-up and in
// every later call.
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
	if cfg.Existing {
		// os.Stat, never a descriptor: closing one would drop this
		// process's SQLite locks on the file.
		fi, err := os.Stat(cfg.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("no state store at %s: `cardhour migrate --state sqlite://%s` creates one (serve and demo create theirs at start)", cfg.Path, cfg.Path)
		case err != nil:
			return nil, fmt.Errorf("cannot open SQLite database %s: %w", cfg.Path, err)
		case fi.IsDir():
			return nil, fmt.Errorf("state store %s is a directory, not a database file", cfg.Path)
		}
		dsn += "&mode=rw" // never create it
	}
	classify := storefail.SQLite(cfg.Path)
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("cannot open SQLite database %s: %w", cfg.Path, err)
	}
	db := sql.OpenDB(storefail.Connector(c, classify))
	db.SetMaxOpenConns(1) // one writer; SQLite serialises writes anyway
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("cannot open SQLite database %s: %w", cfg.Path, storefail.Wrap(err, classify))
	}
	if cfg.Existing {
		if err := checkExisting(ctx, db, cfg.Path); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return sqlstore.New(ctx, sqlstore.Config{DB: db, Dialect: Dialect, Clock: cfg.Clock, Migrations: ms})
}

// checkExisting fails unless the file holds the ledger or the usage store.
func checkExisting(ctx context.Context, db *sql.DB, path string) error {
	var ledgerTables, usageVersion int
	err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger_schema_migrations'),
		(SELECT user_version FROM pragma_user_version)`).Scan(&ledgerTables, &usageVersion)
	if err != nil {
		return fmt.Errorf("cannot read SQLite database %s: %w", path, err)
	}
	if ledgerTables == 0 && usageVersion == 0 {
		return fmt.Errorf("%s holds no state store (neither the ledger nor a usage store): `cardhour migrate --state sqlite://%s` creates one", path, path)
	}
	return nil
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
