package clickhouse

import (
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	chschema "github.com/cardhour/cardhour/schemas/clickhouse"
)

// WrapConn replaces the store's connection with wrap(conn): every later
// statement goes through the wrapper. It lets a test observe (and record)
// the SQL a store sends; deployments/deploytest replays it on a newer
// ClickHouse. Call it before the store is shared.
func (s *Store) WrapConn(wrap func(driver.Conn) driver.Conn) { s.conn = wrap(s.conn) }

// MigrationDDL returns the statements Migrate sends to apply every embedded
// migration in database on a server with features f, in order, one per
// migration (the schema_migrations bookkeeping left out).
func MigrationDDL(database string, f chschema.Features, rawRetentionDays int) ([]string, error) {
	ms, err := chschema.Migrations()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = qualify(chschema.Render(m.SQL, f, rawRetentionDays), "`"+database+"`")
	}
	return out, nil
}

// ClusterMigrationDDL is every statement of the embedded migrations' cluster
// form (see clusterddl.go), in order, for database on cluster: what Migrate
// sends for a cluster store (the Go migrations' `SELECT 1` placeholders
// left out), for checks against other ClickHouse releases.
func ClusterMigrationDDL(database, cluster string, f chschema.Features, rawRetentionDays int) ([]string, error) {
	ms, err := chschema.Migrations()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		stmts, err := clusterDDL(chschema.Render(m.SQL, f, rawRetentionDays), database, cluster)
		if err != nil {
			return nil, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
		for _, st := range stmts {
			if st.sql != "SELECT 1" {
				out = append(out, st.sql)
			}
		}
	}
	return out, nil
}
