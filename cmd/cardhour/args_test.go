//go:build !collector

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A word that is not a flag stops Go's flag parsing; every flag after it used
// to be ignored without a word. Every command now refuses it.
func TestStrayArgumentsAreRefused(t *testing.T) {
	f := func(wantHint string, args ...string) {
		t.Helper()
		code, out, errOut := runCLI(t, "", args...)
		require.Equal(t, 2, code, "args %q: %s", args, errOut)
		require.Empty(t, out, "nothing is written when the command line is refused")
		require.Contains(t, errOut, "unexpected argument")
		require.Contains(t, errOut, wantHint)
	}
	// The case that printed every student's invoices as JSON.
	f(`write --skip-invalid=true`, "bill", "--catalog", exampleCatalog, "--samples", exampleSamples,
		"--period", "2026-11", "--skip-invalid", "true", "--user", "2023110042", "--format", "table")
	// The case that wrote a million lines.
	f(`"10" (this command takes only flags)`, "generate", "10")
	f(`unexpected argument "extra"`, "idle", "--catalog", exampleCatalog, "--samples", exampleSamples, "extra")
	f(`unexpected argument "now"`, "simulate", "--fleet", "x.yaml", "now")
	f(`unexpected argument "x"`, "migrate", "x")
	f(`unexpected argument "x"`, "ingest", "x")
	f(`unexpected argument "x"`, "collect", "x")

	// The = form of a boolean flag still works.
	code, _, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples,
		"--period", "2026-11", "--skip-invalid=true", "--user", "2023110042", "--format", "table")
	require.Equal(t, 0, code, errOut)
}

func TestGenerateRefusesIntervalsThatAreNotNumbers(t *testing.T) {
	out := filepath.Join(t.TempDir(), "g.jsonl")
	for _, iv := range []string{"NaN", "nan", "+Inf", "-1", "0", "0.0001", "1e9"} {
		code, _, errOut := runCLI(t, "", "generate", "--samples", "3", "--interval", iv, "--out", out)
		require.Equal(t, 2, code, "--interval %s: %s", iv, errOut)
		require.Contains(t, errOut, "--interval")
		_, err := os.Stat(out)
		require.True(t, os.IsNotExist(err), "--interval %s: no file may be written", iv)
	}
	code, _, errOut := runCLI(t, "", "generate", "--samples", "3", "--interval", "0.5", "--out", out)
	require.Equal(t, 0, code, errOut)
}

func TestIdleNamesOnlyTheFlagThatIsWrong(t *testing.T) {
	code, _, errOut := runCLI(t, "", "idle", "--catalog", exampleCatalog, "--samples", exampleSamples, "--format", "csv")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `--format "csv": want table or json`)
	require.NotContains(t, errOut, "--catalog is required")
	require.NotContains(t, errOut, "--samples is required")

	code, _, errOut = runCLI(t, "", "idle", "--samples", exampleSamples)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--catalog is required")
	require.NotContains(t, errOut, "--samples is required")
}

// --until ends the trace before a month, short of --samples: the
// instances' latest samples start in the last step before it.
func TestGenerateUntilEndsBeforeTheMonth(t *testing.T) {
	out := filepath.Join(t.TempDir(), "g.jsonl")
	code, _, errOut := runCLI(t, "", "generate", "--instances", "4", "--interval", "3600", "--samples", "100000", "--until", "2026-12", "--out", out)
	require.Equal(t, 0, code, errOut)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Greater(t, len(lines), 4*30*24-40, "a month of 4 instances, less the few samples the trace loses")
	require.LessOrEqual(t, len(lines), 4*30*24)
	last := map[string]string{}
	for _, l := range lines {
		var s struct {
			TS       string `json:"ts"`
			Instance string `json:"instance_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &s))
		require.Less(t, s.TS, "2026-11-30T16:00:00Z", "no sample at or after December (Asia/Shanghai)")
		last[s.Instance] = s.TS
	}
	require.Len(t, last, 4)
	n := 0
	for _, ts := range last {
		if ts == "2026-11-30T15:00:00Z" { // the last hour of November
			n++
		}
	}
	require.GreaterOrEqual(t, n, 3, "the latest samples start in November's last hour (a lost sample aside): %v", last)
	code, _, errOut = runCLI(t, "", "generate", "--until", "2026-11", "--out", out)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--until 2026-11: want a month after --start 2026-11")
}
