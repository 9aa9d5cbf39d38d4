package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// The fake's efficiency reports: fixed numbers over the range asked.
func (f *fakeUsage) Occupancy(_ context.Context, from, to time.Time) (*reads.OccupancyReport, error) {
	return &reads.OccupancyReport{From: from, To: to, Timezone: "Asia/Shanghai",
		Rows:  []reads.OccupancyRow{{GPUModel: "A100", AvailableSeconds: 7200, HeldSeconds: 3600, Occupancy: reads.Percent(3600, 7200)}},
		Total: reads.OccupancyRow{AvailableSeconds: 7200, HeldSeconds: 3600, Occupancy: reads.Percent(3600, 7200)}}, nil
}

// heatRows answers the heat map's store query: three nodes, each seen
// for 3 600 s per hour on 2026-11-03 (UTC) and held for half of it, at a
// known util of 0.1 × its number.
type heatRows struct{}

func (heatRows) UtilRows(_ context.Context, q schemas.UtilRowQuery, fn func(schemas.UtilRow) error) error {
	for h := q.FromMS - q.FromMS%3_600_000; h < q.ToMS; h += 3_600_000 {
		for n := 1; n <= 3; n++ {
			if err := fn(schemas.UtilRow{Node: fmt.Sprintf("gpu-node-%d", n), BucketMS: h, SeenMS: 3_600_000, HeldMS: 1_800_000,
				MeasuredMS: 3_600_000, UtilMS: 0.1 * float64(n) * 3_600_000}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *fakeUsage) UtilHeatmap(ctx context.Context, q reads.HeatmapQuery) (*reads.HeatmapReport, error) {
	return reads.UtilHeatmap(ctx, heatRows{}, &schemas.Catalog{Timezone: "Asia/Shanghai", Location: time.FixedZone("CST", 8*3600)}, q)
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
	require.Equal(t, [3]int{3, 1, 3}, [3]int{hm.NodeCount, hm.GroupSize, len(hm.Rows)}, "three nodes, a row each")
	require.Len(t, hm.Hours, 24)
	require.Equal(t, "2026-11-03T08:00:00+08:00", hm.Hours[0])
	require.Equal(t, "30.0", hm.Rows[2].Util[0])
	require.Equal(t, int64(0), hm.Rows[2].HeldUnmeasuredSeconds[0])
	r = f.do("admin", "GET", "/api/v1/utilization/heatmap?from=2026-11-03T00:00:00Z&to=2026-11-04T00:00:00Z&rows=2", "", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.NoError(t, json.Unmarshal(r.Body, &hm))
	require.Equal(t, [2]int{2, 2}, [2]int{hm.GroupSize, len(hm.Rows)}, "three nodes in two rows")
	require.Equal(t, [3]any{"gpu-node-1", "gpu-node-2", 2}, [3]any{hm.Rows[0].First, hm.Rows[0].Last, hm.Rows[0].Nodes})
	require.Equal(t, "15.0", hm.Rows[0].Util[0], "(0.1 + 0.2) × 3 600 s over 7 200 s measured")
	require.Equal(t, reads.HeatmapSums{SeenSeconds: 2 * 24 * 3600, HeldSeconds: 24 * 3600, MeasuredSeconds: 2 * 24 * 3600, Util: "15.0"}, hm.Rows[0].Total)
	r = f.do("admin", "GET", "/api/v1/utilization/heatmap?from=2026-11-03T00:00:00Z&to=2026-11-04T00:00:00Z&rows=2&node_from=gpu-node-1&node_to=gpu-node-2", "", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.NoError(t, json.Unmarshal(r.Body, &hm))
	require.Equal(t, [3]int{2, 1, 2}, [3]int{hm.NodeCount, hm.GroupSize, len(hm.Rows)}, "the first row drilled into")
	r = f.do("admin", "GET", "/api/v1/utilization/heatmap?from=2026-11-03T00:00:00Z&to=2026-11-04T00:00:00Z&node_prefix=gpu-node-3", "", "")
	require.NoError(t, json.Unmarshal(r.Body, &hm))
	require.Equal(t, "gpu-node-3", hm.Rows[0].First)
	require.Equal(t, 1, hm.NodeCount)
	for q, where := range map[string]string{"rows=501": "query.rows", "node_from=gpu-node-3&node_to=gpu-node-2": "query.node_to"} {
		r = f.do("admin", "GET", "/api/v1/utilization/heatmap?period=2026-11&"+q, "", "")
		require.Equal(t, 422, r.Status, string(r.Body))
		require.Contains(t, string(r.Body), where)
	}

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
