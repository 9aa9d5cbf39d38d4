package collector

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTPHandler serves /metrics from g and /healthz from the collectors' health:
// 200 "ok" when every collector published recently, 503 with the reason otherwise.
func HTTPHandler(g prometheus.Gatherer, cs ...*Collector) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		for _, c := range cs {
			if err := c.Healthy(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "%s: %v\n", c.cfg.Node, err)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
