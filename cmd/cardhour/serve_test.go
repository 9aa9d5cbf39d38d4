//go:build !collector

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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

	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"serve", "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	var base string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`listening on (\S+)`).FindStringSubmatch(stdout.String())
		if m != nil {
			base = "http://" + m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, stderr.String())

	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
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
	require.Contains(t, stderr.String(), `"request_id"`)

	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGTERM))
	select {
	case code := <-done:
		require.Zero(t, code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	require.Contains(t, stderr.String(), `"msg":"stopped"`)

	// A second start with the same catalog makes no new version.
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "256.0.0.1:1")
	require.Equal(t, 1, code)
	require.NotContains(t, errOut, "stored as catalog version")
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
