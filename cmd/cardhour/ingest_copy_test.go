//go:build !collector

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/testenv"
)

// oneServerStore migrates a new database on the ClickHouse server at addr
// and drops it when the test ends; it returns the store URL.
func oneServerStore(t *testing.T, addr string) string {
	t.Helper()
	db := testenv.UniqueName(t, "cp")
	t.Cleanup(func() {
		if conn, err := ch.Open(&ch.Options{Addr: []string{addr}}); err == nil {
			_ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS `"+db+"`")
			_ = conn.Close()
		}
	})
	dsn := "clickhouse://" + addr + "/" + db
	code, _, errOut := runCLI(t, "", "migrate", "--store", dsn)
	require.Equal(t, 0, code, errOut)
	return dsn
}

// copyInto runs `cardhour ingest --store to --from-store from`.
func copyInto(t *testing.T, to, from string) string {
	t.Helper()
	code, out, errOut := runCLI(t, "", "ingest", "--store", to, "--from-store", from, "--listen", "", "--batch-size", "20000")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "back-filled")
	return out
}

// A SQLite store outgrown: copied into ClickHouse (--from-store), and that
// database copied into a new SQLite file, each bills byte for byte like the
// file the first was filled from; a second copy into the same store stores
// nothing twice. A source that holds no samples copies none; flags are
// checked.
func TestIngestFromStore(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	samples := simulated(t, "2026-11-01T00:00:00+08:00", "2026-11-08T00:00:00+08:00")
	dir := t.TempDir()
	lite := "sqlite://" + filepath.Join(dir, "usage.db")
	code, _, errOut := runCLI(t, "", "ingest", "--store", lite, "--from-file", samples, "--listen", "")
	require.Equal(t, 0, code, errOut)

	chDSN := oneServerStore(t, addr)
	out := copyInto(t, chDSN, lite)
	require.Contains(t, out, fmt.Sprintf("back-filled %d samples from %s", countLines(t, samples), lite), "every sample is copied")
	back := "sqlite://" + filepath.Join(dir, "back.db")
	copyInto(t, back, chDSN)
	requireBillsEqual(t, samples, lite, chDSN, back)
	copyInto(t, chDSN, lite)
	requireBillsEqual(t, samples, chDSN)

	empty := "sqlite://" + filepath.Join(dir, "empty.db")
	code, _, errOut = runCLI(t, "", "migrate", "--store", empty)
	require.Equal(t, 0, code, errOut)
	out = copyInto(t, oneServerStore(t, addr), empty)
	require.Contains(t, out, "back-filled 0 samples")

	code, _, errOut = runCLI(t, "", "ingest", "--store", chDSN, "--from-store", lite, "--from-file", samples, "--listen", "")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "give exactly one of --brokers, --from-file and --from-store")
	code, _, errOut = runCLI(t, "", "ingest", "--store", chDSN, "--from-store", "sqlite://"+filepath.Join(dir, "none.db"), "--listen", "")
	require.Equal(t, 1, code)
	require.NotEmpty(t, errOut)
}

// One server's database moved to a cluster: copied (--from-store) into a
// database migrated on the cluster, it bills through any server like the
// file, and every shard holds rows.
func TestClickHouseClusterFromOneServer(t *testing.T) {
	addrs, cluster := testenv.ClickHouseCluster(t)
	addr := testenv.ClickHouseAddr(t)
	samples := simulated(t, "2026-11-01T00:00:00+08:00", "2026-11-06T00:00:00+08:00")
	one := oneServerStore(t, addr)
	code, _, errOut := runCLI(t, "", "ingest", "--store", one, "--from-file", samples, "--listen", "")
	require.Equal(t, 0, code, errOut)
	db, dsn := clusterStore(t, addrs, cluster)
	copyInto(t, dsn, one)
	requireBillsEqual(t, samples, one, dsn, "clickhouse://"+addrs[2]+"/"+db+"?cluster="+cluster)
	for _, a := range addrs {
		conn, err := ch.Open(&ch.Options{Addr: []string{a}})
		require.NoError(t, err)
		var n uint64
		require.NoError(t, conn.QueryRow(context.Background(), "SELECT count() FROM `"+db+"`.raw_samples_local").Scan(&n))
		require.NotZero(t, n, "server %s holds raw samples", a)
		_ = conn.Close()
	}
}
