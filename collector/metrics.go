package collector

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	produced       prometheus.Counter
	invalid        prometheus.Counter
	publishErrors  prometheus.Counter
	sourceErrors   prometheus.Counter
	resolverErrors *prometheus.CounterVec
	clockAnomalies prometheus.Counter
	lag            prometheus.Histogram
	sampleDuration prometheus.Histogram
	lastSample     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		produced: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_samples_produced_total",
			Help: "Samples built, validated and handed to the publisher."}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_samples_invalid_total",
			Help: "Samples dropped because they failed validation (a device reported nonsense)."}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_publish_errors_total",
			Help: "Ticks whose samples the publisher could not accept."}),
		sourceErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_source_errors_total",
			Help: "Ticks on which the device source reported at least one error."}),
		resolverErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardhour_collector_resolver_errors_total",
			Help: "Attribution errors per resolver."}, []string{"resolver"}),
		clockAnomalies: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_clock_anomalies_total",
			Help: "Ticks after a stall or a wall-clock step; such a sample claims one interval only."}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cardhour_collector_sample_lag_seconds",
			Help:    "How late a tick fired after its aligned boundary.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}}),
		sampleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cardhour_collector_sample_duration_seconds",
			Help:    "Time to read the devices and attribute them, per tick.",
			Buckets: []float64{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}}),
		lastSample: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cardhour_collector_last_sample_end_timestamp_seconds",
			Help: "End of the interval covered by the last published samples (Unix seconds)."}),
	}
	if reg == nil {
		return m, nil
	}
	// Several collectors in one process (a simulated fleet) share one set of
	// metrics: reuse what is already registered.
	var err error
	reuse := func(c prometheus.Collector) prometheus.Collector {
		if err != nil {
			return c
		}
		if rerr := reg.Register(c); rerr != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(rerr, &are) {
				return are.ExistingCollector
			}
			err = rerr
		}
		return c
	}
	m.produced = reuse(m.produced).(prometheus.Counter)
	m.invalid = reuse(m.invalid).(prometheus.Counter)
	m.publishErrors = reuse(m.publishErrors).(prometheus.Counter)
	m.sourceErrors = reuse(m.sourceErrors).(prometheus.Counter)
	m.resolverErrors = reuse(m.resolverErrors).(*prometheus.CounterVec)
	m.clockAnomalies = reuse(m.clockAnomalies).(prometheus.Counter)
	m.lag = reuse(m.lag).(prometheus.Histogram)
	m.sampleDuration = reuse(m.sampleDuration).(prometheus.Histogram)
	m.lastSample = reuse(m.lastSample).(prometheus.Gauge)
	return m, err
}
