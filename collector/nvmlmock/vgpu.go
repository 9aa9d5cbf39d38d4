package nvmlmock

import (
	"encoding/binary"
	"sort"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// VGPUState is what a vGPU instance reports at one moment.
type VGPUState struct {
	Active   bool    // a VM runs on it: GetActiveVgpus lists it
	FbUsed   uint64  // framebuffer used, bytes
	Util     float64 // SM utilisation in [0,1]; negative: no sample
	Licensed bool
}

// VGPU is one vGPU instance of a card on a vGPU host.
type VGPU struct {
	ID       uint32 // the NVML handle (nvmlVgpuInstance_t)
	UUID     string // "" : the driver gives none
	TypeName string // e.g. A16-1Q
	FbBytes  uint64
	VMID     string
	VMName   string // not from NVML: the fleet's VM names

	mu      sync.Mutex
	state   VGPUState
	dynamic func() VGPUState
	inst    *vgpuInstance
}

// Set fixes the state the vGPU reports.
func (v *VGPU) Set(s VGPUState) {
	v.mu.Lock()
	v.state = s
	v.mu.Unlock()
}

// Dynamic makes the vGPU compute its state on every call (nil: use Set).
func (v *VGPU) Dynamic(f func() VGPUState) {
	v.mu.Lock()
	v.dynamic = f
	v.mu.Unlock()
}

// State returns the current state.
func (v *VGPU) State() VGPUState {
	v.mu.Lock()
	f, s := v.dynamic, v.state
	v.mu.Unlock()
	if f != nil {
		return f()
	}
	return s
}

// EnableVGPU makes the card a vGPU host card with count instances of the
// given type (framebuffer fbBytes each), none active until their state says
// so. VM IDs and UUIDs are deterministic in seed.
func (g *GPU) EnableVGPU(typeName string, fbBytes uint64, count int, seed string, gpuIdx int) {
	for i := 0; i < count; i++ {
		v := &VGPU{ID: uint32(gpuIdx*1000 + i + 1), UUID: detUUID(seed+"/vgpu", gpuIdx, i), TypeName: typeName, FbBytes: fbBytes,
			VMID: detUUID(seed+"/vm", gpuIdx, i)}
		v.inst = &vgpuInstance{VgpuInstance: unansweredVGPU, v: v, typ: &vgpuType{VgpuTypeId: unansweredType, v: v}}
		g.VGPUs = append(g.VGPUs, v)
	}
}

var (
	unansweredVGPU = &mock.VgpuInstance{}
	unansweredType = &mock.VgpuTypeId{}
)

// vgpuInstance answers the calls a collector makes on a vGPU instance.
type vgpuInstance struct {
	*mock.VgpuInstance
	v   *VGPU
	typ *vgpuType
}

func (i *vgpuInstance) Handle() uint32 { return i.v.ID }
func (i *vgpuInstance) GetUUID() (string, nvml.Return) {
	if i.v.UUID == "" {
		return "", nvml.ERROR_NOT_SUPPORTED
	}
	return i.v.UUID, nvml.SUCCESS
}
func (i *vgpuInstance) GetType() (nvml.VgpuTypeId, nvml.Return) { return i.typ, nvml.SUCCESS }
func (i *vgpuInstance) GetFbUsage() (uint64, nvml.Return)       { return i.v.State().FbUsed, nvml.SUCCESS }
func (i *vgpuInstance) GetVmID() (string, nvml.VgpuVmIdType, nvml.Return) {
	return i.v.VMID, nvml.VGPU_VM_ID_UUID, nvml.SUCCESS
}
func (i *vgpuInstance) GetLicenseInfo() (nvml.VgpuLicenseInfo, nvml.Return) {
	var li nvml.VgpuLicenseInfo
	if i.v.State().Licensed {
		li.IsLicensed = 1
	}
	return li, nvml.SUCCESS
}

type vgpuType struct {
	*mock.VgpuTypeId
	v *VGPU
}

func (t *vgpuType) GetName() (string, nvml.Return)            { return t.v.TypeName, nvml.SUCCESS }
func (t *vgpuType) GetFramebufferSize() (uint64, nvml.Return) { return t.v.FbBytes, nvml.SUCCESS }

func (g *GPU) activeVGPUs() ([]nvml.VgpuInstance, nvml.Return) {
	if r := g.failing(); r != nvml.SUCCESS {
		return nil, r
	}
	if len(g.VGPUs) == 0 {
		return nil, nvml.ERROR_NOT_SUPPORTED // not a vGPU host card
	}
	var out []nvml.VgpuInstance
	for _, v := range g.VGPUs {
		if v.State().Active {
			out = append(out, v.inst)
		}
	}
	return out, nvml.SUCCESS
}

// tick advances the card's sample clock (microseconds, as NVML's CPU
// timestamps) and returns it.
func (g *GPU) tick() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ts += 1_000_000
	return g.ts
}

func (g *GPU) vgpuUtilization(last uint64) (nvml.ValueType, []nvml.VgpuInstanceUtilizationSample, nvml.Return) {
	if len(g.VGPUs) == 0 {
		return 0, nil, nvml.ERROR_NOT_SUPPORTED
	}
	ts := g.tick()
	var out []nvml.VgpuInstanceUtilizationSample
	for _, v := range g.VGPUs {
		st := v.State()
		if !st.Active || st.Util < 0 || ts <= last {
			continue
		}
		smp := nvml.VgpuInstanceUtilizationSample{VgpuInstance: v.ID, TimeStamp: ts}
		binary.LittleEndian.PutUint32(smp.SmUtil[:4], uint32(st.Util*100+0.5))
		out = append(out, smp)
	}
	if len(out) == 0 {
		return nvml.VALUE_TYPE_UNSIGNED_INT, nil, nvml.ERROR_NOT_FOUND
	}
	return nvml.VALUE_TYPE_UNSIGNED_INT, out, nvml.SUCCESS
}

// processUtilization returns a sample per process with non-zero utilisation,
// NOT_FOUND when there is none, as NVML does.
func (g *GPU) processUtilization(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	if r := g.failing(); r != nvml.SUCCESS {
		return nil, r
	}
	if g.MIG {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	ts := g.tick()
	st := g.Instances[0].State()
	pids := make([]uint32, 0, len(st.ProcUtil))
	for pid, u := range st.ProcUtil {
		if u > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	var out []nvml.ProcessUtilizationSample
	for _, pid := range pids {
		if ts > last {
			out = append(out, nvml.ProcessUtilizationSample{Pid: pid, TimeStamp: ts, SmUtil: uint32(min(st.ProcUtil[pid], 1)*100 + 0.5)})
		}
	}
	if len(out) == 0 {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return out, nvml.SUCCESS
}
