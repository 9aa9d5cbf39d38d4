//go:build !collector

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	builtOnce sync.Once
	builtBin  string
	builtErr  error
)

// cardhourBinary builds the real binary once per test run.
func cardhourBinary(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cardhour-bin-")
		if err != nil {
			builtErr = err
			return
		}
		builtBin = filepath.Join(dir, "cardhour")
		out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			builtErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, builtErr)
	return builtBin
}

// binServe is the real binary serving.
type binServe struct {
	t     *testing.T
	cmd   *exec.Cmd
	base  string
	errMu sync.Mutex
	errB  strings.Builder
}

func startBinServe(t *testing.T, bin string, args ...string) *binServe {
	t.Helper()
	sv := &binServe{t: t, cmd: exec.Command(bin, append([]string{"serve"}, args...)...)}
	stdout, err := sv.cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := sv.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, sv.cmd.Start())
	t.Cleanup(func() { _ = sv.cmd.Process.Kill(); _ = sv.cmd.Wait() })
	go func() {
		b, _ := io.ReadAll(stderr)
		sv.errMu.Lock()
		sv.errB.Write(b)
		sv.errMu.Unlock()
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := regexp.MustCompile(`listening on (\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		sv.base = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start: %s", sv.stderr())
	}
	return sv
}

func (sv *binServe) stderr() string {
	sv.errMu.Lock()
	defer sv.errMu.Unlock()
	return sv.errB.String()
}

func (sv *binServe) request(method, path, token, body string) (int, string) {
	sv.t.Helper()
	req, err := http.NewRequest(method, sv.base+path, strings.NewReader(body))
	require.NoError(sv.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(sv.t, err)
	defer res.Body.Close() //nolint:errcheck // read to the end
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// sqlite3 runs the sqlite3 command-line shell on the file: another process
// that opens the database, runs sql and closes it.
func sqlite3(t *testing.T, path, sql string) string {
	t.Helper()
	out, err := exec.Command("sqlite3", path, sql).CombinedOutput()
	require.NoError(t, err, string(out))
	return strings.TrimSpace(string(out))
}

// serve with --state omitted keeps the state in the usage store's file and
// holds SQLite's locks on it for as long as it runs: another client opening
// and closing the file (the sqlite3 shell, a backup script) must not take
// the database for unused and delete its write-ahead log under the server.
// It did: the usage store's readability check opened and closed the file
// with a plain descriptor after the state store had opened it, and closing
// a descriptor drops all of the process's POSIX locks on the file; a token
// revoked afterwards kept working, then the file was malformed.
func TestServeDefaultStateSurvivesOtherSQLiteClients(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Skip("needs the sqlite3 shell")
	}
	bin := cardhourBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "usage.db")
	store := "sqlite://" + db
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		require.NoError(t, cmd.Run(), "cardhour %v: %s", args, errOut.String())
		return strings.TrimSpace(out.String())
	}
	cli("ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	admin := cli("token", "create", "--state", store, "--role", "admin")

	sv := startBinServe(t, bin, "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--grace", "1s")
	st, body := sv.request("POST", "/api/v1/tokens", admin, `{"role":"finance","name":"erp"}`)
	require.Equal(t, 201, st, body)
	var created struct {
		Token  struct{ ID int64 } `json:"token"`
		Secret string             `json:"secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	st, body = sv.request("GET", "/api/v1/me", created.Secret, "")
	require.Equal(t, 200, st, body)

	// Another process opens and closes the file while the server writes.
	for i := range 5 {
		require.Equal(t, "ok", sqlite3(t, db, "PRAGMA quick_check"))
		st, body = sv.request("POST", "/api/v1/tokens", admin, fmt.Sprintf(`{"role":"finance","name":"n%d"}`, i))
		require.Equal(t, 201, st, body)
	}
	_, err := os.Stat(db + "-wal")
	assert.NoError(t, err, "the write-ahead log of the running server was deleted by another client")

	st, body = sv.request("DELETE", fmt.Sprintf("/api/v1/tokens/%d", created.Token.ID), admin, "")
	require.Equal(t, 200, st, body)
	sqlite3(t, db, "SELECT count(*) FROM ledger_tokens")
	st, body = sv.request("GET", "/api/v1/me", created.Secret, "")
	require.Equal(t, 401, st, "a revoked token still works: %s", body)
	require.Contains(t, sqlite3(t, db, "SELECT revoked_ms > 0 FROM ledger_tokens WHERE id = "+fmt.Sprint(created.Token.ID)), "1",
		"another client does not see the revocation")

	// Ingest (another writer) and a billing run, with the shell in between.
	cli("ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	sqlite3(t, db, "SELECT count(*) FROM raw_samples")
	st, body = sv.request("POST", "/api/v1/billing-runs", admin, `{"period":"2026-11"}`)
	require.Equal(t, 200, st, body)
	sqlite3(t, db, "SELECT count(*) FROM ledger_invoices")
	st, body = sv.request("GET", "/api/v1/invoices?period=2026-11", admin, "")
	require.Equal(t, 200, st, body)
	require.Contains(t, body, `"period":"2026-11"`)
	require.Equal(t, "ok", sqlite3(t, db, "PRAGMA integrity_check"))
	require.NotContains(t, sv.stderr(), "malformed")

	require.NoError(t, sv.cmd.Process.Signal(os.Interrupt))
	require.NoError(t, sv.cmd.Wait(), sv.stderr())
	require.Equal(t, "ok", sqlite3(t, db, "PRAGMA integrity_check"))
}
