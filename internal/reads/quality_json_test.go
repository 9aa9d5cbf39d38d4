package reads

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// The data-quality report is part of billing runs' JSON: snake_case names,
// and a node still silent has until null, not year 1.
func TestDataQualityJSON(t *testing.T) {
	from := time.Date(2026, 11, 5, 7, 25, 0, 0, time.UTC)
	dq := DataQuality{Period: "2026-11", CheckedAt: from, Rejected: 2,
		FirstRejected: []schemas.RejectRow{{TimeMS: 1, Source: "file:a:1", Reason: "invalid_field", Error: "e"}},
		Silent:        []SilentNode{{Node: "n1", From: from}, {Node: "n2", From: from, Until: from.Add(time.Hour)}},
		Unattributed:  []schemas.UnattributedUsage{{Node: "n1", InstanceID: "MIG-1", Seconds: 60}}}
	b, err := json.Marshal(dq)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"period":"2026-11","checked_at":"2026-11-05T07:25:00Z","rejected":2,` +
		`"first_rejected":[{"time_ms":1,"source":"file:a:1","reason":"invalid_field","error":"e"}],` +
		`"silent":[{"node":"n1","from":"2026-11-05T07:25:00Z","until":null},{"node":"n2","from":"2026-11-05T07:25:00Z","until":"2026-11-05T08:25:00Z"}],` +
		`"unattributed":[{"node":"n1","instance_id":"MIG-1","seconds":60}]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

// SilentNode's direct JSON writes the encoder's bytes, and nodes or times
// it cannot write go to the encoder.
func TestSilentNodeJSONAsEncoder(t *testing.T) {
	sh := time.FixedZone("CST", 8*3600)
	times := []time.Time{{}, time.Date(2026, 11, 5, 7, 25, 0, 0, time.UTC), time.Date(2026, 11, 5, 7, 25, 0, 120_000_000, time.UTC),
		time.Date(2026, 11, 5, 7, 25, 1, 7, sh), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}
	direct := 0
	for _, node := range []string{"gpu-node-01", "", "a<b>&c", `q"uote`, `back\slash`, "tab\there", "节点-3", "bad\xffutf8", "del\x7f"} {
		for _, from := range times[1:] {
			for _, until := range times {
				n := SilentNode{Node: node, From: from, Until: until}
				want, wantErr := n.marshalJSON()
				got, err := n.MarshalJSON()
				if (err != nil) != (wantErr != nil) || string(got) != string(want) {
					t.Fatalf("%+v: got %s (%v), want %s (%v)", n, got, err, want, wantErr)
				}
				if _, ok := n.appendJSON(nil); ok {
					direct++
				}
			}
		}
	}
	if direct == 0 {
		t.Fatal("no node was written directly")
	}
}
