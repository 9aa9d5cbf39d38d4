package reads_test

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// nodeSamples answers NodeBuckets and LatestSamples over a slice of samples
// (the latest held sample of each instance), as a store without
// NodeLatestRows.
type nodeSamples []schemas.Sample

func (s nodeSamples) NodeBuckets(_ context.Context, fromMS, toMS, bucketMS int64, fn func(schemas.NodeBucketRow) error) error {
	for _, x := range s {
		if x.StartMS >= fromMS && x.StartMS < toMS {
			if err := fn(schemas.NodeBucketRow{Node: x.Node, BucketMS: x.StartMS - x.StartMS%bucketMS}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s nodeSamples) LatestSamples(_ context.Context, fromMS int64, fn func(*schemas.Sample) error) error {
	latest := map[string]schemas.Sample{}
	for _, x := range s {
		if l, ok := latest[x.InstanceID]; x.Project != "" && (!ok || x.StartMS > l.StartMS) {
			latest[x.InstanceID] = x
		}
	}
	for _, x := range latest {
		if x.StartMS >= fromMS {
			if err := fn(&x); err != nil {
				return err
			}
		}
	}
	return nil
}

// NodesNow lists every node that sent a sample within the lookback, with
// its newest sample (exact where a held instance's latest sample is the
// newest, else its minute), silent by the data-quality rule; scoped, only
// the nodes of the project's (user's) instances held now or lately, with
// their count.
func TestNodesNow(t *testing.T) {
	now := time.Date(2026, 11, 18, 10, 0, 30, 0, time.UTC)
	at := func(ago time.Duration) int64 { return now.Add(-ago).UnixMilli() }
	s := func(node, inst, project, user string, ago time.Duration) schemas.Sample {
		return schemas.Sample{StartMS: at(ago), IntervalMS: 10_000, Node: node, InstanceID: inst, Project: project, User: user}
	}
	src := nodeSamples{
		s("n-busy", "MIG-a", "ai101", "s-alice", 20*time.Second),   // 10:00:10, held now
		s("n-busy", "GPU-free", "", "", 5*time.Second),             // 10:00:25, unheld, newest of the node
		s("n-quiet", "GPU-q", "", "", 3*time.Minute),               // unheld only: listed, not silent
		s("n-gone", "MIG-g", "nlp-lab", "s-carol", 11*time.Minute), // 09:49:30: its minute ends 09:50:00, 10:30 ago: silent
		s("n-edge", "MIG-e", "nlp-lab", "s-carol", 10*time.Minute), // 09:50:30: its minute ends 09:51:00, 9:30 ago: not silent
		s("n-old", "MIG-o", "ai101", "s-bob", 25*time.Hour),        // before the lookback: not listed
		s("n-later", "MIG-l", "ai101", "s-bob", -5*time.Minute),    // after now (now is in the store's past): not listed
		s("n-busy", "MIG-b", "ai101", "s-bob", 2*time.Hour),        // s-bob held on n-busy earlier
		s("n-quiet", "MIG-c", "nlp-lab", "s-carol", 23*time.Hour),  // s-carol held on n-quiet lately
	}
	held := []reads.Held{{InstanceID: "MIG-a", Node: "n-busy", Project: "ai101", User: "s-alice", LastSample: time.UnixMilli(at(20 * time.Second)).UTC()}}
	ctx := context.Background()
	minute := func(ago time.Duration) time.Time { return now.Add(-ago).Truncate(time.Minute) }

	all, err := reads.NodesNow(ctx, src, src, held, now, reads.NodeQuery{})
	require.NoError(t, err)
	require.Equal(t, []reads.NodeState{
		// The held instance's latest sample, exactly (the unheld one's
		// minute starts before it).
		{Node: "n-busy", LastSample: time.UnixMilli(at(20 * time.Second)).UTC(), Held: 1, Unpriced: 1},
		{Node: "n-edge", LastSample: minute(10 * time.Minute)},
		{Node: "n-gone", LastSample: minute(11 * time.Minute), Silent: true},
		{Node: "n-quiet", LastSample: minute(3 * time.Minute)},
	}, all)

	// An unheld sample in a later minute than the held one's: its minute.
	src[1].StartMS = at(-50 * time.Second)
	all, err = reads.NodesNow(ctx, src, src, held, now.Add(time.Minute), reads.NodeQuery{})
	require.NoError(t, err)
	require.Equal(t, minute(-50*time.Second), all[0].LastSample)
	src[1].StartMS = at(5 * time.Second)

	lead, err := reads.NodesNow(ctx, src, src, held, now, reads.NodeQuery{Project: "nlp-lab"})
	require.NoError(t, err)
	require.Equal(t, []reads.NodeState{
		{Node: "n-edge", LastSample: minute(10 * time.Minute)},
		{Node: "n-gone", LastSample: minute(11 * time.Minute), Silent: true},
		{Node: "n-quiet", LastSample: minute(3 * time.Minute)},
	}, lead)
	student, err := reads.NodesNow(ctx, src, src, held, now, reads.NodeQuery{Project: "ai101", User: "s-alice"})
	require.NoError(t, err)
	require.Equal(t, []reads.NodeState{{Node: "n-busy", LastSample: time.UnixMilli(at(20 * time.Second)).UTC(), Held: 1, Unpriced: 1}}, student)
	bob, err := reads.NodesNow(ctx, src, src, held, now, reads.NodeQuery{Project: "ai101", User: "s-bob"})
	require.NoError(t, err)
	require.Equal(t, []reads.NodeState{{Node: "n-busy", LastSample: time.UnixMilli(at(20 * time.Second)).UTC()}}, bob,
		"s-bob held on n-busy two hours ago; it holds nothing there now")

	// The rule is the data-quality check's: silent from SilentGap after the
	// end of the newest minute.
	m := minute(0)
	require.False(t, reads.SilentAt(m, m.Add(reads.NodeBucket+reads.SilentGap-time.Millisecond)))
	require.True(t, reads.SilentAt(m, m.Add(reads.NodeBucket+reads.SilentGap)))
}

// AddHeld counts a node's held instances: idle ones, the sum of the priced
// ones' cost so far, and the unpriced ones apart.
func TestNodeStateAddHeld(t *testing.T) {
	money := func(s string) *billing.Money { return &billing.Money{Decimal: decimal.RequireFromString(s)} }
	var n reads.NodeState
	for _, h := range []reads.Held{
		{InstanceID: "a", Idle: true, Cost: money("1.25")},
		{InstanceID: "b", Cost: money("0.50")},
		{InstanceID: "c", Idle: true},
	} {
		n.AddHeld(&h)
	}
	require.Equal(t, 3, n.Held)
	require.Equal(t, 2, n.Idle)
	require.Equal(t, 1, n.Unpriced)
	require.Equal(t, "1.75", n.Cost.String())
}
