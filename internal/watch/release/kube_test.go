package release_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/watch/release"
)

// fakeAPI is an API server that records the requests it gets and answers
// each pod with the status the test gives it.
type fakeAPI struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []seen
	status map[string]int // path → HTTP status (default 200)
}

type seen struct {
	Method, Path, Query, Auth, ContentType string
	Body                                   map[string]any
}

func newFakeAPI(t *testing.T) (*fakeAPI, string) {
	f := &fakeAPI{status: map[string]int{}}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if len(b) > 0 {
			if err := json.Unmarshal(b, &body); err != nil {
				body = map[string]any{"unparsable": string(b)}
			}
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body})
		code := f.status[r.URL.Path]
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch code {
		case 0, http.StatusOK:
			_, _ = io.WriteString(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x"}}`)
		default:
			reason := map[int]string{404: "NotFound", 403: "Forbidden", 500: "InternalError"}[code]
			w.WriteHeader(code)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"x\" `+reason+`","reason":"`+reason+`","code":`+itoa(code)+`}`)
		}
	}))
	t.Cleanup(f.srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw}), 0o600))
	return f, ca
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func (f *fakeAPI) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func kubeRequest(ref string, dry bool) alert.ReleaseRequest {
	return alert.ReleaseRequest{Key: "MIG-a|1793491200000", DryRun: dry,
		Target:   alert.ReleaseTarget{Node: "gpu-01", GPUUUID: "GPU-1", InstanceID: "MIG-a", Project: "nlp-lab", User: "alice", HolderRef: ref},
		Evidence: alert.ReleaseEvidence{StreakStart: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), StreakEnd: time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC), IdleSamples: 1440, Threshold: 0.05}}
}

func TestKubernetesDeletesThePod(t *testing.T) {
	api, ca := newFakeAPI(t)
	tok := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tok, []byte("tok-1\n"), 0o600))
	grace := 30 * time.Second
	k, err := release.NewKubernetes(release.KubeConfig{AllowedNamespaces: []string{"nlp-lab", "vision"}, GracePeriod: &grace,
		APIServer: api.srv.URL, TokenFile: tok, CAFile: ca})
	require.NoError(t, err)
	ctx := context.Background()

	// Dry run: a server-side dry run, nothing released.
	out, err := k.Release(ctx, kubeRequest("k8s:nlp-lab/nb-alice-0", true))
	require.NoError(t, err)
	require.Equal(t, alert.ReleaseOutcome{Action: "dry run: the API server would delete pod nlp-lab/nb-alice-0 with a grace period of 30 s"}, out)
	// The real delete.
	out, err = k.Release(ctx, kubeRequest("k8s:nlp-lab/nb-alice-0", false))
	require.NoError(t, err)
	require.Equal(t, alert.ReleaseOutcome{Released: true, Action: "deleted pod nlp-lab/nb-alice-0 with a grace period of 30 s"}, out)

	reqs := api.requests()
	require.Len(t, reqs, 2)
	for i, r := range reqs {
		require.Equal(t, http.MethodDelete, r.Method)
		require.Equal(t, "/api/v1/namespaces/nlp-lab/pods/nb-alice-0", r.Path)
		require.Equal(t, "Bearer tok-1", r.Auth)
		require.Equal(t, "application/json", r.ContentType)
		require.Equal(t, "DeleteOptions", r.Body["kind"])
		require.EqualValues(t, 30, r.Body["gracePeriodSeconds"])
		if i == 0 {
			require.Equal(t, "dryRun=All", r.Query)
			require.Equal(t, []any{"All"}, r.Body["dryRun"])
		} else {
			require.Empty(t, r.Query)
			require.NotContains(t, r.Body, "dryRun")
		}
	}

	// A second allowed namespace.
	out, err = k.Release(ctx, kubeRequest("k8s:vision/train-7", false))
	require.NoError(t, err)
	require.True(t, out.Released)
	require.Equal(t, "/api/v1/namespaces/vision/pods/train-7", api.requests()[2].Path)
}

func TestKubernetesRefusesAndReports(t *testing.T) {
	api, ca := newFakeAPI(t)
	tok := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tok, []byte("tok"), 0o600))
	k, err := release.NewKubernetes(release.KubeConfig{AllowedNamespaces: []string{"nlp-lab"}, APIServer: api.srv.URL, TokenFile: tok, CAFile: ca})
	require.NoError(t, err)
	ctx := context.Background()

	// A namespace not allowed never reaches the server.
	_, err = k.Release(ctx, kubeRequest("k8s:kube-system/coredns-1", false))
	require.ErrorIs(t, err, release.ErrForbidden)
	require.ErrorContains(t, err, `namespace "kube-system" is not among the allowed namespaces`)
	// Nothing to act on: no pod reference.
	for _, ref := range []string{"", "slurm:812345", "pid:42", "k8s:nlp-lab", "k8s:nlp-lab/a/b", "k8s:nlp-lab/Bad_Name"} {
		_, err = k.Release(ctx, kubeRequest(ref, false))
		require.ErrorIs(t, err, release.ErrNoHandle, ref)
		require.True(t, release.Permanent(err))
	}
	require.Empty(t, api.requests())

	// Already gone: not released, and said so.
	api.status["/api/v1/namespaces/nlp-lab/pods/gone"] = http.StatusNotFound
	out, err := k.Release(ctx, kubeRequest("k8s:nlp-lab/gone", false))
	require.NoError(t, err)
	require.Equal(t, alert.ReleaseOutcome{Action: "pod nlp-lab/gone was already gone; nothing deleted"}, out)
	out, err = k.Release(ctx, kubeRequest("k8s:nlp-lab/gone", true))
	require.NoError(t, err)
	require.Equal(t, alert.ReleaseOutcome{Action: "dry run: pod nlp-lab/gone is already gone; nothing would be deleted"}, out)
	// RBAC refuses: permanent.
	api.status["/api/v1/namespaces/nlp-lab/pods/locked"] = http.StatusForbidden
	out, err = k.Release(ctx, kubeRequest("k8s:nlp-lab/locked", false))
	require.ErrorIs(t, err, release.ErrForbidden)
	require.ErrorContains(t, err, "check the service account's Role")
	require.False(t, out.Released)
	// A server error: retryable, nothing released. The pod's own grace period
	// applies when none is configured.
	api.status["/api/v1/namespaces/nlp-lab/pods/flaky"] = http.StatusInternalServerError
	out, err = k.Release(ctx, kubeRequest("k8s:nlp-lab/flaky", false))
	require.Error(t, err)
	require.False(t, release.Permanent(err))
	require.False(t, out.Released)
	reqs := api.requests()
	require.GreaterOrEqual(t, len(reqs), 4) // client-go may retry a 500; each is the same delete
	for _, r := range reqs {
		require.Equal(t, http.MethodDelete, r.Method)
		require.NotContains(t, r.Body, "gracePeriodSeconds")
	}
}

func TestNewKubernetesConfig(t *testing.T) {
	_, err := release.NewKubernetes(release.KubeConfig{APIServer: "https://x", TokenFile: "t"})
	require.ErrorContains(t, err, "allowed_namespaces is required")
	_, err = release.NewKubernetes(release.KubeConfig{AllowedNamespaces: []string{"Bad_NS"}, APIServer: "https://x", TokenFile: "t"})
	require.ErrorContains(t, err, `allowed namespace "Bad_NS"`)
	half := 1500 * time.Millisecond
	_, err = release.NewKubernetes(release.KubeConfig{AllowedNamespaces: []string{"a"}, GracePeriod: &half, APIServer: "https://x", TokenFile: "t"})
	require.ErrorContains(t, err, "whole number of seconds")
	_, err = release.NewKubernetes(release.KubeConfig{AllowedNamespaces: []string{"a"}, Kubeconfig: filepath.Join(t.TempDir(), "none")})
	require.ErrorContains(t, err, "kubeconfig")
	// A kubeconfig file names the server, its CA and the token.
	api, ca := newFakeAPI(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "`+api.srv.URL+`", certificate-authority: "`+ca+`"}
users:
- name: u
  user: {token: kc-token}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`), 0o600))
	k, err := release.NewKubernetes(release.KubeConfig{AllowedNamespaces: []string{"nlp-lab"}, Kubeconfig: kc})
	require.NoError(t, err)
	out, err := k.Release(context.Background(), kubeRequest("k8s:nlp-lab/p", false))
	require.NoError(t, err)
	require.True(t, out.Released)
	require.Equal(t, "Bearer kc-token", api.requests()[0].Auth)
}
