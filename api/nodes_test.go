package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing"
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

// GET /api/v1/held pages what is held in node, instance order, and sums up
// every instance that matches the filters (node, state, scope) on each page.
func TestHeldPagesAndTotals(t *testing.T) {
	f := newFixture(t)
	f.usage.held[0].Cost = &billing.Money{Decimal: decimal.RequireFromString("2.50")}
	f.usage.held[1].Cost = &billing.Money{Decimal: decimal.RequireFromString("0.75")}
	read := func(role, url string) api.HeldPage {
		t.Helper()
		r := f.do(role, "GET", url, "", "")
		require.Equal(t, 200, r.Status, string(r.Body))
		var b api.HeldPage
		require.NoError(t, json.Unmarshal(r.Body, &b))
		return b
	}
	ids := func(b api.HeldPage) []string {
		out := []string{}
		for _, h := range b.Items {
			out = append(out, h.InstanceID)
		}
		return out
	}
	all := read("admin", "/api/v1/held")
	require.Equal(t, []string{"GPU-3", "MIG-1", "MIG-2"}, ids(all), "node, then instance")
	require.Empty(t, all.NextCursor)
	require.Equal(t, [4]int{3, 1, 2, 1}, [4]int{all.Total, all.Idle, all.Nodes, all.Unpriced})
	require.Equal(t, "3.25", all.Cost.String())

	// Two pages of two and one; the totals are the same on both.
	p1 := read("admin", "/api/v1/held?limit=2")
	require.Equal(t, []string{"GPU-3", "MIG-1"}, ids(p1))
	require.NotEmpty(t, p1.NextCursor)
	p2 := read("admin", "/api/v1/held?limit=2&cursor="+p1.NextCursor)
	require.Equal(t, []string{"MIG-2"}, ids(p2))
	require.Empty(t, p2.NextCursor)
	require.Equal(t, all.Total, p2.Total)
	require.Equal(t, all.Cost.String(), p2.Cost.String())

	idle := read("finance", "/api/v1/held?state=idle")
	require.Equal(t, []string{"MIG-2"}, ids(idle))
	require.Equal(t, [3]int{1, 1, 1}, [3]int{idle.Total, idle.Idle, idle.Nodes})
	require.Equal(t, "0.75", idle.Cost.String())
	busy := read("finance", "/api/v1/held?state=busy&node=gpu-node-01")
	require.Equal(t, []string{"GPU-3", "MIG-1"}, ids(busy))
	require.Equal(t, 0, busy.Idle)
	student := read("student", "/api/v1/held")
	require.Equal(t, []string{"MIG-1"}, ids(student), "s-alice's own")
	require.Equal(t, 1, student.Total)
	none := read("lead", "/api/v1/held?node=gpu-node-09")
	require.Equal(t, []string{}, ids(none))
	require.Nil(t, none.Cost)

	require.Equal(t, 400, f.do("admin", "GET", "/api/v1/held?cursor=nope", "", "").Status)
	require.Equal(t, 422, f.do("admin", "GET", "/api/v1/held?state=asleep", "", "").Status)
}

// GET /api/v1/nodes pages the nodes, the silent ones first with
// order=silent, and sums up every listed node on each page.
func TestNodesPagesAndTotals(t *testing.T) {
	f := newFixture(t)
	read := func(url string) api.NodesBody {
		t.Helper()
		r := f.do("admin", "GET", url, "", "")
		require.Equal(t, 200, r.Status, string(r.Body))
		var b api.NodesBody
		require.NoError(t, json.Unmarshal(r.Body, &b))
		return b
	}
	names := func(b api.NodesBody) []string {
		out := []string{}
		for _, n := range b.Items {
			out = append(out, n.Node)
		}
		return out
	}
	all := read("/api/v1/nodes")
	require.Equal(t, [4]int{3, 1, 3, 1}, [4]int{all.Total, all.Silent, all.Held, all.Idle})
	require.Equal(t, 1, all.Items[1].Idle, "gpu-node-02's idle MIG-2")
	require.Equal(t, 2, all.Items[0].Unpriced)
	p1 := read("/api/v1/nodes?order=silent&limit=2")
	require.Equal(t, []string{"gpu-node-09", "gpu-node-01"}, names(p1))
	p2 := read("/api/v1/nodes?order=silent&limit=2&cursor=" + p1.NextCursor)
	require.Equal(t, []string{"gpu-node-02"}, names(p2))
	require.Empty(t, p2.NextCursor)
	require.Equal(t, 3, p2.Total)
	require.Equal(t, 422, f.do("admin", "GET", "/api/v1/nodes?order=loudest", "", "").Status)
}
