package dcgm

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	scrapeErrors *prometheus.CounterVec
	ignored      *prometheus.CounterVec
	instances    *prometheus.CounterVec
	duration     prometheus.Histogram
	lastSuccess  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		scrapeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardhour_collector_dcgm_scrape_errors_total",
			Help: "dcgm-exporter scrapes that failed, by reason (request, timeout, status, too_large, parse); the tick's samples keep NVML's utilisation."},
			[]string{"reason"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardhour_collector_dcgm_series_ignored_total",
			Help: "DCGM_FI_PROF_GR_ENGINE_ACTIVE series not used, by reason (nan, out_of_range, stale, bad_labels, duplicate, conflict)."},
			[]string{"reason"}),
		instances: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardhour_collector_dcgm_instances_total",
			Help: "Instance samples by what DCGM did to their utilisation (filled, kept, no_series, profile_mismatch, no_scrape)."},
			[]string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cardhour_collector_dcgm_scrape_duration_seconds",
			Help:    "Time to read and parse dcgm-exporter's metrics, successful scrapes.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5}}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cardhour_collector_dcgm_last_success_timestamp_seconds",
			Help: "When dcgm-exporter was last read and parsed (Unix seconds)."}),
	}
	if reg == nil {
		return m, nil
	}
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
	m.scrapeErrors = reuse(m.scrapeErrors).(*prometheus.CounterVec)
	m.ignored = reuse(m.ignored).(*prometheus.CounterVec)
	m.instances = reuse(m.instances).(*prometheus.CounterVec)
	m.duration = reuse(m.duration).(prometheus.Histogram)
	m.lastSuccess = reuse(m.lastSuccess).(prometheus.Gauge)
	return m, err
}
