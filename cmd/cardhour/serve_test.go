//go:build !collector

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/stretchr/testify/require"
)

// token create prints the secret alone; serve answers with it, seeds the
// catalog once, and stops on SIGTERM.
func TestServeAndTokenCreate(t *testing.T) {
	dir := t.TempDir()
	store := "sqlite://" + filepath.Join(dir, "usage.db")
	code, out, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)

	code, out, errOut = runCLI(t, "", "token", "create", "--state", store, "--role", "admin", "--name", "test")
	require.Zero(t, code, errOut)
	require.Regexp(t, `^cht_[A-Za-z0-9_-]{43}\n$`, out, "one line: the secret")
	secret := strings.TrimSpace(out)
	code, _, errOut = runCLI(t, "", "token", "create", "--state", store, "--role", "lead")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "role lead needs a project")
	code, _, errOut = runCLI(t, "", "token", "create", "--state", store, "--role", "admin", "stray")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unexpected argument "stray"`)
	code, out, _ = runCLI(t, "", "token", "list", "--state", store)
	require.Zero(t, code)
	require.Contains(t, out, "admin")
	require.NotContains(t, out, secret)

	sv := startServe(t, "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--grace", "1s")
	get := sv.get
	st, _ := get("/healthz", "")
	require.Equal(t, 200, st)
	st, body := get("/readyz", "")
	require.Equal(t, 200, st, body)
	st, _ = get("/api/v1/me", "")
	require.Equal(t, 401, st)
	st, body = get("/api/v1/catalog", secret)
	require.Equal(t, 200, st, body)
	var cv map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &cv))
	require.EqualValues(t, 1, cv["version"])
	st, body = get("/api/v1/audit?action=catalog.upload", secret)
	require.Equal(t, 200, st)
	require.Contains(t, body, `"actor":"cli`)
	require.Contains(t, sv.stderr.String(), `"request_id"`)
	st, body = get("/api/v1/advice?months=2", secret) // the advice over the usage store
	require.Equal(t, 200, st, body)
	require.Contains(t, body, `"schema":"cardhour.advice.v1"`)
	serveServicesChecks(t, sv, secret)
	sv.stop()

	// A second start with the same catalog makes no new version.
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "256.0.0.1:1")
	require.Equal(t, 1, code)
	require.NotContains(t, errOut, "stored as catalog version")

	// A PDF font named and unusable stops serve at start, naming the flag.
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0",
		"--pdf-font", filepath.Join(t.TempDir(), "missing.ttf"))
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "--pdf-font")
	require.Contains(t, errOut, "missing.ttf")
}

func TestServeFlags(t *testing.T) {
	code, _, errOut := runCLI(t, "", "serve")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--store is required")
	code, _, errOut = runCLI(t, "", "serve", "--store", "clickhouse://127.0.0.1:9000/x")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--state is required when --store is not SQLite")
	code, _, errOut = runCLI(t, "", "serve", "--store", "sqlite:///x.db", "--tls-cert", "c.pem")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--tls-cert and --tls-key go together")
}

type served struct {
	t      *testing.T
	base   string
	stdout *testenv.SyncBuffer
	stderr *testenv.SyncBuffer
	done   chan int
}

// startServe runs cardhour serve with args until stop (SIGTERM).
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	sv := &served{t: t, stdout: &testenv.SyncBuffer{}, stderr: &testenv.SyncBuffer{}, done: make(chan int, 1)}
	go func() { sv.done <- run(append([]string{"serve"}, args...), sv.stdout, sv.stderr) }()
	require.Eventually(t, func() bool {
		select {
		case code := <-sv.done:
			sv.done <- code
			return true
		default:
		}
		m := regexp.MustCompile(`listening on (\S+)`).FindStringSubmatch(sv.stdout.String())
		if m != nil {
			sv.base = "http://" + m[1]
		}
		return m != nil
	}, 20*time.Second, 10*time.Millisecond)
	require.NotEmpty(t, sv.base, sv.stderr.String())
	return sv
}

func (sv *served) request(method, path, token, ctype, body string) (int, string) {
	sv.t.Helper()
	req, err := http.NewRequest(method, sv.base+path, strings.NewReader(body))
	require.NoError(sv.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(sv.t, err)
	defer res.Body.Close() //nolint:errcheck // read to the end
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (sv *served) get(path, token string) (int, string) {
	sv.t.Helper()
	return sv.request("GET", path, token, "", "")
}

// stop sends SIGTERM and waits for a clean exit after the drain.
func (sv *served) stop() {
	sv.t.Helper()
	require.NoError(sv.t, syscall.Kill(syscall.Getpid(), syscall.SIGTERM))
	select {
	case code := <-sv.done:
		require.Zero(sv.t, code, sv.stderr.String())
	case <-time.After(20 * time.Second):
		sv.t.Fatal("serve did not stop on SIGTERM")
	}
	require.Contains(sv.t, sv.stderr.String(), `"msg":"stopped"`)
}
