package nvmlsource_test

import (
	"context"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/nvmlmock"
	"github.com/cardhour/cardhour/collector/nvmlsource"
	"github.com/cardhour/cardhour/schemas"
)

func TestVGPUInstances(t *testing.T) {
	node, err := nvmlmock.New("a16-16gb", []nvmlmock.Layout{nil, nil}, "vgpu-host")
	require.NoError(t, err)
	g := node.GPUs[0]
	g.EnableVGPU("A16-1Q", 1<<30, 16, "vgpu-host", 0)
	g.VGPUs[0].Set(nvmlmock.VGPUState{Active: true, FbUsed: 512 << 20, Util: 0.4, Licensed: true})
	g.VGPUs[1].Set(nvmlmock.VGPUState{Active: true, FbUsed: 2 << 30, Util: -1}) // no sample, unlicensed
	g.VGPUs[2].Set(nvmlmock.VGPUState{Active: false})
	g.VGPUs[1].UUID = "" // a driver without instance UUIDs: <gpu>/vgpu/<id>
	reg := prometheus.NewRegistry()
	src, err := nvmlsource.New(nvmlsource.Config{Lib: node.Lib(), Registerer: reg, VGPU: true,
		VMName: func(id string) string { return "vm-of-" + id[:4] }})
	require.NoError(t, err)
	defer src.Close() //nolint:errcheck // test
	insts, err := src.Sample(context.Background())
	require.NoError(t, err)
	m := byID(insts)
	require.Len(t, insts, 3, "two active vGPUs on GPU 0, GPU 1 whole")
	a := m[g.VGPUs[0].UUID]
	require.Equal(t, "A16-1Q", a.Profile)
	require.Equal(t, schemas.ShareVGPU, a.ShareKind)
	require.InDelta(t, 1.0/16, a.ShareMem, 1e-12)
	require.Equal(t, int64(1<<30), a.MemTotal)
	require.Equal(t, int64(512<<20), a.MemUsed)
	require.True(t, a.UtilKnown)
	require.InDelta(t, 0.4, a.Util, 1e-9)
	require.Equal(t, collector.UtilSourceNVML, a.UtilSource)
	require.Equal(t, g.VGPUs[0].VMID, a.VMID)
	require.Equal(t, "vm-of-"+g.VGPUs[0].VMID[:4], a.VMName)
	b, ok := m[g.Device.UUID+"/vgpu/2"]
	require.True(t, ok, "%v", m)
	require.False(t, b.UtilKnown, "no utilisation sample: null, not 0")
	require.Equal(t, int64(1<<30), b.MemUsed, "capped at the framebuffer")
	require.Equal(t, collector.ProfileFull, m[node.GPUs[1].Device.UUID].Profile)
	require.InDelta(t, 1, testutil.ToFloat64(mustGauge(t, reg, a.InstanceID)), 0)
	require.InDelta(t, 0, testutil.ToFloat64(mustGauge(t, reg, b.InstanceID)), 0)

	// The instance's samples validate as a sample of a share.
	s := schemas.Sample{StartMS: 1, IntervalMS: 1000, Node: "n", GPUUUID: a.GPUUUID, GPUModel: a.GPUModel, InstanceID: a.InstanceID,
		Profile: a.Profile, ShareKind: a.ShareKind, ShareMem: a.ShareMem}
	require.NoError(t, s.Validate())

	// No VM running: the card is reported whole.
	g.VGPUs[0].Set(nvmlmock.VGPUState{})
	g.VGPUs[1].Set(nvmlmock.VGPUState{})
	insts, err = src.Sample(context.Background())
	require.NoError(t, err)
	require.Len(t, insts, 2)
	require.Equal(t, collector.ProfileFull, insts[0].Profile)
}

func mustGauge(t *testing.T, reg *prometheus.Registry, id string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "cardhour_collector_vgpu_licensed" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "instance_id" && l.GetValue() == id {
					g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
					g.Set(m.GetGauge().GetValue())
					return g
				}
			}
		}
	}
	t.Fatalf("no license gauge for %s", id)
	return nil
}

func TestProcessUtilization(t *testing.T) {
	node, err := nvmlmock.New("t4-16gb", []nvmlmock.Layout{nil}, "ts")
	require.NoError(t, err)
	in := node.GPUs[0].Instances[0]
	in.Set(nvmlmock.State{MemUsed: 3 << 30, Util: 0.7,
		Processes: []nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 1 << 30}, {Pid: 20, UsedGpuMemory: 2 << 30}, {Pid: 30}},
		ProcUtil:  map[uint32]float64{10: 0.5, 20: 0.2}})
	src, err := nvmlsource.New(nvmlsource.Config{Lib: node.Lib(), ProcessUtilization: true})
	require.NoError(t, err)
	defer src.Close() //nolint:errcheck // test
	insts, err := src.Sample(context.Background())
	require.NoError(t, err)
	require.Len(t, insts, 1)
	c := insts[0]
	require.Equal(t, "Tesla T4", c.GPUModel)
	require.True(t, c.ProcUtilKnown)
	got := map[uint32]float64{}
	for _, p := range c.Processes {
		require.True(t, p.UtilKnown)
		got[p.PID] = p.Util
	}
	require.Equal(t, map[uint32]float64{10: 0.5, 20: 0.2, 30: 0}, got, "a process without a sample ran nothing")

	// Without the option, per-process utilisation is not read.
	src2, err := nvmlsource.New(nvmlsource.Config{Lib: node.Lib()})
	require.NoError(t, err)
	defer src2.Close() //nolint:errcheck // test
	insts, err = src2.Sample(context.Background())
	require.NoError(t, err)
	require.False(t, insts[0].ProcUtilKnown)
}
