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
	"github.com/cardhour/cardhour/internal/reads"
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
	e := newEnv(t, 3)
	ctx := context.Background()
	spec, err := fleet.Load("../../collector/testdata/fleet.example.yaml")
	require.NoError(t, err)
	sp, err := spool.Open(spool.Config{Dir: t.TempDir(), MaxBytes: 256 << 20, Fsync: spool.FsyncNever})
	require.NoError(t, err)
	defer sp.Close()
	sink, err := kafkapub.NewKafkaSink(kafkapub.KafkaConfig{Brokers: e.brokers, Topic: e.topic})
	require.NoError(t, err)
	defer sink.Close()
	pub, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink})
	require.NoError(t, err)
	var file bytes.Buffer
	jl := collector.NewJSONLPublisher(&file)
	from := time.Date(2026, 11, 2, 0, 0, 0, 0, storetest.Shanghai(t))
	require.NoError(t, fleet.Simulate(ctx, fleet.SimulateConfig{Spec: spec, From: from, To: from.Add(48 * time.Hour), Publisher: tee{pub, jl}}))
	require.NoError(t, jl.Flush())
	require.NoError(t, pub.Drain(ctx))
	require.Zero(t, sp.Pending(), "the spool is drained to Kafka")
	data := file.Bytes()
	require.Positive(t, jl.Count())
	t.Logf("%d samples simulated", jl.Count())

	ch := e.store(t, e.chAddr)
	lite, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "cardhour.db"), Logger: quiet()})
	require.NoError(t, err)
	defer lite.Close()
	eLite := *e
	eLite.group = e.group + "_sqlite"
	for _, run := range []struct {
		e   *env
		st  ingest.Store
		src reads.UsageSource
	}{{e, ch, ch}, {&eLite, lite, lite}} {
		m := ingest.NewMetrics(nil)
		stop := start(t, run.e.workerConfig(run.st, m))
		run.e.waitCommitted(t, 90*time.Second)
		require.NoError(t, stop())
		require.EqualValues(t, jl.Count(), value(m.SamplesWritten), "every sample written once (no replays here)")
		require.Zero(t, value(m.Messages.WithLabelValues("invalid")), "no dead letters")
		storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), run.src)
	}
}
