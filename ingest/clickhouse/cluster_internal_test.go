package clickhouse

import (
	"strings"
	"testing"

	chschema "github.com/cardhour/cardhour/schemas/clickhouse"
)

// The values are ClickHouse 18.16's: SELECT sipHash64('…').
func TestSipHash64MatchesClickHouse(t *testing.T) {
	for k, want := range map[string]uint64{
		"":                             2202906307356721367,
		"a":                            10863254463029944905,
		"b":                            17270894748891556580,
		"hello world, a longer string": 14927753731347096495,
	} {
		if got := sipHash64([]byte(k)); got != want {
			t.Errorf("sipHash64(%q) = %d, want %d", k, got, want)
		}
	}
}

func TestShardOfFollowsWeights(t *testing.T) {
	c := &cluster{shards: []*shard{{num: 1, weight: 1}, {num: 2, weight: 3}}, total: 4}
	n := [2]int{}
	for i := range 4000 {
		k := string(rune('a'+i%26)) + string(rune(i))
		got := c.shardOf(k)
		if want := 0; sipHash64([]byte(k))%4 >= 1 {
			want = 1
			if got != want {
				t.Fatalf("shardOf(%q) = %d, want %d", k, got, want)
			}
		} else if got != want {
			t.Fatalf("shardOf(%q) = %d, want %d", k, got, want)
		}
		n[got]++
	}
	if n[0] < 800 || n[0] > 1200 {
		t.Errorf("shard 1 (weight 1 of 4) got %d of 4000 keys", n[0])
	}
}

// Every migration has a cluster form: tables become replicated local tables
// with a Distributed table over them, sharded by their key; ALTERs alter the
// local tables and make the Distributed one again.
func TestEveryMigrationHasAClusterForm(t *testing.T) {
	ms, err := chschema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	creates := 0
	for _, m := range ms {
		ddl := chschema.Render(m.SQL, chschema.Features{}, 0)
		stmts, err := clusterDDL(ddl, "db", "c")
		if err != nil {
			t.Fatalf("migration %d: %v", m.Version, err)
		}
		for _, st := range stmts {
			if !strings.HasPrefix(st.sql, "INSERT") && st.sql != "SELECT 1" && !strings.Contains(st.sql+" ", " ON CLUSTER c ") {
				t.Errorf("migration %d: %q is not ON CLUSTER", m.Version, st.sql)
			}
		}
		if cm := createTable.FindStringSubmatch(ddl); cm != nil {
			creates++
			table := cm[1]
			local, dist := stmts[0].sql, stmts[1].sql
			if !strings.Contains(local, "`db`."+table+"_local ON CLUSTER c (") ||
				!strings.Contains(local, "ENGINE = Replicated"+cm[3]+"('/clickhouse/tables/{shard}/db/"+table+"_local', '{replica}'") {
				t.Errorf("migration %d: local table %q", m.Version, local)
			}
			if want := "AS `db`." + table + "_local ENGINE = Distributed(c, db, " + table + "_local, sipHash64(" + shardKeys[table] + "))"; !strings.HasSuffix(dist, want) {
				t.Errorf("migration %d: %q does not end with %q", m.Version, dist, want)
			}
		}
	}
	if creates < 9 {
		t.Errorf("%d CREATE TABLE migrations, want the 9 tables", creates)
	}
	stmts, _ := clusterDDL("ALTER TABLE raw_samples ADD COLUMN x String DEFAULT ''", "db", "c")
	if len(stmts) != 3 || stmts[0].sql != "ALTER TABLE `db`.raw_samples_local ON CLUSTER c ADD COLUMN x String DEFAULT ''" ||
		stmts[1].sql != "DROP TABLE IF EXISTS `db`.raw_samples ON CLUSTER c" || !strings.Contains(stmts[2].sql, "Distributed(") {
		t.Errorf("ALTER's cluster form: %+v", stmts)
	}
	if _, err := clusterDDL("RENAME TABLE a TO b", "db", "c"); err == nil {
		t.Error("a statement without a cluster form is refused")
	}
}
