package notify

import (
	"context"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count deliveries. One value per process, registered on the
// registry passed to NewMetrics.
type Metrics struct {
	Delivered *prometheus.CounterVec // channel, type
	Failed    *prometheus.CounterVec // channel, type, error=permanent|retryable
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardhour_notify_delivered_total", Help: "Notifications delivered, by channel and channel type.",
		}, []string{"channel", "type"}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardhour_notify_failed_total",
			Help: "Failed delivery attempts, by channel, channel type and error (permanent: not retried; retryable: retried with backoff).",
		}, []string{"channel", "type", "error"}),
	}
	if reg != nil {
		reg.MustRegister(m.Delivered, m.Failed)
	}
	return m
}

// Instrument wraps the senders of c (as made by Config.Senders) so that every
// attempt is counted.
func (m *Metrics) Instrument(c *Config, senders map[string]Sender) map[string]Sender {
	out := make(map[string]Sender, len(senders))
	for name, s := range senders {
		typ := ""
		if ch, ok := c.Channel(name); ok {
			typ = ch.Type
		}
		// Present from the start, so that rate() sees the first failure.
		m.Delivered.WithLabelValues(name, typ)
		m.Failed.WithLabelValues(name, typ, "permanent")
		m.Failed.WithLabelValues(name, typ, "retryable")
		out[name] = &counted{s: s, m: m, channel: name, typ: typ}
	}
	return out
}

type counted struct {
	s       Sender
	m       *Metrics
	channel string
	typ     string
}

func (c *counted) Send(ctx context.Context, e alert.Envelope) error {
	err := c.s.Send(ctx, e)
	switch {
	case err == nil:
		c.m.Delivered.WithLabelValues(c.channel, c.typ).Inc()
	case Permanent(err):
		c.m.Failed.WithLabelValues(c.channel, c.typ, "permanent").Inc()
	default:
		c.m.Failed.WithLabelValues(c.channel, c.typ, "retryable").Inc()
	}
	return err
}
