//go:build !collector

package main

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/testenv"
)

// tcpProxy forwards connections to target until closed (as
// scripts/tcpforward does); Close also cuts the connections it carries,
// as a database server that stops or a network that fails would.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
}

func startProxy(t *testing.T, listen, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	t.Cleanup(p.Close)
	return p
}

func (p *tcpProxy) forward(c net.Conn) {
	u, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, u)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
	_, _ = io.Copy(c, u)
	_ = c.Close()
}

func (p *tcpProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// requestFull is a request whose whole response the test reads.
func requestFull(t *testing.T, method, url, token, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close() //nolint:errcheck // read to the end
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// requireUnavailable checks a 503 problem with Retry-After whose detail
// names the cause.
func requireUnavailable(t *testing.T, res *http.Response, body, cause string) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, body)
	require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"), body)
	require.Equal(t, "5", res.Header.Get("Retry-After"), body)
	var p struct {
		Type, Detail string
		Status       int
		RequestID    string `json:"request_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &p), body)
	require.Equal(t, "https://cardhour.dev/problems/unavailable", p.Type)
	require.Equal(t, 503, p.Status)
	require.Contains(t, p.Detail, cause, body)
	require.NotEmpty(t, p.RequestID)
}

// The state store in PostgreSQL becomes unreachable while serve runs (the
// server stops, the network fails): requests get 503 with Retry-After and
// the cause, not 500; they are answered again once it is back.
func TestServeAnswers503WhilePostgresIsUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	dsn := testenv.PostgresDSN(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := startProxy(t, "127.0.0.1:0", u.Host)
	addr := proxy.ln.Addr().String()
	u.Host = addr
	state := u.String()

	store := "sqlite://" + filepath.Join(t.TempDir(), "usage.db")
	code, out, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)
	code, _, errOut = runCLI(t, "", "migrate", "--state", state)
	require.Zero(t, code, errOut)
	code, out, errOut = runCLI(t, "", "token", "create", "--state", state, "--role", "admin")
	require.Zero(t, code, errOut)
	admin := strings.TrimSpace(out)
	sv := startServe(t, "--store", store, "--state", state, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--grace", "1s")
	res, body := requestFull(t, "GET", sv.base+"/api/v1/invoices", admin, "")
	require.Equal(t, 200, res.StatusCode, body)

	proxy.Close()
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/invoices", ""},
		{"POST", "/api/v1/billing-runs", `{"period":"2026-11"}`},
		{"GET", "/api/v1/catalog", ""},
	} {
		res, body = requestFull(t, r.method, sv.base+r.path, admin, r.body)
		requireUnavailable(t, res, body, "unreachable")
	}
	require.NotContains(t, sv.stderr.String(), `"status":500`)

	// Back on the same address: answered again.
	startProxy(t, addr, proxy.target)
	require.Eventually(t, func() bool {
		res, _ := requestFull(t, "GET", sv.base+"/api/v1/invoices", admin, "")
		return res.StatusCode == 200
	}, 20*time.Second, 100*time.Millisecond)
	res, body = requestFull(t, "POST", sv.base+"/api/v1/billing-runs", admin, `{"period":"2026-11"}`)
	require.Equal(t, 200, res.StatusCode, body)
	sv.stop()
}

// mountTmpfs mounts a small tmpfs at dir (root only), unmounted at the end.
func mountTmpfs(t *testing.T, dir string, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fill writes a file in dir until its file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close() //nolint:errcheck // written to ENOSPC
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
			break
		}
	}
	for _, n := range []int{4096, 512, 1} { // the last blocks
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// The state store on a file system that fills up while serve runs: a
// billing run, a token, a catalog upload get 503 naming "disk full", reads
// still answer, and all answer again once there is room. Started on the
// full file system, serve says "disk full"; on a read-only one, "read-only
// file system" (never SQLite's "disk I/O error (4874)").
func TestServeOnAFullOrReadOnlyDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a file system")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	mountTmpfs(t, mnt, "4m")
	store := "sqlite://" + filepath.Join(dir, "usage.db")
	state := "sqlite://" + filepath.Join(mnt, "state.db")
	code, out, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)
	code, _, errOut = runCLI(t, "", "migrate", "--state", state)
	require.Zero(t, code, errOut)
	code, out, errOut = runCLI(t, "", "token", "create", "--state", state, "--role", "admin")
	require.Zero(t, code, errOut)
	admin := strings.TrimSpace(out)
	sv := startServe(t, "--store", store, "--state", state, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--grace", "1s")
	res, body := requestFull(t, "GET", sv.base+"/api/v1/invoices", admin, "")
	require.Equal(t, 200, res.StatusCode, body)

	filler := fill(t, mnt)
	for i, r := range []struct{ method, path, body string }{
		{"POST", "/api/v1/billing-runs", `{"period":"2026-11"}`},
		{"POST", "/api/v1/tokens", `{"role":"finance","name":"` + strings.Repeat("x", 200) + `"}`},
	} {
		res, body = requestFull(t, r.method, sv.base+r.path, admin, r.body)
		requireUnavailable(t, res, body, "disk full")
		t.Logf("%d: %s", i, body)
	}
	res, body = requestFull(t, "GET", sv.base+"/api/v1/catalog", admin, "")
	require.Equal(t, 200, res.StatusCode, "reads need no room: %s", body)
	require.NotContains(t, sv.stderr.String(), `"status":500`)

	// A second server started on the full disk says so.
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--state", "sqlite://"+filepath.Join(mnt, "new.db"), "--addr", "127.0.0.1:0")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "disk full")
	t.Log(errOut)
	require.NotContains(t, errOut, "cannot open SQLite database "+filepath.Join(mnt, "new.db")+": disk I/O error")

	require.NoError(t, os.Remove(filler))
	res, body = requestFull(t, "POST", sv.base+"/api/v1/billing-runs", admin, `{"period":"2026-11"}`)
	require.Equal(t, 200, res.StatusCode, body)
	sv.stop()

	// Read-only: the start-up error names it.
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--state", state, "--addr", "127.0.0.1:0")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "read-only file system", errOut)
	t.Log(errOut)
}
