package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

var quiet = slog.New(slog.DiscardHandler)

// Readers never create: a missing file, a file without the schema, or a
// schema older or newer than this build's is a clear, permanent error, and the
// file system is left as it was.
func TestReadOnlyOpenNeedsAStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.db")
	_, err := sqlite.Open(ctx, sqlite.Config{Path: typo, Logger: quiet, ReadOnly: true})
	require.ErrorContains(t, err, "no store at "+typo+": run `cardhour ingest` or `cardhour migrate` first")
	require.True(t, ingest.IsPermanent(err))
	require.NoFileExists(t, typo, "a reader created the store")

	empty := filepath.Join(dir, "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, err = sqlite.Open(ctx, sqlite.Config{Path: empty, Logger: quiet, ReadOnly: true})
	require.ErrorContains(t, err, "holds no cardhour store (schema missing)")
	fi, err := os.Stat(empty)
	require.NoError(t, err)
	require.Zero(t, fi.Size(), "a reader wrote the schema")

	setVersion := func(path string, v int) {
		db, err := sql.Open("sqlite", "file:"+path)
		require.NoError(t, err)
		_, err = db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v))
		require.NoError(t, err)
		require.NoError(t, db.Close())
	}
	old := filepath.Join(dir, "old.db")
	setVersion(old, 3)
	_, err = sqlite.Open(ctx, sqlite.Config{Path: old, Logger: quiet, ReadOnly: true})
	require.ErrorContains(t, err, fmt.Sprintf("schema version 3, this build needs %d: run `cardhour migrate --store sqlite://%s`", sqlite.SchemaVersion, old))

	newer := filepath.Join(dir, "newer.db")
	setVersion(newer, sqlite.SchemaVersion+1)
	for _, ro := range []bool{true, false} {
		_, err = sqlite.Open(ctx, sqlite.Config{Path: newer, Logger: quiet, ReadOnly: ro})
		require.ErrorContains(t, err, "newer than this build of cardhour knows")
		require.True(t, ingest.IsPermanent(err))
	}

	// A store written by ingest opens read-only, and cannot be written so.
	good := filepath.Join(dir, "good.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: good, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	st, err = sqlite.Open(ctx, sqlite.Config{Path: good, Logger: quiet, ReadOnly: true})
	require.NoError(t, err)
	defer st.Close()
	err = st.Write(ctx, &ingest.Batch{Samples: storetest.Samples(t, storetest.Trace(t, 10, 1))})
	require.ErrorContains(t, err, "readonly database")
	require.True(t, ingest.IsPermanent(err), "SQLITE_READONLY is permanent")
}

// Ingest into a store SQLite refuses to write fails after one attempt, with
// the path and SQLite's reason, instead of retrying until killed.
func TestIngestIntoReadOnlyStoreFailsAtOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ro.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	st, err = sqlite.Open(ctx, sqlite.Config{Path: path, Logger: quiet, ReadOnly: true})
	require.NoError(t, err)
	defer st.Close()
	counted := &countingStore{Store: st}
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: counted, Logger: quiet, RetryMin: time.Millisecond, RetryMax: time.Millisecond})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // only reached if it were retried
	defer cancel()
	err = w.Write(wctx, storetest.Samples(t, storetest.Trace(t, 100, 1)))
	require.Error(t, err)
	require.True(t, ingest.IsPermanent(err))
	require.ErrorContains(t, err, path)
	require.Equal(t, 1, counted.writes)
}

type countingStore struct {
	*sqlite.Store
	writes int
}

func (c *countingStore) Write(ctx context.Context, b *ingest.Batch) error {
	c.writes++
	return c.Store.Write(ctx, b)
}

// Where SQLite would only say "unable to open database file", the error
// names the path and why.
func TestWritableOpenSaysWhy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	_, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "missing", "x.db"), Logger: quiet})
	require.ErrorContains(t, err, "cannot create SQLite store "+filepath.Join(dir, "missing", "x.db")+": directory "+filepath.Join(dir, "missing")+" does not exist")
	require.True(t, ingest.IsPermanent(err))

	_, err = sqlite.Open(ctx, sqlite.Config{Path: dir, Logger: quiet})
	require.ErrorContains(t, err, "is a directory, not a database file")

	if os.Geteuid() == 0 {
		t.Log("running as root: permission checks do not apply, skipping the unwritable cases")
		return
	}
	locked := filepath.Join(dir, "locked")
	require.NoError(t, os.Mkdir(locked, 0o555))
	_, err = sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(locked, "x.db"), Logger: quiet})
	require.ErrorContains(t, err, "directory "+locked+" is not writable")
	require.ErrorContains(t, err, "permission denied")
	require.True(t, ingest.IsPermanent(err))

	ro := filepath.Join(dir, "ro.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: ro, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, os.Chmod(ro, 0o444))
	_, err = sqlite.Open(ctx, sqlite.Config{Path: ro, Logger: quiet})
	require.ErrorContains(t, err, "cannot write SQLite store "+ro)
	require.ErrorContains(t, err, "permission denied")
	require.True(t, ingest.IsPermanent(err))
}

// Rejects are kept once per source and summed up per time range.
func TestRejects(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "r.db"), Logger: quiet})
	require.NoError(t, err)
	defer st.Close()
	rs := []ingest.Reject{
		{TimeMS: 3000, Source: "file:/a:3", Reason: "invalid_field", Error: "interval_s: must be > 0"},
		{TimeMS: 1000, Source: "kafka:t/0/7#2", Reason: "malformed_json", Error: "bad"},
		{TimeMS: 9000, Source: "file:/a:9", Reason: "invalid_field", Error: "later"},
	}
	require.NoError(t, st.WriteRejects(ctx, rs))
	require.NoError(t, st.WriteRejects(ctx, rs[:2])) // a replay
	sum, err := st.RejectSummary(ctx, 0, 5000, 1)
	require.NoError(t, err)
	require.EqualValues(t, 2, sum.Count)
	require.Equal(t, []ingest.Reject{rs[1]}, sum.First)
	sum, err = st.RejectSummary(ctx, 5000, 10000, 5)
	require.NoError(t, err)
	require.EqualValues(t, 1, sum.Count)
	require.Equal(t, "later", sum.First[0].Error)
}

// A store in a directory the reader cannot write (another user's) bills: the
// reader cannot create SQLite's shared-memory file, and reads the file alone
// when no write-ahead log is pending.
func TestReadOnlyOpenInUnwritableDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: directory permissions do not apply")
	}
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, st.WriteRejects(ctx, []ingest.Reject{{TimeMS: 1, Source: "file:/a:1", Reason: "malformed_json", Error: "x"}}))
	require.NoError(t, st.Close())
	require.NoError(t, os.Chmod(dir, 0o555))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	st, err = sqlite.Open(ctx, sqlite.Config{Path: path, Logger: quiet, ReadOnly: true})
	require.NoError(t, err)
	defer st.Close()
	sum, err := st.RejectSummary(ctx, 0, 10, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, sum.Count)
}

// The exact idle fallback reads each cut run's raw samples with bound
// parameters, whatever the number of instances.
func TestRawIdleFallbackAt7000Instances(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "i.db"), Logger: quiet})
	require.NoError(t, err)
	defer st.Close()
	data, _ := storetest.StraddlingInstances(t, 7000)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, storetest.Samples(t, data)))
	cat := storetest.Catalogs(t)["thr-cuts"]
	storetest.RequireSameInvoices(t, data, map[string]*schemas.Catalog{"thr-cuts": cat}, st)
}
