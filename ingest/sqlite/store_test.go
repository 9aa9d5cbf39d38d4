package sqlite_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/ingesttest"
	"github.com/cardhour/cardhour/ingest/sqlite"
)

func TestBillFromSQLiteEqualsFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cardhour.db")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Logger: log})
	require.NoError(t, err)
	data := ingesttest.Trace(t, 40_000, 13)
	cat, err := os.ReadFile("../../schemas/examples/catalog.yaml")
	require.NoError(t, err)
	cats := ingesttest.Catalogs(t, cat)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
	require.NoError(t, err)
	samples := ingesttest.Samples(t, data)
	for i := 0; i < len(samples); i += 5000 {
		require.NoError(t, w.Write(ctx, samples[i:min(i+5000, len(samples))]))
	}
	require.NoError(t, st.Close())

	// Reopen (migrations are idempotent) and replay a part: nothing changes.
	st, err = sqlite.Open(ctx, sqlite.Config{Path: path, Logger: log})
	require.NoError(t, err)
	defer st.Close()
	w, err = ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, samples[100:9000]))
	ingesttest.RequireSameInvoices(t, data, cats, st)
}
