package reads_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// utilRows is a store's answer to the heat map's query, as given.
type utilRows []schemas.UtilRow

func (u utilRows) UtilRows(_ context.Context, q schemas.UtilRowQuery, fn func(schemas.UtilRow) error) error {
	if !q.ByNode || !q.AllModels || q.BucketMS != 3_600_000 {
		return fmt.Errorf("unexpected query %+v", q)
	}
	for _, r := range u {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func TestCompareNodes(t *testing.T) {
	want := []string{"a", "a1", "gpu-node-01", "gpu-node-1", "gpu-node-2", "gpu-node-9", "gpu-node-10", "gpu-node-10a", "gpu-node-100", "gpu-node-1000", "gpu-nodf", "rack2-n3", "rack10-n1"}
	got := slices.Clone(want)
	rand.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	slices.SortFunc(got, reads.CompareNodes)
	require.Equal(t, want, got)
	require.Zero(t, reads.CompareNodes("n07", "n07"))
}

// 23 nodes in 5 rows are groups of 5 in node order (the last of 3); each
// row's figures are its nodes' sums, its utilisation their util sum over
// their measured time, to the hour and over the range.
func TestUtilHeatmapGroups(t *testing.T) {
	cat := &schemas.Catalog{Timezone: "UTC", Location: time.UTC}
	from := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	var rows utilRows
	for n := range 23 {
		for h := range 3 {
			// node n, hour h: n+1 instances seen for the hour, n held, a
			// known util of (n mod 4)/4 on all but one instance of odd nodes.
			seen := int64(n+1) * 3_600_000
			measured := seen
			if n%2 == 1 {
				measured -= 3_600_000
			}
			rows = append(rows, schemas.UtilRow{Node: "gpu-node-" + strconv.Itoa(n), BucketMS: from.Add(time.Duration(h) * time.Hour).UnixMilli(),
				SeenMS: seen, HeldMS: int64(n) * 3_600_000, MeasuredMS: measured, HeldUnmeasuredMS: seen - measured, UtilMS: float64(n%4) / 4 * float64(measured)})
		}
	}
	rand.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	hm, err := reads.UtilHeatmap(context.Background(), rows, cat, reads.HeatmapQuery{From: from, To: from.Add(3 * time.Hour), Rows: 5})
	require.NoError(t, err)
	require.Equal(t, 23, hm.NodeCount)
	require.Equal(t, 5, hm.GroupSize)
	require.Len(t, hm.Rows, 5)
	for g, row := range hm.Rows {
		first, last := 5*g, min(5*g+4, 22)
		require.Equal(t, "gpu-node-"+strconv.Itoa(first), row.First)
		require.Equal(t, "gpu-node-"+strconv.Itoa(last), row.Last)
		require.Equal(t, last-first+1, row.Nodes)
		var seen, held, measured, unmeasured int64
		var util float64
		for n := first; n <= last; n++ {
			s, m := int64(n+1)*3600, int64(n+1)*3600
			if n%2 == 1 {
				m -= 3600
			}
			seen, held, measured, unmeasured = seen+s, held+int64(n)*3600, measured+m, unmeasured+s-m
			util += float64(n%4) / 4 * float64(m)
		}
		cell := strconv.FormatFloat(util/float64(measured)*100, 'f', 1, 64)
		require.Equal(t, []string{cell, cell, cell}, row.Util, "row %d", g)
		require.Equal(t, []int64{unmeasured, unmeasured, unmeasured}, row.HeldUnmeasuredSeconds)
		require.Equal(t, reads.HeatmapSums{SeenSeconds: 3 * seen, HeldSeconds: 3 * held, MeasuredSeconds: 3 * measured,
			HeldUnmeasuredSeconds: 3 * unmeasured, Util: cell}, row.Total)
	}
	// The second group drilled into: a row per node.
	hm, err = reads.UtilHeatmap(context.Background(), rows, cat, reads.HeatmapQuery{From: from, To: from.Add(3 * time.Hour), Rows: 5,
		NodeFrom: hm.Rows[1].First, NodeTo: hm.Rows[1].Last})
	require.NoError(t, err)
	require.Equal(t, 1, hm.GroupSize)
	var names []string
	for _, r := range hm.Rows {
		names = append(names, r.First)
		require.Equal(t, r.First, r.Last)
	}
	require.Equal(t, []string{"gpu-node-5", "gpu-node-6", "gpu-node-7", "gpu-node-8", "gpu-node-9"}, names)
	// A prefix: gpu-node-1 and gpu-node-10 … gpu-node-19, 11 nodes in 5 rows of 3.
	hm, err = reads.UtilHeatmap(context.Background(), rows, cat, reads.HeatmapQuery{From: from, To: from.Add(3 * time.Hour), Rows: 5, NodePrefix: "gpu-node-1"})
	require.NoError(t, err)
	require.Equal(t, [3]int{11, 3, 4}, [3]int{hm.NodeCount, hm.GroupSize, len(hm.Rows)})
	require.Equal(t, [2]string{"gpu-node-1", "gpu-node-11"}, [2]string{hm.Rows[0].First, hm.Rows[0].Last})
	_, err = reads.UtilHeatmap(context.Background(), rows, cat, reads.HeatmapQuery{From: from, To: from.Add(time.Hour), Rows: reads.MaxHeatmapRows + 1})
	require.ErrorContains(t, err, "rows must be between 1 and 500")
}
