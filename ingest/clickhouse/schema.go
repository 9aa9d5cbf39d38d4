package clickhouse

import (
	"context"
	"errors"
	"fmt"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/cardhour/cardhour/ingest"
	chschema "github.com/cardhour/cardhour/schemas/clickhouse"
)

// permanentCodes are the ClickHouse exception codes that no retry cures.
var permanentCodes = map[int32]bool{
	16:  true, // NO_SUCH_COLUMN_IN_TABLE: the schema is not this build's
	60:  true, // UNKNOWN_TABLE
	81:  true, // UNKNOWN_DATABASE
	164: true, // READONLY: the user or server is read-only
	192: true, // UNKNOWN_USER
	193: true, // WRONG_PASSWORD
	194: true, // REQUIRED_PASSWORD
	243: true, // NOT_ENOUGH_SPACE
	291: true, // DATABASE_ACCESS_DENIED
	497: true, // ACCESS_DENIED
	516: true, // AUTHENTICATION_FAILED
}

// classify marks err permanent when the server answered with an exception
// that no retry cures (see permanentCodes); lost connections, timeouts and
// other exceptions stay transient.
func classify(err error) error {
	var ex *ch.Exception
	if errors.As(err, &ex) && permanentCodes[ex.Code] {
		return ingest.Permanent(err)
	}
	return err
}

// SchemaVersion is the highest embedded migration: the schema this build
// writes and reads.
func SchemaVersion() (int, error) {
	ms, err := chschema.Migrations()
	if err != nil {
		return 0, err
	}
	return ms[len(ms)-1].Version, nil
}

// CheckSchema fails (ingest.Permanent) unless the database exists and its
// schema_migrations record this build's schema version: a reader or a writer
// opened without Migrate never creates anything.
func (s *Store) CheckSchema(ctx context.Context) error {
	want, err := SchemaVersion()
	if err != nil {
		return err
	}
	db := s.cfg.Database // validated: letters, digits and underscores
	hint := fmt.Sprintf("run `cardhour migrate --store clickhouse://%s/%s` (or `cardhour ingest --migrate`) first", s.cfg.Addr, db)
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = '"+db+"'").Scan(&n); err != nil {
		return classify(fmt.Errorf("cannot check the database %s on ClickHouse %s: %w", db, s.cfg.Addr, err))
	}
	if n == 0 {
		return ingest.Permanent(fmt.Errorf("no store at clickhouse://%s/%s: the database does not exist; %s", s.cfg.Addr, db, hint))
	}
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = '"+db+"' AND name = 'schema_migrations'").Scan(&n); err != nil {
		return classify(fmt.Errorf("cannot check the schema of %s on ClickHouse %s: %w", db, s.cfg.Addr, err))
	}
	if n == 0 {
		return ingest.Permanent(fmt.Errorf("database %s on ClickHouse %s holds no cardhour schema (no schema_migrations table); %s", db, s.cfg.Addr, hint))
	}
	if err := s.checkKind(ctx); err != nil {
		return err
	}
	var v uint32
	if err := s.conn.QueryRow(ctx, "SELECT max(version) FROM "+s.table("schema_migrations")).Scan(&v); err != nil {
		return classify(fmt.Errorf("cannot read the schema version of %s on ClickHouse %s: %w", db, s.cfg.Addr, err))
	}
	switch {
	case int(v) > want:
		return ingest.Permanent(fmt.Errorf("database %s on ClickHouse %s has schema version %d, newer than this build of cardhour knows (%d): upgrade cardhour", db, s.cfg.Addr, v, want))
	case int(v) < want:
		return ingest.Permanent(fmt.Errorf("database %s on ClickHouse %s has schema version %d, this build needs %d: %s", db, s.cfg.Addr, v, want, hint))
	}
	return nil
}
