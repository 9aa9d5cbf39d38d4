package reads

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// NodeLookback is how far back NodesNow looks for nodes: a node whose newest
// sample is older is not listed. A node that stopped reporting stays on the
// list, silent, for this long.
const NodeLookback = 24 * time.Hour

// NodeBucketRows is a store that tells in which buckets each node sent
// samples (QualityRows' NodeBuckets, from the node activity rollup).
type NodeBucketRows interface {
	NodeBuckets(ctx context.Context, fromMS, toMS, bucketMS int64, fn func(schemas.NodeBucketRow) error) error
}

// NodeLatestRows is a store that tells each node's newest activity directly,
// without handing every minute over. Implemented by ingest.MemStore,
// ingest/sqlite and ingest/clickhouse; NodeLatest folds NodeBuckets for a
// store that does not.
type NodeLatestRows interface {
	// NodeLatest calls fn once for each node with a sample starting in
	// [fromMS, toMS), with BucketMS the start of the UTC minute
	// (NodeBucket) in which its newest such sample starts, in any order.
	NodeLatest(ctx context.Context, fromMS, toMS int64, fn func(schemas.NodeBucketRow) error) error
}

// NodeLatest returns, per node with a sample starting in [fromMS, toMS),
// the start of the UTC minute of its newest one: from the store's
// NodeLatestRows when it has them, else the greatest of its NodeBuckets.
func NodeLatest(ctx context.Context, src NodeBucketRows, fromMS, toMS int64) (map[string]int64, error) {
	out := map[string]int64{}
	fold := func(r schemas.NodeBucketRow) error {
		if b, ok := out[r.Node]; !ok || r.BucketMS > b {
			out[r.Node] = r.BucketMS
		}
		return nil
	}
	var err error
	if nl, ok := src.(NodeLatestRows); ok {
		err = nl.NodeLatest(ctx, fromMS, toMS, fold)
	} else {
		err = src.NodeBuckets(ctx, fromMS, toMS, NodeBucket.Milliseconds(), fold)
	}
	if err != nil {
		return nil, fmt.Errorf("nodes: node activity: %w", err)
	}
	return out, nil
}

// SilentAt reports whether a node whose newest sample starts in the minute
// at bucket is silent at now: the data-quality check's rule (SilentGap or
// more from the end of that minute, as CheckDataQuality reports a node still
// silent at the end of its check).
func SilentAt(bucket time.Time, now time.Time) bool {
	return now.Sub(bucket.Add(NodeBucket)) >= SilentGap
}

// NodeQuery is whose nodes NodesNow lists: empty, every node that sent a
// sample within NodeLookback; with Project (and User), only the nodes where
// that project (that user of it) holds an instance now or held one whose
// latest held sample is within the lookback, and Held counts only its
// instances. The API sets it from the token's scope.
type NodeQuery struct {
	Project string
	User    string
}

func (q NodeQuery) scoped() bool { return q.Project != "" || q.User != "" }

func (q NodeQuery) matches(project, user string) bool {
	return (q.Project == "" || project == q.Project) && (q.User == "" || user == q.User)
}

// NodeState is how fresh one node's data is.
type NodeState struct {
	Node string `json:"node"`
	// LastSample is the newest known start of a sample on the node (of any
	// holder, or of none): a held instance's latest sample exactly, any
	// other sample by the start of the UTC minute it starts in (the node
	// activity rollup keeps minutes), so at most a minute early.
	LastSample time.Time `json:"last_sample" doc:"the newest known start of a sample on the node (any holder or none): a held instance's latest sample exactly, others by the start of their UTC minute (at most a minute early)"`
	// Silent: no sample for SilentGap or more (SilentAt), the data-quality
	// check's silent-node rule.
	Silent bool `json:"silent" doc:"the node's newest sample is silent_after_s or more old (from the end of its minute): the data-quality check's silent-node rule"`
	// Held is how many instances are held on the node now (of the query's
	// project or user only, when it names one).
	Held int `json:"held" doc:"instances held on the node now; for a lead or a student, only their project's or their own"`
	// Idle is how many of them are idle now (Held.Idle).
	Idle int `json:"idle" doc:"of the held instances, how many are idle now (their latest sample under the project's idle threshold)"`
	// Cost is the list price so far of the priced ones (the sum of their
	// Held.Cost); nil when none is priced. Unpriced counts the others.
	Cost     *billing.Money `json:"cost,omitempty" doc:"the list price so far of the held instances that a SKU prices (the sum of /api/v1/held's cost); absent when none is priced"`
	Unpriced int            `json:"unpriced" doc:"held instances on the node that no SKU prices (not in cost)"`
}

// AddHeld counts one held instance on the node: held, idle, its cost so
// far (PriceHeld's) or unpriced.
func (n *NodeState) AddHeld(h *Held) {
	n.Held++
	if h.Idle {
		n.Idle++
	}
	if h.Cost == nil {
		n.Unpriced++
		return
	}
	if n.Cost == nil {
		n.Cost = &billing.Money{}
	}
	n.Cost.Decimal = n.Cost.Add(h.Cost.Decimal)
}

// NodesNow returns how fresh each node's data is at now (see NodeQuery for
// which nodes), sorted by node: the newest sample of each node from the node
// activity rollup over NodeLookback, refined by the held instances' latest
// samples (held: HeldNow at now), and whether it is silent. A scoped query
// reads the latest held sample of each instance (LatestRows) to find the
// nodes its project or user held instances on lately.
func NodesNow(ctx context.Context, src NodeBucketRows, latest LatestRows, held []Held, now time.Time, q NodeQuery) ([]NodeState, error) {
	newest, err := NodesNewest(ctx, src, now)
	if err != nil {
		return nil, err
	}
	return NodesFrom(ctx, newest, latest, held, now, q)
}

// NodesNewest is the node activity NodesNow reads at now: NodeLatest over
// NodeLookback up to now.
func NodesNewest(ctx context.Context, src NodeBucketRows, now time.Time) (map[string]int64, error) {
	return NodeLatest(ctx, src, now.Add(-NodeLookback).UnixMilli(), now.UnixMilli()+1)
}

// NodesFrom is NodesNow with the node activity read already (newest,
// NodesNewest's): a caller reads it while what is held is read. A minute
// that starts after now (read at a later clock) is taken as now's.
func NodesFrom(ctx context.Context, newest map[string]int64, latest LatestRows, held []Held, now time.Time, q NodeQuery) ([]NodeState, error) {
	nowMS := now.UnixMilli()
	fromMS := now.Add(-NodeLookback).UnixMilli()
	nodes := map[string]*NodeState{}
	add := func(node string) *NodeState {
		if nodes[node] == nil {
			nodes[node] = &NodeState{Node: node}
		}
		return nodes[node]
	}
	switch {
	case !q.scoped():
		for node := range newest {
			add(node)
		}
	case latest != nil:
		err := latest.LatestSamples(ctx, fromMS, func(s *schemas.Sample) error {
			if s.StartMS <= nowMS && q.matches(s.Project, s.User) {
				add(s.Node)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("nodes: latest samples: %w", err)
		}
	}
	// The held instances' latest samples: exact times (of any holder),
	// and the query's count.
	exact := map[string]time.Time{}
	for i := range held {
		h := &held[i]
		if !h.LastSample.After(now) && h.LastSample.After(exact[h.Node]) {
			exact[h.Node] = h.LastSample
		}
		if q.matches(h.Project, h.User) {
			add(h.Node).AddHeld(h)
		}
	}
	out := make([]NodeState, 0, len(nodes))
	for _, n := range nodes {
		minute, ok := newest[n.Node]
		if !ok { // no rollup row: a held instance's sample only
			minute = exact[n.Node].UnixMilli() - exact[n.Node].UnixMilli()%NodeBucket.Milliseconds()
		}
		bucket := time.UnixMilli(min(minute, nowMS-nowMS%NodeBucket.Milliseconds())).UTC()
		n.LastSample = bucket
		if e := exact[n.Node]; e.After(bucket) || e.Equal(bucket) {
			n.LastSample = e
		}
		n.Silent = SilentAt(bucket, now)
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b NodeState) int { return cmp.Compare(a.Node, b.Node) })
	return out, nil
}

// NodeReport is NodesNow's answer with the time it was read at.
type NodeReport struct {
	At    time.Time
	Nodes []NodeState
}
