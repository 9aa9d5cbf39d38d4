package reads_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// heldSamples is a HeldRows over a slice of samples.
type heldSamples []schemas.Sample

func (s heldSamples) HeldSamples(_ context.Context, fromMS, toMS int64, fn func(*schemas.Sample) error) error {
	for i := range s {
		if s[i].StartMS >= fromMS && s[i].StartMS < toMS {
			if err := fn(&s[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// What is held names its card, and a share its fraction of the card as its
// profile states it; a whole card, a MIG slice and a vGPU type have none.
func TestHeldCardAndShare(t *testing.T) {
	raw, err := os.ReadFile("../../schemas/examples/catalog.yaml")
	require.NoError(t, err)
	cat, err := schemas.ParseCatalog(raw, "example catalog")
	require.NoError(t, err)
	now := time.Date(2026, 11, 18, 10, 0, 0, 0, time.UTC)
	a100, a16, t4 := "NVIDIA A100-SXM4-80GB", "NVIDIA A16", "Tesla T4"
	sample := func(inst, gpu, model, profile string) schemas.Sample {
		return schemas.Sample{StartMS: now.Add(-time.Minute).UnixMilli(), IntervalMS: 60_000, Node: "n1", GPUUUID: gpu, GPUModel: model,
			InstanceID: inst, Profile: profile, Project: "dl-course", User: "u1", Util: 0.5, UtilKnown: true, Processes: 1}
	}
	src := heldSamples{
		sample("GPU-a/share/dl-course/nb-0/main", "GPU-a", a100, "1/20"),
		sample("GPU-a/share/dl-course/nb-1/main", "GPU-a", a100, "mem=10%,cores=30%"),
		sample("GPU-t/share/cv-lab/jobs/main", "GPU-t", t4, "cores=33.33%"),
		sample("VGPU-1", "GPU-v", a16, "A16-1Q"),
		sample("MIG-1", "GPU-m", a100, "1g.10gb"),
		sample("GPU-w", "GPU-w", a100, "full"),
	}
	held, err := reads.HeldNowWithin(context.Background(), src, cat, now, time.Hour)
	require.NoError(t, err)
	got := map[string][2]string{}
	for _, h := range held {
		got[h.InstanceID] = [2]string{h.GPUUUID, h.Share}
	}
	require.Equal(t, map[string][2]string{
		"GPU-a/share/dl-course/nb-0/main": {"GPU-a", "0.05"},
		"GPU-a/share/dl-course/nb-1/main": {"GPU-a", "0.3"}, // the larger of memory and compute
		"GPU-t/share/cv-lab/jobs/main":    {"GPU-t", "0.3333"},
		"VGPU-1":                          {"GPU-v", ""},
		"MIG-1":                           {"GPU-m", ""},
		"GPU-w":                           {"GPU-w", ""},
	}, got)

	// As the API serves it: "gpu" always, "share" a decimal string or absent.
	b, err := json.Marshal(held)
	require.NoError(t, err)
	var items []map[string]any
	require.NoError(t, json.Unmarshal(b, &items))
	for _, it := range items {
		require.Equal(t, got[it["instance"].(string)][0], it["gpu"])
		share, ok := it["share"]
		if want := got[it["instance"].(string)][1]; want == "" {
			require.False(t, ok, "no share for %s", it["instance"])
		} else {
			require.Equal(t, want, share)
		}
	}
}
