package clickhouse

import (
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
