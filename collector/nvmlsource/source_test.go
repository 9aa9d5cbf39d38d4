package nvmlsource_test

import (
	"context"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/nvmlmock"
	"github.com/cardhour/cardhour/collector/nvmlsource"
)

func newSource(t testing.TB, lib nvml.Interface) (*nvmlsource.Source, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := nvmlsource.New(nvmlsource.Config{Lib: lib, Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, reg
}

func byID(insts []collector.Instance) map[string]collector.Instance {
	m := map[string]collector.Instance{}
	for _, in := range insts {
		m[in.InstanceID] = in
	}
	return m
}

func TestLayouts(t *testing.T) {
	seven := nvmlmock.Layout{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}
	mixed := nvmlmock.Layout{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}
	tests := []struct {
		name      string
		model     string
		layouts   []nvmlmock.Layout
		wantModel string
		wantProf  []string
	}{
		{"a100 7x1g", "a100-80gb", []nvmlmock.Layout{seven}, "NVIDIA A100-SXM4-80GB", []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}},
		{"a100 3g+2g+1g+1g", "a100-80gb", []nvmlmock.Layout{mixed}, "NVIDIA A100-SXM4-80GB", []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}},
		{"a100 whole card", "a100-80gb", []nvmlmock.Layout{nil}, "NVIDIA A100-SXM4-80GB", []string{"full"}},
		{"a100-40gb 1g.5gb", "a100-40gb", []nvmlmock.Layout{{"1g.5gb", "2g.10gb", "4g.20gb"}}, "Mock NVIDIA A100-SXM4-40GB", []string{"1g.5gb", "2g.10gb", "4g.20gb"}},
		{"h100 3g+3g+1g", "h100-80gb", []nvmlmock.Layout{{"3g.40gb", "3g.40gb", "1g.10gb"}}, "NVIDIA H100 80GB HBM3", []string{"3g.40gb", "3g.40gb", "1g.10gb"}},
		{"h100 mixed node", "h100-80gb", []nvmlmock.Layout{seven, nil}, "NVIDIA H100 80GB HBM3", append(append([]string{}, seven...), "full")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node, err := nvmlmock.New(tc.model, tc.layouts, t.Name())
			require.NoError(t, err)
			src, _ := newSource(t, node.Lib())
			insts, err := src.Sample(context.Background())
			require.NoError(t, err)
			require.Len(t, insts, len(tc.wantProf))
			var got []string
			for i, in := range insts {
				got = append(got, in.Profile)
				require.Equal(t, tc.wantModel, in.GPUModel)
				require.NotEmpty(t, in.InstanceID)
				require.Positive(t, in.MemTotal)
				if in.Profile == "full" {
					require.Equal(t, in.GPUUUID, in.InstanceID)
					require.Equal(t, -1, in.GIID)
				} else {
					require.Regexp(t, `^MIG-`, in.InstanceID, i)
				}
			}
			require.Equal(t, tc.wantProf, got)
		})
	}
}

func TestUtilSources(t *testing.T) {
	t.Run("whole card: nvml utilisation rates", func(t *testing.T) {
		node, err := nvmlmock.New("a100-80gb", []nvmlmock.Layout{nil}, "u1")
		require.NoError(t, err)
		node.GPUs[0].Instances[0].Set(nvmlmock.State{Util: 0.42, MemUsed: 1 << 30})
		src, _ := newSource(t, node.Lib())
		insts, err := src.Sample(context.Background())
		require.NoError(t, err)
		require.True(t, insts[0].UtilKnown)
		require.InDelta(t, 0.42, insts[0].Util, 1e-9)
		require.Equal(t, collector.UtilSourceNVML, insts[0].UtilSource)
		require.Equal(t, int64(1<<30), insts[0].MemUsed)
	})
	t.Run("A100 MIG: no GPM, util null", func(t *testing.T) {
		node, err := nvmlmock.New("a100-80gb", []nvmlmock.Layout{{"1g.10gb"}}, "u2")
		require.NoError(t, err)
		node.GPUs[0].Instances[0].Set(nvmlmock.State{Util: 0.9})
		src, _ := newSource(t, node.Lib())
		for range 2 {
			insts, err := src.Sample(context.Background())
			require.NoError(t, err)
			require.False(t, insts[0].UtilKnown)
			require.Equal(t, collector.UtilSourceNone, insts[0].UtilSource)
		}
	})
	t.Run("H100 MIG: GPM from the second sample on", func(t *testing.T) {
		node, err := nvmlmock.New("h100-80gb", []nvmlmock.Layout{{"1g.10gb", "3g.40gb"}}, "u3")
		require.NoError(t, err)
		node.GPUs[0].Instances[0].Set(nvmlmock.State{Util: 0.75})
		node.GPUs[0].Instances[1].Set(nvmlmock.State{Util: 0})
		src, _ := newSource(t, node.Lib())
		insts, err := src.Sample(context.Background())
		require.NoError(t, err)
		require.False(t, insts[0].UtilKnown, "one GPM sample measures nothing yet")
		insts, err = src.Sample(context.Background())
		require.NoError(t, err)
		require.True(t, insts[0].UtilKnown)
		require.InDelta(t, 0.75, insts[0].Util, 1e-9)
		require.Equal(t, collector.UtilSourceGPM, insts[0].UtilSource)
		require.True(t, insts[1].UtilKnown)
		require.Zero(t, insts[1].Util)
	})
	t.Run("GPM disabled by config", func(t *testing.T) {
		node, err := nvmlmock.New("h100-80gb", []nvmlmock.Layout{{"1g.10gb"}}, "u4")
		require.NoError(t, err)
		src, err := nvmlsource.New(nvmlsource.Config{Lib: node.Lib(), DisableGPM: true})
		require.NoError(t, err)
		defer src.Close()
		for range 2 {
			insts, err := src.Sample(context.Background())
			require.NoError(t, err)
			require.False(t, insts[0].UtilKnown)
		}
	})
}

func TestProcessesAppearAndGo(t *testing.T) {
	node, err := nvmlmock.New("a100-80gb", []nvmlmock.Layout{{"1g.10gb", "1g.10gb"}}, "p")
	require.NoError(t, err)
	in := node.GPUs[0].Instances[1]
	src, _ := newSource(t, node.Lib())
	steps := []struct {
		state nvmlmock.State
		procs int
		mem   int64
	}{
		{nvmlmock.State{}, 0, 0},
		{nvmlmock.State{MemUsed: 5 << 30, Processes: []nvml.ProcessInfo{{Pid: 42, UsedGpuMemory: 5 << 30}}}, 1, 5 << 30},
		{nvmlmock.State{MemUsed: 6 << 30, Processes: []nvml.ProcessInfo{{Pid: 42, UsedGpuMemory: 5 << 30}, {Pid: 43, UsedGpuMemory: 1 << 30}}}, 2, 6 << 30},
		{nvmlmock.State{}, 0, 0},
	}
	for i, st := range steps {
		in.Set(st.state)
		insts, err := src.Sample(context.Background())
		require.NoError(t, err)
		got := byID(insts)[in.UUID]
		require.Len(t, got.Processes, st.procs, "step %d", i)
		require.Equal(t, st.mem, got.MemUsed, "step %d", i)
		require.Empty(t, byID(insts)[node.GPUs[0].Instances[0].UUID].Processes)
	}
}

func TestFailingDeviceDoesNotStopOthers(t *testing.T) {
	node, err := nvmlmock.New("a100-80gb", []nvmlmock.Layout{{"1g.10gb", "1g.10gb"}, nil, {"3g.40gb"}}, "f")
	require.NoError(t, err)
	node.GPUs[1].Fail(nvml.ERROR_GPU_IS_LOST)
	src, reg := newSource(t, node.Lib())
	insts, err := src.Sample(context.Background())
	require.Error(t, err)
	require.Contains(t, err.Error(), "GPU 1")
	require.Len(t, insts, 3, "GPUs 0 and 2 are still read")
	require.Equal(t, 1.0, nvmlErrors(t, reg, "GetUUID"))

	node.GPUs[1].Fail(nvml.SUCCESS)
	insts, err = src.Sample(context.Background())
	require.NoError(t, err)
	require.Len(t, insts, 4)
}

func nvmlErrors(t *testing.T, reg *prometheus.Registry, call string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "cardhour_collector_nvml_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == call {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestPanickingBindingBecomesError(t *testing.T) {
	node, err := nvmlmock.New("a100-80gb", []nvmlmock.Layout{nil, nil}, "panic")
	require.NoError(t, err)
	node.GPUs[0].Device.GetMigModeFunc = nil // the moq mock panics on a nil func
	src, _ := newSource(t, node.Lib())
	insts, err := src.Sample(context.Background())
	require.ErrorContains(t, err, "panicked")
	require.Len(t, insts, 1)
}

// A simulated node is sampled for days: the mock must not keep a record of the
// calls made on every tick (go-nvml's generated mock methods do).
func TestMockLibRecordsNoPerTickCalls(t *testing.T) {
	node, err := nvmlmock.New("h100-80gb", []nvmlmock.Layout{{"1g.10gb", "3g.40gb"}, nil}, "calls")
	require.NoError(t, err)
	src, _ := newSource(t, node.Lib())
	for range 3 {
		insts, err := src.Sample(context.Background())
		require.NoError(t, err)
		require.Len(t, insts, 3)
	}
	require.Empty(t, node.Server.DeviceGetHandleByIndexCalls())
	require.Empty(t, node.Server.GpmMigSampleGetCalls())
	require.Empty(t, node.Server.GpmMetricsGetCalls())
	for _, g := range node.GPUs {
		require.Empty(t, g.Device.GetMigDeviceHandleByIndexCalls())
		require.Empty(t, g.Device.GetUUIDCalls())
		require.Empty(t, g.Device.GetMemoryInfoCalls())
		require.Empty(t, g.Device.GetUtilizationRatesCalls())
	}
}

func TestMissingLibrary(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := nvmlsource.New(nvmlsource.Config{Lib: lib})
	require.ErrorIs(t, err, nvmlsource.ErrNoNVML)

	lib = &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }}
	_, err = nvmlsource.New(nvmlsource.Config{Lib: lib})
	require.ErrorContains(t, err, "cannot initialise NVML")
}

func TestProfileName(t *testing.T) {
	f := func(idx int, slices uint32, memMB, devMB uint64, want string) {
		t.Helper()
		got := nvmlsource.ProfileName(idx, nvml.GpuInstanceProfileInfo{SliceCount: slices, MemorySizeMB: memMB}, devMB<<20)
		require.Equal(t, want, got)
	}
	f(nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1, 9856, 81920, "1g.10gb")
	f(nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 9856, 81920, "1g.10gb+me")
	f(nvml.GPU_INSTANCE_PROFILE_7_SLICE, 7, 80384, 81920, "7g.80gb")
	f(nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1, 4864, 40960, "1g.5gb")
	f(nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1, 17920, 143771, "1g.18gb") // H200
	f(0, 1, 100, 0, "1g.0gb")                                         // no division by zero
}

// BenchmarkSampleNode is one tick of a node of 8 A100s split 7 × 1g.10gb on the
// mock NVML (the mock's own cost included).
func BenchmarkSampleNode(b *testing.B) {
	seven := nvmlmock.Layout{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}
	layouts := make([]nvmlmock.Layout, 8)
	for i := range layouts {
		layouts[i] = seven
	}
	node, err := nvmlmock.New("a100-80gb", layouts, "bench")
	if err != nil {
		b.Fatal(err)
	}
	src, _ := newSource(b, node.Lib())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := src.Sample(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
