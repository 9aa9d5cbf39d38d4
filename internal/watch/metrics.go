package watch

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	alerts   *prometheus.CounterVec // by kind
	sent     *prometheus.CounterVec // by channel
	retried  *prometheus.CounterVec // by channel
	failed   *prometheus.CounterVec // by channel
	releases *prometheus.CounterVec // by status
	cycle    prometheus.Histogram
	leader   prometheus.Gauge
	backlog  *prometheus.GaugeVec // by status: pending, failed
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardhour_watch_alerts_total",
			Help: "Alerts recorded, by kind (each natural key once)."}, []string{"kind"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardhour_watch_deliveries_sent_total",
			Help: "Deliveries sent, by channel."}, []string{"channel"}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardhour_watch_delivery_retries_total",
			Help: "Delivery attempts that failed and will be retried, by channel."}, []string{"channel"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardhour_watch_deliveries_failed_total",
			Help: "Deliveries failed for good (a permanent error or the retry horizon spent), by channel."}, []string{"channel"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardhour_watch_releases_total",
			Help: "Release attempts, by outcome (done, dry_run, failed)."}, []string{"status"}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cardhour_watch_cycle_seconds",
			Help:    "Duration of one watch cycle (reads, decisions, records, releases).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cardhour_watch_leader",
			Help: "1 while this replica holds the watch lease."}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cardhour_watch_delivery_backlog",
			Help: "Deliveries not sent, by status: pending (due or waiting for a retry) and failed (for good; re-send them from the API or the dashboard). Counted after every delivery round of the leader."},
			[]string{"status"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.alerts, err = register(reg, m.alerts, err)
	m.sent, err = register(reg, m.sent, err)
	m.retried, err = register(reg, m.retried, err)
	m.failed, err = register(reg, m.failed, err)
	m.releases, err = register(reg, m.releases, err)
	m.cycle, err = register(reg, m.cycle, err)
	m.leader, err = register(reg, m.leader, err)
	m.backlog, err = register(reg, m.backlog, err)
	if err != nil {
		return nil, fmt.Errorf("watch metrics: %w", err)
	}
	return m, nil
}

// register registers c, or returns the collector of the same name already
// registered (two watchers in one process share their metrics).
func register[C prometheus.Collector](reg prometheus.Registerer, c C, prev error) (C, error) {
	if prev != nil {
		return c, prev
	}
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if old, ok := are.ExistingCollector.(C); ok {
			return old, nil
		}
	}
	return c, err
}
