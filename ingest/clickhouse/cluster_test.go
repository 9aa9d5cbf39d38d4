package clickhouse_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
)

// openCluster migrates a new database on the test cluster (services.sh up
// chcluster), opened through its first server, and drops it on every server
// when the test ends. Run alone: go test ./ingest/clickhouse -run TestClickHouseCluster
func openCluster(t *testing.T) *clickhouse.Store {
	t.Helper()
	addrs, cluster := testenv.ClickHouseCluster(t)
	db := testenv.UniqueName(t, "clu")
	cfg := clickhouse.Config{Addr: addrs[0], Database: db, Cluster: cluster, Logger: slog.New(slog.DiscardHandler), Migrate: true}
	st, err := clickhouse.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = st.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS `"+db+"` ON CLUSTER "+cluster)
		_ = st.Close()
	})
	return st
}

// The stores' common read suites, on a cluster store: every read goes
// through the Distributed tables and answers as one server does.
func TestClickHouseClusterReads(t *testing.T) {
	for name, suite := range map[string]func(*testing.T, ingest.Backend){
		"reads":          storetest.RequireReads,
		"filtered_usage": storetest.RequireFilteredUsage,
		"data_quality":   storetest.RequireDataQuality,
		"efficiency":     storetest.RequireEfficiency,
		"savings":        storetest.RequireSavings,
		"packed_usage":   func(t *testing.T, st ingest.Backend) { storetest.RequirePackedUsage(t, st, 300) },
		"shares":         func(t *testing.T, st ingest.Backend) { storetest.RequireShareRoundTrip(t, st, time.Now()) },
	} {
		t.Run(name, func(t *testing.T) { suite(t, openCluster(t)) })
	}
}

// Invoices from a cluster store equal the file's, also after a replay
// through a fresh compactor (FINAL and argMax per shard).
func TestClickHouseClusterInvoices(t *testing.T) {
	st := openCluster(t)
	data := storetest.Trace(t, 60_000, 23)
	cats := storetest.Catalogs(t)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	samples := storetest.Samples(t, data)
	storetest.WriteStreamed(t, w, samples, 9000, 1500)
	storetest.RequireSameInvoices(t, data, cats, st)
	w2, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	storetest.WriteStreamed(t, w2, samples[len(samples)/3:len(samples)/2], 9000, 1500)
	storetest.RequireSameInvoices(t, data, cats, st)
	v1, err := st.DataVersion(context.Background())
	require.NoError(t, err)
	require.NoError(t, w2.Write(context.Background(), samples[:10]))
	v2, err := st.DataVersion(context.Background())
	require.NoError(t, err)
	require.NotEqual(t, v1, v2, "a write on any shard changes the data version")
}
