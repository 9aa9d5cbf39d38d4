//go:build !collector

package main

import (
	"github.com/cardhour/cardhour/billing/watch"
	"github.com/cardhour/cardhour/billing/watch/edges"
	"github.com/cardhour/cardhour/billing/watch/notify"
	"github.com/cardhour/cardhour/billing/watch/release"
)

// The watcher's edges: the notify: section becomes billing/watch/notify's
// channels, the release: section billing/watch/release's releasers. The
// adapters of billing/watch/edges copy the watcher's types into theirs.
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
		return edges.Notifier{N: n}, nil
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
		return edges.Releaser{R: set}, nil
	}
}
