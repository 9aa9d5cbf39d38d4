package clickhouse_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
)

func TestClickHousePackedUsage(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	storetest.RequirePackedUsage(t, st, 300)
}

// A database written before run packs gets them from its runs when
// migrated (0015, in Go): usage from the packs answers as from the runs, and
// batches written after add packs of their own.
func TestRunPacksBackfill(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	ctx := context.Background()
	db := "`" + st.Database() + "`"
	samples := storetest.Samples(t, storetest.Trace(t, 12_000, 37))
	old, later := samples[:len(samples)*2/3], samples[len(samples)*2/3:]
	mem := ingest.NewMemStore()
	storetest.WriteStreamedTo(t, old, 1_500, 500, st, mem)
	// Back to the schema before run packs: the table gone, 0014 and 0015
	// not recorded.
	require.NoError(t, st.Conn().Exec(ctx, "DROP TABLE "+db+".run_packs"))
	require.NoError(t, st.Conn().Exec(ctx, "ALTER TABLE "+db+".schema_migrations DELETE WHERE version IN (14, 15)"))
	require.Eventually(t, func() bool {
		var n uint64
		require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM "+db+".schema_migrations WHERE version IN (14, 15)").Scan(&n))
		return n == 0
	}, 10*time.Second, 50*time.Millisecond)
	res, err := st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{14, 15}, res.Applied)
	count := func() uint64 {
		var n uint64
		require.NoError(t, st.Conn().QueryRow(ctx, "SELECT count() FROM "+db+".run_packs").Scan(&n))
		return n
	}
	require.Positive(t, count(), "the migration filled run_packs")
	storetest.RequirePacksAsRuns(t, st, mem, old, 5)

	n := count()
	storetest.WriteStreamedTo(t, later, 1_000, 500, st, mem)
	require.Greater(t, count(), n, "batches after the migration write packs")
	storetest.RequirePacksAsRuns(t, st, mem, samples, 6)
}

// Migration 0018 recreates run_packs with small granules, from a table of
// the default granularity, and, run again after a crash that left the old
// table beside an empty new one, copies the old table's packs over and drops
// it; usage from the packs answers as before either way.
func TestRunPacksRegranule(t *testing.T) {
	d, samples, mem := newPacksDB(t, 43, 1_000)
	st, db := d.st, d.name()
	exec, scalar, tables := d.exec, d.scalar, d.tables
	definition := func() string {
		return scalar("SELECT create_table_query FROM system.tables WHERE database = '" + st.Database() + "' AND name = 'run_packs'")
	}
	packs := scalar("SELECT toString(count()) FROM " + db + ".run_packs")
	require.Contains(t, definition(), "index_granularity = 16", "a new database has small granules")

	// A database migrated before 0018: run_packs with the default granules.
	exec("RENAME TABLE " + db + ".run_packs TO " + db + ".run_packs_copy")
	exec("CREATE TABLE " + db + ".run_packs (day Date, project String, min_ms Int64, max_ms Int64, runs String) ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY (project, day)")
	exec("INSERT INTO " + db + ".run_packs SELECT * FROM " + db + ".run_packs_copy")
	exec("DROP TABLE " + db + ".run_packs_copy")
	require.Contains(t, definition(), "index_granularity = 8192")
	d.rerun(18)
	require.Contains(t, definition(), "index_granularity = 16")
	require.Equal(t, "run_packs", tables(), "nothing left beside run_packs")
	require.Equal(t, packs, scalar("SELECT toString(count()) FROM "+db+".run_packs"))
	storetest.RequirePacksAsRuns(t, st, mem, samples, 9)

	// A crash after the rename, before the packs written meanwhile were
	// copied: here every pack is still in the old table.
	exec("RENAME TABLE " + db + ".run_packs TO " + db + ".run_packs_before_regranule")
	exec("CREATE TABLE " + db + ".run_packs (day Date, project String, min_ms Int64, max_ms Int64, runs String) ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY (project, day) SETTINGS index_granularity = 16")
	d.rerun(18)
	require.Equal(t, "run_packs", tables(), "the old table is dropped")
	require.Equal(t, packs, scalar("SELECT toString(count()) FROM "+db+".run_packs"), "every pack copied once")
	storetest.RequirePacksAsRuns(t, st, mem, samples, 10)
}

// Migration 0019 seals the version-1 packs of a database written before
// packs were sealed, and, run again after a crash that left the old table
// (holding packs the new one lacks) beside the new, seals and copies those
// and drops it; usage from the packs answers as before either way.
func TestRunPacksReseal(t *testing.T) {
	d, samples, mem := newPacksDB(t, 47, 4_000)
	st, db := d.st, d.name()
	ctx := context.Background()
	exec, scalar, tables := d.exec, d.scalar, d.tables
	// versions counts the packs by their first byte: "plain,sealed".
	versions := func() string {
		return scalar("SELECT concat(toString(countIf(substring(runs, 1, 1) = unhex('01'))), ',', toString(countIf(substring(runs, 1, 1) = unhex('02')))) FROM " +
			db + ".run_packs")
	}
	// The packs as a build before sealing wrote them (version 1), which
	// writePlain inserts into a table.
	type pack struct {
		day     time.Time
		project string
		lo, hi  int64
		runs    []byte
	}
	var all []pack
	rows, err := st.Conn().Query(ctx, "SELECT day, project, min_ms, max_ms, runs FROM "+db+".run_packs")
	require.NoError(t, err)
	for rows.Next() {
		var p pack
		require.NoError(t, rows.Scan(&p.day, &p.project, &p.lo, &p.hi, &p.runs))
		p.runs, err = schemas.Unseal(p.runs)
		require.NoError(t, err)
		all = append(all, p)
	}
	require.NoError(t, rows.Err())
	writePlain := func(table string, packs []pack) {
		t.Helper()
		b, err := st.Conn().PrepareBatch(ctx, "INSERT INTO "+db+"."+table+" (day, project, min_ms, max_ms, runs)")
		require.NoError(t, err)
		for _, p := range packs {
			require.NoError(t, b.Append(p.day, p.project, p.lo, p.hi, string(p.runs)))
		}
		require.NoError(t, b.Send())
	}
	n, k := len(all), 0 // packs, of which LZ4 makes k smaller
	for _, p := range all {
		if _, ok := schemas.Reseal(p.runs); ok {
			k++
		}
	}
	require.Greater(t, n, 3)
	require.Greater(t, k, n/2)
	sealed := versions()
	require.Equal(t, strconv.Itoa(n-k)+","+strconv.Itoa(k), sealed, "a new database writes packs sealed where that makes them smaller")

	// A database written before 0019: version-1 packs.
	exec("DROP TABLE " + db + ".run_packs")
	exec("CREATE TABLE " + db + ".run_packs (day Date, project String, min_ms Int64, max_ms Int64, runs String) ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY (project, day) SETTINGS index_granularity = 16")
	writePlain("run_packs", all)
	require.Equal(t, strconv.Itoa(n)+",0", versions())
	storetest.RequirePacksAsRuns(t, st, mem, samples, 11)
	d.rerun(19)
	require.Equal(t, "run_packs", tables(), "nothing left beside run_packs")
	require.Equal(t, sealed, versions(), "every pack sealed, none lost or repeated")
	storetest.RequirePacksAsRuns(t, st, mem, samples, 12)

	// A crash after the rename, before the packs written to the old table
	// during the copy were copied: the new table has the first half of the
	// packs, sealed; the old one all of them, unsealed.
	exec("CREATE TABLE " + db + ".run_packs_before_sealing AS " + db + ".run_packs")
	writePlain("run_packs_before_sealing", all)
	exec("DROP TABLE " + db + ".run_packs")
	exec("CREATE TABLE " + db + ".run_packs AS " + db + ".run_packs_before_sealing")
	half := make([]pack, n/2)
	for i := range half {
		half[i] = all[i]
		half[i].runs, _ = schemas.Reseal(all[i].runs)
	}
	writePlain("run_packs", half)
	d.rerun(19)
	require.Equal(t, "run_packs", tables(), "the old table and the side table are dropped")
	require.Equal(t, sealed, versions(), "the other half sealed and copied, the first half not again")
	storetest.RequirePacksAsRuns(t, st, mem, samples, 13)
}

// packsDB runs the statements of the run_packs migration tests on a store's
// database.
type packsDB struct {
	t  *testing.T
	st *clickhouse.Store
}

// newPacksDB opens a fresh database and streams 8 000 samples of a trace
// (seed) into it in batches of batch, and into a MemStore to compare with.
func newPacksDB(t *testing.T, seed uint64, batch int) (packsDB, []schemas.Sample, *ingest.MemStore) {
	t.Helper()
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	samples := storetest.Samples(t, storetest.Trace(t, 8_000, seed))
	mem := ingest.NewMemStore()
	storetest.WriteStreamedTo(t, samples, batch, 500, st, mem)
	return packsDB{t, st}, samples, mem
}

// name is the database's quoted name.
func (d packsDB) name() string { return "`" + d.st.Database() + "`" }

func (d packsDB) exec(q string) {
	d.t.Helper()
	require.NoError(d.t, d.st.Conn().Exec(context.Background(), q))
}

func (d packsDB) scalar(q string) (v string) {
	d.t.Helper()
	require.NoError(d.t, d.st.Conn().QueryRow(context.Background(), q).Scan(&v))
	return v
}

// tables lists the database's tables named run_packs…, comma-separated.
func (d packsDB) tables() string {
	return d.scalar("SELECT arrayStringConcat(groupArray(name), ',') FROM (SELECT name FROM system.tables WHERE database = '" +
		d.st.Database() + "' AND name LIKE 'run_packs%' ORDER BY name)")
}

// rerun forgets that migration v was applied and migrates, which must apply
// v alone (as after a crash before its version was recorded).
func (d packsDB) rerun(v int) {
	d.t.Helper()
	db := d.name()
	d.exec("ALTER TABLE " + db + ".schema_migrations DELETE WHERE version = " + strconv.Itoa(v))
	require.Eventually(d.t, func() bool {
		return d.scalar("SELECT toString(count()) FROM "+db+".schema_migrations WHERE version = "+strconv.Itoa(v)) == "0"
	}, 10*time.Second, 50*time.Millisecond)
	res, err := d.st.Migrate(context.Background())
	require.NoError(d.t, err)
	require.Equal(d.t, []int{v}, res.Applied)
}
