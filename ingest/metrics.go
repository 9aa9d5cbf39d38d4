package ingest

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/schemas"
)

// Metrics are the ingest pipeline's Prometheus metrics. One value per process,
// registered on the registry passed to NewMetrics; share it between the workers.
type Metrics struct {
	Messages       *prometheus.CounterVec // sample lines, result=valid|invalid
	SamplesWritten prometheus.Counter     // raw samples accepted by the store
	SamplesEarly   prometheus.Counter     // samples sent as blocks of a batch's open insert
	RowsWritten    *prometheus.CounterVec // table=raw_samples|occupancy|idle_spans|latest_samples
	Batches        prometheus.Counter     // batches written
	BatchSamples   prometheus.Histogram   // samples per batch
	WriteSeconds   prometheus.Histogram   // store write latency (successful writes)
	WriteErrors    prometheus.Counter     // failed store writes (each retry counts)
	DLQ            *prometheus.CounterVec // reason: each of schemas.RejectReasons, from 0
	DLQErrors      prometheus.Counter     // failed dead-letter writes
	Commits        prometheus.Counter     // successful offset commits
	CommitErrors   prometheus.Counter     // failed offset commits
	Lag            *prometheus.GaugeVec   // partition
	Paused         prometheus.Gauge       // 1 while a worker waits for the store
	Workers        prometheus.Gauge       // running consumer goroutines
	RunsForgotten  prometheus.Counter     // open runs the compactors forgot (MaxOpenRuns)
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardhour_ingest_messages_total", Help: "Sample lines read (from Kafka messages or a file), by result (valid, invalid).",
		}, []string{"result"}),
		SamplesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardhour_ingest_samples_written_total", Help: "Samples written to the store.",
		}),
		SamplesEarly: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardhour_ingest_samples_streamed_total",
			Help: "Samples sent to the store as blocks of a batch's open insert, while the batch is still being read (stored only once the insert is finished).",
		}),
		RowsWritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardhour_ingest_rows_written_total", Help: "Rows written to the store, by table.",
		}, []string{"table"}),
		Batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardhour_ingest_batches_total", Help: "Batches written to the store.",
		}),
		BatchSamples: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cardhour_ingest_batch_samples", Help: "Samples per batch written.",
			Buckets: prometheus.ExponentialBuckets(16, 4, 8),
		}),
		WriteSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cardhour_ingest_store_write_seconds", Help: "Latency of successful store writes.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10),
		}),
		WriteErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardhour_ingest_store_write_errors_total", Help: "Failed store writes (retried with backoff).",
		}),
		DLQ: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardhour_ingest_dlq_messages_total", Help: "Invalid messages sent to the dead-letter topic, by reason.",
		}, []string{"reason"}),
		DLQErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardhour_ingest_dlq_write_errors_total", Help: "Failed dead-letter writes (retried with backoff).",
		}),
		Commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardhour_ingest_commits_total", Help: "Successful Kafka offset commits.",
		}),
		CommitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardhour_ingest_commit_errors_total", Help: "Failed Kafka offset commits (retried).",
		}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cardhour_ingest_consumer_lag_messages", Help: "Messages behind the partition's high watermark at the last fetch.",
		}, []string{"partition"}),
		Paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cardhour_ingest_paused", Help: "Workers waiting for the store or Kafka (not consuming).",
		}),
		Workers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cardhour_ingest_workers", Help: "Running consumer workers.",
		}),
		RunsForgotten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardhour_ingest_runs_forgotten_total",
			Help: "Open runs a compactor forgot to stay within its max open runs (already written: later samples of their keys start new rows; bills do not change).",
		}),
	}

	// Every reason is exported from the start, so that a rate or an alert on
	// one has a series before its first dead letter.
	for _, r := range schemas.RejectReasons {
		m.DLQ.WithLabelValues(string(r))
	}
	if reg != nil {
		reg.MustRegister(m.Messages, m.SamplesWritten, m.SamplesEarly, m.RowsWritten, m.Batches, m.BatchSamples,
			m.WriteSeconds, m.WriteErrors, m.DLQ, m.DLQErrors, m.Commits, m.CommitErrors, m.Lag, m.Paused, m.Workers,
			m.RunsForgotten)
	}
	return m
}
