//go:build !collector

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeSamples(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "samples.jsonl")
	data := strings.Join(lines, "\n")
	if data != "" {
		data += "\n"
	}
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	return path
}

// An empty input, an input whose every line was skipped and a month without usage
// bill with exit status 0, and every format says so.
func TestBillSaysWhenNothingWasBilled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		args  []string
		want  []string
	}{
		{"empty file", nil, nil, []string{
			"the input has no sample lines: nothing was billed from it (输入中没有样本)",
			"no usage in 2026-11: no GPU instance was held in this period (本期无用量)"}},
		{"every line invalid", []string{`{"ts":"2026-11-03T10:00:00+08:00","interval_s":-60}`, "not json"},
			[]string{"--skip-invalid"}, []string{
				"all 2 sample line(s) were invalid and skipped: nothing was billed from the input, first at line 1",
				"no usage in 2026-11"}},
		{"no usage in the month", nil, []string{"--period", "2026-06"}, []string{"no usage in 2026-06"}},
	} {
		samples := writeSamples(t, tc.lines...)
		if tc.name == "no usage in the month" {
			samples = exampleSamples
		}
		for _, format := range []string{"json", "table", "csv"} {
			args := append([]string{"bill", "--catalog", exampleCatalog, "--samples", samples, "--format", format}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--period") {
				args = append(args, "--period", "2026-11")
			}
			code, out, errOut := runCLI(t, "", args...)
			require.Equal(t, 0, code, "%s, %s: %s", tc.name, format, errOut)
			for _, w := range tc.want {
				require.Contains(t, out, w, "%s, %s", tc.name, format)
				require.Contains(t, errOut, w, "%s, %s: on stderr too", tc.name, format)
			}
			if format == "csv" {
				require.Contains(t, out, ",warning 警告,")
			}
		}
	}
}

func TestBillCSVCarriesSkippedLines(t *testing.T) {
	data, err := os.ReadFile(exampleSamples)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	path := writeSamples(t, append([]string{"not json"}, lines...)...)
	code, out, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", path, "--period", "2026-11",
		"--format", "csv", "--skip-invalid")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, ",warning 警告,,,,,,,,,,,,,\"1 of ")
	require.Contains(t, out, "sample line(s) were invalid and skipped: they are not billed and this bill may be incomplete, first at line 1")
	require.Contains(t, out, "NVIDIA L40S / full matches no SKU", "the unpriced usage is in the CSV, not only on stderr")
}

// `bill --user X` names no other student, in any format nor on stderr: the example
// month warns about another student's unpriced usage.
func TestBillStatementNamesNoOtherStudent(t *testing.T) {
	for _, format := range []string{"json", "table", "csv"} {
		code, out, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", "2026-11",
			"--user", "2023110042", "--format", format)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "2023110042")
		for _, other := range []string{"2026010204", "2026010203", "2023110077", "2024210015", "2022310101", "2021110999"} {
			require.NotContains(t, out, other, format)
			require.NotContains(t, errOut, other, format)
		}
	}
}

// Two holders on one slice at once: reported in every format, the same from a
// store as from the file.
func TestBillReportsHolderConflicts(t *testing.T) {
	sample := func(ts, project, user string) string {
		return `{"ts":"` + ts + `","interval_s":600,"node":"n1","gpu_uuid":"GPU-1","gpu_model":"NVIDIA A100-SXM4-80GB",` +
			`"instance_id":"MIG-x","profile":"1g.10gb","project":"` + project + `","user":"` + user + `",` +
			`"util":null,"mem_used_bytes":0,"mem_total_bytes":10737418240,"processes":1}`
	}
	path := writeSamples(t,
		sample("2026-11-03T10:00:00+08:00", "nlp-lab", "2023110042"),
		sample("2026-11-03T10:10:00+08:00", "nlp-lab", "2023110042"),
		sample("2026-11-03T10:05:00+08:00", "cv-lab", "2022310101"))
	wants := map[string][]string{
		"json":  {`"instance_id": "MIG-x"`, `"user": "2022310101"`, `"user": "2023110042"`, `"overlap_seconds": 600`},
		"table": {"MIG-x", "cv-lab/2022310101, nlp-lab/2023110042", "600"},
		"csv":   {`instance ""MIG-x"" was held by 2 holders (cv-lab/2022310101, nlp-lab/2023110042)`},
	}
	for format, want := range wants {
		code, out, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", path, "--period", "2026-11", "--format", format)
		require.Equal(t, 0, code, errOut)
		for _, w := range want {
			require.Contains(t, out, w, format)
		}
		require.Contains(t, out, "for 600 s, first at 2026-11-03 10:05:00, last until 2026-11-03 10:15:00", format)
	}

	_, fromFile, _ := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", path, "--period", "2026-11")
	db := "sqlite://" + filepath.Join(t.TempDir(), "usage.db")
	code, _, errOut := runCLI(t, "", "ingest", "--store", db, "--from-file", path, "--listen", "")
	require.Equal(t, 0, code, errOut)
	code, fromStore, errOut := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", db, "--period", "2026-11")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, fromFile, fromStore)
}
