package api

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/reads"
)

// What is held now (GET /api/v1/held) and how fresh each node is
// (GET /api/v1/nodes): both can be paged, and both carry the totals of
// everything that matches, so that a fleet of tens of thousands of
// instances is summed up on the server and shown a page at a time.

// maxNowPage is the largest page of /api/v1/held and /api/v1/nodes.
const maxNowPage = 10000

type heldInput struct {
	Project string `query:"project"`
	User    string `query:"user"`
	Node    string `query:"node" doc:"only the instances on this node"`
	State   string `query:"state" enum:"idle,busy" doc:"only the idle ones, or only the busy ones"`
	Cursor  string `query:"cursor" doc:"next_cursor of the previous page: opaque, made by this server; any other string is 400 (problem type bad-cursor)"`
	Limit   int    `query:"limit" minimum:"0" maximum:"10000" doc:"page size; 0: every instance that matches, in one page"`
}

// HeldPage is a page of what is held now, in a stable order (node, then
// instance), with the totals of everything that matches the filters.
type HeldPage struct {
	Items      []reads.Held `json:"items"`
	NextCursor string       `json:"next_cursor" doc:"opaque; pass as cursor for the next page, empty on the last"`
	Total      int          `json:"total" doc:"instances that match the filters (on every page)"`
	Idle       int          `json:"idle" doc:"of them, idle now"`
	Nodes      int          `json:"nodes" doc:"the nodes they are held on"`
	// Cost is the sum of the matching items' cost so far; Unpriced counts
	// those without one.
	Cost     *billing.Money `json:"cost,omitempty" doc:"the list price so far of the matching instances that a SKU prices; absent when none is priced"`
	Unpriced int            `json:"unpriced" doc:"matching instances that no SKU prices (not in cost)"`
}

func (s *Server) getHeldNow(ctx context.Context, in *heldInput) (*body[HeldPage], error) {
	off, u, project, user, err := s.nowRead(ctx, in.Cursor, in.Project, in.User)
	if err != nil {
		return nil, err
	}
	held, err := u.HeldNow(ctx)
	if err != nil {
		return nil, err
	}
	match := []reads.Held{}
	var sum reads.NodeState
	nodes := map[string]bool{}
	for i := range held {
		h := &held[i]
		if (project != "" && h.Project != project) || (user != "" && h.User != user) || (in.Node != "" && h.Node != in.Node) ||
			(in.State == "idle" && !h.Idle) || (in.State == "busy" && h.Idle) {
			continue
		}
		match = append(match, *h)
		sum.AddHeld(h)
		nodes[h.Node] = true
	}
	// HeldNow's order is node, then instance; a page relies on it.
	slices.SortStableFunc(match, func(a, b reads.Held) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.InstanceID, b.InstanceID))
	})
	out := HeldPage{Total: sum.Held, Idle: sum.Idle, Nodes: len(nodes), Cost: sum.Cost, Unpriced: sum.Unpriced}
	out.Items, out.NextCursor = pageOf(match, off, in.Limit)
	return &body[HeldPage]{out}, nil
}

// nowRead is what both reads of now begin with: the page's offset (from
// cursor), the usage reads, and the project and user the token may read.
func (s *Server) nowRead(ctx context.Context, cursor, project, user string) (int, Usage, string, string, error) {
	off, err := decodeOffset(ctx, cursor)
	if err != nil {
		return 0, nil, "", "", err
	}
	u, err := s.usage()
	if err != nil {
		return 0, nil, "", "", err
	}
	project, user, err = subjectScope(ctx, project, user)
	return off, u, project, user, err
}

// pageOf is the page of items from off, at most limit of them (0: all),
// and the cursor of the next page ("" on the last).
func pageOf[T any](items []T, off, limit int) ([]T, string) {
	off = min(off, len(items))
	items = items[off:]
	if limit > 0 && len(items) > limit {
		return items[:limit], offsetCursor(off + limit)
	}
	return items, ""
}

// NodesBody is how fresh each node's data is.
type NodesBody struct {
	CheckedAt    time.Time         `json:"checked_at" doc:"the server's clock of the read (silent is decided at it)"`
	RefreshS     int64             `json:"refresh_s" doc:"seconds between reads worth making: the interval cardhour serve runs its watcher at (watch.interval, else --watch-every); the dashboard's Now page polls at it"`
	SilentAfterS int64             `json:"silent_after_s" doc:"a node is silent when its newest sample is this old (from the end of its minute): the data-quality check's threshold"`
	LookbackS    int64             `json:"lookback_s" doc:"a node whose newest sample is older is not listed"`
	Items        []reads.NodeState `json:"items"`
	NextCursor   string            `json:"next_cursor" doc:"opaque; pass as cursor for the next page, empty on the last"`
	Total        int               `json:"total" doc:"nodes listed (on every page)"`
	Silent       int               `json:"silent" doc:"of them, silent"`
	Held         int               `json:"held" doc:"instances held on them now (the sum of held)"`
	Idle         int               `json:"idle" doc:"of those, idle now (the sum of idle)"`
}

type nodesInput struct {
	Project string `query:"project" doc:"only the nodes of this project's instances (a lead or student token: its own project)"`
	User    string `query:"user" doc:"only the nodes of this user's instances (a student token: its own)"`
	Order   string `query:"order" enum:"node,silent" default:"node" doc:"node: by node name; silent: the silent nodes first, then by node name"`
	Cursor  string `query:"cursor" doc:"next_cursor of the previous page: opaque, made by this server; any other string is 400 (problem type bad-cursor)"`
	Limit   int    `query:"limit" minimum:"0" maximum:"10000" doc:"page size; 0: every node, in one page"`
}

func (s *Server) listNodes(ctx context.Context, in *nodesInput) (*body[NodesBody], error) {
	off, u, project, user, err := s.nowRead(ctx, in.Cursor, in.Project, in.User)
	if err != nil {
		return nil, err
	}
	rep, err := u.Nodes(ctx, reads.NodeQuery{Project: project, User: user})
	if err != nil {
		return nil, err
	}
	out := NodesBody{CheckedAt: rep.At.UTC(), RefreshS: int64(max(cmp.Or(s.cfg.RefreshInterval, DefaultRefreshInterval)/time.Second, 1)),
		SilentAfterS: int64(reads.SilentGap / time.Second), LookbackS: int64(reads.NodeLookback / time.Second), Total: len(rep.Nodes)}
	nodes := slices.Clone(rep.Nodes)
	for _, n := range nodes {
		out.Held += n.Held
		out.Idle += n.Idle
		if n.Silent {
			out.Silent++
		}
	}
	slices.SortStableFunc(nodes, func(a, b reads.NodeState) int {
		if in.Order == "silent" && a.Silent != b.Silent {
			if a.Silent {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Node, b.Node)
	})
	out.Items, out.NextCursor = pageOf(nodes, off, in.Limit)
	if out.Items == nil {
		out.Items = []reads.NodeState{}
	}
	return &body[NodesBody]{out}, nil
}
