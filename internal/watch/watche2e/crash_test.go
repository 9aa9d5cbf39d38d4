package watche2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"net/http"
	"net/http/httptest"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/watch"
)

// The helper process of TestKilledDuringRelease: a watcher leader that
// runs one cycle, in which it releases MIG-crash through a webhook that
// never answers. It is killed with SIGKILL during that call.
func TestCrashHelperProcess(t *testing.T) {
	path := os.Getenv("CARDHOUR_CRASH_LEDGER")
	if path == "" {
		t.Skip("helper process of TestKilledDuringRelease")
	}
	now := t0.Add(65 * time.Minute)
	cat := smallCat(t)
	l := openSQLite(t, path, func() time.Time { return now })
	w := newWatcher(t, cat, harnessOpts{ledger: l, usage: memUsage(t, idleSamples("nlp", "s1", "MIG-crash", t0, now)),
		notifier: notifierTo(t, os.Getenv("CARDHOUR_CRASH_ALERTS")), releaseURL: os.Getenv("CARDHOUR_CRASH_RELEASE"),
		admins: []watch.Person{{Name: "ops", Email: "ops@example.edu"}}})
	_, err := w.Cycle(context.Background(), now)
	t.Fatalf("the cycle returned (%v): the release call should have been killed", err)
}

// kill -9 of the leader while its release call is in flight: the release
// stays pending; after its stale time the restarted watcher settles it
// against the latest samples (none since the call began: released) and
// the holder is told, at the webhook receiver, without a second release.
func TestKilledDuringRelease(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	clock := ledgertest.NewClock(t0)
	l := openSQLite(t, path, clock.Now)
	importRoster(t, l)
	require.NoError(t, l.Close())

	alerts := newReceiver(t)
	called := make(chan struct{}, 4)
	relSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices the caller's death
		called <- struct{}{}
		select { // the release takes effect, its answer never comes back
		case <-r.Context().Done():
		case <-time.After(2 * time.Minute):
		}
	}))
	defer relSrv.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CARDHOUR_CRASH_LEDGER="+path, "CARDHOUR_CRASH_ALERTS="+alerts.srv.URL,
		"CARDHOUR_CRASH_RELEASE="+relSrv.URL)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	select {
	case <-called:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the helper never called the releaser:\n%s", out)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err := cmd.Wait()
	require.Error(t, err)
	require.Contains(t, err.Error(), "killed", "the helper died of SIGKILL:\n%s", out)

	// What the kill left: the release pending, nothing told.
	l = openSQLite(t, path, clock.Now)
	rs, _, err := l.Releases(context.Background(), ledger.ReleaseFilter{InstanceID: "MIG-crash"})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, ledger.ReleasePending, rs[0].Status)
	require.Empty(t, alerts.payloads())

	// The restarted leader; the instance's samples stopped when the
	// release took effect (65 min after t0).
	cat := smallCat(t)
	usage := memUsage(t, idleSamples("nlp", "s1", "MIG-crash", t0, t0.Add(65*time.Minute)))
	w := newWatcher(t, cat, harnessOpts{ledger: l, usage: usage, notifier: notifierTo(t, alerts.srv.URL),
		releaseURL: relSrv.URL, admins: []watch.Person{{Name: "ops", Email: "ops@example.edu"}}})
	ctx := context.Background()
	for _, at := range []time.Time{t0.Add(70 * time.Minute), t0.Add(76 * time.Minute), t0.Add(80 * time.Minute)} {
		clock.Set(at)
		_, err := w.Cycle(ctx, at)
		require.NoError(t, err)
		w.Deliver(ctx, at)
	}
	got := alerts.payloads()
	var toHolder []string
	for _, p := range got {
		require.Equal(t, watch.KindIdleRelease, string(p.Kind), "%s to %s: %s", p.Kind, p.To.Role, p.Subject)
		if p.To.Role == "holder" {
			toHolder = append(toHolder, p.Key)
			require.Equal(t, "s1", p.To.User)
			if p.Lang == "en" {
				require.Contains(t, p.Subject+p.Body, "released")
			}
		}
	}
	require.Len(t, toHolder, 1, "the holder is told once: %+v", got)
	require.Len(t, got, 2, "holder and admin")
	r, err := l.ReleaseByKey(ctx, rs[0].Key)
	require.NoError(t, err)
	require.Equal(t, ledger.ReleaseDone, r.Status, "%+v", r)
	require.Contains(t, r.Action, "answer was lost")
	require.Len(t, called, 0, "the release was not called again")
}
