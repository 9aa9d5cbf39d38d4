package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const (
	exampleCatalog = "../../schemas/examples/catalog.yaml"
	exampleSamples = "../../schemas/examples/samples.jsonl"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if stdin != "" {
		r, w, err := os.Pipe()
		require.NoError(t, err)
		go func() { _, _ = w.WriteString(stdin); _ = w.Close() }()
		old := os.Stdin
		os.Stdin = r
		defer func() { os.Stdin = old }()
	}
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run 'go test ./cmd/cardhour -update' to create it")
	require.Equal(t, string(want), got, "output differs from %s (rerun with -update if the change is intended)", path)
}
