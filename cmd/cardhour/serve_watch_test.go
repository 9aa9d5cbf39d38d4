//go:build !collector

package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/catalogs"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
	"github.com/cardhour/cardhour/internal/watch"
)

func TestServeWatch(t *testing.T) {
	dir := t.TempDir()
	store := "sqlite://" + filepath.Join(dir, "usage.db")
	code, out, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	bad := file("bad.yaml", "watch:\n  interval: soon\n")
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", bad)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, bad+`:2: watch.interval: "soon" is not a positive duration`)

	// The notify: and release: sections are read by their own packages,
	// whose errors name the file, the line (the file's) and the field.
	badNotify := file("notify.yaml", "watch:\n  interval: 1s\nnotify:\n  channels: {}\n")
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", badNotify)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, badNotify+": notify config:4: channels: must be a list")

	// A section a build cannot read is refused, not ignored.
	hook := watchNotifier
	watchNotifier = nil
	t.Cleanup(func() { watchNotifier = hook })
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", badNotify)
	watchNotifier = hook
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "notify: this build has no notification channels")

	badRelease := file("release.yaml", "watch:\n  interval: 1s\nrelease:\n  default: [nowhere]\n")
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", badRelease)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, badRelease+":")
	require.Contains(t, errOut, "line 4")
	require.Contains(t, errOut, "nowhere")

	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--watch-every", "0s")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--watch-every must be positive")

	ok := file("watch.yaml", "watch:\n  interval: 1s\n  admins:\n    - {name: Ops, email: ops@example.edu}\n")
	sv := startServe(t, "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", ok)
	require.Eventually(t, func() bool { return strings.Contains(sv.stderr.String(), `"watcher started"`) }, 10*time.Second, 10*time.Millisecond)
	st, body := sv.get("/metrics", "")
	require.Equal(t, 200, st)
	require.Contains(t, body, "cardhour_watch_leader")
	sv.stop()
}

// A stop lets the watcher and the jobs give their leases up while the
// state store is still open, however slow their stop: another replica
// takes the leases at once, and no release meets a closed database.
func TestServeStopReleasesTheLeasesBeforeTheStoresClose(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "usage.db")
	store := "sqlite://" + dbPath
	code, out, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)
	// A cycle every minute: a lease not given up would be held for three.
	watchFile := filepath.Join(dir, "watch.yaml")
	require.NoError(t, os.WriteFile(watchFile, []byte("watch:\n  interval: 1m\n  admins:\n    - {name: Ops, email: ops@example.edu}\n"), 0o600))
	var released sync.Map
	leaseReleasing = func(name string) {
		time.Sleep(300 * time.Millisecond) // a slow stop
		released.Store(name, true)
	}
	t.Cleanup(func() { leaseReleasing = nil })

	sv := startServe(t, "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", watchFile,
		"--auto-finalize", "--jobs-every", "1m")
	require.Eventually(t, func() bool {
		_, body := sv.get("/metrics", "")
		return strings.Contains(body, "\ncardhour_watch_leader 1\n")
	}, 20*time.Second, 50*time.Millisecond, "the watcher holds the lease")
	led, err := ledgerdsn.Open(context.Background(), store, ledgerdsn.Options{Clock: time.Now})
	require.NoError(t, err)
	defer led.Close() //nolint:errcheck // the test's own handle
	for _, lease := range []string{watch.LeaseName, invoicing.LeaseAutoFinalize} {
		require.Eventually(t, func() bool {
			ok, err := led.AcquireLease(context.Background(), lease, "replica-2", time.Minute)
			require.NoError(t, err)
			return !ok
		}, 10*time.Second, 50*time.Millisecond, "serve holds %s", lease)
	}

	sv.stop()
	for _, lease := range []string{watch.LeaseName, invoicing.LeaseAutoFinalize} {
		_, ok := released.Load(lease)
		require.True(t, ok, "serve gave %s up", lease)
		took, err := led.AcquireLease(context.Background(), lease, "replica-2", time.Minute)
		require.NoError(t, err)
		require.True(t, took, "another replica takes %s at once", lease)
	}
	logged := sv.stderr.String()
	require.NotContains(t, logged, "database is closed")
	require.NotContains(t, logged, "cannot give the lease up")
}

// failingLeases is a state store whose lease cannot be given up.
type failingLeases struct{ ledger.Store }

func (failingLeases) ReleaseLease(context.Context, string, string) error {
	return errors.New("database is closed")
}

// The watcher's actor returns a lease it could not give up, once, so that
// serve's run group reports it; a clean stop is no error.
func TestWatchActorReturnsAFailedLeaseRelease(t *testing.T) {
	for _, fail := range []bool{false, true} {
		led, err := ledgerdsn.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "state.db"), ledgerdsn.Options{Clock: time.Now})
		require.NoError(t, err)
		t.Cleanup(func() { _ = led.Close() })
		var st ledger.Store = led
		if fail {
			st = failingLeases{led}
		}
		leases := &leaseLedger{Store: st, log: slog.New(slog.DiscardHandler)}
		reg := prometheus.NewRegistry()
		a, err := watchActor(leases, ingest.NewMemStore(), catalogs.New(led),
			watchOptions{File: "watch.yaml", Every: time.Second}, reg, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.run(ctx) }()
		require.Eventually(t, func() bool {
			return strings.Contains(gathered(t, reg), "cardhour_watch_leader 1")
		}, 10*time.Second, 5*time.Millisecond, "the watcher takes the lease")
		cancel()
		err = <-done
		if !fail {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, "cannot give the watch lease up: database is closed")
		require.Equal(t, 1, strings.Count(err.Error(), "database is closed"), "reported once: %v", err)
	}
}

// gathered is reg's metrics in the text format.
func gathered(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, mf := range mfs {
		_, err := expfmt.MetricFamilyToText(&b, mf)
		require.NoError(t, err)
	}
	return b.String()
}
