package reads

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// UtilRows is a store that sums every sample, held or not, in the database
// (a GROUP BY): ingest.MemStore, ingest/sqlite, ingest/clickhouse.
type UtilRows interface {
	UtilRows(ctx context.Context, q schemas.UtilRowQuery, fn func(schemas.UtilRow) error) error
}

// Longest ranges of the efficiency reads: the occupancy of a quarter, the
// heat map of a month (31 days × 24 hours per node).
const (
	MaxOccupancyRange = 93 * 24 * time.Hour
	MaxHeatmapRange   = 31 * 24 * time.Hour
)

// OccupancyReport is the cluster's occupancy per GPU model over [From, To):
// of the instance-hours the collector saw (every instance it samples, held
// or not: the instances that exist), the part that was held.
type OccupancyReport struct {
	From     time.Time      `json:"from"`
	To       time.Time      `json:"to"`
	Timezone string         `json:"timezone"`
	Rows     []OccupancyRow `json:"rows"`  // by GPU model
	Total    OccupancyRow   `json:"total"` // every model (gpu_model empty)
}

// OccupancyRow is the occupancy of one GPU model (a MIG slice or a share
// counts as one instance, like a whole card).
type OccupancyRow struct {
	GPUModel string `json:"gpu_model,omitempty"`
	// AvailableSeconds: instance-seconds sampled (held or not);
	// HeldSeconds: the held part; Occupancy: held ÷ available as a percent
	// with one decimal (Percent), absent when nothing was sampled.
	AvailableSeconds int64  `json:"available_seconds" doc:"instance-seconds the collector sampled, held or not"`
	HeldSeconds      int64  `json:"held_seconds" doc:"instance-seconds of held samples"`
	Occupancy        string `json:"occupancy,omitempty" doc:"held_seconds ÷ available_seconds as a percent with one decimal, rounded half up (\"62.5\"); absent when nothing was sampled"`
}

// checkRange checks [from, to) against the longest range max.
func checkRange(what string, from, to time.Time, max time.Duration) error {
	if from.IsZero() || to.IsZero() || !from.Before(to) {
		return fmt.Errorf("%s: from must be before to", what)
	}
	if to.Sub(from) > max {
		return fmt.Errorf("%s: the range may span at most %d days", what, int(max/(24*time.Hour)))
	}
	return nil
}

// Occupancy is the occupancy per GPU model of [from, to) from the store's
// sums of every sample that starts in it (one GROUP BY by model).
func Occupancy(ctx context.Context, src UtilRows, cat *schemas.Catalog, from, to time.Time) (*OccupancyReport, error) {
	if err := checkRange("occupancy", from, to, MaxOccupancyRange); err != nil {
		return nil, err
	}
	by := map[string]*OccupancyRow{}
	rep := &OccupancyReport{From: from, To: to, Timezone: cat.Timezone, Rows: []OccupancyRow{}}
	err := src.UtilRows(ctx, schemas.UtilRowQuery{FromMS: from.UnixMilli(), ToMS: to.UnixMilli()}, func(r schemas.UtilRow) error {
		o := by[r.GPUModel]
		if o == nil {
			o = &OccupancyRow{GPUModel: r.GPUModel}
			by[r.GPUModel] = o
		}
		o.AvailableSeconds += r.SeenMS
		o.HeldSeconds += r.HeldMS
		rep.Total.AvailableSeconds += r.SeenMS
		rep.Total.HeldSeconds += r.HeldMS
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("occupancy: %w", err)
	}
	for _, o := range by {
		o.AvailableSeconds, o.HeldSeconds = o.AvailableSeconds/1000, o.HeldSeconds/1000
		o.Occupancy = Percent(o.HeldSeconds, o.AvailableSeconds)
		rep.Rows = append(rep.Rows, *o)
	}
	rep.Total.AvailableSeconds, rep.Total.HeldSeconds = rep.Total.AvailableSeconds/1000, rep.Total.HeldSeconds/1000
	rep.Total.Occupancy = Percent(rep.Total.HeldSeconds, rep.Total.AvailableSeconds)
	slices.SortFunc(rep.Rows, func(a, b OccupancyRow) int { return cmp.Compare(a.GPUModel, b.GPUModel) })
	return rep, nil
}

// HeatmapReport is the utilisation of each node per local hour of
// [From, To): the cells of a heat map of nodes × hours.
type HeatmapReport struct {
	From     time.Time     `json:"from"`
	To       time.Time     `json:"to"`
	Timezone string        `json:"timezone"`
	Nodes    []string      `json:"nodes" doc:"every node with a sample in the range, sorted"`
	Hours    []string      `json:"hours" doc:"every local start hour of the range, RFC 3339 with offset, in order"`
	Cells    []HeatmapCell `json:"cells" doc:"the node-hours with samples, by node then hour"`
}

// HeatmapCell is one node's hour. Util is the average utilisation of the
// samples that measured it (weighted by their intervals, held or not), as a
// percent with one decimal, absent when none did; a cell with held time and
// no util is held but not measured (MIG without DCGM, for one).
type HeatmapCell struct {
	Node                  string `json:"node"`
	Hour                  string `json:"hour" doc:"local start hour, RFC 3339 with offset"`
	SeenSeconds           int64  `json:"seen_seconds" doc:"instance-seconds sampled, held or not"`
	HeldSeconds           int64  `json:"held_seconds" doc:"instance-seconds held"`
	MeasuredSeconds       int64  `json:"measured_seconds" doc:"instance-seconds of samples with a known util, held or not"`
	HeldUnmeasuredSeconds int64  `json:"held_unmeasured_seconds" doc:"instance-seconds held whose util is unknown (null)"`
	Util                  string `json:"util,omitempty" doc:"average util of the measured samples as a percent with one decimal (\"37.5\"); absent when none measured it"`
}

type heatSum struct {
	row     schemas.UtilRow
	utilSum float64
}

// UtilHeatmap is the heat map of [from, to): the store's sums of every
// sample by node and UTC bucket (an hour, or a quarter hour in a zone with
// a fractional offset), each bucket named by the local hour it starts in.
func UtilHeatmap(ctx context.Context, src UtilRows, cat *schemas.Catalog, from, to time.Time) (*HeatmapReport, error) {
	if err := checkRange("heatmap", from, to, MaxHeatmapRange); err != nil {
		return nil, err
	}
	loc := cat.Location
	if loc == nil {
		loc = time.UTC
	}
	rep := &HeatmapReport{From: from, To: to, Timezone: cat.Timezone, Nodes: []string{}, Hours: localHours(loc, from, to), Cells: []HeatmapCell{}}
	type key struct{ node, hour string }
	cells := map[key]*heatSum{}
	names := map[int64]string{}
	q := schemas.UtilRowQuery{FromMS: from.UnixMilli(), ToMS: to.UnixMilli(), ByNode: true, BucketMS: bucketFor(loc, from, to)}
	err := src.UtilRows(ctx, q, func(r schemas.UtilRow) error {
		h, ok := names[r.BucketMS]
		if !ok {
			h = hourOf(time.UnixMilli(r.BucketMS).In(loc))
			names[r.BucketMS] = h
		}
		k := key{r.Node, h}
		c := cells[k]
		if c == nil {
			c = &heatSum{row: schemas.UtilRow{Node: r.Node}}
			cells[k] = c
		}
		c.row.SeenMS += r.SeenMS
		c.row.HeldMS += r.HeldMS
		c.row.MeasuredMS += r.MeasuredMS
		c.row.HeldUnmeasuredMS += r.HeldUnmeasuredMS
		c.utilSum += r.UtilMS
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heatmap: %w", err)
	}
	nodes := map[string]bool{}
	for k, c := range cells {
		nodes[k.node] = true
		cell := HeatmapCell{Node: k.node, Hour: k.hour, SeenSeconds: c.row.SeenMS / 1000, HeldSeconds: c.row.HeldMS / 1000,
			MeasuredSeconds: c.row.MeasuredMS / 1000, HeldUnmeasuredSeconds: c.row.HeldUnmeasuredMS / 1000}
		if c.row.MeasuredMS > 0 {
			cell.Util = strconv.FormatFloat(math.Round(c.utilSum/float64(c.row.MeasuredMS)*1000)/10, 'f', 1, 64)
		}
		rep.Cells = append(rep.Cells, cell)
	}
	for n := range nodes {
		rep.Nodes = append(rep.Nodes, n)
	}
	slices.Sort(rep.Nodes)
	slices.SortFunc(rep.Cells, func(a, b HeatmapCell) int { return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Hour, b.Hour)) })
	return rep, nil
}

// hourOf is the local start hour of t, RFC 3339 with its offset.
func hourOf(t time.Time) string {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, t.Location()).Format(time.RFC3339)
}

// localHours are the local start hours of [from, to) in loc, in order.
func localHours(loc *time.Location, from, to time.Time) []string {
	var out []string
	for t := from.Truncate(15 * time.Minute); t.Before(to); t = t.Add(15 * time.Minute) {
		h := hourOf(t.In(loc))
		if len(out) == 0 || out[len(out)-1] != h {
			out = append(out, h)
		}
	}
	return out
}
