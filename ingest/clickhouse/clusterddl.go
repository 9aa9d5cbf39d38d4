package clickhouse

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/cardhour/cardhour/ingest"
	chschema "github.com/cardhour/cardhour/schemas/clickhouse"
)

// The cluster form of the migrations. A migration file is written for one
// server; on a cluster (Config.Cluster) the runner rewrites it:
//
//	CREATE TABLE IF NOT EXISTS t (…) ENGINE = E(args) …
//	  → CREATE TABLE IF NOT EXISTS db.t_local ON CLUSTER c (…)
//	      ENGINE = ReplicatedE('/clickhouse/tables/{shard}/db/t_local', '{replica}', args) …
//	    CREATE TABLE IF NOT EXISTS db.t ON CLUSTER c AS db.t_local
//	      ENGINE = Distributed(c, db, t_local, sipHash64(key))
//	ALTER TABLE t ADD COLUMN …
//	  → ALTER TABLE db.t_local ON CLUSTER c ADD COLUMN …   (skipped when there)
//	    DROP TABLE IF EXISTS db.t ON CLUSTER c, and the Distributed table
//	    created again over the altered local one (ClickHouse 18.16 refuses
//	    ALTER … ON CLUSTER of a Distributed table when shards are replicated;
//	    a Distributed table holds no data of its own: writes go to the
//	    local tables)
//	INSERT INTO t SELECT … FROM u
//	  → the same statement, over the Distributed tables, with
//	    insert_distributed_sync: the rows land on their shards
//
// The migrations done in Go run over the Distributed tables and write
// through the store, which shards (0015); 0018 and 0019, which rebuild
// run_packs in the layout and encoding this build writes, have nothing to do
// on a cluster: a cluster's run_packs is created in that layout (0014) and
// only this build's sealed packs are ever written to it.

var (
	createTable = regexp.MustCompile(`(?is)^CREATE TABLE IF NOT EXISTS\s+([A-Za-z_][A-Za-z0-9_]*)\s*(\(.*\))\s*ENGINE\s*=\s*([A-Za-z]+)(?:\(([^)]*)\))?(.*)$`)
	alterTable  = regexp.MustCompile(`(?is)^ALTER TABLE\s+([A-Za-z_][A-Za-z0-9_]*)\s+(ADD COLUMN.*)$`)
)

// clusterGoDone are the Go migrations a cluster store needs not run.
var clusterGoDone = map[string]bool{"run_packs_granules": true, "run_packs_sealed": true}

// clusterStatement is one statement of a migration's cluster form.
type clusterStatement struct {
	sql   string
	alter string // the ALTER's ddl (unqualified), to skip when its column is there
}

// clusterDDL is the cluster form of one rendered, unqualified migration
// statement of database db (unquoted) on cluster c.
func clusterDDL(ddl, db, c string) ([]clusterStatement, error) {
	qdb := "`" + db + "`"
	if m := createTable.FindStringSubmatch(ddl); m != nil {
		t, cols, engine, args, rest := m[1], m[2], m[3], strings.TrimSpace(m[4]), strings.TrimSpace(m[5])
		params := "'/clickhouse/tables/{shard}/" + db + "/" + t + localSuffix + "', '{replica}'"
		if args != "" {
			params += ", " + args
		}
		if t == "run_packs" {
			rest += " SETTINGS index_granularity = " + itoa(packGranule)
		}
		local := "CREATE TABLE IF NOT EXISTS " + qdb + "." + t + localSuffix + " ON CLUSTER " + c + " " + cols +
			" ENGINE = Replicated" + engine + "(" + params + ") " + rest
		dist, err := distributedDDL(t, db, c)
		if err != nil {
			return nil, err
		}
		return []clusterStatement{{sql: strings.TrimSpace(local)}, {sql: dist}}, nil
	}
	if m := alterTable.FindStringSubmatch(ddl); m != nil {
		t := m[1]
		dist, err := distributedDDL(t, db, c)
		if err != nil {
			return nil, err
		}
		return []clusterStatement{
			{sql: "ALTER TABLE " + qdb + "." + t + localSuffix + " ON CLUSTER " + c + " " + m[2], alter: ddl},
			{sql: "DROP TABLE IF EXISTS " + qdb + "." + t + " ON CLUSTER " + c},
			{sql: dist},
		}, nil
	}
	up := strings.ToUpper(strings.TrimSpace(ddl))
	if strings.HasPrefix(up, "INSERT INTO") || up == "SELECT 1" {
		return []clusterStatement{{sql: qualify(ddl, qdb)}}, nil
	}
	return nil, fmt.Errorf("no cluster form for the statement %.60q", ddl)
}

// distributedDDL creates table t of db as a Distributed table over t_local.
func distributedDDL(t, db, c string) (string, error) {
	key, ok := shardKeys[t]
	if !ok {
		return "", fmt.Errorf("table %s has no sharding key (shardKeys)", t)
	}
	qdb := "`" + db + "`"
	return "CREATE TABLE IF NOT EXISTS " + qdb + "." + t + " ON CLUSTER " + c + " AS " + qdb + "." + t + localSuffix +
		" ENGINE = Distributed(" + c + ", " + db + ", " + t + localSuffix + ", sipHash64(" + key + "))", nil
}

// migrateCluster applies one migration's cluster form.
func (s *Store) migrateCluster(ctx context.Context, m chschema.Migration, ddl string) error {
	if clusterGoDone[m.Name] {
		return nil
	}
	stmts, err := clusterDDL(ddl, s.cfg.Database, s.cluster.name)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if st.alter != "" {
			present, err := s.columnPresent(ctx, st.alter, localSuffix)
			if err != nil {
				return err
			}
			if present {
				continue
			}
		}
		if st.sql == "SELECT 1" {
			err = s.apply(ctx, m, st.sql)
		} else {
			err = s.conn.Exec(ctx, st.sql)
		}
		if err != nil {
			return classify(err)
		}
	}
	return nil
}

// checkKind fails (ingest.Permanent) when the database's schema_migrations
// says the store is of the other kind: a cluster's store opened without
// Config.Cluster (its writes would skip the quorum), or a one-server store
// opened as a cluster's. Nothing is checked before schema_migrations exists.
func (s *Store) checkKind(ctx context.Context) error {
	engines, err := s.strings(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = 'schema_migrations'", s.cfg.Database)
	if err != nil {
		return classify(fmt.Errorf("cannot read the engine of schema_migrations: %w", err))
	}
	if len(engines) == 0 {
		return nil
	}
	replicated := strings.HasPrefix(engines[0], "Replicated")
	switch {
	case replicated && s.cluster == nil:
		return ingest.Permanent(fmt.Errorf("database %s on ClickHouse %s is a cluster's store (replicated tables): open it with clickhouse://%s/%s?cluster=NAME (migrate: --cluster NAME)", s.cfg.Database, s.cfg.Addr, s.cfg.Addr, s.cfg.Database))
	case !replicated && s.cluster != nil:
		return ingest.Permanent(fmt.Errorf("database %s on ClickHouse %s is a one-server store, not cluster %s's: open it without a cluster", s.cfg.Database, s.cfg.Addr, s.cluster.name))
	}
	return nil
}

// strings is the first column of a query's rows.
func (s *Store) strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
