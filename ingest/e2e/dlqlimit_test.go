package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
)

// logRecords reads the JSON log records written to logs.
func logRecords(t *testing.T, logs *testenv.SyncBuffer) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &r), "log line %s", line)
		out = append(out, r)
	}
	return out
}

// A dead-letter topic that does not exist yet is not a problem: its first dead
// letter creates it with the broker's defaults. The worker starts without a
// warning (but the dead letter's own), sizes its dead letters to the broker's message.max.bytes (what the
// topic will take), and the first dead letter creates the topic and lands.
func TestDeadLetterTopicNotCreatedYet(t *testing.T) {
	e := newEnv(t, 1)
	st := e.store(t, e.chAddr)
	dlq := e.topic + "_late_dlq"
	t.Cleanup(func() {
		_, _ = e.client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{dlq}})
	})
	meta, err := e.client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{dlq}})
	require.NoError(t, err)
	require.Len(t, meta.Topics, 1)
	require.ErrorIs(t, meta.Topics[0].Error, kafka.UnknownTopicOrPartition, "the dead-letter topic does not exist before the worker starts")
	d, err := e.client.DescribeConfigs(context.Background(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: strconv.Itoa(meta.Brokers[0].ID), ConfigNames: []string{"message.max.bytes"}}}})
	require.NoError(t, err)
	require.Len(t, d.Resources, 1)
	require.Len(t, d.Resources[0].ConfigEntries, 1)
	brokerLimit, err := strconv.Atoi(d.Resources[0].ConfigEntries[0].ConfigValue)
	require.NoError(t, err)

	good := bytes.TrimSpace(storetest.Trace(t, 20, 5))
	line := string(bytes.Split(good, []byte("\n"))[0])
	w := &kafka.Writer{Addr: kafka.TCP(e.brokers...), Topic: e.topic, BatchTimeout: 5 * time.Millisecond}
	e.write(t, w, []kafka.Message{{Value: good}, {Key: []byte("bad"), Value: []byte(line[:len(line)/2])}})
	require.NoError(t, w.Close())

	logs := &testenv.SyncBuffer{}
	m := ingest.NewMetrics(nil)
	cfg := e.workerConfig(st, m)
	cfg.DLQTopic = dlq
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	cfg.MaxClockSkew = 5 * time.Minute
	cfg.Now = func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }
	stop := start(t, cfg)
	// The dead letter is counted once written (acknowledged by every replica);
	// the lag alone can read 0 before the worker has consumed anything.
	require.Eventually(t, func() bool { return value(m.DLQ.WithLabelValues("malformed_json")) == 1 },
		60*time.Second, 50*time.Millisecond, "the bad message was dead-lettered")
	e.waitCommitted(t, 60*time.Second)
	require.NoError(t, stop())

	limit := -1.0
	for _, r := range logRecords(t, logs) {
		if r["msg"] != "invalid message sent to the dead-letter topic" {
			require.NotEqual(t, "WARN", r["level"], "no warning but the dead letter's: %v", r)
		}
		require.NotEqual(t, "ERROR", r["level"], "no error: %v", r)
		if r["msg"] == "dead letters" {
			limit, _ = r["max_message_bytes"].(float64)
		}
	}
	require.Equal(t, float64(brokerLimit), limit, "dead letters are sized to the broker's message.max.bytes")

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: e.brokers, Topic: dlq, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dm, err := r.ReadMessage(ctx)
	require.NoError(t, err, "the first dead letter created the topic and landed in it")
	require.Equal(t, "bad", string(dm.Key))
	require.True(t, strings.HasPrefix(line, string(dm.Value)), "the dead letter is the bad message")
}
