package e2e

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/fleet"
	"github.com/cardhour/cardhour/collector/kafkapub"
	"github.com/cardhour/cardhour/collector/spool"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

// tee publishes every tick to all of its publishers.
type tee []collector.Publisher

func (t tee) Publish(ctx context.Context, samples []schemas.Sample) error {
	for _, p := range t {
		if err := p.Publish(ctx, samples); err != nil {
			return err
		}
	}
	return nil
}

// The whole pipeline with the real collector code: a simulated fleet (the
// example lab, two days) publishes through the collector's spool and Kafka sink
// (one message per node and tick, zstd) and, at the same time, to a JSON Lines
// file. The spool is drained only at the end, so it holds a backlog of several
// MiB as after a Kafka outage. Two ingest workers in two groups consume the
// topic, one into ClickHouse, one into SQLite. Both stores bill byte for byte
// like the file.
func TestSimulatedFleetThroughKafkaBillsLikeFile(t *testing.T) {
	from := time.Date(2026, 11, 2, 0, 0, 0, 0, storetest.Shanghai(t))
	throughKafka(t, simulation{"../../collector/testdata/fleet.example.yaml", from, from.Add(48 * time.Hour)})
}

// The shared fleet (collector/testdata/fleet.shared.yaml: vGPU instances of
// an A16, HAMi shares of an A100, time-sliced replicas of a T4; three days,
// so that the A16 course's lab is in them) and a HAMi card whose two shares
// hold 120 % of its memory (testdata/fleet.oversub.yaml), through the same
// pipeline: both stores bill byte for byte like the file, the over-subscription
// finding included, and give back every held sample with its share fields.
func TestSharedFleetThroughKafkaBillsLikeFile(t *testing.T) {
	from := time.Date(2026, 11, 2, 0, 0, 0, 0, storetest.Shanghai(t))
	data, stores := throughKafka(t,
		simulation{"../../collector/testdata/fleet.shared.yaml", from, from.Add(72 * time.Hour)},
		simulation{"testdata/fleet.oversub.yaml", from, from.Add(48 * time.Hour)})
	bill := string(storetest.BillFile(t, data, storetest.Catalogs(t)["example"], "2026-11"))
	for _, want := range []string{`"oversubscribed"`, `"basis": "memory"`, `"peak": "1.2"`, `"over_seconds": 18000`,
		`"sku": "a16-1q"`, `"sku": "a100-80g-1-20"`, `"sku": "t4-share[1/4]"`, `"sku": "a100-80g-share[mem=60%,cores=50%]"`} {
		require.Contains(t, bill, want)
	}
	want := heldOf(storetest.Samples(t, data))
	kinds := map[string]int{}
	for _, s := range want {
		kinds[s.ShareKind]++
	}
	require.Len(t, kinds, 3, "vgpu, hami and timeslice samples: %v", kinds)
	for name, st := range stores {
		got := map[sampleID]schemas.Sample{}
		require.NoError(t, st.HeldSamples(context.Background(), 0, from.AddDate(0, 1, 0).UnixMilli(), func(s *schemas.Sample) error {
			got[sampleID{s.InstanceID, s.StartMS}] = storetest.LatestFields(*s)
			return nil
		}))
		require.Equal(t, len(want), len(got), name)
		for id, s := range want {
			require.Equal(t, s, got[id], "%s: held sample %s at %d", name, id.instance, id.startMS)
		}
	}
}

type sampleID struct {
	instance string
	startMS  int64
}

// heldOf is the held samples by identity, with the fields stores return.
func heldOf(samples []schemas.Sample) map[sampleID]schemas.Sample {
	out := map[sampleID]schemas.Sample{}
	for _, s := range samples {
		if s.Project != "" {
			out[sampleID{s.InstanceID, s.StartMS}] = storetest.LatestFields(s)
		}
	}
	return out
}

// simulation is a fleet file simulated over [from, to).
type simulation struct {
	fleet    string
	from, to time.Time
}

// throughKafka runs the simulations, one after the other, through the
// collector's spool and Kafka sink and, at the same time, into a JSON Lines
// file; then two ingest workers in two groups consume the topic, one into
// ClickHouse, one into SQLite, and both stores must bill byte for byte like
// the file. It returns the file and the two stores, by name.
func throughKafka(t *testing.T, sims ...simulation) ([]byte, map[string]ingest.Backend) {
	t.Helper()
	e := newEnv(t, 3)
	ctx := context.Background()
	sp, err := spool.Open(spool.Config{Dir: t.TempDir(), MaxBytes: 256 << 20, Fsync: spool.FsyncNever})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sp.Close() })
	sink, err := kafkapub.NewKafkaSink(kafkapub.KafkaConfig{Brokers: e.brokers, Topic: e.topic})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	pub, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink})
	require.NoError(t, err)
	var file bytes.Buffer
	jl := collector.NewJSONLPublisher(&file)
	for _, sim := range sims {
		spec, err := fleet.Load(sim.fleet)
		require.NoError(t, err)
		require.NoError(t, fleet.Simulate(ctx, fleet.SimulateConfig{Spec: spec, From: sim.from, To: sim.to, Publisher: tee{pub, jl}}))
	}
	require.NoError(t, jl.Flush())
	require.NoError(t, pub.Drain(ctx))
	require.Zero(t, sp.Pending(), "the spool is drained to Kafka")
	data := file.Bytes()
	require.Positive(t, jl.Count())
	t.Logf("%d samples simulated", jl.Count())

	ch := e.store(t, e.chAddr)
	lite, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "cardhour.db"), Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = lite.Close() })
	eLite := *e
	eLite.group = e.group + "_sqlite"
	for _, run := range []struct {
		e  *env
		st ingest.Backend
	}{{e, ch}, {&eLite, lite}} {
		m := ingest.NewMetrics(nil)
		stop := start(t, run.e.workerConfig(run.st, m))
		run.e.waitCommitted(t, 90*time.Second)
		require.NoError(t, stop())
		require.EqualValues(t, jl.Count(), value(m.SamplesWritten), "every sample written once (no replays here)")
		require.Zero(t, value(m.Messages.WithLabelValues("invalid")), "no dead letters")
		storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), run.st)
	}
	return data, map[string]ingest.Backend{"clickhouse": ch, "sqlite": lite}
}
