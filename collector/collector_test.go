package collector_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cardhour/cardhour/collector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeSource struct {
	insts []collector.Instance
	err   error
}

func (f *fakeSource) Sample(context.Context) ([]collector.Instance, error) { return f.insts, f.err }

type fakeResolver struct {
	name string
	m    map[string]collector.Holder
	err  error
}

func (r *fakeResolver) Name() string { return r.name }
func (r *fakeResolver) Resolve(context.Context, []collector.Instance) (map[string]collector.Holder, error) {
	return r.m, r.err
}

func inst(id string) collector.Instance {
	return collector.Instance{GPUUUID: "GPU-1", GPUModel: "Mock NVIDIA A100-SXM4-40GB", InstanceID: id, Profile: "1g.5gb", MemTotal: 5 << 30}
}

func TestFastForwardTicksAreAlignedAndContiguous(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 3, 500e6, time.UTC) // not on a boundary
	clock := collector.NewFastForwardClock(start)
	pub := &collector.MemoryPublisher{}
	c, err := collector.New(collector.Config{Node: "n1", Interval: 10 * time.Second, Clock: clock,
		StopAt: start.Add(time.Minute), Source: &fakeSource{insts: []collector.Instance{inst("MIG-a")}},
		Publisher: pub, ModelNames: map[string]string{"Mock NVIDIA A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB"},
		Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	got := pub.Samples()
	require.Len(t, got, 7)
	require.Equal(t, start.UnixMilli(), got[0].StartMS, "the first sample covers [start, first boundary)")
	require.EqualValues(t, 6500, got[0].IntervalMS)
	for i := 1; i < len(got); i++ {
		require.Equal(t, got[i-1].EndMS(), got[i].StartMS, "contiguous")
		require.Zero(t, got[i].StartMS%10000, "aligned")
	}
	require.Equal(t, start.Add(time.Minute).UnixMilli(), got[len(got)-1].EndMS(), "stops exactly at StopAt")
	require.Equal(t, "NVIDIA A100-SXM4-40GB", got[0].GPUModel)
	require.Equal(t, "none", got[0].UtilSource)
	require.Empty(t, got[0].Project, "an instance with no holder is still sampled")
}

func TestFinalSampleOnShutdown(t *testing.T) {
	pub := &collector.MemoryPublisher{}
	c, err := collector.New(collector.Config{Node: "n1", Interval: time.Second,
		Source: &fakeSource{insts: []collector.Instance{inst("MIG-a")}}, Publisher: pub})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	require.NoError(t, c.Run(ctx))
	end := time.Now()
	got := pub.Samples()
	require.GreaterOrEqual(t, len(got), 2)
	require.InDelta(t, t0.UnixMilli(), got[0].StartMS, 2)
	last := got[len(got)-1]
	require.InDelta(t, end.UnixMilli(), last.EndMS(), 20, "the final sample ends at shutdown")
	for i := 1; i < len(got); i++ {
		require.Equal(t, got[i-1].EndMS(), got[i].StartMS)
	}
	require.NoError(t, c.Healthy())
}

func TestResolversInOrderAndErrorsDoNotStopSampling(t *testing.T) {
	clock := collector.NewFastForwardClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	pub := &collector.MemoryPublisher{}
	broken := &fakeResolver{name: "kube", err: errors.New("kubelet socket missing")}
	first := &fakeResolver{name: "unix", m: map[string]collector.Holder{"MIG-a": {Project: "nlp-lab", User: "alice", Ref: "slurm:42"}}}
	second := &fakeResolver{name: "static", m: map[string]collector.Holder{
		"MIG-a": {Project: "wrong", User: "x"}, "MIG-b": {Project: "cv-lab"}}}
	bad := inst("MIG-bad")
	bad.MemUsed = -1
	c, err := collector.New(collector.Config{Node: "n1", Interval: time.Second, Clock: clock, StopAt: clock.Now().Add(time.Second),
		Source:    &fakeSource{insts: []collector.Instance{inst("MIG-a"), inst("MIG-b"), inst("MIG-c"), bad}, err: errors.New("GPU 3: lost")},
		Resolvers: []collector.Resolver{broken, first, second}, Publisher: pub})
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	got := map[string][3]string{}
	for _, s := range pub.Samples() {
		got[s.InstanceID] = [3]string{s.Project, s.User, s.HolderRef}
	}
	require.Equal(t, map[string][3]string{"MIG-a": {"nlp-lab", "alice", "slurm:42"}, "MIG-b": {"cv-lab", "", ""}, "MIG-c": {"", "", ""}}, got,
		"first resolver wins (with its holder reference), invalid samples are dropped")
}

func TestConfigValidate(t *testing.T) {
	_, err := collector.New(collector.Config{Interval: 500 * time.Millisecond})
	require.ErrorContains(t, err, "node must not be empty")
	require.ErrorContains(t, err, "interval")
	require.ErrorContains(t, err, "source is required")
	require.ErrorContains(t, err, "publisher is required")
}
