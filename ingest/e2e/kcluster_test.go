package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector/kafkapub"
	"github.com/cardhour/cardhour/collector/spool"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
)

// The Kafka cluster tests run against the testenv profile kcluster
// (deployments/testenv/services.sh up kcluster: three brokers, replication
// factor 3, min.insync.replicas 2) and the single ClickHouse, alone with
//
//	go test ./ingest/e2e -run TestKafkaCluster
//
// (make test-kcluster starts the profile, runs them and stops it).

// newClusterEnv is newEnv on the Kafka cluster. The sample topic is not
// created here: the collector's sink creates it on its first write (Kafka's
// auto-creation), and ingest the dead-letter topic at its start, both with the
// brokers' defaults, as on a site that leaves topics to Kafka.
func newClusterEnv(t *testing.T) *env {
	t.Helper()
	e := &env{brokers: testenv.KafkaCluster(t), chAddr: testenv.ClickHouseAddr(t)}
	e.topic = testenv.UniqueName(t, "ksamples")
	e.dlq = e.topic + "_dlq"
	e.group = e.topic + "_group"
	e.db = testenv.UniqueName(t, "kc")
	e.client = &kafka.Client{Addr: kafka.TCP(e.brokers...), Timeout: 10 * time.Second}
	t.Cleanup(func() {
		_, _ = e.client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{e.topic, e.dlq}})
	})
	return e
}

// requireReplicated: every partition of topic has three replicas, all in
// sync, and the topic's min.insync.replicas is 2.
func (e *env) requireReplicated(t *testing.T, topic string) {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		meta, err := e.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err != nil || len(meta.Topics) != 1 || len(meta.Topics[0].Partitions) == 0 {
			return false
		}
		for _, p := range meta.Topics[0].Partitions {
			if len(p.Replicas) != 3 || len(p.Isr) != 3 {
				return false
			}
		}
		return true
	}, 60*time.Second, 200*time.Millisecond, "%s: every partition with 3 replicas in sync", topic)
	res, err := e.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"min.insync.replicas"}}}})
	require.NoError(t, err)
	require.Len(t, res.Resources, 1)
	require.NoError(t, res.Resources[0].Error)
	require.Len(t, res.Resources[0].ConfigEntries, 1)
	require.Equal(t, "2", res.Resources[0].ConfigEntries[0].ConfigValue, "%s: min.insync.replicas", topic)
}

// collectorPublisher is the collector's publishing path: its spool and its
// Kafka sink (acks=all) on the cluster, with a registry for its counters.
type collectorPublisher struct {
	pub   *kafkapub.Publisher
	spool *spool.Spool
	reg   *prometheus.Registry
}

func (e *env) collectorPublisher(t *testing.T) *collectorPublisher {
	t.Helper()
	sp, err := spool.Open(spool.Config{Dir: t.TempDir(), MaxBytes: 256 << 20, Fsync: spool.FsyncNever})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sp.Close() })
	sink, err := kafkapub.NewKafkaSink(kafkapub.KafkaConfig{Brokers: e.brokers, Topic: e.topic, WriteTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	reg := prometheus.NewRegistry()
	pub, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink, BatchRecords: 500, Logger: quiet(), Registerer: reg})
	require.NoError(t, err)
	return &collectorPublisher{pub: pub, spool: sp, reg: reg}
}

// counter reads one of the publisher's counters.
func (c *collectorPublisher) counter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := c.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// publish spools samples as the collector does, a tick's worth (100 samples)
// at a time.
func (c *collectorPublisher) publish(t *testing.T, samples []schemas.Sample) {
	t.Helper()
	for i := 0; i < len(samples); i += 100 {
		require.NoError(t, c.pub.Publish(context.Background(), samples[i:min(i+100, len(samples))]))
	}
}

// waitSent waits until the spool holds nothing Kafka has not acknowledged.
func (c *collectorPublisher) waitSent(t *testing.T, timeout time.Duration, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return c.spool.Pending() == 0 }, timeout, 50*time.Millisecond,
		"%s: the spool still holds records Kafka has not acknowledged", what)
}

// thirds cuts a trace into three parts at line ends.
func thirds(data []byte) [3][]byte {
	a := bytes.LastIndexByte(data[:len(data)/3], '\n') + 1
	b := bytes.LastIndexByte(data[:2*len(data)/3], '\n') + 1
	return [3][]byte{data[:a], data[a:b], data[b:]}
}

// members is the number of members of the group.
func (e *env) members(t *testing.T) int {
	t.Helper()
	res, err := e.client.DescribeGroups(context.Background(), &kafka.DescribeGroupsRequest{GroupIDs: []string{e.group}})
	require.NoError(t, err)
	require.Len(t, res.Groups, 1)
	return len(res.Groups[0].Members)
}

// rawRows is the number of rows of raw_samples, duplicates included (merges
// of the ReplacingMergeTree may or may not have removed them yet).
func rawRows(t *testing.T, st *clickhouse.Store) uint64 {
	t.Helper()
	var n uint64
	require.NoError(t, st.Conn().QueryRow(context.Background(), "SELECT count() FROM `"+st.Database()+"`.raw_samples").Scan(&n))
	return n
}

// runScript runs a shell script (services.sh) and fails the test if it fails.
func runScript(t *testing.T, script string, args ...string) {
	t.Helper()
	out, err := exec.Command("bash", append([]string{script}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", script, strings.Join(args, " "), out)
}

// Samples published by the collector's spool and sink (acks=all) into a
// topic of 6 partitions, 3 replicas each, consumed by `cardhour ingest`
// processes in one group: two, then a third joins, then one is killed with
// SIGKILL in the middle of its work and a fourth joins. What the killed
// worker had not committed is consumed again by the others; a part of the
// stream is published twice (a collector replaying its spool). Every
// published sample is stored (raw rows may repeat; distinct samples are
// exactly the published ones), and the invoices are those of the file.
func TestKafkaClusterWorkersComeAndGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills subprocesses")
	}
	e := newClusterEnv(t)
	st := e.store(t, e.chAddr)
	data := storetest.Trace(t, 60_000, 71)
	parts := thirds(data)
	c := e.collectorPublisher(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.pub.Run(ctx) }()
	c.publish(t, storetest.Samples(t, parts[0]))
	c.waitSent(t, 60*time.Second, "first third")
	e.requireReplicated(t, e.topic)

	bin := buildCardhour(t)
	total := distinctSamples(t, data)
	w1, w2 := e.ingestProcess(t, bin), e.ingestProcess(t, bin)
	require.Eventually(t, func() bool { return countRaw(t, st) > 0 }, 90*time.Second, 50*time.Millisecond, "two workers store nothing")
	e.requireReplicated(t, e.dlq) // created by ingest at its start
	w3 := e.ingestProcess(t, bin)
	require.Eventually(t, func() bool { return e.members(t) == 3 }, 60*time.Second, 200*time.Millisecond, "the third worker joins the group")
	c.publish(t, storetest.Samples(t, parts[1]))
	c.publish(t, storetest.Samples(t, parts[0][:bytes.LastIndexByte(parts[0][:len(parts[0])/2], '\n')+1])) // a replay
	c.waitSent(t, 60*time.Second, "second third")
	require.Eventually(t, func() bool { return countRaw(t, st) > total/2 }, 90*time.Second, 20*time.Millisecond, "three workers make no progress")
	c.publish(t, storetest.Samples(t, parts[2]))
	c.waitSent(t, 60*time.Second, "last third")
	require.Positive(t, e.lag(t), "killed before the end")
	require.NoError(t, w1.Process.Signal(syscall.SIGKILL))
	_ = w1.Wait()
	w4 := e.ingestProcess(t, bin)
	// The killed member leaves when its session times out (6 s); the new one joins.
	require.Eventually(t, func() bool { return e.members(t) == 3 }, 60*time.Second, 200*time.Millisecond, "three members after the kill and the join")
	e.waitCommitted(t, 120*time.Second)
	for _, w := range []*exec.Cmd{w2, w3, w4} {
		require.NoError(t, w.Process.Signal(syscall.SIGTERM))
		require.NoError(t, w.Wait(), "clean shutdown on SIGTERM")
	}

	require.Equal(t, total, countRaw(t, st), "every published sample is stored")
	rows := rawRows(t, st)
	require.GreaterOrEqual(t, rows, total, "raw rows: each sample once or more (redelivery, replay)")
	t.Logf("%d distinct samples, %d raw rows", total, rows)
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
}

// A collector publishing (spool + Kafka sink, acks=all) while brokers die:
// with one of three killed (kill -9) the writes go on to the two others
// (min.insync.replicas 2); with two of three killed none is acknowledged and
// the samples wait in the spool; once both are back the spool is sent. An
// ingest worker then reads every sample: the invoices are those of the file.
func TestKafkaClusterBrokerLoss(t *testing.T) {
	services, err := filepath.Abs("../../deployments/testenv/services.sh")
	require.NoError(t, err)
	e := newClusterEnv(t)
	data := storetest.Trace(t, 30_000, 72)
	samples := storetest.Samples(t, data)
	chunk := len(samples) / 5
	c := e.collectorPublisher(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.pub.Run(ctx) }()
	t.Cleanup(func() { runScript(t, services, "up", "kcluster") }) // whatever happens, the cluster is whole again

	c.publish(t, samples[:chunk])
	c.waitSent(t, 60*time.Second, "three brokers")
	e.requireReplicated(t, e.topic)

	runScript(t, services, "kill", "kcluster", "1")
	// The partitions node 1 led get new leaders and the ISRs shrink within
	// seconds (broker.session.timeout.ms, replica.lag.time.max.ms 6 s).
	c.publish(t, samples[chunk:2*chunk])
	c.waitSent(t, 60*time.Second, "node 1 down, during the failover")
	errsOne := c.counter(t, "cardhour_collector_kafka_write_errors_total")
	c.publish(t, samples[2*chunk:3*chunk])
	c.waitSent(t, 15*time.Second, "node 1 down, after the failover")
	require.Equal(t, errsOne, c.counter(t, "cardhour_collector_kafka_write_errors_total"),
		"with 2 of 3 brokers every write is acknowledged")

	runScript(t, services, "kill", "kcluster", "2")
	c.publish(t, samples[3*chunk:4*chunk])
	time.Sleep(15 * time.Second)
	pending := c.spool.Pending()
	require.Positive(t, pending, "with 1 of 3 brokers nothing is acknowledged: the samples wait in the spool")
	require.Greater(t, c.counter(t, "cardhour_collector_kafka_write_errors_total"), errsOne, "writes failed")
	c.publish(t, samples[4*chunk:])
	require.Greater(t, c.spool.Pending(), pending, "the spool grows")
	t.Logf("node 1 down: %v failed writes during the failover; nodes 1 and 2 down: %d records in the spool after 15 s, %v failed writes in all",
		errsOne, pending, c.counter(t, "cardhour_collector_kafka_write_errors_total"))

	runScript(t, services, "up", "kcluster")
	c.waitSent(t, 120*time.Second, "brokers back")
	e.requireReplicated(t, e.topic)
	require.GreaterOrEqual(t, c.counter(t, "cardhour_collector_published_samples_total"), float64(len(samples)))

	st := e.store(t, e.chAddr)
	stop := start(t, e.workerConfig(st, ingest.NewMetrics(nil)))
	e.waitCommitted(t, 120*time.Second)
	require.NoError(t, stop())
	require.Equal(t, distinctSamples(t, data), countRaw(t, st), "no sample lost")
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
}

// buildCardhour builds the cardhour binary into the test's directory.
func buildCardhour(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cardhour")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/cardhour").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// ingestProcess starts `cardhour ingest` on e's topic and group; it is
// killed when the test ends, and its log shown if the test failed.
func (e *env) ingestProcess(t *testing.T, bin string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "ingest", "--store", "clickhouse://"+e.chAddr+"/"+e.db, "--brokers", strings.Join(e.brokers, ","),
		"--topic", e.topic, "--group", e.group, "--dlq-topic", e.dlq, "--batch-size", "1500", "--batch-age", "100ms",
		"--listen", "", "--log-level", "warn", "--session-timeout", "6s")
	var logs testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("worker %d log:\n%s", cmd.Process.Pid, logs.String())
		}
	})
	return cmd
}
