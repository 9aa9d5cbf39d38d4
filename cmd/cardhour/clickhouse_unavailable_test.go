//go:build !collector

package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/testenv"
)

// The usage store in ClickHouse becomes unreachable while serve runs (the
// server stops or restarts, the network fails): the usage reads, the
// advice over them and a billing run get 503 problem+json with Retry-After
// and the cause, not 500 `internal`; they are answered again once it is
// back.
func TestServeAnswers503WhileClickHouseIsUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ClickHouse")
	}
	chAddr := testenv.ClickHouseAddr(t)
	proxy := startProxy(t, "127.0.0.1:0", chAddr)
	addr := proxy.ln.Addr().String()
	db := testenv.UniqueName(t, "chcut")
	store := "clickhouse://" + addr + "/" + db
	dropDatabaseAtEnd(t, chAddr, db)
	code, out, errOut := runCLI(t, "", "migrate", "--store", store)
	require.Zero(t, code, out+errOut)
	code, out, errOut = runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)
	state := "sqlite://" + filepath.Join(t.TempDir(), "state.db")
	code, _, errOut = runCLI(t, "", "migrate", "--state", state)
	require.Zero(t, code, errOut)
	code, out, errOut = runCLI(t, "", "token", "create", "--state", state, "--role", "admin")
	require.Zero(t, code, errOut)
	admin := strings.TrimSpace(out)
	sv := startServe(t, "--store", store, "--state", state, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--grace", "1s")

	reqs := []struct{ method, path, body string }{
		{"GET", "/api/v1/usage?period=2026-11&group_by=project,day", ""},
		{"GET", "/api/v1/usage?period=2026-11&group_by=node,sku,day&node=gpu-node-01", ""},
		{"GET", "/api/v1/held", ""},
		{"GET", "/api/v1/advice?months=2", ""},
		{"POST", "/api/v1/billing-runs", `{"period":"2026-11"}`},
	}
	for _, r := range reqs {
		res, body := requestFull(t, r.method, sv.base+r.path, admin, r.body)
		require.Equal(t, 200, res.StatusCode, "%s %s: %s", r.method, r.path, body)
	}

	// Cut: the open connections drop and new ones are refused. The usage
	// cache may answer a report it holds until it next reads the store's
	// data version (once a second, reads.UsageCacheConfig.Poll).
	proxy.Close()
	require.Eventually(t, func() bool {
		res, _ := requestFull(t, "GET", sv.base+reqs[0].path, admin, "")
		return res.StatusCode != 200
	}, 10*time.Second, 100*time.Millisecond)
	// A read of what is held serves the reads within a tick of its clock
	// (reads.HeldShare): let the one made before the cut age out.
	time.Sleep(reads.DefaultHeldTick + 100*time.Millisecond)
	for _, r := range reqs {
		res, body := requestFull(t, r.method, sv.base+r.path, admin, r.body)
		t.Logf("%s %s: %s", r.method, r.path, body)
		requireUnavailable(t, res, body, "unreachable")
	}
	require.NotContains(t, sv.stderr.String(), `"status":500`)

	// Back on the same address: answered again.
	startProxy(t, addr, chAddr)
	require.Eventually(t, func() bool {
		res, _ := requestFull(t, "GET", sv.base+reqs[0].path, admin, "")
		return res.StatusCode == 200
	}, 20*time.Second, 100*time.Millisecond)
	for _, r := range reqs {
		res, body := requestFull(t, r.method, sv.base+r.path, admin, r.body)
		require.Equal(t, 200, res.StatusCode, "%s %s: %s", r.method, r.path, body)
	}
	require.NotContains(t, sv.stderr.String(), `"status":500`)
	sv.stop()
}
