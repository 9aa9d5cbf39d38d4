package nvmlsource

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/schemas"
)

// vgpuInstances reads the active vGPU instances of a GPU on a vGPU host: one
// instance each, profile the vGPU type's name, share_mem its framebuffer over
// the card's memory, utilisation from nvmlDeviceGetVgpuUtilization (null
// where it gives none). The guests' processes are not visible from the host.
func (s *Source) vgpuInstances(dev nvml.Device, idx int, uuid, name string, vgpus []nvml.VgpuInstance) ([]collector.Instance, error) {
	mem, r := dev.GetMemoryInfo()
	if r != nvml.SUCCESS {
		return nil, s.fail("GetMemoryInfo", r)
	}
	util := s.vgpuUtil(dev, uuid)
	out := make([]collector.Instance, 0, len(vgpus))
	var errs []error
	for _, v := range vgpus {
		in, err := s.vgpuInstance(v, idx, uuid, name, mem.Total, util)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, in)
	}
	collector.SortInstances(out)
	return out, joinErrs(errs)
}

func (s *Source) vgpuInstance(v nvml.VgpuInstance, idx int, gpuUUID, name string, cardMem uint64, util map[uint32]float64) (collector.Instance, error) {
	in := collector.Instance{GPUUUID: gpuUUID, GPUModel: name, GPUIndex: idx, GIID: -1,
		ShareKind: schemas.ShareVGPU, UtilSource: collector.UtilSourceNone}
	h, hasHandle := vgpuHandle(v)
	if id, r := v.GetUUID(); r == nvml.SUCCESS && id != "" {
		in.InstanceID = id
	} else if hasHandle {
		in.InstanceID = fmt.Sprintf("%s/vgpu/%d", gpuUUID, h)
	} else {
		return in, s.fail("VgpuInstanceGetUUID", r)
	}
	typ, r := v.GetType()
	if r != nvml.SUCCESS {
		return in, s.fail("VgpuInstanceGetType", r)
	}
	if in.Profile, r = typ.GetName(); r != nvml.SUCCESS || in.Profile == "" {
		return in, s.fail("VgpuTypeGetName", r)
	}
	fb, r := typ.GetFramebufferSize()
	if r != nvml.SUCCESS {
		return in, s.fail("VgpuTypeGetFramebufferSize", r)
	}
	in.MemTotal = clampInt64(fb)
	if cardMem > 0 && fb > 0 {
		in.ShareMem = min(float64(fb)/float64(cardMem), 1)
	}
	if used, r := v.GetFbUsage(); r == nvml.SUCCESS {
		in.MemUsed = clampInt64(min(used, fb))
	} else {
		_ = s.fail("VgpuInstanceGetFbUsage", r)
	}
	if vm, _, r := v.GetVmID(); r == nvml.SUCCESS {
		in.VMID = vm
	} else {
		_ = s.fail("VgpuInstanceGetVmID", r)
	}
	if s.vmName != nil && in.VMID != "" {
		in.VMName = s.vmName(in.VMID)
	}
	if u, ok := util[h]; ok && hasHandle {
		in.Util, in.UtilKnown, in.UtilSource = u, true, collector.UtilSourceNVML
	}
	s.license(v, &in)
	return in, nil
}

// vgpuHandle is the NVML handle of a vGPU instance (nvmlVgpuInstance_t, an
// unsigned int): the key of nvmlDeviceGetVgpuUtilization's samples. go-nvml's
// instance is that integer; a test double may say it with Handle().
func vgpuHandle(v nvml.VgpuInstance) (uint32, bool) {
	if h, ok := v.(interface{ Handle() uint32 }); ok {
		return h.Handle(), true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Uint32 {
		return uint32(rv.Uint()), true
	}
	return 0, false
}

// vgpuUtil is the SM utilisation of each vGPU instance of the GPU since the
// previous tick: the mean of its samples newer than the last one seen.
func (s *Source) vgpuUtil(dev nvml.Device, gpuUUID string) map[uint32]float64 {
	typ, samples, r := dev.GetVgpuUtilization(s.vgpuSeen[gpuUUID])
	switch r {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_FOUND, nvml.ERROR_NOT_SUPPORTED:
		return nil // no samples since the last tick: util null
	default:
		_ = s.fail("GetVgpuUtilization", r)
		return nil
	}
	sum := map[uint32]float64{}
	n := map[uint32]int{}
	last := s.vgpuSeen[gpuUUID]
	for _, smp := range samples {
		v, ok := sampleValue(typ, smp.SmUtil)
		if !ok || v < 0 {
			continue
		}
		sum[smp.VgpuInstance] += v
		n[smp.VgpuInstance]++
		last = max(last, smp.TimeStamp)
	}
	s.vgpuSeen[gpuUUID] = last
	for h, v := range sum {
		sum[h] = min(v/float64(n[h])/100, 1)
	}
	return sum
}

// sampleValue reads an nvmlValue_t of the given type as a number.
func sampleValue(t nvml.ValueType, b [8]byte) (float64, bool) {
	switch t {
	case nvml.VALUE_TYPE_DOUBLE:
		f := math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(b[:4])), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(b[:])), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(b[:]))), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(b[:4]))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(b[:2])), true
	}
	return 0, false
}

// license exports the license state of a vGPU instance (the metric
// cardhour_collector_vgpu_licensed) and logs a change to unlicensed: an
// unlicensed vGPU runs with reduced capability, which the holder should know;
// it is not on the wire.
func (s *Source) license(v nvml.VgpuInstance, in *collector.Instance) {
	licensed := -1.0
	if li, r := v.GetLicenseInfo(); r == nvml.SUCCESS {
		licensed = float64(min(li.IsLicensed, 1))
	} else if st, r2 := v.GetLicenseStatus(); r2 == nvml.SUCCESS {
		licensed = float64(min(max(st, 0), 1))
	} else {
		_ = s.fail("VgpuInstanceGetLicenseInfo", r)
		return
	}
	s.licensed.WithLabelValues(in.InstanceID, in.VMID).Set(licensed)
	was, seen := s.licenseSeen[in.InstanceID]
	if licensed == 0 && (!seen || was != 0) {
		s.log.Warn("vGPU instance is not licensed", "instance_id", in.InstanceID, "vm_id", in.VMID, "profile", in.Profile)
	} else if licensed == 1 && seen && was == 0 {
		s.log.Info("vGPU instance is licensed again", "instance_id", in.InstanceID, "vm_id", in.VMID)
	}
	if len(s.licenseSeen) > 4096 {
		clear(s.licenseSeen)
	}
	s.licenseSeen[in.InstanceID] = licensed
}
