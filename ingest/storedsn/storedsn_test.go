package storedsn_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest/storedsn"
)

func TestOpenRejectsBadURLs(t *testing.T) {
	opt := storedsn.Options{Logger: slog.New(slog.DiscardHandler)}
	for dsn, want := range map[string]string{
		"clickhouse://127.0.0.1:1/db?compres=lz4":         `unknown parameter "compres"`,
		"clickhouse://127.0.0.1:1/db?compress=lzo":        `compression "lzo": want lz4, zstd or none`,
		"clickhouse://127.0.0.1:1/":                       "want clickhouse://host:port/database",
		"postgres://x/y":                                  `unknown scheme "postgres"`,
		"sqlite://":                                       "want sqlite:///path/to/file.db",
		"clickhouse://127.0.0.1:1/db?quorum_timeout=soon": `quorum_timeout "soon": want a positive duration`,
		"clickhouse://127.0.0.1:1/db?cluster=a-b":         `cluster "a-b": want letters, digits and underscores`,
	} {
		_, err := storedsn.Open(context.Background(), dsn, opt)
		require.ErrorContains(t, err, want, dsn)
	}
}

func TestClusterOptionAgreesWithURL(t *testing.T) {
	opt := storedsn.Options{Logger: slog.New(slog.DiscardHandler), Cluster: "two"}
	_, err := storedsn.Open(context.Background(), "clickhouse://127.0.0.1:1/db?cluster=one", opt)
	require.ErrorContains(t, err, `names cluster "one", and "two" is asked for`)
	_, err = storedsn.Open(context.Background(), "sqlite:///tmp/x.db", opt)
	require.ErrorContains(t, err, "a cluster (two) is for ClickHouse stores only")
}
