package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// LatestFields is s with the fields reads.LatestRows returns (those of
// reads.HeldRows): memory, util source and schema cleared, util 0 when
// unknown.
func LatestFields(s schemas.Sample) schemas.Sample {
	s.MemUsed, s.MemTotal, s.UtilSource, s.SchemaField = 0, 0, "", ""
	if !s.UtilKnown {
		s.Util = 0
	}
	return s
}

// LatestOf is what a store's latest samples are once samples are written:
// per instance its held sample with the greatest start (ties: the later one
// in samples), with LatestFields.
func LatestOf(samples []schemas.Sample) map[string]schemas.Sample {
	out := map[string]schemas.Sample{}
	for _, s := range samples {
		if cur, ok := out[s.InstanceID]; s.Project != "" && (!ok || s.StartMS >= cur.StartMS) {
			out[s.InstanceID] = LatestFields(s)
		}
	}
	return out
}

// Latest reads st's latest samples from fromMS, by instance; an instance
// returned twice fails the test.
func Latest(t testing.TB, st reads.LatestRows, fromMS int64) map[string]schemas.Sample {
	t.Helper()
	out := map[string]schemas.Sample{}
	require.NoError(t, st.LatestSamples(context.Background(), fromMS, func(s *schemas.Sample) error {
		_, dup := out[s.InstanceID]
		require.False(t, dup, "instance %s returned twice", s.InstanceID)
		out[s.InstanceID] = *s
		return nil
	}))
	return out
}

// requireLatest checks the latest samples of st, which RequireReads wrote:
// want (by instance) are the latest held samples written so far, though
// replays of older samples were written after them and some instances had
// unheld samples only. It then writes two holders of one instance in one
// batch, an unheld sample after them and a replay of the earlier holder,
// and checks that only the later holder's last sample is kept, and that
// fromMS bounds the instances returned.
func requireLatest(t *testing.T, st ingest.Backend, want map[string]schemas.Sample) {
	ctx := context.Background()
	for id, s := range want {
		want[id] = LatestFields(s)
	}
	require.Equal(t, want, Latest(t, st, utc("2026-11-01T00:00:00Z").UnixMilli()),
		"the latest held sample of each instance, older replays written later notwithstanding; unheld instances (mig-c, mig-d) absent")

	const model = "NVIDIA A100-SXM4-80GB"
	at := utc("2026-11-20T10:00:00Z")
	// erin holds mig-f for 10 min, then frank for 5 (another key, one instance,
	// written in one batch with frank's samples first), then nobody.
	erin := minutes("mig-f", "n4", model, "3g.40gb", "cv-lab", "erin", at, 10,
		func(i int) (float64, bool) { return 0.02, true }, 1)
	frank := minutes("mig-f", "n4", model, "3g.40gb", "cv-lab", "frank", at.Add(10*time.Minute), 5,
		func(int) (float64, bool) { return 0, false }, 0)
	for i := range frank {
		frank[i].HolderRef = "k8s:cv/frank-0"
	}
	free := minutes("mig-f", "n4", model, "3g.40gb", "", "", at.Add(15*time.Minute), 3,
		func(int) (float64, bool) { return 0, true }, 0)
	c := ingest.NewCompactor(0)
	require.NoError(t, st.Write(ctx, c.Build(append(append([]schemas.Sample(nil), frank...), erin...))))
	require.NoError(t, st.Write(ctx, c.Build(free)))
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(erin))) // a restarted worker replays erin's batch
	// A hand-made batch with an older latest sample of mig-a (a store keeps
	// the newest whatever the writer sends).
	require.NoError(t, st.Write(ctx, &ingest.Batch{Latest: []schemas.Sample{want["mig-a"]}}))
	old := want["mig-a"]
	old.StartMS -= 60_000
	old.HolderRef = "slurm:1"
	require.NoError(t, st.Write(ctx, &ingest.Batch{Latest: []schemas.Sample{old}}))

	want["mig-f"] = LatestFields(frank[4])
	require.Equal(t, want, Latest(t, st, utc("2026-11-01T00:00:00Z").UnixMilli()), "after a second holder and a release")
	// fromMS: instances whose latest held sample starts at or after it.
	require.Equal(t, map[string]schemas.Sample{"mig-e": want["mig-e"], "mig-f": want["mig-f"]},
		Latest(t, st, want["mig-e"].StartMS), "from the start of mig-e's latest sample")
	require.Equal(t, map[string]schemas.Sample{"mig-f": want["mig-f"]}, Latest(t, st, want["mig-e"].StartMS+1))
	require.Equal(t, map[string]schemas.Sample{"mig-f": want["mig-f"]}, Latest(t, st, want["mig-f"].StartMS))
	require.Empty(t, Latest(t, st, want["mig-f"].StartMS+1))
}
