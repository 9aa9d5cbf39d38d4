// Package nvmlmock builds go-nvml mock servers (dgxa100, dgxh100) with MIG layouts
// and scriptable device state, for the simulated fleet and for tests.
//
// go-nvml's mock servers create GPU and compute instances but have no MIG device
// handles, and fill in no memory use, processes, utilisation or GPM: this package
// adds those function fields. Every value a device reports comes from a State that
// the caller sets (Instance.Set) or computes on demand (Instance.Dynamic).
//
// Node.Lib is the nvml.Interface to sample: it and the device handles it hands
// out answer the calls a collector makes on every tick directly. go-nvml's
// generated mock methods record every call in a slice that grows for as long as
// the process runs (tens of megabytes a day for a node sampled at 1 Hz); a
// collector of a simulated fleet runs for days.
package nvmlmock

import (
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/cardhour/cardhour/collector/nvmlsource"
)

// Models the mock can build, by short name.
var models = map[string]struct {
	cfg gpus.Config
	gpm bool // GPM present (Hopper and newer)
	h   bool // built with the dgxh100 server
}{
	"a100-80gb": {cfg: gpus.A100_SXM4_80GB},
	"a100-40gb": {cfg: gpus.A100_SXM4_40GB},
	"h100-80gb": {cfg: gpus.H100_SXM5_80GB, gpm: true, h: true},
	// Cards without MIG, shared by vGPU, HAMi or time-slicing (go-nvml's
	// mock has no such configuration: name and memory as the drivers report).
	"a16-16gb": {cfg: gpus.Config{Name: "NVIDIA A16", Architecture: nvml.DEVICE_ARCH_AMPERE, Brand: nvml.BRAND_NVIDIA,
		MemoryMB: 16384, CudaMajor: 8, CudaMinor: 6, PciDeviceId: 0x25B610DE}},
	"t4-16gb": {cfg: gpus.Config{Name: "Tesla T4", Architecture: nvml.DEVICE_ARCH_TURING, Brand: nvml.BRAND_NVIDIA,
		MemoryMB: 15360, CudaMajor: 7, CudaMinor: 5, PciDeviceId: 0x1EB810DE}},
}

// Models returns the short model names New accepts.
func Models() []string { return []string{"a100-40gb", "a100-80gb", "a16-16gb", "h100-80gb", "t4-16gb"} }

// State is what an instance reports at one moment.
type State struct {
	MemUsed   uint64
	Processes []nvml.ProcessInfo
	// Util in [0,1]; on a whole card it is returned by GetUtilizationRates, on a
	// MIG instance by GPM (when the GPU has GPM).
	Util float64
	// ProcUtil is the SM utilisation in [0,1] of each process (by PID) of a
	// whole card, returned by GetProcessUtilization for the non-zero ones.
	ProcUtil map[uint32]float64
}

// Instance is one MIG device, or a whole card.
type Instance struct {
	UUID     string
	GIID     int    // -1 for a whole card
	Profile  string // expected profile name (what the source should derive)
	MemTotal uint64
	Handle   nvml.Device // the MIG device handle, or the GPU's own handle

	mu      sync.Mutex
	state   State
	dynamic func() State
}

// Set fixes the state the instance reports.
func (in *Instance) Set(s State) {
	in.mu.Lock()
	in.state = s
	in.mu.Unlock()
}

// Dynamic makes the instance compute its state on every call (nil: use Set).
func (in *Instance) Dynamic(f func() State) {
	in.mu.Lock()
	in.dynamic = f
	in.mu.Unlock()
}

// State returns the current state.
func (in *Instance) State() State {
	in.mu.Lock()
	f, s := in.dynamic, in.state
	in.mu.Unlock()
	if f != nil {
		return f()
	}
	return s
}

// GPU is one physical card.
type GPU struct {
	Device    *server.Device
	MIG       bool
	GPM       bool
	Instances []*Instance

	handle *gpuHandle // what Node.Lib hands out for this GPU
	mu     sync.Mutex
	fail   nvml.Return
	// VGPUs are the card's vGPU instances (EnableVGPU); the active ones are
	// what GetActiveVgpus returns.
	VGPUs []*VGPU
	ts    uint64 // the clock of the utilisation samples, one step per call
}

// Fail makes every call on this GPU and its MIG devices return r (SUCCESS heals it).
func (g *GPU) Fail(r nvml.Return) {
	g.mu.Lock()
	g.fail = r
	g.mu.Unlock()
}

func (g *GPU) failing() nvml.Return {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fail
}

// Node is one simulated server.
type Node struct {
	// Server is go-nvml's mock server with this package's function fields; its
	// methods record every call (use Lib to sample).
	Server *server.Server
	Model  string
	GPUs   []*GPU

	lib *lib
}

// Lib returns the node's NVML: Server, with the per-tick calls answered without
// go-nvml's call recording.
func (n *Node) Lib() nvml.Interface { return n.lib }

// Layout of one GPU: nil or empty means MIG disabled (the whole card); otherwise
// the MIG profiles to create, e.g. {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}.
type Layout []string

// New builds a node of len(layouts) GPUs of the given model. seed makes the UUIDs
// deterministic (same seed and layout, same UUIDs).
func New(model string, layouts []Layout, seed string) (*Node, error) {
	mdl, ok := models[model]
	if !ok {
		return nil, fmt.Errorf("unknown GPU model %q (known: %v)", model, Models())
	}
	cfgs := gpus.Multiple(len(layouts), mdl.cfg)
	var srv *server.Server
	if mdl.h {
		srv = dgxh100.NewWithGPUs(cfgs...)
	} else {
		srv = dgxa100.NewWithGPUs(cfgs...)
	}
	n := &Node{Server: srv, Model: model}
	for i, layout := range layouts {
		d := srv.Devices[i].(*server.Device)
		d.UUID = "GPU-" + detUUID(seed, i, -1)
		g := &GPU{Device: d, GPM: mdl.gpm}
		g.handle = &gpuHandle{Device: d, g: g}
		if len(layout) > 0 {
			if err := g.createMIG(layout, seed, i); err != nil {
				return nil, fmt.Errorf("GPU %d: %w", i, err)
			}
		} else {
			g.Instances = []*Instance{{UUID: d.UUID, GIID: -1, Profile: "full", MemTotal: d.MemoryInfo.Total, Handle: g.handle}}
		}
		g.install()
		n.GPUs = append(n.GPUs, g)
	}
	n.install()
	n.lib = &lib{Server: srv, n: n}
	return n, nil
}

// detUUID returns a stable RFC 4122-shaped UUID for (seed, gpu, slot).
func detUUID(seed string, gpu, slot int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", seed, gpu, slot))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// profileIndex finds the GPU instance profile index whose derived name is want.
func profileIndex(d *server.Device, want string) (int, nvml.GpuInstanceProfileInfo, error) {
	var names []string
	for i := 0; i < nvml.GPU_INSTANCE_PROFILE_COUNT; i++ {
		info, ok := d.Config.MIGProfiles.GpuInstanceProfiles[i]
		if !ok {
			continue
		}
		name := nvmlsource.ProfileName(i, info, d.MemoryInfo.Total)
		if name == want {
			return i, info, nil
		}
		names = append(names, name)
	}
	return 0, nvml.GpuInstanceProfileInfo{}, fmt.Errorf("MIG profile %q not offered by %s (offered: %v)", want, d.Config.Name, names)
}

func (g *GPU) createMIG(layout Layout, seed string, gpuIdx int) error {
	d := g.Device
	if _, r := d.SetMigMode(nvml.DEVICE_MIG_ENABLE); r != nvml.SUCCESS {
		return fmt.Errorf("enable MIG: %w", r)
	}
	g.MIG = true
	slices := 0
	for slot, p := range layout {
		idx, info, err := profileIndex(d, p)
		if err != nil {
			return err
		}
		slices += int(info.SliceCount)
		if slices > 7 {
			return fmt.Errorf("MIG layout %v needs more than 7 slices", layout)
		}
		pi := d.Config.MIGProfiles.GpuInstanceProfiles[idx]
		gi, r := d.CreateGpuInstance(&pi)
		if r != nvml.SUCCESS {
			return fmt.Errorf("create GPU instance %s: %w", p, r)
		}
		giInfo, _ := gi.GetInfo()
		ciInfo, r := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE*0+ciProfileFor(int(info.SliceCount)), nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if r == nvml.SUCCESS {
			_, _ = gi.CreateComputeInstance(&ciInfo)
		}
		in := &Instance{UUID: "MIG-" + detUUID(seed, gpuIdx, slot), GIID: int(giInfo.Id), Profile: p,
			MemTotal: info.MemorySizeMB * 1024 * 1024}
		in.Handle = &migHandle{Device: unanswered, g: g, in: in}
		g.Instances = append(g.Instances, in)
	}
	return nil
}

// ciProfileFor returns the compute instance profile index that spans a whole GPU
// instance of the given slice count.
func ciProfileFor(slices int) int {
	switch slices {
	case 1:
		return nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE
	case 2:
		return nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE
	case 3:
		return nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE
	case 4:
		return nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE
	case 6:
		return nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE
	default:
		return nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE
	}
}

// unanswered backs the methods of a MIG handle that the simulation does not
// answer: go-nvml's mock panics on them, as it does on any function field left nil.
var unanswered = &mock.Device{}

// migHandle is a MIG device handle: a few fields and the answers to the calls a
// collector makes, rather than a generated mock of 15 KB per instance.
type migHandle struct {
	*mock.Device // the rest of nvml.Device: unanswered
	g            *GPU
	in           *Instance
}

func (h *migHandle) GetUUID() (string, nvml.Return) {
	if r := h.g.failing(); r != nvml.SUCCESS {
		return "", r
	}
	return h.in.UUID, nvml.SUCCESS
}

func (h *migHandle) IsMigDeviceHandle() (bool, nvml.Return) { return true, nvml.SUCCESS }

// GetGpuInstanceId implements nvml.Device (the name is NVML's).
func (h *migHandle) GetGpuInstanceId() (int, nvml.Return) { return h.in.GIID, nvml.SUCCESS } //nolint:revive // NVML's name

// GetComputeInstanceId implements nvml.Device (the name is NVML's).
func (h *migHandle) GetComputeInstanceId() (int, nvml.Return) { return 0, nvml.SUCCESS } //nolint:revive // NVML's name

func (h *migHandle) GetDeviceHandleFromMigDeviceHandle() (nvml.Device, nvml.Return) {
	return h.g.handle, nvml.SUCCESS
}

func (h *migHandle) GetName() (string, nvml.Return) { return h.g.Device.GetNameFunc() }

func (h *migHandle) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	if r := h.g.failing(); r != nvml.SUCCESS {
		return nvml.Memory{}, r
	}
	s := h.in.State()
	used := min(s.MemUsed, h.in.MemTotal)
	return nvml.Memory{Total: h.in.MemTotal, Used: used, Free: h.in.MemTotal - used}, nvml.SUCCESS
}

func (h *migHandle) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	if r := h.g.failing(); r != nvml.SUCCESS {
		return nil, r
	}
	return h.in.State().Processes, nvml.SUCCESS
}

// GetUtilizationRates: NVML does not give utilisation on a MIG device handle.
func (h *migHandle) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
}

// gpuHandle is a GPU's handle as Node.Lib hands it out: the per-tick calls go
// straight to the function fields of the mock device (a field set to nil panics,
// as in go-nvml's mock); the rest go through the mock's recording methods.
type gpuHandle struct {
	*server.Device
	g *GPU
}

func (h *gpuHandle) GetUUID() (string, nvml.Return)         { return h.GetUUIDFunc() }
func (h *gpuHandle) GetName() (string, nvml.Return)         { return h.GetNameFunc() }
func (h *gpuHandle) GetMigMode() (int, int, nvml.Return)    { return h.GetMigModeFunc() }
func (h *gpuHandle) IsMigDeviceHandle() (bool, nvml.Return) { return false, nvml.SUCCESS }
func (h *gpuHandle) GetMaxMigDeviceCount() (int, nvml.Return) {
	return h.GetMaxMigDeviceCountFunc()
}
func (h *gpuHandle) GetMigDeviceHandleByIndex(i int) (nvml.Device, nvml.Return) {
	return h.GetMigDeviceHandleByIndexFunc(i)
}
func (h *gpuHandle) GetMemoryInfo() (nvml.Memory, nvml.Return) { return h.GetMemoryInfoFunc() }
func (h *gpuHandle) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return h.GetComputeRunningProcessesFunc()
}
func (h *gpuHandle) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	return h.GetUtilizationRatesFunc()
}
func (h *gpuHandle) GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return) {
	return h.GpmQueryDeviceSupportFunc()
}
func (h *gpuHandle) GetActiveVgpus() ([]nvml.VgpuInstance, nvml.Return) { return h.g.activeVGPUs() }
func (h *gpuHandle) GetVgpuUtilization(last uint64) (nvml.ValueType, []nvml.VgpuInstanceUtilizationSample, nvml.Return) {
	return h.g.vgpuUtilization(last)
}
func (h *gpuHandle) GetProcessUtilization(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	return h.g.processUtilization(last)
}

// lib is Node.Lib: the mock server, with the per-tick calls answered directly.
type lib struct {
	*server.Server
	n *Node
}

func (l *lib) DeviceGetCount() (int, nvml.Return) { return len(l.n.GPUs), nvml.SUCCESS }

func (l *lib) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i < 0 || i >= len(l.n.GPUs) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return l.n.GPUs[i].handle, nvml.SUCCESS
}

func (l *lib) GpmQueryDeviceSupport(d nvml.Device) (nvml.GpmSupport, nvml.Return) {
	return l.GpmQueryDeviceSupportFunc(d)
}

func (l *lib) GpmSampleAlloc() (nvml.GpmSample, nvml.Return) { return l.GpmSampleAllocFunc() }

func (l *lib) GpmSampleFree(smp nvml.GpmSample) nvml.Return { return l.GpmSampleFreeFunc(smp) }

func (l *lib) GpmMigSampleGet(d nvml.Device, giID int, smp nvml.GpmSample) nvml.Return {
	return l.GpmMigSampleGetFunc(d, giID, smp)
}

func (l *lib) GpmMetricsGet(m *nvml.GpmMetricsGetType) nvml.Return {
	return l.GpmMetricsGetFunc(m)
}

// install sets the function fields go-nvml's mock device lacks: what the
// card is, then what it reads.
func (g *GPU) install() {
	g.installTopology()
	g.installReadings()
}

// installTopology answers the card's identity and its MIG instances.
func (g *GPU) installTopology() {
	d := g.Device
	origUUID, origName := d.GetUUIDFunc, d.GetNameFunc
	d.GetUUIDFunc = func() (string, nvml.Return) {
		if r := g.failing(); r != nvml.SUCCESS {
			return "", r
		}
		return origUUID()
	}
	d.GetNameFunc = func() (string, nvml.Return) {
		if r := g.failing(); r != nvml.SUCCESS {
			return "", r
		}
		return origName()
	}
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) {
		if !g.MIG {
			return 0, nvml.SUCCESS
		}
		return 7, nvml.SUCCESS
	}
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if r := g.failing(); r != nvml.SUCCESS {
			return nil, r
		}
		if !g.MIG || i < 0 || i >= len(g.Instances) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return g.Instances[i].Handle, nvml.SUCCESS
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		d.RLock()
		defer d.RUnlock()
		for gi := range d.GpuInstances {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
}

// installReadings answers the card's memory, processes, utilisation and GPM
// support, failing as the card is told to.
func (g *GPU) installReadings() {
	d := g.Device
	origMem := d.GetMemoryInfoFunc
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if r := g.failing(); r != nvml.SUCCESS {
			return nvml.Memory{}, r
		}
		if g.MIG {
			return origMem()
		}
		in := g.Instances[0]
		s := in.State()
		used := min(s.MemUsed, in.MemTotal)
		return nvml.Memory{Total: in.MemTotal, Used: used, Free: in.MemTotal - used}, nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		if r := g.failing(); r != nvml.SUCCESS {
			return nil, r
		}
		var ps []nvml.ProcessInfo
		for _, in := range g.Instances {
			ps = append(ps, in.State().Processes...)
		}
		return ps, nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		if r := g.failing(); r != nvml.SUCCESS {
			return nvml.Utilization{}, r
		}
		if g.MIG {
			// As on real hardware: no utilisation for a GPU in MIG mode.
			return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.Utilization{Gpu: uint32(g.Instances[0].State().Util*100 + 0.5)}, nvml.SUCCESS
	}
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		if r := g.failing(); r != nvml.SUCCESS {
			return nvml.GpmSupport{}, r
		}
		if !g.GPM {
			return nvml.GpmSupport{IsSupportedDevice: 0}, nvml.SUCCESS
		}
		return nvml.GpmSupport{IsSupportedDevice: 1}, nvml.SUCCESS
	}
}

func (n *Node) gpu(d nvml.Device) *GPU {
	if h, ok := d.(*gpuHandle); ok {
		return h.g
	}
	for _, g := range n.GPUs {
		if g.Device == d {
			return g
		}
	}
	return nil
}

// gpmSample is a GPM sample buffer of the mock: it remembers the utilisation of
// the instance it was taken on.
type gpmSample struct {
	mock.GpmSample
	util  float64
	valid bool
}

func (n *Node) install() {
	s := n.Server
	s.DeviceGetCountFunc = func() (int, nvml.Return) { return len(n.GPUs), nvml.SUCCESS }
	s.GpmQueryDeviceSupportFunc = func(d nvml.Device) (nvml.GpmSupport, nvml.Return) {
		return d.GpmQueryDeviceSupport()
	}
	s.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		gs := &gpmSample{}
		gs.FreeFunc = func() nvml.Return { return nvml.SUCCESS }
		return gs, nvml.SUCCESS
	}
	s.GpmSampleFreeFunc = func(nvml.GpmSample) nvml.Return { return nvml.SUCCESS }
	s.GpmMigSampleGetFunc = func(d nvml.Device, giID int, smp nvml.GpmSample) nvml.Return {
		g := n.gpu(d)
		gs, ok := smp.(*gpmSample)
		if g == nil || !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		if r := g.failing(); r != nvml.SUCCESS {
			return r
		}
		if !g.GPM {
			return nvml.ERROR_NOT_SUPPORTED
		}
		for _, in := range g.Instances {
			if in.GIID == giID {
				gs.util, gs.valid = in.State().Util, true
				return nvml.SUCCESS
			}
		}
		return nvml.ERROR_NOT_FOUND
	}
	s.GpmMetricsGetFunc = func(m *nvml.GpmMetricsGetType) nvml.Return {
		s1, ok1 := m.Sample1.(*gpmSample)
		s2, ok2 := m.Sample2.(*gpmSample)
		if !ok1 || !ok2 || !s1.valid || !s2.valid {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		for i := 0; i < int(m.NumMetrics) && i < len(m.Metrics); i++ {
			switch nvml.GpmMetricId(m.Metrics[i].MetricId) {
			case nvml.GPM_METRIC_SM_UTIL, nvml.GPM_METRIC_GRAPHICS_UTIL:
				// The mock's "counter" is the utilisation at the second sample.
				m.Metrics[i].Value = s2.util * 100
				m.Metrics[i].NvmlReturn = uint32(nvml.SUCCESS)
			default:
				m.Metrics[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return nvml.SUCCESS
	}
}
