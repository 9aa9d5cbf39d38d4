package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// RequireEfficiency checks reads.Occupancy and reads.UtilHeatmap on st, an
// empty store, against hand-computed answers: held and unheld samples,
// measured and unmeasured (util null), a replayed batch counted once, in
// America/New_York (EST on 2026-11-02).
func RequireEfficiency(t *testing.T, st ingest.Backend) {
	ctx := context.Background()
	cat := ReadsCatalog(t)
	const a100, h100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
	known := func(u float64) func(int) (float64, bool) { return func(int) (float64, bool) { return u, true } }
	unknown := func(int) (float64, bool) { return 0, false }
	// n1: alice holds mig-a for an hour at util 0.4; mig-b is free for two
	// hours at util 0. n2 (MIG without DCGM, util null): bob holds gpu-h for
	// an hour from 10:30Z; gpu-i is free for the half hour before.
	alice := minutes("mig-a", "n1", a100, "1g.10gb", "nlp-lab", "alice", utc("2026-11-02T10:00:00Z"), 60, known(0.4), 1)
	free := minutes("mig-b", "n1", a100, "1g.10gb", "", "", utc("2026-11-02T10:00:00Z"), 120, known(0), 0)
	bob := minutes("gpu-h", "n2", h100, "1g.10gb", "ai101", "bob", utc("2026-11-02T10:30:00Z"), 60, unknown, 1)
	idle := minutes("gpu-i", "n2", h100, "1g.10gb", "", "", utc("2026-11-02T10:00:00Z"), 30, unknown, 0)
	c := ingest.NewCompactor(0)
	for _, b := range [][]schemas.Sample{alice, free, bob, idle} {
		require.NoError(t, st.Write(ctx, c.Build(b)))
	}
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(alice[:30])), "a replay counts once")
	src, ok := st.(reads.UtilRows)
	require.True(t, ok, "every usage store sums every sample (reads.UtilRows)")

	occ, err := reads.Occupancy(ctx, src, cat, utc("2026-11-02T00:00:00Z"), utc("2026-11-03T00:00:00Z"))
	require.NoError(t, err)
	require.Equal(t, []reads.OccupancyRow{
		{GPUModel: a100, AvailableSeconds: 10800, HeldSeconds: 3600, Occupancy: "33.3"},
		{GPUModel: h100, AvailableSeconds: 5400, HeldSeconds: 3600, Occupancy: "66.7"},
	}, occ.Rows)
	require.Equal(t, reads.OccupancyRow{AvailableSeconds: 16200, HeldSeconds: 7200, Occupancy: "44.4"}, occ.Total)
	none, err := reads.Occupancy(ctx, src, cat, utc("2026-10-01T00:00:00Z"), utc("2026-10-02T00:00:00Z"))
	require.NoError(t, err)
	require.Equal(t, reads.OccupancyRow{}, none.Total)
	require.Empty(t, none.Rows)

	day := reads.HeatmapQuery{From: utc("2026-11-02T10:00:00Z"), To: utc("2026-11-02T12:00:00Z")}
	hm, err := reads.UtilHeatmap(ctx, src, cat, day)
	require.NoError(t, err)
	require.Equal(t, []string{"2026-11-02T05:00:00-05:00", "2026-11-02T06:00:00-05:00"}, hm.Hours)
	require.Equal(t, 2, hm.NodeCount)
	require.Equal(t, 1, hm.GroupSize)
	n1 := reads.HeatmapRow{First: "n1", Last: "n1", Nodes: 1,
		Total: reads.HeatmapSums{SeenSeconds: 10800, HeldSeconds: 3600, MeasuredSeconds: 10800, Util: "13.3"},
		Util:  []string{"20.0", "0.0"}, HeldUnmeasuredSeconds: []int64{0, 0}}
	n2 := reads.HeatmapRow{First: "n2", Last: "n2", Nodes: 1,
		Total: reads.HeatmapSums{SeenSeconds: 5400, HeldSeconds: 3600, HeldUnmeasuredSeconds: 3600},
		Util:  []string{"", ""}, HeldUnmeasuredSeconds: []int64{1800, 1800}}
	require.Equal(t, []reads.HeatmapRow{n1, n2}, hm.Rows)
	// One row: the two nodes' sums, the utilisation of their measured time
	// (n2 measured none), not an average of the nodes' percentages.
	day.Rows = 1
	hm, err = reads.UtilHeatmap(ctx, src, cat, day)
	require.NoError(t, err)
	require.Equal(t, 2, hm.GroupSize)
	require.Equal(t, []reads.HeatmapRow{{First: "n1", Last: "n2", Nodes: 2,
		Total: reads.HeatmapSums{SeenSeconds: 16200, HeldSeconds: 7200, MeasuredSeconds: 10800, HeldUnmeasuredSeconds: 3600, Util: "13.3"},
		Util:  []string{"20.0", "0.0"}, HeldUnmeasuredSeconds: []int64{1800, 1800}}}, hm.Rows)
	day.Rows, day.NodeFrom = 0, "n2"
	hm, err = reads.UtilHeatmap(ctx, src, cat, day)
	require.NoError(t, err)
	require.Equal(t, []reads.HeatmapRow{n2}, hm.Rows)
	day.NodeFrom, day.NodePrefix = "", "n3"
	hm, err = reads.UtilHeatmap(ctx, src, cat, day)
	require.NoError(t, err)
	require.Zero(t, hm.NodeCount)
	require.Empty(t, hm.Rows)
	_, err = reads.UtilHeatmap(ctx, src, cat, reads.HeatmapQuery{From: utc("2026-11-01T00:00:00Z"), To: utc("2026-12-03T00:00:00Z")})
	require.ErrorContains(t, err, "at most 31 days")
}
