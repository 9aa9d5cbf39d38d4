//go:build !collector

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writeSamples writes the example samples with line 1 replaced by edit(line 1).
func writeEditedExample(t *testing.T, edit func(string) string) string {
	t.Helper()
	data, err := os.ReadFile(exampleSamples)
	require.NoError(t, err)
	lines := strings.SplitN(string(data), "\n", 2)
	path := filepath.Join(t.TempDir(), "samples.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(edit(lines[0])+"\n"+lines[1]), 0o644))
	return path
}

// One line claiming a month is an error with its line number, not a month of
// usage; --skip-invalid bills the rest; --max-interval moves the bound.
func TestBillRejectsOverlongInterval(t *testing.T) {
	path := writeEditedExample(t, func(l string) string { return strings.Replace(l, `"interval_s":60`, `"interval_s":2592000`, 1) })
	args := []string{"bill", "--catalog", exampleCatalog, "--samples", path, "--period", "2026-11"}

	code, out, errOut := runCLI(t, "", args...)
	require.Equal(t, 1, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, `line 1: field "interval_s": value 2592000: longer than the longest interval accepted, 3600 s`)
	require.Contains(t, errOut, "--max-interval")

	code, out, errOut = runCLI(t, "", append(args, "--skip-invalid")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "skipped 1 invalid line(s)")
	require.NotContains(t, out, `"used_seconds": 2386800`, "the line claims no usage")

	code, out, errOut = runCLI(t, "", append(args, "--max-interval", "720h")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"used_seconds": 2386800`, "with a month-long bound the line claims the rest of the month")

	for _, bad := range []string{"0", "-1h", "87841h", "1us"} {
		code, _, errOut = runCLI(t, "", append(args, "--max-interval", bad)...)
		require.Equal(t, 2, code, bad)
		require.Contains(t, errOut, "--max-interval", bad)
	}
}

func TestIdleRejectsOverlongInterval(t *testing.T) {
	path := writeEditedExample(t, func(l string) string { return strings.Replace(l, `"interval_s":60`, `"interval_s":7200`, 1) })
	code, _, errOut := runCLI(t, "", "idle", "--catalog", exampleCatalog, "--samples", path)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `line 1: field "interval_s": value 7200`)
	code, _, errOut = runCLI(t, "", "idle", "--catalog", exampleCatalog, "--samples", path, "--max-interval", "2h")
	require.Equal(t, 0, code, errOut)
}

// ingest --from-file reports a sample that ends beyond the clock skew (and an
// over-long one) with its line and does not store it.
func TestIngestFromFileRejectsFutureAndOverlongSamples(t *testing.T) {
	future := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	path := writeEditedExample(t, func(l string) string {
		long := strings.Replace(l, `"interval_s":60`, `"interval_s":86400`, 1)
		return strings.Replace(l, `"ts":"2026-11-03T09:00:00+08:00"`, `"ts":"`+future+`"`, 1) + "\n" + long
	})
	db := filepath.Join(t.TempDir(), "s.db")
	code, out, errOut := runCLI(t, "", "ingest", "--store", "sqlite://"+db, "--from-file", path, "--listen", "", "--log-level", "error")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, path+`:1: field "ts": value "`+future+`": the sample ends at`)
	require.Contains(t, errOut, "--max-clock-skew")
	require.Contains(t, errOut, path+`:2: field "interval_s": value 86400`)
	require.Contains(t, out, "(2 invalid lines not stored, recorded as rejected in the store)")

	// --max-clock-skew 0 turns the clock check off.
	code, out, errOut = runCLI(t, "", "ingest", "--store", "sqlite://"+filepath.Join(t.TempDir(), "s.db"), "--from-file", path,
		"--listen", "", "--log-level", "error", "--max-clock-skew", "0")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, out, "(1 invalid lines not stored, recorded as rejected in the store)")
	require.NotContains(t, errOut, "--max-clock-skew")
}
