// Package postgres is the ledger in clusters: ledger.Store in PostgreSQL
// (github.com/jackc/pgx/v5 through database/sql). Transactions run at READ
// COMMITTED; what must not race is serialised by row locks: finalizing
// locks the invoice's row (SELECT … FOR UPDATE) and then the year's
// counter row (INSERT … ON CONFLICT DO UPDATE … RETURNING), held until
// commit. Migrations run under a transaction-scoped advisory lock, so
// replicas starting together apply each one once.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/internal/sqlstore"
	"github.com/cardhour/cardhour/internal/storefail"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Config configures a Store.
type Config struct {
	// DSN is a libpq-style URL or key=value string, e.g.
	// postgres://user@host:5432/db?sslmode=disable.
	DSN      string
	Clock    func() time.Time // the store never reads the time otherwise
	MaxConns int              // connection pool size; 0: 10
	// Existing opens only a database that holds the ledger's schema; it
	// never creates it (see sqlite.Config.Existing).
	Existing bool
}

// migrationLockKey is the advisory lock key held while migrating ("cardhour
// ledger" in ASCII, truncated to 63 bits).
const migrationLockKey = 0x63686c6564676572

// Open connects and applies pending migrations. Errors of a server that
// cannot answer for now (unreachable, refusing connections, shutting down
// or starting: 57P01, 57P02, 57P03, out of disk) wrap
// ledger.ErrUnavailable and name the cause, at start-up and in every later
// call.
func Open(ctx context.Context, cfg Config) (ledger.Store, error) {
	var errs []error
	if cfg.DSN == "" {
		errs = append(errs, errors.New("postgres ledger: DSN is required"))
	}
	if cfg.Clock == nil {
		errs = append(errs, errors.New("postgres ledger: clock is required"))
	}
	if cfg.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("postgres ledger: max conns %d: want 0 (default) or more", cfg.MaxConns))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ms, err := sqlstore.LoadMigrations(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	db, err := storefail.OpenDB(stdlib.GetDefaultDriver(), cfg.DSN, storefail.Postgres)
	if err != nil {
		return nil, fmt.Errorf("postgres ledger: %w", err)
	}
	n := cfg.MaxConns
	if n == 0 {
		n = 10
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres ledger: cannot connect: %w", storefail.Wrap(err, storefail.Postgres))
	}
	if cfg.Existing {
		var present bool
		if err := db.QueryRowContext(ctx, `SELECT to_regclass('ledger_schema_migrations') IS NOT NULL`).Scan(&present); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("postgres ledger: cannot read the schema: %w", err)
		}
		if !present {
			_ = db.Close()
			return nil, errors.New("postgres ledger: the database holds no state store (schema missing): `cardhour migrate --state postgres://…` creates it (serve creates it at start)")
		}
	}
	return sqlstore.New(ctx, sqlstore.Config{DB: db, Dialect: Dialect, Clock: cfg.Clock, Migrations: ms})
}

// Dialect is PostgreSQL's: $n placeholders, an advisory lock for migrations.
var Dialect = sqlstore.Dialect{
	Name:          "postgres",
	Rebind:        rebind,
	IsUnique:      isUnique,
	ForUpdate:     " FOR UPDATE",
	MigrationLock: "SELECT pg_advisory_xact_lock(" + strconv.FormatInt(migrationLockKey, 10) + ")",
}

// rebind turns ?-placeholders into $1, $2, …; the ledger's queries have no
// '?' anywhere else.
func rebind(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isUnique(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == "23505"
}
