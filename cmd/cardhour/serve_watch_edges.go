//go:build !collector

package main

import (
	"github.com/cardhour/cardhour/internal/watch"
	"github.com/cardhour/cardhour/internal/watch/notify"
	"github.com/cardhour/cardhour/internal/watch/release"
)

// The watcher's edges: the notify: section becomes internal/watch/notify's
// channels, the release: section internal/watch/release's releasers; both
// speak the watcher's types (internal/watch/alert) as they are.
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
		return n, nil
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
		return set, nil
	}
}
