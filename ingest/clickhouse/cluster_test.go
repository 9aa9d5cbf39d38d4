package clickhouse_test

import (
	"context"
	"hash/fnv"
	"log/slog"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
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

// Versioned migrations upgrade a cluster as they upgrade one server: a
// store of version 15 (the share columns dropped on every server, and
// schema_migrations at 15) is migrated to 19 by ALTERs of the local tables
// and Distributed tables made again; samples written before read as no
// share, those written after with their shares. Applied again, the ALTERs
// find their columns and are recorded without running.
func TestClickHouseClusterUpgrade(t *testing.T) {
	addrs, cluster := testenv.ClickHouseCluster(t)
	st := openCluster(t)
	ctx := context.Background()
	db := "`" + st.Database() + "`"
	data := storetest.Trace(t, 10_000, 23)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, storetest.Samples(t, data)))

	for _, table := range []string{"raw_samples", "latest_samples"} {
		for _, q := range []string{
			"ALTER TABLE " + db + "." + table + "_local ON CLUSTER " + cluster + " DROP COLUMN share_kind, DROP COLUMN share_mem, DROP COLUMN share_cores",
			"DROP TABLE " + db + "." + table + " ON CLUSTER " + cluster,
			"CREATE TABLE " + db + "." + table + " ON CLUSTER " + cluster + " AS " + db + "." + table + "_local ENGINE = Distributed(" + cluster + ", " + st.Database() + ", " + table + "_local, sipHash64(instance_id))",
		} {
			require.NoError(t, st.Conn().Exec(ctx, q), q)
		}
	}
	setVersions := func(last int) {
		t.Helper()
		require.NoError(t, st.Conn().Exec(ctx, "ALTER TABLE "+db+".schema_migrations DROP PARTITION tuple()"))
		rec, err := st.Conn().PrepareBatch(ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_quorum": len(addrs)})),
			"INSERT INTO "+db+".schema_migrations (version, name, applied_at)")
		require.NoError(t, err)
		for v := 1; v <= last; v++ {
			require.NoError(t, rec.Append(uint32(v), "m", time.Now().UTC()))
		}
		require.NoError(t, rec.Send())
	}
	shareColumns := func(addr string) uint64 {
		conn, err := ch.Open(&ch.Options{Addr: []string{addr}})
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		var n uint64
		require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND name IN ('share_kind', 'share_mem', 'share_cores')",
			st.Database()).Scan(&n))
		return n
	}
	setVersions(15)
	for _, a := range addrs {
		require.Zero(t, shareColumns(a), a)
	}
	res, err := st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{16, 17, 18, 19, 20, 21, 22}, res.Applied)
	for _, a := range addrs {
		require.EqualValues(t, 12, shareColumns(a), "three columns in raw_samples and latest_samples, local and Distributed, on %s", a)
	}
	storetest.RequireSharesAfterMigration(t, data, st)

	setVersions(15)
	res, err = st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{16, 17, 18, 19, 20, 21, 22}, res.Applied, "recorded again without running")
	require.NoError(t, st.CheckSchema(ctx))
	for _, a := range addrs {
		require.EqualValues(t, 12, shareColumns(a), a)
	}
}

// Several ingest workers write to one cluster: their quorum inserts into a
// shard's tables meet (ClickHouse 18.16 refuses a quorum insert while
// another client's waits for its quorum), and each store sends a refused
// insert again instead of failing the batch, which would make its writer
// write the whole batch again (every shard's rows twice). Three stores, as
// three processes, write a trace (each instance's samples to one of them)
// at once in small batches: no batch fails, and the store bills the trace
// as the file does.
func TestClickHouseClusterConcurrentWriters(t *testing.T) {
	st := openCluster(t)
	addrs, cluster := testenv.ClickHouseCluster(t)
	data := storetest.Trace(t, 60_000, 29)
	samples := storetest.Samples(t, data)
	var stores []*clickhouse.Store
	for i := range 3 {
		cfg := clickhouse.Config{Addr: addrs[i%len(addrs)], Database: st.Database(), Cluster: cluster, Logger: slog.New(slog.DiscardHandler)}
		s, err := clickhouse.Open(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	// Each instance's samples to one store, as a Kafka partition keyed by
	// instance gives them to one worker.
	parts := make([][]schemas.Sample, len(stores))
	for _, smp := range samples {
		h := fnv.New32a()
		_, _ = h.Write([]byte(smp.InstanceID))
		i := int(h.Sum32() % uint32(len(stores)))
		parts[i] = append(parts[i], smp)
	}
	metrics := make([]*ingest.Metrics, len(stores))
	for i := range metrics {
		metrics[i] = ingest.NewMetrics(prometheus.NewRegistry())
	}
	errs := make(chan error, len(stores))
	for i, s := range stores {
		go func() {
			w, err := ingest.NewWriter(ingest.WriterConfig{Store: s, Logger: slog.New(slog.DiscardHandler), Metrics: metrics[i]})
			if err == nil {
				part := parts[i]
				for len(part) > 0 && err == nil {
					n := min(500, len(part))
					err = w.Write(context.Background(), part[:n])
					part = part[n:]
				}
			}
			errs <- err
		}()
	}
	for range stores {
		require.NoError(t, <-errs)
	}
	var retries int64
	for i, s := range stores {
		retries += s.QuorumRetries()
		require.Zero(t, testutil.ToFloat64(metrics[i].WriteErrors), "store %d: no batch failed and was written again", i)
	}
	t.Logf("%d inserts sent again while another store's quorum insert was under way", retries)
	require.Positive(t, retries, "the stores' quorum inserts met (else this test proves nothing)")
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
}
