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
