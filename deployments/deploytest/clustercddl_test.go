package deploytest

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest/clickhouse"
	chschema "github.com/cardhour/cardhour/schemas/clickhouse"
)

// TestClusterDDLParsesOnClickHouse26 checks that current ClickHouse parses
// every statement of a cluster store's migrations (ON CLUSTER, Replicated*
// engines with their ZooKeeper paths and macros, Distributed tables), with
// the newest feature set, through chDB (scripts/chdb-replay.sh): formatQuery
// of each must succeed. chDB has neither a cluster nor ZooKeeper, so it
// parses the statements and does not run them; the cluster tests run them
// on 18.16 (go test ./cmd/cardhour ./ingest/clickhouse -run TestClickHouseCluster).
func TestClusterDDLParsesOnClickHouse26(t *testing.T) {
	f, err := chschema.FeaturesFor(newestVersion)
	require.NoError(t, err)
	ddl, err := clickhouse.ClusterMigrationDDL("cardhour", "cardhour", f, 400)
	require.NoError(t, err)
	require.Greater(t, len(ddl), 20)
	var plan []step
	for _, q := range ddl {
		if !strings.HasPrefix(q, "INSERT") { // data copies run once, through the Distributed tables
			require.Contains(t, q, " ON CLUSTER cardhour")
		}
		plan = append(plan, step{Kind: "query", SQL: "SELECT toUInt8(length(formatQuery(" + literal(q) + ")) > 0)",
			Rows: [][]any{{1}}, Compare: true, What: "cluster DDL: " + q[:min(len(q), 80)]})
	}
	path := filepath.Join(t.TempDir(), "cluster-plan.json")
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
	require.NoError(t, err, "cluster DDL on ClickHouse %s:\n%s", newestVersion, out)
	t.Logf("%d cluster statements parsed; %s", len(ddl), strings.TrimSpace(string(out)))
}
