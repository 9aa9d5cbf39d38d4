package notify

import (
	"context"
	"fmt"
	"time"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/prometheus/client_golang/prometheus"
)

// Notifier is a configuration with its senders: it plans messages and sends
// envelopes on the channel they name, counting every attempt.
type Notifier struct {
	cfg     *Config
	senders map[string]Sender
	metrics *Metrics
}

// NewNotifier makes the senders of cfg and registers the delivery metrics on
// reg (nil: not registered).
func NewNotifier(cfg *Config, reg prometheus.Registerer) (*Notifier, error) {
	senders, err := cfg.Senders()
	if err != nil {
		return nil, err
	}
	m := NewMetrics(reg)
	return &Notifier{cfg: cfg, senders: m.Instrument(cfg, senders), metrics: m}, nil
}

// Config is the notifier's configuration.
func (n *Notifier) Config() *Config { return n.cfg }

// Metrics are the notifier's delivery counters.
func (n *Notifier) Metrics() *Metrics { return n.metrics }

// Collectors are the delivery counters, for a /metrics registry.
func (n *Notifier) Collectors() []prometheus.Collector {
	return []prometheus.Collector{n.metrics.Delivered, n.metrics.Failed}
}

// Plan is Config.Plan.
func (n *Notifier) Plan(m alert.Message, people []alert.Person) ([]alert.Envelope, error) {
	return n.cfg.Plan(m, people)
}

// Send makes one attempt at delivering e on the channel it names. An
// envelope for a channel that is not configured (any more) fails permanently.
func (n *Notifier) Send(ctx context.Context, e alert.Envelope) error {
	s, ok := n.senders[e.Channel]
	if !ok {
		return fmt.Errorf("%w: no channel %q", ErrConfig, e.Channel)
	}
	return s.Send(ctx, e)
}

// Permanent is the package's Permanent.
func (n *Notifier) Permanent(err error) bool { return Permanent(err) }

// Backoff is the package's Backoff with its own random source.
func (n *Notifier) Backoff(attempt int) time.Duration { return Backoff(attempt, nil) }
