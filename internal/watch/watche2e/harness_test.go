package watche2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/ledger/sqlite"
	"github.com/cardhour/cardhour/internal/watch"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/watch/notify"
	"github.com/cardhour/cardhour/internal/watch/release"
	"github.com/cardhour/cardhour/schemas"
)

// A small harness for the tests that need no Kafka nor ClickHouse: an
// SQLite ledger in a file (a restarted process opens it again), samples in
// an ingest.MemStore, and the real webhook notifier and releaser against
// receivers in the test.

const smallCatalog = `
currency: CNY
timezone: Asia/Shanghai
skus:
  - {id: a100-1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "1.80"}
defaults:
  gap_tolerance_s: 300
  idle: {threshold: 0.05, warn_after: 30m, remind_after: 45m, release_after: 60m, release: "on"}
projects:
  - id: nlp
  - id: calm
    idle: {warn_after: 30m, remind_after: 45m, release: "off"}
`

// t0 is the harness's start: 2026-11-02 09:00 in Shanghai.
var t0 = time.Date(2026, 11, 2, 1, 0, 0, 0, time.UTC)

func smallCat(t testing.TB) *schemas.Catalog {
	t.Helper()
	cat, err := schemas.ParseCatalog([]byte(smallCatalog), "catalog")
	require.NoError(t, err)
	return cat
}

// idleSamples are one-minute idle samples of inst held by project/user in [from, to).
func idleSamples(project, user, inst string, from, to time.Time) []schemas.Sample {
	var out []schemas.Sample
	for at := from; at.Before(to); at = at.Add(time.Minute) {
		out = append(out, schemas.Sample{StartMS: at.UnixMilli(), IntervalMS: 60_000, Node: "node-1", GPUUUID: "GPU-1",
			GPUModel: "A100", InstanceID: inst, Profile: "1g.10gb", Project: project, User: user, Util: 0, UtilKnown: true,
			Processes: 1, HolderRef: "k8s:" + project + "/" + inst})
	}
	return out
}

func memUsage(t testing.TB, samples []schemas.Sample) *ingest.MemStore {
	t.Helper()
	u := ingest.NewMemStore()
	require.NoError(t, u.Write(context.Background(), ingest.NewCompactor(0).Build(samples)))
	return u
}

func openSQLite(t testing.TB, path string, clock func() time.Time) ledger.Store {
	t.Helper()
	l, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func importRoster(t testing.TB, l ledger.Store) {
	t.Helper()
	var sts []ledger.Student
	for _, p := range []string{"nlp", "calm"} {
		for _, u := range []string{"s1", "s2", "s3", "s4"} {
			sts = append(sts, ledger.Student{Project: p, User: u, Name: u, Email: u + "@" + p + ".example.edu"})
		}
	}
	_, err := l.ImportRoster(context.Background(), "admin", ledger.RosterImport{Mode: ledger.RosterReplace,
		Projects: []string{"nlp", "calm"}, Students: sts})
	require.NoError(t, err)
}

// receiver is a webhook receiver of alerts that can be down.
type receiver struct {
	mu   sync.Mutex
	down bool
	got  []notify.WebhookPayload
	srv  *httptest.Server
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.down {
			http.Error(w, "receiver down", http.StatusServiceUnavailable)
			return
		}
		var p notify.WebhookPayload
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.got = append(r.got, p)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

func (r *receiver) payloads() []notify.WebhookPayload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notify.WebhookPayload(nil), r.got...)
}

// notifierTo is the real notifier with one webhook channel to url.
func notifierTo(t testing.TB, url string) watch.Notifier {
	t.Helper()
	cfg, err := notify.ParseConfig([]byte(fmt.Sprintf("languages: [en, zh-CN]\nchannels:\n  - name: hook\n    type: webhook\n    url: %s\n    secret: s3cret\n", url)))
	require.NoError(t, err)
	n, err := notify.NewNotifier(cfg, nil)
	require.NoError(t, err)
	return n
}

type harnessOpts struct {
	ledger     ledger.Store
	usage      watch.Usage
	notifier   watch.Notifier
	releaseURL string
	admins     []alert.Person
	leads      map[string][]alert.Person
	retryFor   time.Duration
	reg        prometheus.Registerer
}

func newWatcher(t testing.TB, cat *schemas.Catalog, o harnessOpts) *watch.Watcher {
	t.Helper()
	cfg := watch.Config{Ledger: o.ledger, Usage: o.usage, Notifier: o.notifier, Admins: o.admins, Leads: o.leads,
		Catalog:          func(context.Context) (*schemas.Catalog, error) { return cat, nil },
		ReleaseTimeout:   time.Minute,
		DeliveryRetryFor: o.retryFor, Registerer: o.reg}
	if o.releaseURL != "" {
		hook := release.NewWebhook(release.WebhookConfig{URL: o.releaseURL, Secret: "rel", Timeout: time.Minute})
		set, err := release.NewSet(map[string]release.Releaser{"hook": hook}, []string{"hook"}, nil)
		require.NoError(t, err)
		cfg.Releaser = set
	}
	w, err := watch.New(cfg)
	require.NoError(t, err)
	return w
}

var _ = ledgertest.NewClock
