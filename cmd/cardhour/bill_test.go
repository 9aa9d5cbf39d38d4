//go:build !collector

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The worked examples of docs/billing.md, as golden invoices.
func TestBillGolden(t *testing.T) {
	for _, tc := range []struct{ period, format, file string }{
		{"2026-11", "json", "example-2026-11.json"},
		{"2026-11", "table", "example-2026-11.txt"},
		{"2026-11", "csv", "example-2026-11.csv"},
		{"2026-12", "json", "example-2026-12.json"},
		{"2026-09", "json", "example-2026-09.json"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples,
				"--period", tc.period, "--format", tc.format)
			require.Equal(t, 0, code, errOut)
			golden(t, tc.file, out)
		})
	}
}

func TestBillExampleNumbers(t *testing.T) {
	// The amounts docs/billing.md derives by hand.
	code, out, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", "2026-11")
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{
		`"project": "nlp-lab"`, `"total": "7.18"`, // 0.90 + 6.28
		`"used_seconds": 5020.5`, `"billed_seconds": 5021`, `"amount": "6.28"`,
		`"project": "cv-lab"`, `"total": "863.60"`, `"amount": "855.00"`, `"billed_seconds": 7200`,
		`"project": "thesis-h100"`, `"total": "6.00"`,
		`"idle_seconds": 2400`,
	} {
		require.Contains(t, out, want)
	}
	require.Contains(t, errOut, "NVIDIA L40S / full matches no SKU")
}

func TestBillStatementForUser(t *testing.T) {
	code, out, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", "2026-11",
		"--user", "2023110042", "--format", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"project": "nlp-lab"`)
	require.Contains(t, out, `"total": "6.28"`, "the 3g.40gb usage; the covered 1g.10gb line is 0.00")
	require.NotContains(t, out, `"kind": "reservation"`)
	require.NotContains(t, out, "cv-lab")
}

func TestBillStdinAndShuffledInputGiveTheSameBytes(t *testing.T) {
	data, err := os.ReadFile(exampleSamples)
	require.NoError(t, err)
	_, want, _ := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", "2026-11")

	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	// Reverse and duplicate: a replayed, reordered stream.
	var rev []string
	for i := len(lines) - 1; i >= 0; i-- {
		rev = append(rev, lines[i], lines[i])
	}
	code, got, errOut := runCLI(t, strings.Join(rev, "\n")+"\n", "bill", "--catalog", exampleCatalog, "--samples", "-", "--period", "2026-11")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, want, got)
}

func TestBillInvalidLines(t *testing.T) {
	data, err := os.ReadFile(exampleSamples)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	bad := append([]string{}, lines[:4]...)
	bad = append(bad, `{"ts":"2026-11-03T10:00:00+08:00","interval_s":-60}`, "", `not json`)
	bad = append(bad, lines[4:]...)
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(bad, "\n")+"\n"), 0o644))

	code, out, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", path, "--period", "2026-11")
	require.Equal(t, 1, code)
	require.Empty(t, out, "no invoice on bad input")
	require.Contains(t, errOut, "line 5: field \"interval_s\"")
	require.Contains(t, errOut, "--skip-invalid")

	code, out, errOut = runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", path, "--period", "2026-11", "--skip-invalid")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "skipped 2 invalid line(s)")
	require.Contains(t, errOut, "bad.jsonl:5: field \"interval_s\"")
	require.Contains(t, errOut, "bad.jsonl:7: malformed JSON")
	require.Contains(t, out, "sample line(s) were invalid and skipped: they are not billed and this bill may be incomplete, first at line 5")
	require.Contains(t, out, `"skipped_lines": 2`)
	require.Contains(t, out, `"total": "7.18"`, "the valid lines are billed as before")
}

func TestBillUsageErrors(t *testing.T) {
	code, _, errOut := runCLI(t, "", "bill")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--catalog is required; --samples is required; --period is required")

	code, _, errOut = runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", "2026-13")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `period "2026-13"`)

	code, _, errOut = runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", "2026-11", "--format", "xml")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `--format "xml"`)

	code, _, errOut = runCLI(t, "", "bill", "--catalog", "testdata/nope.yaml", "--samples", exampleSamples, "--period", "2026-11")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "cannot read catalog")

	code, _, errOut = runCLI(t, "", "frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown command "frobnicate"`)
}

func TestIdleAlertsGolden(t *testing.T) {
	for _, format := range []string{"table", "json"} {
		code, out, errOut := runCLI(t, "", "idle", "--catalog", exampleCatalog, "--samples", exampleSamples, "--format", format)
		require.Equal(t, 0, code, errOut)
		golden(t, "example-idle."+format, out)
	}
}

// A simulated lab, end to end through the real collector code: simulate five days,
// bill it, and check that every scripted holder shows up priced.
func TestSimulateThenBill(t *testing.T) {
	out := filepath.Join(t.TempDir(), "day.jsonl")
	code, _, errOut := runCLI(t, "", "simulate", "--fleet", "../../collector/testdata/fleet.example.yaml",
		"--from", "2026-11-01T00:00:00+08:00", "--to", "2026-11-06T00:00:00+08:00", "--out", out)
	require.Equal(t, 0, code, errOut)
	code, invoice, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", out, "--period", "2026-11")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, errOut, "matches no SKU", "every simulated instance has a price")
	for _, p := range []string{"nlp-lab", "cv-lab", "ai101", "thesis-h100"} {
		require.Contains(t, invoice, `"project": "`+p+`"`)
	}
	// Replaying the same days changes nothing.
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	code, again, errOut := runCLI(t, string(data)+string(data), "bill", "--catalog", exampleCatalog, "--samples", "-", "--period", "2026-11")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, invoice, again)
}

// bill --cpu-profile writes a CPU profile (gzipped protobuf) of the run, and
// the invoice is the same as without it; a profile that cannot be created is
// an error naming the flag.
func TestBillCPUProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "bill.prof")
	code, out, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", "2026-11",
		"--cpu-profile", prof)
	require.Equal(t, 0, code, errOut)
	_, plain, _ := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", "2026-11")
	require.Equal(t, plain, out)
	b, err := os.ReadFile(prof)
	require.NoError(t, err)
	require.Greater(t, len(b), 2)
	require.Equal(t, []byte{0x1f, 0x8b}, b[:2], "a gzipped pprof profile")

	code, _, errOut = runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", "2026-11",
		"--cpu-profile", filepath.Join(t.TempDir(), "missing", "bill.prof"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--cpu-profile")
}
