package collector

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTPHandler serves /metrics from g, and the collectors' health:
//
//   - /healthz (liveness): 503 with the reason when a collector has not handed
//     samples to its publisher (the spool) for three intervals, a state a
//     restart may cure; else 200, with "ok", or "degraded: <reason>" when a
//     check of degraded fails. A collector that samples and spools while Kafka
//     is away is alive: restarting it would not bring Kafka back.
//   - /readyz (readiness): 503 with the reason when /healthz fails or a check of
//     degraded fails (e.g. the oldest sample Kafka has not acknowledged is older
//     than the limit); else 200 "ok".
func HTTPHandler(g prometheus.Gatherer, degraded []func() error, cs ...*Collector) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	live := func() error {
		for _, c := range cs {
			if err := c.Healthy(); err != nil {
				return fmt.Errorf("%s: %w", c.cfg.Node, err)
			}
		}
		return nil
	}
	ready := func() error {
		for _, check := range degraded {
			if err := check(); err != nil {
				return err
			}
		}
		return nil
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := live(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		if err := ready(); err != nil {
			fmt.Fprintf(w, "degraded: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := live(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		if err := ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "degraded: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
