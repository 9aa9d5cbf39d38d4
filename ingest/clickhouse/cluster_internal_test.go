package clickhouse

import "testing"

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
