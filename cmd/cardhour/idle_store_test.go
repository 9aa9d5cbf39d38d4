//go:build !collector

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/testenv"
)

// `cardhour idle --store` gives what `cardhour idle --samples` gives for the
// same samples, in both formats: the same detector over the stored held
// samples. A window that holds none of them lists nothing.
func TestIdleFromStoreMatchesTheFile(t *testing.T) {
	idleFromStoreMatchesTheFile(t, "sqlite://"+filepath.Join(t.TempDir(), "cardhour.db"))
}

// The same from ClickHouse, the store of a site on Kafka.
func TestIdleFromClickHouseMatchesTheFile(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	db := testenv.UniqueName(t, "idle")
	dropDatabaseAtEnd(t, addr, db)
	idleFromStoreMatchesTheFile(t, "clickhouse://"+addr+"/"+db)
}

func idleFromStoreMatchesTheFile(t *testing.T, store string) {
	t.Helper()
	code, _, errOut := runCLI(t, "", "migrate", "--store", store)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Equal(t, 0, code, errOut)
	// The example ingested twice: a replay changes nothing.
	code, _, errOut = runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Equal(t, 0, code, errOut)
	for _, format := range []string{"table", "json"} {
		code, fromFile, errOut := runCLI(t, "", "idle", "--catalog", exampleCatalog, "--samples", exampleSamples, "--format", format)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, fromFile, "idle_warning", "the example has idle streaks")
		for _, window := range [][]string{{"--period", "2026-11"}, {"--from", "2026-10-01T00:00:00Z", "--to", "2027-01-01T00:00:00+08:00"}} {
			args := append([]string{"idle", "--catalog", exampleCatalog, "--store", store, "--format", format}, window...)
			code, fromStore, errOut := runCLI(t, "", args...)
			require.Equal(t, 0, code, errOut)
			require.Equal(t, fromFile, fromStore, "%s %v", format, window)
		}
	}
	code, out, errOut := runCLI(t, "", "idle", "--catalog", exampleCatalog, "--store", store, "--period", "2026-09", "--format", "json")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, strings.TrimSpace(out))
}

func TestIdleFromStoreRefusesBadFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo.db")
	code, out, errOut := runCLI(t, "", "idle", "--catalog", exampleCatalog, "--store", "sqlite://"+missing)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "no store at "+missing)
	require.NoFileExists(t, missing)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--store", "sqlite://" + missing, "--samples", exampleSamples}, "--samples and --store are exclusive"},
		{[]string{"--samples", exampleSamples, "--period", "2026-11"}, "--period, --from and --to go with --store"},
		{[]string{"--store", "sqlite://" + missing, "--period", "2026-11", "--from", "2026-11-01T00:00:00Z"}, "give --period or --from/--to, not both"},
		{[]string{"--store", "sqlite://" + missing, "--from", "yesterday"}, `--from "yesterday": want an RFC 3339 time`},
		{[]string{"--store", "sqlite://" + missing, "--period", "2026-13"}, "--period"},
		{[]string{"--store", "sqlite://" + missing, "--from", "2026-11-02T00:00:00Z", "--to", "2026-11-01T00:00:00Z"}, "is not after --from"},
		{[]string{}, "--samples or --store is required"},
	} {
		code, _, errOut := runCLI(t, "", append([]string{"idle", "--catalog", exampleCatalog}, c.args...)...)
		require.Equal(t, 2, code, "%v: %s", c.args, errOut)
		require.Contains(t, errOut, c.want, "%v", c.args)
	}
}
