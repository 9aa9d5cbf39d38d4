package release_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/watch/release"
)

// receiver checks a webhook release as a site's service would: signature
// over timestamp "." body with its own HMAC, then answers with reply.
func receiver(t *testing.T, secret string, status int, reply string, got *[]map[string]any) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		ts := r.Header.Get("X-Cardhour-Timestamp")
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(ts + "." + string(body)))
		want := hex.EncodeToString(m.Sum(nil))
		if !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Cardhour-Signature"))) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var v map[string]any
		require.NoError(t, json.Unmarshal(body, &v))
		v["_method"], v["_ts"], v["_idem"], v["_ctype"] = r.Method, ts, r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type")
		*got = append(*got, v)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWebhookSignedRelease(t *testing.T) {
	ctx := context.Background()
	var got []map[string]any
	srv := receiver(t, "s3cret", http.StatusOK, `{"released":true,"detail":"job 812345 cancelled"}`, &got)
	now := func() time.Time { return time.Unix(1793491200, 0) }
	w := release.NewWebhook(release.WebhookConfig{URL: srv.URL + "/release?token=abc", Secret: "s3cret", Now: now})
	out, err := w.Release(ctx, slurmRequest("slurm:812345", false))
	require.NoError(t, err)
	require.Equal(t, alert.ReleaseOutcome{Released: true, Action: "webhook " + srv.URL + "/release released: job 812345 cancelled"}, out,
		"the URL's query (a token) is not shown")
	require.Len(t, got, 1)
	require.Equal(t, map[string]any{
		"key": "MIG-a|1793491200000", "dry_run": false,
		"target": map[string]any{"node": "gpu-01", "gpu_uuid": "GPU-1", "instance_id": "MIG-a", "gpu_model": "", "profile": "",
			"project": "hpc-lab", "user": "alice", "holder_ref": "slurm:812345"},
		"evidence": map[string]any{"streak_start": "2026-11-01T00:00:00Z", "streak_end": "2026-11-01T04:00:00Z", "idle_samples": 1440.0, "threshold": 0.05},
		"_method":  "POST", "_ts": "1793491200", "_idem": "MIG-a|1793491200000", "_ctype": "application/json",
	}, got[0])
	require.Equal(t, release.Sign("s3cret", "1793491200", []byte(`x`)), func() string {
		m := hmac.New(sha256.New, []byte("s3cret"))
		m.Write([]byte("1793491200.x"))
		return hex.EncodeToString(m.Sum(nil))
	}())

	// A wrong secret: the receiver refuses (401), an error, nothing released.
	bad := release.NewWebhook(release.WebhookConfig{URL: srv.URL, Secret: "other"})
	out, err = bad.Release(ctx, slurmRequest("slurm:812345", false))
	require.ErrorContains(t, err, "answered HTTP 401")
	require.False(t, out.Released)
}

func TestWebhookReplies(t *testing.T) {
	ctx := context.Background()
	var got []map[string]any
	f := func(status int, reply string, dry bool) (alert.ReleaseOutcome, error) {
		srv := receiver(t, "k", status, reply, &got)
		return release.NewWebhook(release.WebhookConfig{URL: srv.URL, Secret: "k"}).Release(ctx, slurmRequest("", dry))
	}
	out, err := f(http.StatusOK, `{"released":false,"detail":"no such job"}`, false)
	require.NoError(t, err)
	require.False(t, out.Released)
	require.Contains(t, out.Action, "did not release: no such job")

	out, err = f(http.StatusAccepted, ``, false)
	require.NoError(t, err)
	require.False(t, out.Released, "a 2xx that does not say released is not a release")
	require.Contains(t, out.Action, "did not release (HTTP 202, no detail)")

	out, err = f(http.StatusOK, `{"released":false,"detail":"would cancel job 1"}`, true)
	require.NoError(t, err)
	require.Equal(t, false, out.Released)
	require.Contains(t, out.Action, "dry run: webhook")
	require.Contains(t, out.Action, "answered: would cancel job 1")
	require.Equal(t, true, got[len(got)-1]["dry_run"])

	out, err = f(http.StatusOK, `{"released":true}`, true)
	require.NoError(t, err)
	require.True(t, out.Released, "the receiver released although asked for a dry run: said as it is")
	require.Contains(t, out.Action, "released although asked for a dry run")

	out, err = f(http.StatusOK, `<html>ok</html>`, false)
	require.ErrorContains(t, err, `not {"released": bool, "detail": string}`)
	require.False(t, out.Released)

	out, err = f(http.StatusServiceUnavailable, `busy`, false)
	require.ErrorContains(t, err, "answered HTTP 503: busy")
	require.False(t, release.Permanent(err))
	require.False(t, out.Released)

	_, err = release.NewWebhook(release.WebhookConfig{URL: "ftp://x"}).Release(ctx, slurmRequest("", false))
	require.ErrorContains(t, err, "want an absolute http:// or https:// URL")
}
