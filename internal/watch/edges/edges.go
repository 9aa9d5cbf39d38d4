// Package edges connects the watcher (internal/watch) to its real edges, the
// notification channels (internal/watch/notify) and the releasers
// (internal/watch/release). The watcher declares the small interfaces it
// uses with types of its own; the adapters here copy them into the edge
// packages' types field by field. cardhour serve and the end-to-end tests
// use the same adapters.
package edges

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/internal/watch"
	"github.com/cardhour/cardhour/internal/watch/notify"
	"github.com/cardhour/cardhour/internal/watch/release"
)

// Notifier is a watch.Notifier over a notify.Notifier.
type Notifier struct{ N *notify.Notifier }

var _ watch.Notifier = Notifier{}

// Collectors are the delivery counters, for a /metrics registry.
func (a Notifier) Collectors() []prometheus.Collector {
	m := a.N.Metrics()
	return []prometheus.Collector{m.Delivered, m.Failed}
}

// Plan implements watch.Notifier.
func (a Notifier) Plan(m watch.Message, people []watch.Person) ([]watch.Envelope, error) {
	ps := make([]notify.Person, len(people))
	for i, p := range people {
		ps[i] = notify.Person(p)
	}
	es, err := a.N.Plan(Message(m), ps)
	if err != nil {
		return nil, err
	}
	out := make([]watch.Envelope, len(es))
	for i, e := range es {
		out[i] = watch.Envelope{Channel: e.Channel, To: watch.Person(e.To), Lang: e.Lang, Subject: e.Subject, Body: e.Body, Message: m}
	}
	return out, nil
}

// Send implements watch.Notifier.
func (a Notifier) Send(ctx context.Context, e watch.Envelope) error {
	return a.N.Send(ctx, notify.Envelope{Channel: e.Channel, To: notify.Person(e.To), Lang: e.Lang, Subject: e.Subject,
		Body: e.Body, Message: Message(e.Message)})
}

// Permanent implements watch.Notifier.
func (a Notifier) Permanent(err error) bool { return a.N.Permanent(err) }

// Backoff implements watch.Notifier.
func (a Notifier) Backoff(attempt int) time.Duration { return a.N.Backoff(attempt) }

// Message is m as notify's message.
func Message(m watch.Message) notify.Message {
	f := m.Facts
	nf := notify.Facts{Project: f.Project, User: f.User, Node: f.Node, GPUUUID: f.GPUUUID, GPUModel: f.GPUModel,
		Profile: f.Profile, InstanceID: f.InstanceID, HeldSince: f.HeldSince, IdleSince: f.IdleSince, At: f.At,
		NextAction: f.NextAction, NextAt: f.NextAt, Cost: f.Cost, Currency: f.Currency, TZ: f.TZ,
		ExemptionHint: f.ExemptionHint, Outcome: f.Outcome}
	if f.Budget != nil {
		b := notify.BudgetFacts(*f.Budget)
		nf.Budget = &b
	}
	return notify.Message{Kind: m.Kind, Key: m.Key, Facts: nf}
}

// Releaser is a watch.Releaser over a release.Releaser (a release.Set
// routes by project).
type Releaser struct{ R release.Releaser }

var _ watch.Releaser = Releaser{}

// Release implements watch.Releaser.
func (a Releaser) Release(ctx context.Context, r watch.ReleaseRequest) (watch.Outcome, error) {
	o, err := a.R.Release(ctx, release.Request{Key: r.Key, Target: release.Target(r.Target),
		Evidence: release.Evidence(r.Evidence), DryRun: r.DryRun})
	return watch.Outcome(o), err
}

// Permanent implements watch.Releaser.
func (a Releaser) Permanent(err error) bool { return release.Permanent(err) }
