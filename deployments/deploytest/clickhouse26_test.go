package deploytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
	chschema "github.com/cardhour/cardhour/schemas/clickhouse"
)

// newestVersion is a current ClickHouse release (chDB 26.9), for the feature set.
const newestVersion = "26.9"

// TestClickHouse26 proves that current ClickHouse takes the SQL cardhour
// sends: every migration rendered with the newest feature set (LowCardinality,
// TTL), then every statement the ClickHouse store and the Grafana dashboards
// send in the store's read conformance suite, a month of billing and the
// dashboard test, recorded on the test server (18.16) with the answers it
// gave, and replayed in process on ClickHouse 26 through chDB
// (scripts/chdb-replay.sh), where every query must answer the same.
func TestClickHouse26(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	ctx := context.Background()
	f, err := chschema.FeaturesFor(newestVersion)
	require.NoError(t, err)
	require.Equal(t, chschema.Features{LowCardinality: true, TTL: true}, f, "the newest feature set")
	ms, err := chschema.Migrations()
	require.NoError(t, err)

	var plan []step
	rec := &recorder{}
	open := func(db string) *clickhouse.Store {
		st, err := clickhouse.Open(ctx, clickhouse.Config{Addr: addr, Database: db, Migrate: true, RawRetentionDays: 400,
			Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = st.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS `"+db+"`")
			_ = st.Close()
		})
		// The same database on ClickHouse 26: the migrations as Migrate would
		// apply them there, and their records.
		ddl, err := clickhouse.MigrationDDL(db, f, 400)
		require.NoError(t, err)
		require.Contains(t, ddl[0], "LowCardinality(String)")
		require.Contains(t, ddl[0], "TTL ts + INTERVAL 400 DAY")
		plan = append(plan,
			step{Kind: "exec", SQL: "CREATE DATABASE IF NOT EXISTS `" + db + "`", What: "migrations (26)"},
			step{Kind: "exec", SQL: "CREATE TABLE IF NOT EXISTS `" + db + "`.schema_migrations (version UInt32, name String, applied_at DateTime('UTC')) ENGINE = MergeTree ORDER BY version", What: "migrations (26)"})
		for i, m := range ms {
			plan = append(plan, step{Kind: "exec", SQL: ddl[i], What: fmt.Sprintf("migration %04d_%s (26)", m.Version, m.Name)},
				step{Kind: "insert", SQL: fmt.Sprintf("INSERT INTO `%s`.schema_migrations (version, name, applied_at) VALUES (%d, %s, now())", db, m.Version, literal(m.Name)), What: "migrations (26)"})
		}
		st.WrapConn(func(c driver.Conn) driver.Conn { rec.Conn = c; return rec })
		return st
	}

	// The store's reads, as its conformance suite exercises them.
	reads := open(testenv.UniqueName(t, "ch26r"))
	rec.label("migrate again, check schema")
	_, err = reads.Migrate(ctx)
	require.NoError(t, err)
	require.NoError(t, reads.CheckSchema(ctx))
	rec.label("storetest.RequireReads")
	storetest.RequireReads(t, reads)

	// Billing from the store (streamed and plain writes) equals the file path.
	billed := open(testenv.UniqueName(t, "ch26b"))
	rec.label("writes and billing")
	data := storetest.Trace(t, 3000, 5)
	samples := storetest.Samples(t, data)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: billed, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	storetest.WriteStreamed(t, w, samples[:len(samples)/2], 700, 200)
	require.NoError(t, w.Write(ctx, samples[len(samples)/2:]))
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), billed)

	// The dashboards' panels.
	rec.label("Grafana dashboard panels")
	d := loadDashboard(t, "cardhour-usage.json")
	from := time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC)
	for _, p := range d.Panels {
		rows := queryAll(t, billed, d.expand(t, p.Targets[0].RawSQL, "`"+billed.Database()+"`", from, from.AddDate(0, 0, 3)))
		require.NotEmpty(t, rows, p.Title)
	}

	steps := rec.snapshot()
	var queries, inserts int
	for _, s := range steps {
		switch s.Kind {
		case "query":
			queries++
		case "insert":
			inserts++
		}
	}
	require.Greater(t, queries, 30, "the recording holds the store's queries")
	require.Greater(t, inserts, 5)
	plan = append(plan, steps...)
	// CARDHOUR_CHDB_PLAN=FILE keeps the plan, to replay it by hand.
	path := os.Getenv("CARDHOUR_CHDB_PLAN")
	if path == "" {
		path = filepath.Join(t.TempDir(), "plan.json")
	}
	b, err := json.Marshal(map[string]any{"steps": plan})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))

	cmd := exec.Command("bash", filepath.Join(root(t), "scripts/chdb-replay.sh"), path)
	cmd.Dir = root(t)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		skipOrFail(t, "no chDB: %s", strings.TrimSpace(string(out)))
	}
	require.NoError(t, err, "replay on ClickHouse %s:\n%s", newestVersion, out)
	t.Logf("%d statements (%d queries, %d inserts) recorded on the test server; %s", len(plan), queries, inserts, strings.TrimSpace(string(out)))
}
