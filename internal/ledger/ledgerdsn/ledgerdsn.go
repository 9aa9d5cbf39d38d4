// Package ledgerdsn opens a state store (ledger.Store) from a URL:
//
//	sqlite:///path/to/file.db          SQLite (sqlite://relative.db too); the
//	                                   usage store's file may be used
//	postgres://user@host:port/db?…     PostgreSQL (postgresql:// too); the URL
//	                                   is passed to pgx as it is (sslmode,
//	                                   password, search_path, …)
package ledgerdsn

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/postgres"
	"github.com/cardhour/cardhour/internal/ledger/sqlite"
)

// Options are the settings that do not fit in the URL.
type Options struct {
	Clock func() time.Time // required: the store never reads the time otherwise
	// Existing opens only a state store that exists (a SQLite file holding
	// the ledger or the usage store, a PostgreSQL database holding the
	// ledger's schema) and never creates one: every command but migrate,
	// serve and demo sets it.
	Existing bool
}

// Open parses dsn and opens (migrating) the store it names. Errors of a
// store that cannot answer for now wrap ledger.ErrUnavailable.
func Open(ctx context.Context, dsn string, opt Options) (ledger.Store, error) {
	if opt.Clock == nil {
		return nil, errors.New("state store: a clock is required")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("state store %q: %w", dsn, err)
	}
	switch u.Scheme {
	case "sqlite":
		if u.RawQuery != "" {
			return nil, fmt.Errorf("state store %q: sqlite:// takes no parameters", dsn)
		}
		path := u.Host + u.Path // sqlite:///abs.db → /abs.db; sqlite://rel.db → rel.db
		if path == "" {
			return nil, fmt.Errorf("state store %q: want sqlite:///path/to/file.db", dsn)
		}
		return sqlite.Open(ctx, sqlite.Config{Path: path, Clock: opt.Clock, Existing: opt.Existing})
	case "postgres", "postgresql":
		if u.Host == "" {
			return nil, fmt.Errorf("state store %q: want postgres://user@host:port/database", dsn)
		}
		return postgres.Open(ctx, postgres.Config{DSN: dsn, Clock: opt.Clock, Existing: opt.Existing})
	}
	return nil, fmt.Errorf("state store %q: unknown scheme %q (want sqlite:// or postgres://)", dsn, u.Scheme)
}
