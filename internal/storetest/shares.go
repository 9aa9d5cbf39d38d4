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

// ShareSamples are ten minutes of three shares of cards from at, one of
// each kind: a HAMi share stating both fractions, time-sliced replicas
// stating the compute only, a vGPU instance stating the memory only.
func ShareSamples(at time.Time) [][]schemas.Sample {
	const a100, t4, a16 = "NVIDIA A100-SXM4-80GB", "Tesla T4", "NVIDIA A16"
	share := func(ss []schemas.Sample, kind string, mem, cores float64) []schemas.Sample {
		for i := range ss {
			ss[i].ShareKind, ss[i].ShareMem, ss[i].ShareCores = kind, mem, cores
		}
		return ss
	}
	hami := share(minutes("GPU-s1/share/dl/nb-0/main", "s1", a100, "1/20", "dl-course", "2025030101", at, 10,
		func(i int) (float64, bool) { return 0.5, true }, 1), schemas.ShareHAMi, 0.05, 0.05)
	ts := share(minutes("GPU-s2/share/cv/jobs-0/main", "s2", t4, "1/4", "cv-lab", "2022110317", at, 10,
		func(i int) (float64, bool) { return 0, false }, 1), schemas.ShareTimeslice, 0, 0.25)
	vgpu := share(minutes("VGPU-s3-0", "s3", a16, "A16-1Q", "ai101", "2025010201", at, 10,
		func(i int) (float64, bool) { return 0.01 * float64(i), true }, 0), schemas.ShareVGPU, 0.0625, 0)
	return [][]schemas.Sample{hami, ts, vgpu}
}

// RequireShareRoundTrip writes ShareSamples(at) to st, which holds no
// samples in the hour from at, and checks that they come back with their
// share fields (share_kind, share_mem, share_cores) from every read that
// returns samples: held samples by time and by instance, and the latest
// samples (st holds no later held sample); a replay changes none of them.
func RequireShareRoundTrip(t *testing.T, st ingest.Backend, at time.Time) {
	t.Helper()
	ctx := context.Background()
	shares := ShareSamples(at)
	c := ingest.NewCompactor(0)
	want := map[string]map[int64]schemas.Sample{}
	var insts []string
	for _, ss := range shares {
		require.NoError(t, st.Write(ctx, c.Build(ss)))
		insts = append(insts, ss[0].InstanceID)
		want[ss[0].InstanceID] = map[int64]schemas.Sample{}
		for _, s := range ss {
			want[s.InstanceID][s.StartMS] = LatestFields(s)
		}
	}
	require.NoError(t, st.Write(ctx, ingest.NewCompactor(0).Build(shares[0][2:6]))) // a replay
	collect := func(read func(fn func(*schemas.Sample) error) error) map[string]map[int64]schemas.Sample {
		t.Helper()
		got := map[string]map[int64]schemas.Sample{}
		require.NoError(t, read(func(s *schemas.Sample) error {
			if got[s.InstanceID] == nil {
				got[s.InstanceID] = map[int64]schemas.Sample{}
			}
			got[s.InstanceID][s.StartMS] = LatestFields(*s) // the in-memory store keeps the memory fields too
			return nil
		}))
		return got
	}
	from, to := at.UnixMilli(), at.Add(time.Hour).UnixMilli()
	require.Equal(t, want, collect(func(fn func(*schemas.Sample) error) error { return st.HeldSamples(ctx, from, to, fn) }),
		"held samples keep the share fields")
	ir, ok := st.(reads.InstanceRows)
	require.True(t, ok)
	require.Equal(t, want, collect(func(fn func(*schemas.Sample) error) error { return ir.InstanceSamples(ctx, insts, from, to, fn) }),
		"samples by instance keep the share fields")
	latest := map[string]schemas.Sample{}
	for _, ss := range shares {
		latest[ss[0].InstanceID] = LatestFields(ss[len(ss)-1])
	}
	require.Equal(t, latest, Latest(t, st, from), "latest samples keep the share fields")
	require.Equal(t, "1/20", latest[insts[0]].Profile)
	require.Equal(t, [3]any{schemas.ShareVGPU, 0.0625, 0.0}, [3]any{latest[insts[2]].ShareKind, latest[insts[2]].ShareMem, latest[insts[2]].ShareCores})
}

// requireShares is RequireShareRoundTrip on the store RequireReads wrote.
func requireShares(t *testing.T, st ingest.Backend) {
	RequireShareRoundTrip(t, st, utc("2026-11-25T10:00:00Z"))
}

// RequireSharesAfterMigration checks a store that held data (a Trace) before
// its share columns were added and was migrated since: it bills data as
// before, every sample written before reads as no share, and samples of
// shares written after come back with their fields (RequireShareRoundTrip
// at 2026-12-20 10:00 UTC, after every Trace).
func RequireSharesAfterMigration(t *testing.T, data []byte, st ingest.Backend) {
	t.Helper()
	RequireSameInvoices(t, data, Catalogs(t), st)
	var old int
	require.NoError(t, st.HeldSamples(context.Background(), 0, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), func(s *schemas.Sample) error {
		old++
		require.Equal(t, [3]any{"", 0.0, 0.0}, [3]any{s.ShareKind, s.ShareMem, s.ShareCores}, "a row written before reads as no share")
		return nil
	}))
	require.Positive(t, old)
	RequireShareRoundTrip(t, st, time.Date(2026, 12, 20, 10, 0, 0, 0, time.UTC))
}
