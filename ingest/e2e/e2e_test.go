package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

// Samples → Kafka (3 partitions, with replays) → two workers in one group →
// ClickHouse → invoices equal, byte for byte, to billing the file.
func TestKafkaToClickHouseBillsLikeFile(t *testing.T) {
	e := newEnv(t, 3)
	st := e.store(t, e.chAddr)
	data := storetest.Trace(t, 40_000, 21)
	n := e.produce(t, data)
	// The same stream again: a collector replaying its spool.
	e.produce(t, data[:bytes.LastIndexByte(data[:len(data)/4], '\n')+1])

	m := ingest.NewMetrics(nil)
	cfg := e.workerConfig(st, m)
	cfg.Consumers = 2
	// A backlog is committed only when a consumer catches up (a batch that is
	// not full), not after every batch. With BatchAge an hour a batch ends
	// only full or at the end of its partition, so the count of commits
	// depends on the partitions and the group's rebalances, not on how busy
	// the machine is (at 300 ms a batch read slowly ended by its age).
	// CommitInterval still commits what a consumer staged without seeing it
	// as its partition's end (once, a run on a loaded machine left 12
	// messages uncommitted for good with an hour): at 30 s it adds at most
	// three commits per consumer within the 90 s wait, below the bound.
	cfg.CommitInterval = 30 * time.Second
	cfg.BatchAge = time.Hour
	stop := start(t, cfg)
	e.waitCommitted(t, 90*time.Second)
	require.NoError(t, stop())
	t.Logf("%v commits for %d samples in batches of %d", value(m.Commits), n, cfg.BatchSize)
	require.Less(t, value(m.Commits), float64(n/cfg.BatchSize), "staged batches are committed together")

	require.GreaterOrEqual(t, value(m.SamplesWritten), float64(n))
	require.Positive(t, value(m.SamplesEarly), "batches are streamed to ClickHouse while they are read")
	require.Zero(t, value(m.DLQ.WithLabelValues("malformed_json")))
	require.Equal(t, distinctSamples(t, data), countRaw(t, st))
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
	require.Equal(t, storetest.LatestOf(storetest.Samples(t, data)), storetest.Latest(t, st, 0),
		"the latest held sample of each instance, whichever worker wrote it")
}

// A backlog is stored and committed promptly however it ends, with BatchAge an
// hour so that no batch can end by its age:
//   - exactly with a full batch: no further batch comes to commit it, so it is
//     committed once CommitInterval has passed;
//   - with a batch that reaches the end of its partition: it ends at once;
//   - with a tiny last batch after a full one: it ends at once too, since the
//     consumer remembers it was catching up (a backlog of over 1 000 messages).
func TestBacklogIsCommittedPromptly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		samples   int64
		batchSize func(n int) int
		commits   int // 0: not checked
	}{
		{"ends with a full batch", 5_000, func(n int) int { return n }, 1},
		{"ends inside a batch", 5_000, func(n int) int { return 2 * n }, 0},
		{"ends with a tiny batch", 20_000, func(n int) int { return n - 50 }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			st := e.store(t, e.chAddr)
			data := storetest.Trace(t, tc.samples, 9)
			n := e.produce(t, data)
			m := ingest.NewMetrics(nil)
			cfg := e.workerConfig(st, m)
			cfg.BatchSize = tc.batchSize(n)
			cfg.BatchAge = time.Hour
			cfg.CommitInterval = 2 * time.Second
			stop := start(t, cfg)
			e.waitCommitted(t, 30*time.Second)
			require.NoError(t, stop())
			if tc.commits > 0 {
				require.EqualValues(t, tc.commits, value(m.Commits))
			}
			storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
		})
	}
}

// Malformed messages land in the dead-letter topic with their reason; the valid
// ones around them are stored; nothing is lost and the worker keeps running. In
// a message of several lines, only the invalid line is a dead letter (with its
// line number); the valid lines beside it are stored, whatever the size of the
// message. A dead letter larger than the dead-letter topic takes goes there in
// parts that together are the original bytes.
func TestDeadLetters(t *testing.T) {
	e := newEnv(t, 1)
	st := e.store(t, e.chAddr)
	good := bytes.Split(bytes.TrimSpace(storetest.Trace(t, 200, 5)), []byte("\n"))
	line := string(good[0])
	// A message of about 1 500 samples (600 KB, ten times the dead-letter
	// limit below) with one invalid line in the middle, and the same lines under
	// a schema header this build does not read.
	large := bytes.Split(bytes.TrimSpace(storetest.Trace(t, 1500, 6)), []byte("\n"))
	largeMsg := string(bytes.Join(large, []byte("\n"))) + "\n"
	largeBad := string(bytes.Join(large[:700], []byte("\n"))) + "\n" +
		strings.Replace(string(large[700]), `"processes":`, `"processes":"two","x":`, 1) + "\n" +
		string(bytes.Join(large[701:], []byte("\n"))) + "\n"
	bad := []struct {
		value  string
		header string
		reason string
		line   string // source_line header ("" for a whole message)
		valid  int    // valid samples in the same message
	}{
		{line[:len(line)/2], "", "malformed_json", "1", 0},
		{strings.Replace(line, `"processes":`, `"processes":"two","x":`, 1), "", "invalid_field", "1", 0},
		{strings.Replace(line, `"interval_s":10`, `"interval_s":-10`, 1), "", "invalid_field", "1", 0},
		{strings.Replace(line, `"interval_s":10`, `"interval_s":2592000`, 1), "", "interval_too_long", "1", 0},
		{string(good[4]) + "\n" + strings.Replace(line, `"ts":"2026-`, `"ts":"2099-`, 1), "", "future_ts", "2", 1},
		{line, "cardhour.sample.v2", "unknown_schema", "", 0},
		{strings.Replace(line, `"cardhour.sample.v1"`, `"cardhour.sample.v7"`, 1), "", "unknown_schema", "1", 0},
		{`{"ts":"` + strings.Repeat("x", 200<<10) + `"}`, "", "invalid_field", "1", 0}, // a line of 200 KiB: in parts
		{largeBad, "", "invalid_field", "701", len(large) - 1},
		{largeMsg, "cardhour.sample.v2", "unknown_schema", "", 0}, // 600 KB: in parts
		{"", "", "malformed_json", "", 0},
		{"\n \n", "", "malformed_json", "", 0},
		{string(good[1]) + "\n\n" + strings.Replace(string(good[2]), `"mem_used_bytes":`, `"mem_used_bytes":-`, 1) + "\n" + string(good[3]) + "\n",
			"", "invalid_field", "3", 2},
	}
	var msgs []kafka.Message
	for i, g := range good {
		msgs = append(msgs, kafka.Message{Value: g})
		if i < len(bad) {
			b := bad[i]
			m := kafka.Message{Key: []byte(fmt.Sprint("bad-", i)), Value: []byte(b.value)}
			if b.header != "" {
				m.Headers = []kafka.Header{{Key: "schema", Value: []byte(b.header)}}
			}
			msgs = append(msgs, m)
		}
	}
	w := &kafka.Writer{Addr: kafka.TCP(e.brokers...), Topic: e.topic, BatchTimeout: 5 * time.Millisecond, BatchBytes: 1 << 20}
	e.write(t, w, msgs)
	require.NoError(t, w.Close())

	m := ingest.NewMetrics(nil)
	cfg := e.workerConfig(st, m)
	// The dead-letter topic takes record batches of at most 64 KiB (the broker
	// refuses larger ones); the worker asks Kafka for that limit.
	res, err := e.client.AlterConfigs(context.Background(), &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: e.dlq,
		Configs: []kafka.AlterConfigRequestConfig{{Name: "max.message.bytes", Value: strconv.Itoa(64 << 10)}}}}})
	require.NoError(t, err)
	for _, err := range res.Errors {
		require.NoError(t, err)
	}
	// The broker applies a config change after AlterConfigs returns (KRaft
	// goes through its metadata log): wait until it reports the new limit,
	// or the worker reads the old one and its parts are refused.
	require.Eventually(t, func() bool {
		d, err := e.client.DescribeConfigs(context.Background(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: e.dlq, ConfigNames: []string{"max.message.bytes"}}}})
		if err != nil || len(d.Resources) != 1 || len(d.Resources[0].ConfigEntries) != 1 {
			return false
		}
		return d.Resources[0].ConfigEntries[0].ConfigValue == strconv.Itoa(64<<10)
	}, 20*time.Second, 50*time.Millisecond, "the dead-letter topic's max.message.bytes never reads 64 KiB")
	cfg.MaxClockSkew = 5 * time.Minute
	cfg.Now = func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) } // after the trace
	stop := start(t, cfg)
	e.waitCommitted(t, 60*time.Second)
	require.NoError(t, stop())

	extra := 0
	for _, b := range bad {
		extra += b.valid
	}
	require.EqualValues(t, len(good)+extra, value(m.SamplesWritten))
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: e.brokers, Topic: e.dlq, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := map[string]int{}
	parts := map[int][]kafka.Message{} // bad index -> the parts read so far
	split := 0
	for done := 0; done < len(bad); {
		dm, err := r.ReadMessage(ctx)
		require.NoError(t, err, "dead letter %d of %d", done+1, len(bad))
		hdr := map[string]string{}
		for _, h := range dm.Headers {
			hdr[h.Key] = string(h.Value)
		}
		var idx int
		_, err = fmt.Sscanf(string(dm.Key), "bad-%d", &idx)
		require.NoError(t, err)
		require.LessOrEqual(t, len(dm.Value), 64<<10, "a dead letter fits the dead-letter topic")
		parts[idx] = append(parts[idx], dm)
		if n := hdr[ingest.HeaderParts]; n != "" {
			require.Equal(t, strconv.Itoa(len(parts[idx])), hdr[ingest.HeaderPart], "message %d: parts in order", idx)
			if strconv.Itoa(len(parts[idx])) != n {
				continue
			}
			split++
		}
		done++
		var value []byte
		for _, p := range parts[idx] {
			value = append(value, p.Value...)
		}
		require.NotEmpty(t, hdr[ingest.HeaderError])
		require.Equal(t, e.topic, hdr[ingest.HeaderSourceTopic])
		require.NotEmpty(t, hdr[ingest.HeaderSourceOffset])
		require.Equal(t, bad[idx].reason, hdr[ingest.HeaderReason], "message %d: %s", idx, hdr[ingest.HeaderError])
		require.Equal(t, bad[idx].line, hdr[ingest.HeaderSourceLine], "message %d", idx)
		if bad[idx].line != "" {
			n, _ := strconv.Atoi(bad[idx].line)
			require.Equal(t, strings.Split(bad[idx].value, "\n")[n-1], string(value), "the invalid line alone, whole")
		} else {
			require.Equal(t, bad[idx].value, string(value), "the message, whole")
		}
		got[hdr[ingest.HeaderReason]]++
	}
	require.Equal(t, 2, split, "the line of 200 KiB and the message of 600 KB came in parts")
	for reason, n := range got {
		require.EqualValues(t, n, value(m.DLQ.WithLabelValues(reason)), reason)
	}
	for _, r := range schemas.RejectReasons {
		require.Positive(t, got[string(r)], "a dead letter with reason %s", r)
	}
	require.Len(t, got, len(schemas.RejectReasons), "every reason is one of schemas.RejectReasons: %v", got)

	// Each dead letter is recorded in the store, once per source position,
	// dated by its sample's ts where it has one.
	sum, err := st.RejectSummary(context.Background(), 0, 1<<62, len(bad)+1)
	require.NoError(t, err)
	require.EqualValues(t, len(bad), sum.Count)
	for _, r := range sum.First {
		require.True(t, strings.HasPrefix(r.Source, "kafka:"+e.topic+"/0/"), r.Source)
		require.True(t, r.Reason.Valid(), "%s: reason %q", r.Source, r.Reason)
		require.NotEmpty(t, r.Error)
	}
	ts := storetest.Samples(t, good[0])[0].StartMS
	sum, err = st.RejectSummary(context.Background(), ts, ts+1, 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, sum.Count, int64(5), "the cut line, the two invalid fields and both unknown schemas are dated by the first sample's ts")
}

// A store error that no retry cures stops the worker with that error at once,
// instead of consuming again forever; nothing is committed.
func TestPermanentStoreErrorStopsTheWorker(t *testing.T) {
	e := newEnv(t, 2)
	st := e.store(t, e.chAddr)
	require.NoError(t, st.Conn().Exec(context.Background(), "DROP TABLE `"+e.db+"`.raw_samples"))
	e.produce(t, storetest.Trace(t, 2000, 3))
	cfg := e.workerConfig(st, ingest.NewMetrics(nil))
	cfg.Consumers = 2
	w, err := ingest.NewWorker(cfg)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }() // never cancelled: only the error ends it
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the worker kept retrying a permanent error")
	}
	require.Error(t, err)
	require.True(t, ingest.IsPermanent(err), "%v", err)
	require.ErrorContains(t, err, "raw_samples")
	require.Positive(t, e.lag(t), "nothing was committed")
}

// A worker process killed with SIGKILL in the middle of its work loses nothing:
// what it had not committed is consumed again after the restart, and the
// invoices are those of the file.
func TestKillWorkerMidBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a subprocess")
	}
	e := newEnv(t, 2)
	st := e.store(t, e.chAddr)
	data := storetest.Trace(t, 40_000, 33)
	e.produce(t, data)

	bin := buildCardhour(t)
	run := func() *exec.Cmd { return e.ingestProcess(t, bin) }
	total := distinctSamples(t, data)
	for kill := 0; kill < 2; kill++ {
		cmd := run()
		deadline := time.Now().Add(60 * time.Second)
		for {
			n := countRaw(t, st)
			if n > total*uint64(kill+1)/4 {
				break
			}
			require.True(t, time.Now().Before(deadline), "worker made no progress")
			time.Sleep(20 * time.Millisecond)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		require.Positive(t, e.lag(t), "killed before the end")
	}
	// The survivor: a SIGTERM-able process that finishes the job.
	cmd := run()
	e.waitCommitted(t, 90*time.Second)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "clean shutdown on SIGTERM")

	require.Equal(t, total, countRaw(t, st), "no sample missing")
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
}

// ClickHouse goes away under load: the worker stops committing, retries with
// backoff, resumes when it is back; nothing lost, invoices unchanged.
func TestClickHouseOutage(t *testing.T) {
	e := newEnv(t, 2)
	direct := e.store(t, e.chAddr) // creates the database; used to verify
	proxy := storetest.NewProxy(t, e.chAddr)
	st := e.store(t, proxy.Addr())
	data := storetest.Trace(t, 30_000, 44)
	half := bytes.LastIndexByte(data[:len(data)/2], '\n') + 1
	e.produce(t, data[:half])

	m := ingest.NewMetrics(nil)
	stop := start(t, e.workerConfig(st, m))
	require.Eventually(t, func() bool { return value(m.SamplesWritten) > 0 }, 60*time.Second, 20*time.Millisecond)
	proxy.Pause()
	e.produce(t, data[half:])
	require.Eventually(t, func() bool { return value(m.WriteErrors) > 0 }, 30*time.Second, 20*time.Millisecond)
	lagDuring := e.lag(t)
	require.Positive(t, lagDuring)
	time.Sleep(1500 * time.Millisecond)
	require.GreaterOrEqual(t, e.lag(t), lagDuring, "nothing is committed while the store is down")
	require.EqualValues(t, 1, value(m.Paused))
	proxy.Resume()
	e.waitCommitted(t, 90*time.Second)
	require.NoError(t, stop())

	require.Equal(t, distinctSamples(t, data), countRaw(t, direct))
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), direct)
}

// ClickHouse hangs instead of failing (connections open, no byte moves): each
// write attempt is abandoned after StoreTimeout and retried, the worker reports
// itself stuck, commits nothing, and finishes once ClickHouse answers again.
func TestClickHouseStall(t *testing.T) {
	e := newEnv(t, 2)
	direct := e.store(t, e.chAddr)
	proxy := storetest.NewProxy(t, e.chAddr)
	st := e.store(t, proxy.Addr())
	data := storetest.Trace(t, 20_000, 45)
	half := bytes.LastIndexByte(data[:len(data)/2], '\n') + 1
	e.produce(t, data[:half])

	m := ingest.NewMetrics(nil)
	cfg := e.workerConfig(st, m)
	cfg.StoreTimeout = 500 * time.Millisecond
	w, err := ingest.NewWorker(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	require.Eventually(t, func() bool { return value(m.SamplesWritten) > 0 }, 60*time.Second, 20*time.Millisecond)
	proxy.Stall()
	e.produce(t, data[half:])
	require.Eventually(t, func() bool { return value(m.WriteErrors) >= 2 }, 30*time.Second, 20*time.Millisecond,
		"a hung store write is abandoned and retried")
	lagDuring := e.lag(t)
	require.Positive(t, lagDuring)
	require.Eventually(t, func() bool { return w.Healthy(200*time.Millisecond) != nil }, 10*time.Second, 20*time.Millisecond,
		"the worker reports that it waits for the store")
	require.GreaterOrEqual(t, e.lag(t), lagDuring, "nothing is committed while the store hangs")
	proxy.Resume()
	e.waitCommitted(t, 90*time.Second)
	require.NoError(t, w.Healthy(time.Minute))
	cancel()
	require.NoError(t, <-done)

	require.Equal(t, distinctSamples(t, data), countRaw(t, direct))
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), direct)
}

// Kafka goes away (every connection of the worker cut and refused): the worker
// waits, reconnects and finishes; nothing lost, invoices unchanged.
func TestKafkaOutage(t *testing.T) {
	e := newEnv(t, 2)
	st := e.store(t, e.chAddr)
	data := storetest.Trace(t, 30_000, 55)
	half := bytes.LastIndexByte(data[:len(data)/2], '\n') + 1
	e.produce(t, data[:half])

	g := &gate{}
	m := ingest.NewMetrics(nil)
	cfg := e.workerConfig(st, m)
	cfg.Dialer = g.dialer()
	stop := start(t, cfg)
	require.Eventually(t, func() bool { return value(m.SamplesWritten) > 0 }, 60*time.Second, 20*time.Millisecond)
	g.set(true)
	e.produce(t, data[half:]) // the test's producer is not cut off
	time.Sleep(3 * time.Second)
	require.Positive(t, e.lag(t), "the worker cannot consume or commit while Kafka is unreachable")
	g.set(false)
	e.waitCommitted(t, 120*time.Second)
	require.NoError(t, stop())

	require.Equal(t, distinctSamples(t, data), countRaw(t, st))
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
}

// value reads a counter or gauge.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// A shutdown in the middle of a batch (its messages fetched and decoded, the
// batch neither full nor old enough) either stores the batch's samples and
// commits it, or commits nothing: what is committed is stored.
func TestShutdownMidBatchCommitsOnlyWhatItStored(t *testing.T) {
	e := newEnv(t, 1)
	data := storetest.Trace(t, 300, 17)
	n := e.produce(t, data)
	m := ingest.NewMetrics(nil)
	cfg := e.workerConfig(ingest.NewMemStore(), m)
	cfg.BatchSize, cfg.BatchAge, cfg.StreamPiece = 1_000_000, time.Hour, 4096 // the batch stays open
	stop := start(t, cfg)
	time.Sleep(3 * time.Second) // the fetcher takes every message (they are on the broker already)
	require.NoError(t, stop())
	if lag := e.lag(t); lag == 0 {
		require.EqualValues(t, n, value(m.SamplesWritten), "the batch was committed: every sample of it is stored")
	} else {
		t.Logf("the batch was abandoned uncommitted (%d messages), as the shutdown allows", lag)
	}
}
