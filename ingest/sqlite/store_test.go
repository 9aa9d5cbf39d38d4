package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

func TestBillFromSQLiteEqualsFile(t *testing.T) {
	ctx := context.Background()
	st, path, log := openTemp(t)
	data := storetest.Trace(t, 40_000, 13)
	cats := storetest.Catalogs(t)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
	require.NoError(t, err)
	samples := storetest.Samples(t, data)
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
	storetest.RequireSameInvoices(t, data, cats, st)
	require.Equal(t, storetest.LatestOf(samples), storetest.Latest(t, st, 0))
}

// A store written before latest_samples existed gets them from its raw
// samples when migrated: per instance the held sample with the greatest start.
func TestLatestSamplesBackfill(t *testing.T) {
	ctx := context.Background()
	st, path, log := openTemp(t)
	samples := storetest.Samples(t, storetest.Trace(t, 20_000, 23))
	require.NoError(t, st.Write(ctx, &ingest.Batch{Samples: samples})) // raw rows only
	require.Empty(t, storetest.Latest(t, st, 0))
	require.NoError(t, st.Close())

	st = reopenBefore(t, path, "latest_samples")
	defer st.Close()
	want := storetest.LatestOf(samples)
	require.Greater(t, len(want), 40)
	require.Equal(t, want, storetest.Latest(t, st, 0))

	// Later writes keep the newer sample: an older replay changes nothing.
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, samples[:len(samples)/2]))
	require.Equal(t, want, storetest.Latest(t, st, 0))
}

// Idle runs written before the class layout (idle_runs, one exact util per run)
// are carried over by the migration and bill exactly as before; thresholds that
// cut through a class read raw samples, and fail loudly once those are gone.
func TestOldIdleRunsMigrateAndRawFallback(t *testing.T) {
	ctx := context.Background()
	st, path, log := openTemp(t)
	data := storetest.Trace(t, 20_000, 17)
	cats := storetest.Catalogs(t)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
	require.NoError(t, err)
	samples := storetest.Samples(t, data)
	require.NoError(t, w.Write(ctx, samples))
	require.NoError(t, st.Close())

	// Rewind to schema version 5: idle time only in the old table.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec(`DELETE FROM idle_spans`)
	require.NoError(t, err)
	for i := range samples {
		s := &samples[i]
		if !ingest.IdleCandidate(s) {
			continue
		}
		known := 0
		if s.UtilKnown {
			known = 1
		}
		_, err = db.Exec(`INSERT OR REPLACE INTO idle_runs (project, user, instance_id, gpu_model, profile, util_known, util, start_ms, end_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, s.Project, s.User, s.InstanceID, s.GPUModel, s.Profile, known, s.Util, s.StartMS, s.EndMS())
		require.NoError(t, err)
	}
	_, err = db.Exec(`PRAGMA user_version = 5`)
	require.NoError(t, err)

	st, err = sqlite.Open(ctx, sqlite.Config{Path: path, Logger: log})
	require.NoError(t, err)
	defer st.Close()
	storetest.RequireSameInvoices(t, data, cats, st)

	// Raw samples expired: thresholds on class bounds still bill exactly, the
	// others refuse (once class runs with mixed utilisations are stored).
	w, err = ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, samples))
	_, err = db.Exec(`DELETE FROM raw_samples`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	storetest.RequireSameInvoices(t, data, map[string]*schemas.Catalog{"example": cats["example"], "thr-bounds": cats["thr-bounds"]}, st)
	p, err := billing.ParsePeriod(storetest.Periods[0], cats["thr-cuts"].Location)
	require.NoError(t, err)
	_, err = reads.BillFrom(ctx, st, cats["thr-cuts"], p)
	require.ErrorContains(t, err, "no longer stored")
}

// A store written before the data-quality rollup gets it from its raw
// samples when migrated: the check answers as the raw samples do, and
// samples written after the migration add to the rollup.
func TestDataQualityRollupBackfill(t *testing.T) {
	ctx := context.Background()
	st, path, _ := openTemp(t)
	old, later := storetest.QualityTraceBefore(t, time.Date(2026, 11, 1, 0, 30, 0, 0, time.UTC))
	require.NoError(t, st.Write(ctx, &ingest.Batch{Samples: old}))
	require.NoError(t, st.Close())

	st = reopenBefore(t, path, "node_minutes", "unheld_busy")
	defer st.Close()
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(later)))
	storetest.RequireDataQualityOf(t, st, append(old, later...))
}

// reopenBefore takes the store at path back to the schema before the
// migration creating tables[0] (dropping tables, setting user_version), opens
// it again and checks that Open ran every migration from there.
func reopenBefore(t *testing.T, path string, tables ...string) *sqlite.Store {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	for _, table := range tables {
		_, err = db.Exec(`DROP TABLE ` + table)
		require.NoError(t, err)
	}
	before := sqlite.VersionBefore("CREATE TABLE IF NOT EXISTS " + tables[0])
	_, err = db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, before))
	require.NoError(t, err)
	require.NoError(t, db.Close())

	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	from, to := st.Migrated()
	require.Equal(t, [2]int{before, sqlite.SchemaVersion}, [2]int{from, to})
	return st
}

// A store of schema version 29, before raw and latest samples kept the
// share fields, migrates: its rows bill as before (as no share) and samples
// of shares written after come back with their fields.
func TestShareColumnsMigrate(t *testing.T) {
	ctx := context.Background()
	st, path, log := openTemp(t)
	data := storetest.Trace(t, 10_000, 23)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, storetest.Samples(t, data)))
	require.NoError(t, st.Close())

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	for _, table := range []string{"raw_samples", "latest_samples"} {
		for _, col := range []string{"share_kind", "share_mem", "share_cores"} {
			_, err = db.Exec(`ALTER TABLE ` + table + ` DROP COLUMN ` + col)
			require.NoError(t, err)
		}
	}
	before := sqlite.VersionBefore("ALTER TABLE raw_samples ADD COLUMN share_kind")
	require.Equal(t, 29, before)
	_, err = db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, before))
	require.NoError(t, err)
	require.NoError(t, db.Close())

	st, err = sqlite.Open(ctx, sqlite.Config{Path: path, Logger: log})
	require.NoError(t, err)
	defer st.Close()
	from, to := st.Migrated()
	require.Equal(t, [2]int{29, sqlite.SchemaVersion}, [2]int{from, to})
	storetest.RequireSharesAfterMigration(t, data, st)
}

// openTemp opens a store in a fresh file of t's temporary directory; the path
// and the logger serve to open it again.
func openTemp(t *testing.T) (st *sqlite.Store, path string, log *slog.Logger) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "cardhour.db")
	log = slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Logger: log})
	require.NoError(t, err)
	return st, path, log
}
