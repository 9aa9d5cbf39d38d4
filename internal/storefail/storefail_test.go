package storefail_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"

	"github.com/cardhour/cardhour/internal/storefail"
)

func open(t *testing.T, path, params string) *sql.DB {
	t.Helper()
	c, err := sqlite.NewConnector("file:" + path + "?" + params)
	require.NoError(t, err)
	db := sql.OpenDB(storefail.Connector(c, storefail.SQLite(path)))
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// A full database (max_page_count stands in for a full disk) and one locked
// by another writer are ErrUnavailable with their cause, whichever call
// meets them; the driver's error is still found beneath.
func TestSQLiteErrorsAreClassifiedAtTheDriver(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	db := open(t, path, "_pragma=journal_mode(WAL)&_txlock=immediate")
	_, err := db.ExecContext(ctx, `CREATE TABLE t (v BLOB)`)
	require.NoError(t, err)

	full := open(t, path, "_pragma=max_page_count(3)")
	_, err = full.ExecContext(ctx, `INSERT INTO t VALUES (zeroblob(100000))`)
	require.ErrorIs(t, err, storefail.ErrUnavailable)
	require.Equal(t, "disk full", storefail.Cause(fmt.Errorf("wrapped: %w", err)))
	var se *sqlite.Error
	require.True(t, errors.As(err, &se), "%T", err)

	// Another writer holds the write lock; no busy timeout.
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `INSERT INTO t VALUES (1)`)
	require.NoError(t, err)
	other := open(t, path, "_pragma=busy_timeout(0)")
	_, err = other.ExecContext(ctx, `INSERT INTO t VALUES (2)`)
	require.ErrorIs(t, err, storefail.ErrUnavailable)
	require.Contains(t, storefail.Cause(err), "database locked")
	require.NoError(t, tx.Rollback())

	// Reads, the end of rows and other errors are left alone.
	rows, err := db.QueryContext(ctx, `SELECT count(*) FROM t`)
	require.NoError(t, err)
	require.True(t, rows.Next())
	require.False(t, rows.Next())
	require.NoError(t, rows.Err())
	_, err = db.ExecContext(ctx, `INSERT INTO nosuch VALUES (1)`)
	require.Error(t, err)
	require.NotErrorIs(t, err, storefail.ErrUnavailable)
}

func TestPostgresCauses(t *testing.T) {
	for code, want := range map[string]string{
		"57P01": "admin shutdown", "57P02": "after a crash", "57P03": "cannot accept connections yet",
		"53100": "disk is full", "08006": "connection to the database server failed", "25006": "read-only",
	} {
		err := storefail.Wrap(fmt.Errorf("q: %w", &pgconn.PgError{Code: code}), storefail.Postgres)
		require.ErrorIs(t, err, storefail.ErrUnavailable, code)
		require.Contains(t, storefail.Cause(err), want, code)
	}
	for _, code := range []string{"23505", "42P01", "22P02"} {
		err := storefail.Wrap(&pgconn.PgError{Code: code}, storefail.Postgres)
		require.NotErrorIs(t, err, storefail.ErrUnavailable, code)
	}
}
