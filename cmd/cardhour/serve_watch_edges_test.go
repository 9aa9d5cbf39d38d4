//go:build !collector

package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	ingestsqlite "github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	ledgersqlite "github.com/cardhour/cardhour/internal/ledger/sqlite"
	"github.com/cardhour/cardhour/internal/watch"
	"github.com/cardhour/cardhour/schemas"
)

// signed is one request a receiver accepted after checking its signature
// (computed here, independently of the senders): hex HMAC-SHA256 under the
// shared secret of the X-Cardhour-Timestamp header, ".", and the body.
type signed struct {
	key  string // Idempotency-Key
	body []byte
}

// receiver is an httptest server that refuses a request whose signature
// does not verify (401) and answers the others with reply(body).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []signed
	forged int
}

func newReceiver(t *testing.T, secret string, reply func(body []byte) string) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil || req.Method != http.MethodPost || !strings.HasPrefix(req.Header.Get("Content-Type"), "application/json") {
			http.Error(w, "want a JSON POST", http.StatusBadRequest)
			return
		}
		ts := req.Header.Get("X-Cardhour-Timestamp")
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(ts + "."))
		m.Write(body)
		want := hex.EncodeToString(m.Sum(nil))
		if ts == "" || !hmac.Equal([]byte(want), []byte(req.Header.Get("X-Cardhour-Signature"))) {
			r.mu.Lock()
			r.forged++
			r.mu.Unlock()
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, signed{key: req.Header.Get("Idempotency-Key"), body: body})
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply(body))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []signed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]signed(nil), r.got...)
}

const edgesCatalog = `
currency: CNY
timezone: Asia/Shanghai
skus:
  - {id: a100-1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "2.00"}
defaults:
  idle: {threshold: 0.05, warn_after: 30m, release_after: 60m, release: "on"}
projects:
  - id: nlp
`

// TestWatchEdges runs the watcher as serve builds it from a watch file
// (loadWatch: the notify: section through notify.ParseConfig, the release:
// section through release.ParseConfig) over an SQLite usage store: an idle
// held instance is warned, then released by a webhook releaser, and the
// alerts reach a generic webhook signed with HMAC-SHA256; an instance
// whose release the receiver refuses is told as not released.
func TestWatchEdges(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const alertSecret, releaseSecret = "alert-secret", "release-secret"

	alerts := newReceiver(t, alertSecret, func([]byte) string { return "" })
	releases := newReceiver(t, releaseSecret, func(body []byte) string {
		var req struct {
			Target struct {
				InstanceID string `json:"instance_id"`
			} `json:"target"`
		}
		_ = json.Unmarshal(body, &req)
		if req.Target.InstanceID == "mig-stuck" {
			return `{"released": false, "detail": "pod is protected"}`
		}
		return `{"released": true, "detail": "deleted pod nlp/` + req.Target.InstanceID + `"}`
	})

	file := filepath.Join(dir, "watch.yaml")
	require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf(`watch:
  interval: 1m
  exemption_hint: "ask your lead"
  admins:
    - {name: Ops, email: ops@example.edu, lang: en}
notify:
  languages: [en]
  channels:
    - name: ticketing
      type: webhook
      url: %s/alerts
      secret: %s
      roles: [admin]
release:
  default: [site-hook]
  releasers:
    site-hook:
      kind: webhook
      url: %s/release
      secret: %s
      timeout: 5s
`, alerts.srv.URL, alertSecret, releases.srv.URL, releaseSecret)), 0o600))
	wo, err := loadWatch(file, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, time.Minute, wo.Every)
	require.NotNil(t, wo.Config.Notifier, "the notify: section gives a notifier")
	require.NotNil(t, wo.Config.Releaser, "the release: section gives a releaser")

	cat, err := schemas.ParseCatalog([]byte(edgesCatalog), "catalog")
	require.NoError(t, err)
	usage, err := ingestsqlite.Open(ctx, ingestsqlite.Config{Path: filepath.Join(dir, "usage.db"), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = usage.Close() })

	// Two instances held since 09:00, busy until 10:00, idle from then on.
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, cat.Location)
	heldFrom, idleFrom := day.Add(9*time.Hour), day.Add(10*time.Hour)
	clock := ledgertest.NewClock(heldFrom)
	led, err := ledgersqlite.Open(ctx, ledgersqlite.Config{Path: filepath.Join(dir, "ledger.db"), Clock: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })

	comp := ingest.NewCompactor(0)
	fed := heldFrom
	feed := func(to time.Time) { // the samples a collector has sent by to
		var batch []schemas.Sample
		for ts := fed; ts.Before(to); ts = ts.Add(time.Minute) {
			util := 0.9
			if !ts.Before(idleFrom) {
				util = 0
			}
			for _, inst := range []string{"mig-free", "mig-stuck"} {
				batch = append(batch, schemas.Sample{StartMS: ts.UnixMilli(), IntervalMS: 60_000, Node: "gpu-01", GPUUUID: "GPU-1",
					GPUModel: "A100", InstanceID: inst, Profile: "1g.10gb", Project: "nlp", User: "alice",
					Util: util, UtilKnown: true, Processes: 1, HolderRef: "k8s:nlp/" + inst})
			}
		}
		fed = to
		require.NoError(t, usage.Write(ctx, comp.Build(batch)))
	}

	cfg := wo.Config
	cfg.Ledger, cfg.Usage = led, usage
	cfg.Catalog = func(context.Context) (*schemas.Catalog, error) { return cat, nil }
	w, err := watch.New(cfg)
	require.NoError(t, err)
	cycle := func(at time.Time) watch.CycleReport {
		t.Helper()
		feed(at)
		clock.Set(at)
		rep, err := w.Cycle(ctx, at)
		require.NoError(t, err)
		w.Deliver(ctx, at)
		return rep
	}
	// payload is the part of an alert webhook body the test reads.
	type payload struct {
		Key, Kind, Subject, Body string
		To                       struct{ Role, Email string }
		Facts                    struct {
			InstanceID string `json:"instance_id"`
			Outcome    string
		}
	}
	alertsOf := func(kind billing.AlertKind) []payload {
		var out []payload
		for _, r := range alerts.requests() {
			var p payload
			require.NoError(t, json.Unmarshal(r.body, &p))
			require.Equal(t, "ops@example.edu", p.To.Email)
			require.True(t, strings.HasPrefix(r.key, p.Key+"|ticketing|"), "Idempotency-Key %q names the message %q", r.key, p.Key)
			if p.Kind == string(kind) {
				out = append(out, p)
			}
		}
		return out
	}

	// 10:40: idle 40 min, past warn_after: a warning each, and no release.
	rep := cycle(idleFrom.Add(40 * time.Minute))
	require.Equal(t, 2, rep.Alerts, "%+v", rep)
	require.Empty(t, releases.requests())
	warned := alertsOf(billing.AlertIdleWarning)
	require.Len(t, warned, 2)
	for _, p := range warned {
		require.NotContains(t, p.Subject+p.Body, "was released", "a warning says nothing was released")
		require.Contains(t, p.Body, "will be released automatically at 2026-12-01 11:00")
	}

	// 11:05: idle 65 min, past release_after: each is released once.
	rep = cycle(idleFrom.Add(65 * time.Minute))
	require.Equal(t, 2, rep.Releases, "%+v", rep)
	reqs := releases.requests()
	require.Len(t, reqs, 2)
	byInst := map[string]map[string]any{}
	for _, r := range reqs {
		var body struct {
			Key      string         `json:"key"`
			DryRun   bool           `json:"dry_run"`
			Target   map[string]any `json:"target"`
			Evidence map[string]any `json:"evidence"`
		}
		require.NoError(t, json.Unmarshal(r.body, &body))
		inst := body.Target["instance_id"].(string)
		require.Equal(t, fmt.Sprintf("%s|%d", inst, idleFrom.UnixMilli()), body.Key)
		require.Equal(t, body.Key, r.key, "the Idempotency-Key is the release's key")
		require.False(t, body.DryRun)
		require.Equal(t, "k8s:nlp/"+inst, body.Target["holder_ref"])
		require.Equal(t, "gpu-01", body.Target["node"])
		require.Equal(t, "alice", body.Target["user"])
		require.Equal(t, idleFrom.UTC().Format(time.RFC3339), body.Evidence["streak_start"])
		require.EqualValues(t, 65, body.Evidence["idle_samples"], "one idle sample a minute since 10:00")
		byInst[inst] = body.Target
	}
	require.Len(t, byInst, 2)

	rels, _, err := led.Releases(ctx, ledger.ReleaseFilter{Limit: 10})
	require.NoError(t, err)
	status := map[string]ledger.Release{}
	for _, r := range rels {
		status[r.InstanceID] = r
	}
	require.Equal(t, billing.ReleaseDone, status["mig-free"].Status)
	require.Contains(t, status["mig-free"].Action, "deleted pod nlp/mig-free")
	require.Equal(t, billing.ReleaseFailed, status["mig-stuck"].Status)
	require.True(t, status["mig-stuck"].RetryAt.IsZero(), "a receiver that answers released:false is not asked again")
	require.Contains(t, status["mig-stuck"].Action, "pod is protected")

	done := alertsOf(billing.AlertIdleRelease)
	require.Len(t, done, 1)
	require.Equal(t, "mig-free", done[0].Facts.InstanceID)
	require.Contains(t, done[0].Subject, "was released")
	require.Contains(t, done[0].Body, "deleted pod nlp/mig-free")
	failed := alertsOf(billing.AlertIdleReleaseFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "mig-stuck", failed[0].Facts.InstanceID)
	require.Contains(t, failed[0].Subject, "could not be released")
	require.NotContains(t, failed[0].Subject+failed[0].Body, "was released")
	require.Contains(t, failed[0].Body, "pod is protected")

	// Later cycles (the released one's samples have stopped in a real
	// cluster; here both go on idling) decide nothing new and send nothing.
	n := len(alerts.requests())
	rep = cycle(idleFrom.Add(80 * time.Minute))
	require.Zero(t, rep.Alerts+rep.Releases, "%+v", rep)
	require.Len(t, alerts.requests(), n)
	require.Len(t, releases.requests(), 2)
	require.Zero(t, alerts.forged+releases.forged, "every request carried a valid signature")

	sent, _, err := led.Deliveries(ctx, ledger.DeliveryFilter{Status: ledger.DeliverySent, Limit: 10})
	require.NoError(t, err)
	require.Len(t, sent, 4, "two warnings and two release outcomes recorded as sent")
}
