package watche2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/ledger/sqlite"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/internal/watch"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/watch/notify"
	"github.com/cardhour/cardhour/schemas"
)

const latencyCatalog = `
currency: CNY
timezone: Asia/Shanghai
defaults:
  gap_tolerance_s: 30
  idle: {threshold: 0.05, warn_after: 1m, release_after: 1h, release: "off"}
skus:
  - {id: a100-1g, gpu_model: NVIDIA A100-SXM4-80GB, profile: 1g.10gb, hourly_price: "1.80"}
projects:
  - id: nlp
`

// BenchmarkAlertLatency measures how long an idle warning takes to reach
// its webhook once the samples that make it due are ingested, through the
// real path: Kafka, the ingest worker (default batching) and ClickHouse,
// then the watcher's Run at a 1 s poll interval with an SQLite ledger and
// the notifier's signed webhook. Each alert is a new instance whose
// samples (every 10 s, idle for the last 90 s: past warn_after 1m) are
// published at once; "ingested" is when the worker's group has committed
// them (the worker commits after the store write). The target: within two
// poll intervals.
//
//	go test -run '^$' -bench AlertLatency -benchtime=10x ./internal/watch/watche2e/
func BenchmarkAlertLatency(b *testing.B) {
	const poll = time.Second
	ctx := context.Background()
	cat, err := schemas.ParseCatalog([]byte(latencyCatalog), "catalog")
	if err != nil {
		b.Fatal(err)
	}
	brokers, chAddr := testenv.KafkaBrokers(b), testenv.ClickHouseAddr(b)
	topic, db := testenv.UniqueName(b, "latency"), testenv.UniqueName(b, "latency")
	kc := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	if _, err := kc.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}, {Topic: topic + "_dlq", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = kc.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic, topic + "_dlq"}})
	})
	store, err := clickhouse.Open(ctx, clickhouse.Config{Addr: chAddr, Database: db, Logger: quiet(), Migrate: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = store.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS `"+db+"`")
		_ = store.Close()
	})
	worker, err := ingest.NewWorker(ingest.WorkerConfig{Brokers: brokers, Topic: topic, GroupID: topic + "_group",
		DLQTopic: topic + "_dlq", Store: store, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var bg sync.WaitGroup
	b.Cleanup(func() { stop(); bg.Wait() })
	bg.Add(1)
	go func() { defer bg.Done(); _ = worker.Run(runCtx) }()

	arrived := make(chan string, 16) // instance ids, as alerts reach the webhook
	var mu sync.Mutex
	arrivedAt := map[string]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		body, _ := io.ReadAll(r.Body)
		var p notify.WebhookPayload
		if err := json.Unmarshal(body, &p); err == nil && p.Kind == billing.AlertIdleWarning && p.To.Role == "admin" {
			mu.Lock()
			arrivedAt[p.Facts.InstanceID] = now
			mu.Unlock()
			arrived <- p.Facts.InstanceID
		}
	}))
	b.Cleanup(srv.Close)
	ncfg, err := notify.ParseConfig([]byte(fmt.Sprintf("channels:\n  - {name: hook, type: webhook, url: %q, secret: s}\n", srv.URL)))
	if err != nil {
		b.Fatal(err)
	}
	notifier, err := notify.NewNotifier(ncfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	led, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "ledger.db"), Clock: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = led.Close() })
	w, err := watch.New(watch.Config{Ledger: led, Usage: store, Notifier: notifier,
		Catalog: func(context.Context) (*schemas.Catalog, error) { return cat, nil },
		Admins:  []alert.Person{{Name: "Ops", Email: "ops@example.edu"}}, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	bg.Add(1)
	go func() { defer bg.Done(); _ = w.Run(runCtx, "bench", poll, time.Now) }()
	producer := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, BatchTimeout: time.Millisecond,
		RequiredAcks: kafka.RequireAll}
	b.Cleanup(func() { _ = producer.Close() })

	var sinceIngest, sinceSend []float64
	b.ResetTimer()
	for i := range b.N {
		time.Sleep(time.Duration(rand.Int64N(int64(poll)))) // any phase of the poll
		inst := fmt.Sprintf("MIG-latency-%d", i)
		now := time.Now().Truncate(time.Second)
		var ss []schemas.Sample
		for ts := now.Add(-90 * time.Second); ts.Before(now); ts = ts.Add(10 * time.Second) {
			ss = append(ss, schemas.Sample{StartMS: ts.UnixMilli(), IntervalMS: 10_000, Node: "gpu-lat", GPUUUID: "GPU-lat",
				GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: inst, Profile: "1g.10gb", Project: "nlp", User: "s1"})
		}
		sent := time.Now()
		produceB(b, producer, ss)
		ingested := waitIngestedB(b, kc, topic)
		select {
		case got := <-arrived:
			if got != inst {
				b.Fatalf("alert for %s, want %s", got, inst)
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("no alert for %s within 30 s", inst)
		}
		mu.Lock()
		at := arrivedAt[inst]
		mu.Unlock()
		sinceIngest = append(sinceIngest, at.Sub(ingested).Seconds())
		sinceSend = append(sinceSend, at.Sub(sent).Seconds())
	}
	b.StopTimer()
	slices.Sort(sinceIngest)
	slices.Sort(sinceSend)
	q := func(xs []float64, p float64) float64 { return xs[min(len(xs)-1, int(p*float64(len(xs))))] }
	b.ReportMetric(q(sinceIngest, 0.5), "p50_after_ingest_s")
	b.ReportMetric(sinceIngest[len(sinceIngest)-1], "max_after_ingest_s")
	b.ReportMetric(q(sinceSend, 0.5), "p50_after_publish_s")
	b.ReportMetric(sinceSend[len(sinceSend)-1], "max_after_publish_s")
	b.Logf("poll %v; after ingest (s): %.2f; after publish (s): %.2f", poll, sinceIngest, sinceSend)
}

func produceB(b *testing.B, w *kafka.Writer, samples []schemas.Sample) {
	hdr := []kafka.Header{{Key: "schema", Value: []byte(schemas.SampleSchemaV1)}}
	buf, spans := schemas.AppendMessages(nil, nil, samples, 16<<10)
	var msgs []kafka.Message
	for _, m := range spans {
		msgs = append(msgs, kafka.Message{Key: []byte(m.Key), Value: buf[m.Start:m.End], Headers: hdr})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		b.Fatal(err)
	}
}

// waitIngestedB polls the group's lag every 10 ms and returns when it
// reaches zero.
func waitIngestedB(b *testing.B, c *kafka.Client, topic string) time.Time {
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lo, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(0)}}})
		if err != nil {
			b.Fatal(err)
		}
		of, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: topic + "_group", Topics: map[string][]int{topic: {0}}})
		if err != nil {
			b.Fatal(err)
		}
		if p := of.Topics[topic]; len(p) == 1 && p[0].CommittedOffset >= lo.Topics[topic][0].LastOffset {
			return time.Now()
		}
		if time.Now().After(deadline) {
			b.Fatal("not ingested within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
