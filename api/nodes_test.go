package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/reads"
)

// GET /api/v1/nodes: every node for admin and finance, the nodes of its
// project's instances for a lead and of its own for a student, with held
// counting only those; the silent-node threshold, the look-back and the
// refresh interval (the server's, 30 s by default) beside them.
func TestNodesByRole(t *testing.T) {
	f := newFixture(t)
	read := func(role, url string) api.NodesBody {
		t.Helper()
		r := f.do(role, "GET", url, "", "")
		require.Equal(t, 200, r.Status, string(r.Body))
		var b api.NodesBody
		require.NoError(t, json.Unmarshal(r.Body, &b))
		return b
	}
	type row struct {
		node   string
		held   int
		silent bool
	}
	rows := func(b api.NodesBody) []row {
		out := []row{}
		for _, n := range b.Items {
			out = append(out, row{n.Node, n.Held, n.Silent})
		}
		return out
	}
	every := []row{{"gpu-node-01", 2, false}, {"gpu-node-02", 1, false}, {"gpu-node-09", 0, true}}
	for _, role := range []string{"admin", "finance"} {
		b := read(role, "/api/v1/nodes")
		require.Equal(t, every, rows(b), role)
		require.Equal(t, int64(30), b.RefreshS)
		require.Equal(t, int64(reads.SilentGap/time.Second), b.SilentAfterS)
		require.Equal(t, int64(86400), b.LookbackS)
		require.True(t, b.CheckedAt.Equal(now))
	}
	require.Equal(t, []row{{"gpu-node-01", 1, false}}, rows(read("finance", "/api/v1/nodes?project=nlp-lab")))
	require.Equal(t, []row{{"gpu-node-01", 1, false}, {"gpu-node-02", 1, false}}, rows(read("lead", "/api/v1/nodes")), "ai101's instances only")
	require.Equal(t, []row{{"gpu-node-02", 1, false}}, rows(read("lead", "/api/v1/nodes?user=s-bob")))
	require.Equal(t, []row{{"gpu-node-01", 1, false}}, rows(read("student", "/api/v1/nodes")), "s-alice's instance only")
	for _, u := range []string{"/api/v1/nodes?user=s-bob", "/api/v1/nodes?project=nlp-lab"} {
		require.Equal(t, 403, f.do("student", "GET", u, "", "").Status, u)
	}
	require.Equal(t, 403, f.do("lead", "GET", "/api/v1/nodes?project=nlp-lab", "", "").Status)

	// The server's refresh interval.
	srv, err := api.New(api.Config{Ledger: f.led, Usage: f.usage, Clock: func() time.Time { return now }, RefreshInterval: 2 * time.Second})
	require.NoError(t, err)
	f.h = srv.Handler()
	require.Equal(t, int64(2), read("admin", "/api/v1/nodes").RefreshS)
}
