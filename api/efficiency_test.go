package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/reads"
)

// The fake's efficiency reports: fixed numbers over the range asked.
func (f *fakeUsage) Occupancy(_ context.Context, from, to time.Time) (*reads.OccupancyReport, error) {
	return &reads.OccupancyReport{From: from, To: to, Timezone: "Asia/Shanghai",
		Rows:  []reads.OccupancyRow{{GPUModel: "A100", AvailableSeconds: 7200, HeldSeconds: 3600, Occupancy: reads.Percent(3600, 7200)}},
		Total: reads.OccupancyRow{AvailableSeconds: 7200, HeldSeconds: 3600, Occupancy: reads.Percent(3600, 7200)}}, nil
}

func (f *fakeUsage) UtilHeatmap(_ context.Context, from, to time.Time) (*reads.HeatmapReport, error) {
	return &reads.HeatmapReport{From: from, To: to, Timezone: "Asia/Shanghai", Nodes: []string{"gpu-node-01"}, Hours: []string{"2026-11-03T10:00:00+08:00"},
		Cells: []reads.HeatmapCell{{Node: "gpu-node-01", Hour: "2026-11-03T10:00:00+08:00", SeenSeconds: 3600, HeldSeconds: 3600, MeasuredSeconds: 3600, Util: "42.0"}}}, nil
}

// Occupancy and the heat map: a period is the catalog's local month, a
// range longer than each route's bound is 422, the report is served as
// the reads compute it.
func TestEfficiencyRoutes(t *testing.T) {
	f := newFixture(t)
	r := f.do("finance", "GET", "/api/v1/occupancy?period=2026-11", "", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	var occ reads.OccupancyReport
	require.NoError(t, json.Unmarshal(r.Body, &occ))
	require.Equal(t, "2026-10-31T16:00:00Z", occ.From.UTC().Format(time.RFC3339), "November in Shanghai")
	require.Equal(t, "2026-11-30T16:00:00Z", occ.To.UTC().Format(time.RFC3339))
	require.Equal(t, []reads.OccupancyRow{{GPUModel: "A100", AvailableSeconds: 7200, HeldSeconds: 3600, Occupancy: "50.0"}}, occ.Rows)
	require.JSONEq(t, `{"available_seconds":7200,"held_seconds":3600,"occupancy":"50.0"}`, string(mustJSON(t, occ.Total)))

	r = f.do("admin", "GET", "/api/v1/utilization/heatmap?from=2026-11-03T00:00:00Z&to=2026-11-04T00:00:00Z", "", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	var hm reads.HeatmapReport
	require.NoError(t, json.Unmarshal(r.Body, &hm))
	require.Equal(t, "42.0", hm.Cells[0].Util)

	r = f.do("admin", "GET", "/api/v1/utilization/heatmap?from=2026-10-01T00:00:00Z&to=2026-11-02T00:00:00Z", "", "")
	require.Equal(t, 422, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), "at most 31 days")
	r = f.do("finance", "GET", "/api/v1/occupancy?from=2026-01-01T00:00:00Z&to=2026-11-01T00:00:00Z", "", "")
	require.Equal(t, 422, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), "at most 93 days")
	for _, role := range []string{"lead", "student"} {
		require.Equal(t, 403, f.do(role, "GET", "/api/v1/occupancy?period=2026-11", "", "").Status, role)
		require.Equal(t, 403, f.do(role, "GET", "/api/v1/utilization/heatmap?period=2026-11", "", "").Status, role)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
