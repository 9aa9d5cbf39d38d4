package watche2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"net/http"
	"net/http/httptest"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/ledger/postgres"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/internal/watch/alert"
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
		admins: []alert.Person{{Name: "ops", Email: "ops@example.edu"}}})
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
	require.Equal(t, billing.ReleasePending, rs[0].Status)
	require.Empty(t, alerts.payloads())

	// The restarted leader; the instance's samples stopped when the
	// release took effect (65 min after t0).
	cat := smallCat(t)
	usage := memUsage(t, idleSamples("nlp", "s1", "MIG-crash", t0, t0.Add(65*time.Minute)))
	w := newWatcher(t, cat, harnessOpts{ledger: l, usage: usage, notifier: notifierTo(t, alerts.srv.URL),
		releaseURL: relSrv.URL, admins: []alert.Person{{Name: "ops", Email: "ops@example.edu"}}})
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
		require.Equal(t, string(billing.AlertIdleRelease), string(p.Kind), "%s to %s: %s", p.Kind, p.To.Role, p.Subject)
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
	require.Equal(t, billing.ReleaseDone, r.Status, "%+v", r)
	require.Contains(t, r.Action, "answer was lost")
	require.Len(t, called, 0, "the release was not called again")
}

// killAfterFinish is the ledger of the helper process of
// TestKilledAfterFinishRelease: once a release's outcome is committed, the
// process kills itself with SIGKILL, before the watcher records its alert.
type killAfterFinish struct{ ledger.Store }

func (k killAfterFinish) FinishRelease(ctx context.Context, actor string, id int64, res ledger.ReleaseResult) (ledger.Release, error) {
	r, err := k.Store.FinishRelease(ctx, actor, id, res)
	if err == nil {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	return r, err
}

// The helper process of TestKilledAfterFinishRelease: a watcher leader on
// PostgreSQL that runs one cycle, in which it releases MIG-done through a
// webhook that answers released, and dies by SIGKILL right after the
// outcome is committed.
func TestKilledAfterFinishHelperProcess(t *testing.T) {
	dsn := os.Getenv("CARDHOUR_CRASH_PG")
	if dsn == "" {
		t.Skip("helper process of TestKilledAfterFinishRelease")
	}
	now := t0.Add(65 * time.Minute)
	l, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Clock: func() time.Time { return now }, MaxConns: 2})
	require.NoError(t, err)
	w := newWatcher(t, smallCat(t), harnessOpts{ledger: killAfterFinish{l}, usage: memUsage(t, idleSamples("nlp", "s1", "MIG-done", t0, now)),
		notifier: notifierTo(t, os.Getenv("CARDHOUR_CRASH_ALERTS")), releaseURL: os.Getenv("CARDHOUR_CRASH_RELEASE"),
		admins: []alert.Person{{Name: "ops", Email: "ops@example.edu"}}})
	_, err = w.Cycle(context.Background(), now)
	t.Fatalf("the cycle returned (%v): the process should have been killed after FinishRelease", err)
}

// kill -9 of the leader after the release's outcome is committed and
// before its alert is recorded, on durable PostgreSQL: the release is done
// and nobody is told; the instance, released, is no longer held. The
// restarted watcher tells the outcome anyway: the holder and the admin each
// receive idle_release once at the webhook receiver, and the instance is
// not released again.
func TestKilledAfterFinishRelease(t *testing.T) {
	dsn := testenv.DurablePostgresDSN(t)
	ctx := context.Background()
	clock := ledgertest.NewClock(t0)
	open := func() ledger.Store {
		l, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Clock: clock.Now, MaxConns: 2})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	l := open()
	importRoster(t, l)
	require.NoError(t, l.Close())

	alerts := newReceiver(t)
	var calls atomic.Int32
	relSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"released": true, "detail": "deleted pod nlp/MIG-done"}`)
	}))
	defer relSrv.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledAfterFinishHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CARDHOUR_CRASH_PG="+dsn, "CARDHOUR_CRASH_ALERTS="+alerts.srv.URL,
		"CARDHOUR_CRASH_RELEASE="+relSrv.URL)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the helper did not die:\n%s\n%v", out, <-done)
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "killed", "the helper died of SIGKILL:\n%s", out)
	require.EqualValues(t, 1, calls.Load(), "the helper called the releaser once:\n%s", out)

	// What the kill left: the release done, its outcome told to nobody.
	l = open()
	key := ledger.ReleaseKey("MIG-done", t0)
	r, err := l.ReleaseByKey(ctx, key)
	require.NoError(t, err)
	require.Equal(t, billing.ReleaseDone, r.Status, "%+v", r)
	_, err = l.AlertByKey(ctx, ledger.IdleAlertKey(billing.AlertIdleRelease, "MIG-done", t0))
	require.ErrorIs(t, err, ledger.ErrNotFound)
	require.Empty(t, alerts.payloads())

	// The restarted leader, 15 minutes later: the samples stopped when the
	// release took effect, the instance is no longer held.
	usage := memUsage(t, idleSamples("nlp", "s1", "MIG-done", t0, t0.Add(65*time.Minute)))
	w := newWatcher(t, smallCat(t), harnessOpts{ledger: l, usage: usage, notifier: notifierTo(t, alerts.srv.URL),
		releaseURL: relSrv.URL, admins: []alert.Person{{Name: "ops", Email: "ops@example.edu"}}})
	for _, at := range []time.Time{t0.Add(80 * time.Minute), t0.Add(81 * time.Minute), t0.Add(100 * time.Minute)} {
		clock.Set(at)
		rep, err := w.Cycle(ctx, at)
		require.NoError(t, err)
		require.Zero(t, rep.Held, "the released instance is no longer held")
		w.Deliver(ctx, at)
	}
	// A second restart tells nothing again.
	w2 := newWatcher(t, smallCat(t), harnessOpts{ledger: open(), usage: usage, notifier: notifierTo(t, alerts.srv.URL),
		releaseURL: relSrv.URL, admins: []alert.Person{{Name: "ops", Email: "ops@example.edu"}}})
	clock.Set(t0.Add(2 * time.Hour))
	_, err = w2.Cycle(ctx, t0.Add(2*time.Hour))
	require.NoError(t, err)
	w2.Deliver(ctx, t0.Add(2*time.Hour))

	got := map[string]int{}
	for _, p := range alerts.payloads() {
		require.Equal(t, string(billing.AlertIdleRelease), string(p.Kind), "%s to %s: %s", p.Kind, p.To.Role, p.Subject)
		got[p.To.Role]++
		if p.To.Role == "holder" {
			require.Equal(t, "s1", p.To.User)
		}
		if p.Lang == "en" {
			require.Contains(t, p.Subject+p.Body, "released")
			require.Contains(t, p.Body, "deleted pod nlp/MIG-done")
		}
	}
	require.Equal(t, map[string]int{"holder": 1, "admin": 1}, got, "each person is told once: %+v", alerts.payloads())
	a, err := l.AlertByKey(ctx, ledger.IdleAlertKey(billing.AlertIdleRelease, "MIG-done", t0))
	require.NoError(t, err)
	ds, _, err := l.Deliveries(ctx, ledger.DeliveryFilter{AlertID: a.ID})
	require.NoError(t, err)
	require.Len(t, ds, 2)
	for _, d := range ds {
		require.Equal(t, ledger.DeliverySent, d.Status, "%+v", d)
	}
	require.EqualValues(t, 1, calls.Load(), "the instance was not released again")
}
