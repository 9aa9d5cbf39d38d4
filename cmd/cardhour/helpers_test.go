package main

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest/clickhouse"
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

// dropDatabaseAtEnd drops the ClickHouse database db at addr when the test
// ends (opened with its migrations, so that it exists to be dropped).
func dropDatabaseAtEnd(t *testing.T, addr, db string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		st, err := clickhouse.Open(ctx, clickhouse.Config{Addr: addr, Database: db, Logger: slog.New(slog.DiscardHandler), Migrate: true})
		if err == nil {
			_ = st.Conn().Exec(ctx, "DROP DATABASE IF EXISTS `"+db+"`")
			_ = st.Close()
		}
	})
}
