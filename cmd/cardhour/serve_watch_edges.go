//go:build !collector

package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/billing/watch"
	"github.com/cardhour/cardhour/billing/watch/notify"
	"github.com/cardhour/cardhour/billing/watch/release"
)

// The watcher's edges: the notify: section becomes billing/watch/notify's
// channels, the release: section billing/watch/release's releasers. The
// adapters copy the watcher's types into the edge packages' field by field.
func init() {
	watchNotifier = func(section []byte) (watch.Notifier, error) {
		cfg, err := notify.ParseConfig(section)
		if err != nil {
			return nil, err
		}
		n, err := notify.NewNotifier(cfg, nil)
		if err != nil {
			return nil, err
		}
		return notifyAdapter{n}, nil
	}
	watchReleaser = func(section []byte) (watch.Releaser, error) {
		cfg, err := release.ParseConfig(section)
		if err != nil {
			return nil, err
		}
		set, err := cfg.Build()
		if err != nil {
			return nil, err
		}
		return releaseAdapter{set}, nil
	}
}

// notifyAdapter is a watch.Notifier over a notify.Notifier.
type notifyAdapter struct{ n *notify.Notifier }

// Collectors are the delivery counters, for serve's /metrics.
func (a notifyAdapter) Collectors() []prometheus.Collector {
	m := a.n.Metrics()
	return []prometheus.Collector{m.Delivered, m.Failed}
}

func (a notifyAdapter) Plan(m watch.Message, people []watch.Person) ([]watch.Envelope, error) {
	ps := make([]notify.Person, len(people))
	for i, p := range people {
		ps[i] = notify.Person(p)
	}
	es, err := a.n.Plan(toNotifyMessage(m), ps)
	if err != nil {
		return nil, err
	}
	out := make([]watch.Envelope, len(es))
	for i, e := range es {
		out[i] = watch.Envelope{Channel: e.Channel, To: watch.Person(e.To), Lang: e.Lang, Subject: e.Subject, Body: e.Body, Message: m}
	}
	return out, nil
}

func (a notifyAdapter) Send(ctx context.Context, e watch.Envelope) error {
	return a.n.Send(ctx, notify.Envelope{Channel: e.Channel, To: notify.Person(e.To), Lang: e.Lang, Subject: e.Subject,
		Body: e.Body, Message: toNotifyMessage(e.Message)})
}

func (a notifyAdapter) Permanent(err error) bool          { return a.n.Permanent(err) }
func (a notifyAdapter) Backoff(attempt int) time.Duration { return a.n.Backoff(attempt) }

func toNotifyMessage(m watch.Message) notify.Message {
	f := m.Facts
	nf := notify.Facts{Project: f.Project, User: f.User, Node: f.Node, GPUUUID: f.GPUUUID, GPUModel: f.GPUModel,
		Profile: f.Profile, InstanceID: f.InstanceID, HeldSince: f.HeldSince, IdleSince: f.IdleSince, At: f.At,
		NextAction: f.NextAction, NextAt: f.NextAt, Cost: f.Cost, Currency: f.Currency, TZ: f.TZ,
		ExemptionHint: f.ExemptionHint, Outcome: f.Outcome}
	if f.Budget != nil {
		b := notify.BudgetFacts(*f.Budget)
		nf.Budget = &b
	}
	return notify.Message{Kind: notify.Kind(m.Kind), Key: m.Key, Facts: nf}
}

// releaseAdapter is a watch.Releaser over a release.Set.
type releaseAdapter struct{ s *release.Set }

func (a releaseAdapter) Release(ctx context.Context, r watch.ReleaseRequest) (watch.Outcome, error) {
	o, err := a.s.Release(ctx, release.Request{Key: r.Key, Target: release.Target(r.Target),
		Evidence: release.Evidence(r.Evidence), DryRun: r.DryRun})
	return watch.Outcome(o), err
}

func (a releaseAdapter) Permanent(err error) bool { return release.Permanent(err) }
