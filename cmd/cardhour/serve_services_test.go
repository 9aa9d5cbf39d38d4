//go:build !collector

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/testenv"
)

// serve on real services: the state in PostgreSQL, the usage in ClickHouse.
func TestServeOnPostgresAndClickHouse(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL and ClickHouse")
	}
	state := testenv.DurablePostgresDSN(t)
	addr := testenv.ClickHouseAddr(t)
	db := testenv.UniqueName(t, "serve")
	store := "clickhouse://" + addr + "/" + db
	code, _, errOut := runCLI(t, "", "migrate", "--store", store)
	require.Zero(t, code, errOut)
	dropDatabaseAtEnd(t, addr, db)
	code, out, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)
	code, _, errOut = runCLI(t, "", "migrate", "--state", state)
	require.Zero(t, code, errOut)
	code, out, errOut = runCLI(t, "", "token", "create", "--state", state, "--role", "admin")
	require.Zero(t, code, errOut)
	admin := strings.TrimSpace(out)

	sv := startServe(t, "--store", store, "--state", state, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--grace", "1s")
	st, body := sv.get("/readyz", "")
	require.Equal(t, 200, st, body)
	st, body = sv.get("/api/v1/catalog", admin)
	require.Equal(t, 200, st, body)
	require.Contains(t, body, `"version":1`)
	st, body = sv.request("POST", "/api/v1/tokens", admin, "application/json", `{"role":"student","user":"2023110042","project":"nlp-lab"}`)
	require.Equal(t, 201, st, body)
	st, body = sv.get("/api/v1/audit?action=token.create", admin)
	require.Equal(t, 200, st, body)
	require.Contains(t, body, `"actor":"token:`)
	serveServicesChecks(t, sv, admin)
	sv.stop()
}
