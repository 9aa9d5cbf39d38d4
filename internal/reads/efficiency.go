package reads

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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
