package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// requireInstanceSamples checks reads.InstanceRows on the store
// RequireReads wrote: only the instances asked for, only held samples
// starting in the range, replays at most repeated.
func requireInstanceSamples(t *testing.T, st ingest.Backend) {
	ctx := context.Background()
	ir, ok := st.(reads.InstanceRows)
	require.True(t, ok, "every usage store reads samples by instance (reads.InstanceRows)")
	read := func(insts []string, from, to string) map[string]map[int64]schemas.Sample {
		t.Helper()
		got := map[string]map[int64]schemas.Sample{}
		require.NoError(t, ir.InstanceSamples(ctx, insts, utc(from).UnixMilli(), utc(to).UnixMilli(), func(s *schemas.Sample) error {
			if got[s.InstanceID] == nil {
				got[s.InstanceID] = map[int64]schemas.Sample{}
			}
			got[s.InstanceID][s.StartMS] = *s
			return nil
		}))
		return got
	}
	got := read([]string{"mig-b", "x-1", "mig-c"}, "2026-11-02T06:00:00Z", "2026-11-02T06:25:00Z")
	require.Len(t, got, 2, "mig-c is not held: its samples are not held samples")
	require.Len(t, got["mig-b"], 25)
	require.Len(t, got["x-1"], 5, "x-1 starts at 06:20")
	b := got["mig-b"][utc("2026-11-02T06:24:00Z").UnixMilli()]
	require.Equal(t, schemas.Sample{StartMS: utc("2026-11-02T06:24:00Z").UnixMilli(), IntervalMS: 60_000, Node: "n2", GPUUUID: "GPU-n2",
		GPUModel: "NVIDIA H100 80GB HBM3", InstanceID: "mig-b", Profile: "1g.10gb", Project: "ai101", User: "bob", Util: 0.3, UtilKnown: true,
		Processes: 1, HolderRef: "k8s:ai101/nb-bob"}, b)
	alice := read([]string{"mig-a"}, "2026-11-02T04:00:00Z", "2026-11-02T05:00:00Z")
	require.Len(t, alice["mig-a"], 60, "alice's replayed hour, each sample once")
	require.Empty(t, read([]string{"mig-a"}, "2026-11-02T06:00:00Z", "2026-11-02T07:00:00Z"))
	require.Empty(t, read(nil, "2026-11-02T04:00:00Z", "2026-11-02T07:00:00Z"))
}
