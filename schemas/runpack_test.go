package schemas_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// MergePacks merges runs as the run tables do: a run written again with the
// same key and start keeps the later end, an idle run also by class and
// utilisation bounds (NaN bounds merge with NaN), and distinct runs stay.
func TestMergePacksMergesAsTheRunTables(t *testing.T) {
	const day = 20_000 * schemas.DayMS
	a := schemas.Key{Project: "p", User: "u1", InstanceID: "i1", GPUModel: "A100", Profile: "1g.10gb"}
	b := schemas.Key{Project: "p", User: "u2", InstanceID: "i2", GPUModel: "A100", Profile: "1g.10gb"}
	idle := func(k schemas.Key, s, e int64, lo, hi float64) schemas.IdleRun {
		return schemas.IdleRun{Run: schemas.Run{Key: k, StartMS: s, EndMS: e}, Class: 1, MinUtil: lo, MaxUtil: hi}
	}
	first := schemas.PackRuns(
		[]schemas.Run{{Key: a, StartMS: day + 1_000, EndMS: day + 5_000}, {Key: b, StartMS: day + 2_000, EndMS: day + 3_000}},
		[]schemas.IdleRun{idle(a, day+1_000, day+4_000, 0, 0.01), idle(b, day+2_000, day+2_500, math.NaN(), math.NaN())})
	second := schemas.PackRuns(
		[]schemas.Run{{Key: a, StartMS: day + 1_000, EndMS: day + 9_000}, {Key: a, StartMS: day + 20_000, EndMS: day + 21_000}},
		[]schemas.IdleRun{idle(a, day+1_000, day+8_000, 0, 0.01), idle(a, day+1_000, day+3_000, 0, 0.02),
			idle(b, day+2_000, day+2_900, math.NaN(), math.NaN())})
	require.Len(t, first, 1)
	require.Len(t, second, 1)
	merged, err := schemas.MergePacks([][]byte{first[0].Data, second[0].Data})
	require.NoError(t, err)
	require.Len(t, merged, 1)
	require.Equal(t, "p", merged[0].Project)
	require.Equal(t, int64(day), merged[0].DayMS)
	require.Equal(t, int64(day+1_000), merged[0].MinMS)
	require.Equal(t, int64(day+21_000), merged[0].MaxMS)

	var d schemas.DecodedPack
	require.NoError(t, d.Decode(merged[0].Data))
	occ, idles := d.Runs()
	require.ElementsMatch(t, []schemas.Run{
		{Key: a, StartMS: day + 1_000, EndMS: day + 9_000},
		{Key: a, StartMS: day + 20_000, EndMS: day + 21_000},
		{Key: b, StartMS: day + 2_000, EndMS: day + 3_000},
	}, occ)
	require.Len(t, idles, 3)
	ends := map[[2]float64]int64{}
	for _, r := range idles {
		if math.IsNaN(r.MinUtil) {
			require.Equal(t, b, r.Key)
			require.Equal(t, int64(day+2_900), r.EndMS, "NaN bounds merge")
			continue
		}
		ends[[2]float64{r.MinUtil, r.MaxUtil}] = r.EndMS
	}
	require.Equal(t, map[[2]float64]int64{{0, 0.01}: day + 8_000, {0, 0.02}: day + 3_000}, ends)

	_, err = schemas.MergePacks([][]byte{first[0].Data[:len(first[0].Data)-3]})
	require.Error(t, err, "a truncated pack is refused")
}
