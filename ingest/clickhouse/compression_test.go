package clickhouse_test

import (
	"testing"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest/clickhouse"
)

// Unset, the compression is none on a loopback address and lz4 on any
// other; a named one is used wherever the server is.
func TestCompressionDefault(t *testing.T) {
	for addr, want := range map[string]ch.CompressionMethod{
		"127.0.0.1:9000":          ch.CompressionNone,
		"127.0.0.53:9000":         ch.CompressionNone,
		"[::1]:9000":              ch.CompressionNone,
		"localhost:9000":          ch.CompressionNone,
		"10.0.0.7:9000":           ch.CompressionLZ4,
		"clickhouse.svc:9000":     ch.CompressionLZ4,
		"[2001:db8::1]:9000":      ch.CompressionLZ4,
		"clickhouse-0.local:9000": ch.CompressionLZ4,
	} {
		c := clickhouse.Config{Addr: addr}
		require.Equal(t, want, c.CompressionMethod(), addr)
	}
	for name, want := range map[string]ch.CompressionMethod{"lz4": ch.CompressionLZ4, "zstd": ch.CompressionZSTD, "none": ch.CompressionNone} {
		for _, addr := range []string{"127.0.0.1:9000", "10.0.0.7:9000"} {
			c := clickhouse.Config{Addr: addr, Compression: name}
			require.Equal(t, want, c.CompressionMethod(), "%s at %s", name, addr)
		}
	}
}
