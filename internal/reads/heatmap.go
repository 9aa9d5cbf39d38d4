package reads

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// The heat map's rows: at most DefaultHeatmapRows unless asked for more, at
// most MaxHeatmapRows (a chart of rows × hours cells, 31 days × 24 hours).
const (
	DefaultHeatmapRows = 100
	MaxHeatmapRows     = 500
)

// HeatmapQuery is what UtilHeatmap reads: the range, the most rows to
// return, and which nodes (every node with a sample in the range whose
// name starts with NodePrefix and lies between NodeFrom and NodeTo, both
// included, in node order; empty: no bound).
type HeatmapQuery struct {
	From, To         time.Time
	Rows             int // 0: DefaultHeatmapRows
	NodePrefix       string
	NodeFrom, NodeTo string
}

// HeatmapReport is the utilisation per local hour of [From, To) of the
// nodes asked for, a row per node, or, when there are more nodes than
// rows, a row per group of GroupSize consecutive nodes (node order: by
// name, runs of digits compared as numbers, so gpu-node-9 comes before
// gpu-node-10).
type HeatmapReport struct {
	From      time.Time    `json:"from"`
	To        time.Time    `json:"to"`
	Timezone  string       `json:"timezone"`
	NodeCount int          `json:"node_count" doc:"nodes with a sample in the range that match the query"`
	GroupSize int          `json:"group_size" doc:"nodes per row (the last row may have fewer); 1: a row per node; 0 when there is no node"`
	Hours     []string     `json:"hours" doc:"every local start hour of the range, RFC 3339 with offset, in order; each row's arrays have one entry per hour"`
	Rows      []HeatmapRow `json:"rows" doc:"in node order, at most the rows asked for"`
}

// HeatmapRow is one node, or a group of consecutive nodes, over the range.
// Every figure is a sum of the group's sample intervals; a utilisation is
// the group's util × interval sum over its measured time (not an average of
// its nodes' percentages).
type HeatmapRow struct {
	First string      `json:"first" doc:"the row's first node in node order"`
	Last  string      `json:"last" doc:"the row's last node (the first when the row is one node)"`
	Nodes int         `json:"nodes" doc:"nodes in the row"`
	Total HeatmapSums `json:"total" doc:"the row's sums over the whole range"`
	// Per hour, in the order of Hours.
	Util                  []string `json:"util" doc:"per hour: the average util of the row's measured samples as a percent with one decimal (\"37.5\"); \"\" when none measured it"`
	HeldUnmeasuredSeconds []int64  `json:"held_unmeasured_seconds" doc:"per hour: instance-seconds held whose util is unknown (null: MIG without DCGM, for one)"`
}

// HeatmapSums are a row's sums over the range.
type HeatmapSums struct {
	SeenSeconds           int64  `json:"seen_seconds" doc:"instance-seconds sampled, held or not"`
	HeldSeconds           int64  `json:"held_seconds" doc:"instance-seconds held"`
	MeasuredSeconds       int64  `json:"measured_seconds" doc:"instance-seconds of samples with a known util, held or not"`
	HeldUnmeasuredSeconds int64  `json:"held_unmeasured_seconds" doc:"instance-seconds held whose util is unknown (null)"`
	Util                  string `json:"util,omitempty" doc:"average util of the measured samples as a percent with one decimal; absent when none measured it"`
}

// heatSum is the store's sums of one node (or group) and hour, in ms.
type heatSum struct {
	seen, held, measured, heldUnmeasured int64
	util                                 float64
}

func (h *heatSum) add(o heatSum) {
	h.seen += o.seen
	h.held += o.held
	h.measured += o.measured
	h.heldUnmeasured += o.heldUnmeasured
	h.util += o.util
}

// utilText is util × ms ÷ measured ms as a percent with one decimal.
func (h *heatSum) utilText() string {
	if h.measured <= 0 {
		return ""
	}
	return strconv.FormatFloat(math.Round(h.util/float64(h.measured)*1000)/10, 'f', 1, 64)
}

// UtilHeatmap is the heat map of q: one read of the store's sums of every
// sample by node and UTC bucket (an hour, or a quarter hour in a zone with
// a fractional offset; every GPU model together), each bucket named by the
// local hour it starts in, then the nodes asked for summed into at most
// q.Rows rows.
func UtilHeatmap(ctx context.Context, src UtilRows, cat *schemas.Catalog, q HeatmapQuery) (*HeatmapReport, error) {
	if err := checkRange("heatmap", q.From, q.To, MaxHeatmapRange); err != nil {
		return nil, err
	}
	rows := q.Rows
	if rows == 0 {
		rows = DefaultHeatmapRows
	}
	if rows < 1 || rows > MaxHeatmapRows {
		return nil, fmt.Errorf("heatmap: rows must be between 1 and %d", MaxHeatmapRows)
	}
	loc := cat.Location
	if loc == nil {
		loc = time.UTC
	}
	rep := &HeatmapReport{From: q.From, To: q.To, Timezone: cat.Timezone, Hours: localHours(loc, q.From, q.To), Rows: []HeatmapRow{}}
	if g, ok := src.(UtilGroupRows); ok {
		return groupedHeatmap(ctx, g, src, loc, q, rows, rep)
	}
	byNode, err := nodeHours(ctx, src, loc, q, rep.Hours)
	if err != nil {
		return nil, err
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, CompareNodes)
	rep.NodeCount = len(nodes)
	if len(nodes) == 0 {
		return rep, nil
	}
	rep.GroupSize = (len(nodes) + rows - 1) / rows
	for i := 0; i < len(nodes); i += rep.GroupSize {
		group := nodes[i:min(i+rep.GroupSize, len(nodes))]
		rep.Rows = append(rep.Rows, heatRow(group, byNode, len(rep.Hours)))
	}
	return rep, nil
}

// UtilGroupRows is a UtilRows store that can also sum nodes into groups in
// the database (ingest/clickhouse): the rows of q by node, each node of
// groups summed into its group (UtilRow.Node: the group's name), the nodes
// not in groups left out. UtilHeatmap then reads rows × hours sums instead
// of nodes × hours.
type UtilGroupRows interface {
	UtilGroupRows(ctx context.Context, q schemas.UtilRowQuery, groups map[string]string, fn func(schemas.UtilRow) error) error
}

// groupedHeatmap is UtilHeatmap on a UtilGroupRows store: one read of the
// nodes in the range, grouped here, then one read of the groups' sums.
func groupedHeatmap(ctx context.Context, g UtilGroupRows, src UtilRows, loc *time.Location, q HeatmapQuery, rows int, rep *HeatmapReport) (*HeatmapReport, error) {
	var nodes []string
	err := src.UtilRows(ctx, schemas.UtilRowQuery{FromMS: q.From.UnixMilli(), ToMS: q.To.UnixMilli(), ByNode: true, AllModels: true}, func(r schemas.UtilRow) error {
		if q.wants(r.Node) {
			nodes = append(nodes, r.Node)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heatmap: %w", err)
	}
	slices.SortFunc(nodes, CompareNodes)
	nodes = slices.Compact(nodes)
	rep.NodeCount = len(nodes)
	if len(nodes) == 0 {
		return rep, nil
	}
	rep.GroupSize = (len(nodes) + rows - 1) / rows
	groups := make(map[string]string, len(nodes))
	for i, n := range nodes {
		groups[n] = nodes[i-i%rep.GroupSize]
	}
	hourAt := hourIndex(loc, rep.Hours)
	cells := map[string][]heatSum{}
	rq := schemas.UtilRowQuery{FromMS: q.From.UnixMilli(), ToMS: q.To.UnixMilli(), ByNode: true, AllModels: true, BucketMS: bucketFor(loc, q.From, q.To)}
	err = g.UtilGroupRows(ctx, rq, groups, func(r schemas.UtilRow) error {
		c, ok := cells[r.Node]
		if !ok {
			c = make([]heatSum, len(rep.Hours))
			cells[r.Node] = c
		}
		c[hourAt(r.BucketMS)].add(heatSum{r.SeenMS, r.HeldMS, r.MeasuredMS, r.HeldUnmeasuredMS, r.UtilMS})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heatmap: %w", err)
	}
	for i := 0; i < len(nodes); i += rep.GroupSize {
		group := nodes[i:min(i+rep.GroupSize, len(nodes))]
		if cells[group[0]] == nil {
			cells[group[0]] = make([]heatSum, len(rep.Hours))
		}
		row := heatRow(group[:1], cells, len(rep.Hours))
		row.Last, row.Nodes = group[len(group)-1], len(group)
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// hourIndex maps a UTC bucket's start to the index of its local hour in
// hours.
func hourIndex(loc *time.Location, hours []string) func(bucketMS int64) int {
	index := make(map[string]int, len(hours))
	for i, h := range hours {
		index[h] = i
	}
	at := map[int64]int{} // bucket → hour
	return func(b int64) int {
		h, ok := at[b]
		if !ok {
			h = index[hourOf(time.UnixMilli(b).In(loc))]
			at[b] = h
		}
		return h
	}
}

// nodeHours reads the store's sums per node and local hour (an index into
// hours) of the nodes q asks for.
func nodeHours(ctx context.Context, src UtilRows, loc *time.Location, q HeatmapQuery, hours []string) (map[string][]heatSum, error) {
	hourAt := hourIndex(loc, hours)
	byNode := map[string][]heatSum{}
	rq := schemas.UtilRowQuery{FromMS: q.From.UnixMilli(), ToMS: q.To.UnixMilli(), ByNode: true, AllModels: true, BucketMS: bucketFor(loc, q.From, q.To)}
	err := src.UtilRows(ctx, rq, func(r schemas.UtilRow) error {
		cells, ok := byNode[r.Node]
		if !ok {
			if !q.wants(r.Node) {
				byNode[r.Node] = nil
				return nil
			}
			cells = make([]heatSum, len(hours))
			byNode[r.Node] = cells
		}
		if cells == nil {
			return nil
		}
		cells[hourAt(r.BucketMS)].add(heatSum{r.SeenMS, r.HeldMS, r.MeasuredMS, r.HeldUnmeasuredMS, r.UtilMS})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heatmap: %w", err)
	}
	maps.DeleteFunc(byNode, func(_ string, c []heatSum) bool { return c == nil })
	return byNode, nil
}

// wants is whether node is one of the nodes q asks for.
func (q HeatmapQuery) wants(node string) bool {
	return strings.HasPrefix(node, q.NodePrefix) &&
		(q.NodeFrom == "" || CompareNodes(q.NodeFrom, node) <= 0) &&
		(q.NodeTo == "" || CompareNodes(node, q.NodeTo) <= 0)
}

// heatRow sums the group's nodes per hour and over the range.
func heatRow(group []string, byNode map[string][]heatSum, hours int) HeatmapRow {
	row := HeatmapRow{First: group[0], Last: group[len(group)-1], Nodes: len(group),
		Util: make([]string, hours), HeldUnmeasuredSeconds: make([]int64, hours)}
	var total heatSum
	for h := range hours {
		var cell heatSum
		for _, n := range group {
			cell.add(byNode[n][h])
		}
		total.add(cell)
		row.Util[h] = cell.utilText()
		row.HeldUnmeasuredSeconds[h] = cell.heldUnmeasured / 1000
	}
	row.Total = HeatmapSums{SeenSeconds: total.seen / 1000, HeldSeconds: total.held / 1000, MeasuredSeconds: total.measured / 1000,
		HeldUnmeasuredSeconds: total.heldUnmeasured / 1000, Util: total.utilText()}
	return row
}

// CompareNodes orders node names as people read them: runs of digits
// compare as numbers (gpu-node-9 before gpu-node-10), the rest byte by
// byte; names equal that way compare as strings (gpu-node-01 before
// gpu-node-1).
func CompareNodes(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			ea, eb := digitsEnd(a, i), digitsEnd(b, j)
			na, nb := strings.TrimLeft(a[i:ea], "0"), strings.TrimLeft(b[j:eb], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			i, j = ea, eb
			continue
		}
		if a[i] != b[j] {
			return cmp.Compare(a[i], b[j])
		}
		i, j = i+1, j+1
	}
	return cmp.Or(cmp.Compare(len(a)-i, len(b)-j), strings.Compare(a, b))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digitsEnd is the end of the run of digits of s that starts at i.
func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}
