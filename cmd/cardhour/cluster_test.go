//go:build !collector

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/testenv"
)

// The ClickHouse cluster tests run against the testenv profile chcluster
// (deployments/testenv/services.sh up chcluster: cluster `cardhour`, shard 1
// on nodes 1 and 2, shard 2 on node 3), alone with
//
//	go test ./cmd/cardhour -run TestClickHouseCluster
const fleetExample = "../../collector/testdata/fleet.example.yaml"

// clusterStore migrates a new database on the cluster and drops it on every
// server when the test ends; it returns the store URL (through addrs[0]).
func clusterStore(t *testing.T, addrs []string, cluster string) (db, dsn string) {
	t.Helper()
	db = testenv.UniqueName(t, "clu")
	t.Cleanup(func() {
		conn, err := ch.Open(&ch.Options{Addr: addrs[:1]})
		if err == nil {
			_ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS `"+db+"` ON CLUSTER "+cluster)
			_ = conn.Close()
		}
	})
	code, out, errOut := runCLI(t, "", "migrate", "--store", "clickhouse://"+addrs[0]+"/"+db, "--cluster", cluster)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "database "+db+" on cluster "+cluster+" at schema version 22, applied now: [1 2 3")
	return db, "clickhouse://" + addrs[0] + "/" + db + "?cluster=" + cluster
}

// simulated writes the example fleet's samples of [from, to) to a file.
func simulated(t *testing.T, from, to string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "samples.jsonl")
	code, _, errOut := runCLI(t, "", "simulate", "--fleet", fleetExample, "--from", from, "--to", to, "--out", path)
	require.Equal(t, 0, code, errOut)
	return path
}

// requireBillsEqual bills 2026-11 from each store URL and from the file:
// byte for byte the same.
func requireBillsEqual(t *testing.T, samples string, stores ...string) {
	t.Helper()
	code, want, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", samples, "--period", "2026-11")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, want, `"invoices"`)
	for _, st := range stores {
		code, got, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", st, "--period", "2026-11")
		require.Equal(t, 0, code, errOut)
		require.Equal(t, want, got, "bill --store %s", st)
	}
}

// Migrate on the cluster (twice: the second applies nothing), ingest a
// simulated file, and bill through two servers: the same bytes as billing
// the file. An unknown cluster, and the store opened as one server's, are
// refused.
func TestClickHouseCluster(t *testing.T) {
	addrs, cluster := testenv.ClickHouseCluster(t)
	db, dsn := clusterStore(t, addrs, cluster)
	code, out, errOut := runCLI(t, "", "migrate", "--store", "clickhouse://"+addrs[1]+"/"+db, "--cluster", cluster)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "at schema version 22, applied now: []")

	code, _, errOut = runCLI(t, "", "migrate", "--store", "clickhouse://"+addrs[0]+"/"+db, "--cluster", "no_such_cluster")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `knows no cluster "no_such_cluster"`)
	require.Contains(t, errOut, "system.clusters has: "+cluster)
	code, _, errOut = runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", "clickhouse://"+addrs[0]+"/"+db, "--period", "2026-11")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is a cluster's store")

	samples := simulated(t, "2026-11-01T00:00:00+08:00", "2026-11-11T00:00:00+08:00")
	code, out, errOut = runCLI(t, "", "ingest", "--store", dsn, "--from-file", samples, "--listen", "", "--batch-size", "50000")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "back-filled")
	requireBillsEqual(t, samples, dsn, "clickhouse://"+addrs[2]+"/"+db+"?cluster="+cluster)
	// Reservation advice and idle alerts, from the cluster store as from the file.
	requireSameOutput(t, []string{"advise", "--catalog", exampleCatalog, "--now", "2026-12", "--months", "1", "--format", "json"}, "--samples", samples, dsn)
	requireSameOutput(t, []string{"idle", "--catalog", exampleCatalog, "--format", "json"}, "--samples", samples, dsn,
		"--from", "2026-10-31T16:00:00Z", "--to", "2026-11-10T16:00:00Z")

	// Every shard holds rows, and every raw sample is on one shard only.
	total := uint64(0)
	for _, a := range addrs {
		n := localCount(t, a, db, "raw_samples_local")
		require.NotZero(t, n, "server %s holds no raw samples", a)
		total += n
	}
	lines := countLines(t, samples)
	require.Equal(t, 2*lines-localCount(t, addrs[2], db, "raw_samples_local"), total,
		"shard 1's two replicas hold its rows each, shard 2's one replica its own")
}

// Kill -9 a replica of shard 1 while a back-fill writes: the inserts wait
// (their quorum cannot be met) and are retried; the replica, started again,
// catches up; nothing is lost and the bills, read through that replica too,
// are the file's.
func TestClickHouseClusterReplicaLoss(t *testing.T) {
	addrs, cluster := testenv.ClickHouseCluster(t)
	services, err := filepath.Abs("../../deployments/testenv/services.sh")
	require.NoError(t, err)
	db, dsn := clusterStore(t, addrs, cluster)
	samples := simulated(t, "2026-11-01T00:00:00+08:00", "2026-12-01T00:00:00+08:00")

	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := runCLI(t, "", "ingest", "--store", dsn+"&quorum_timeout=5s", "--from-file", samples, "--listen", "", "--batch-size", "20000")
		done <- result{code, out, errOut}
	}()
	// Once the first rows are in, kill node 2 (shard 1's second replica).
	deadline := time.Now().Add(time.Minute)
	for localCount(t, addrs[0], db, "raw_samples_local") == 0 {
		require.True(t, time.Now().Before(deadline), "no rows written in a minute")
		time.Sleep(50 * time.Millisecond)
	}
	runScript(t, services, "kill", "chcluster", "2")
	killedAt := localCount(t, addrs[0], db, "raw_samples_local")
	// A migration needs every replica: it is refused, naming the missing one.
	code, _, errOut := runCLI(t, "", "migrate", "--store", "clickhouse://"+addrs[0]+"/"+db+"_other", "--cluster", cluster)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "replica 2 of shard 1 ("+addrs[1]+") is unreachable")
	time.Sleep(3 * time.Second)
	runScript(t, services, "up", "chcluster")
	var r result
	select {
	case r = <-done:
	case <-time.After(5 * time.Minute):
		t.Fatal("the back-fill did not end within 5 minutes of the replica's return")
	}
	require.Equal(t, 0, r.code, r.errOut)
	lines := countLines(t, samples)
	require.Less(t, killedAt, lines, "the replica was killed during the back-fill")
	require.Contains(t, r.errOut, "retrying", "writes failed while the replica was down")

	// Node 2 catches up with node 1: the same rows in every local table.
	for _, table := range []string{"raw_samples_local", "occupancy_local", "idle_spans_local", "latest_samples_local", "run_packs_local", "node_minutes_local"} {
		want := localCount(t, addrs[0], db, table)
		deadline := time.Now().Add(2 * time.Minute)
		for localCount(t, addrs[1], db, table) != want {
			require.True(t, time.Now().Before(deadline), "node 2 has not caught up on %s in 2 minutes", table)
			time.Sleep(200 * time.Millisecond)
		}
	}
	var final uint64
	for _, a := range []string{addrs[0], addrs[2]} {
		final += finalCount(t, a, db)
	}
	require.Equal(t, lines, final, "every sample is stored once (after FINAL)")
	requireBillsEqual(t, samples, dsn, "clickhouse://"+addrs[1]+"/"+db+"?cluster="+cluster)
}

// requireSameOutput runs args with --samples FILE and with --store DSN
// (then the extra flags): the same standard output.
func requireSameOutput(t *testing.T, args []string, samplesFlag, samples, dsn string, storeFlags ...string) {
	t.Helper()
	code, want, errOut := runCLI(t, "", append(append([]string{}, args...), samplesFlag, samples)...)
	require.Equal(t, 0, code, errOut)
	require.NotEmpty(t, want)
	code, got, errOut := runCLI(t, "", append(append(append([]string{}, args...), "--store", dsn), storeFlags...)...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, want, got, "%s from the cluster store", args[0])
}

func runScript(t *testing.T, script string, args ...string) {
	t.Helper()
	out, err := exec.Command("bash", append([]string{script}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", script, strings.Join(args, " "), out)
}

func localQuery(t *testing.T, addr, q string) uint64 {
	t.Helper()
	conn, err := ch.Open(&ch.Options{Addr: []string{addr}, DialTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	var n uint64
	require.NoError(t, conn.QueryRow(context.Background(), q).Scan(&n), "%s on %s", q, addr)
	return n
}

func localCount(t *testing.T, addr, db, table string) uint64 {
	t.Helper()
	return localQuery(t, addr, fmt.Sprintf("SELECT count() FROM `%s`.%s", db, table))
}

// finalCount is the number of distinct raw samples on one server.
func finalCount(t *testing.T, addr, db string) uint64 {
	t.Helper()
	return localQuery(t, addr, fmt.Sprintf("SELECT count() FROM `%s`.raw_samples_local FINAL", db))
}

func countLines(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return uint64(strings.Count(string(b), "\n"))
}
