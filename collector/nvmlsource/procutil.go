package nvmlsource

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cardhour/cardhour/collector"
)

// processUtil sets the SM utilisation of each process of a whole card from
// nvmlDeviceGetProcessUtilization: the mean of the process's samples newer
// than the last one seen. NVML returns a sample only for a process that had
// non-zero utilisation in the sample period, and NOT_FOUND when no process
// had any, so a process without a sample ran nothing: 0. Any other answer
// leaves every process's utilisation unknown (ProcUtilKnown false).
func (s *Source) processUtil(dev nvml.Device, in *collector.Instance) {
	samples, r := dev.GetProcessUtilization(s.procSeen[in.GPUUUID])
	switch r {
	case nvml.SUCCESS, nvml.ERROR_NOT_FOUND:
	case nvml.ERROR_NOT_SUPPORTED:
		return
	default:
		_ = s.fail("GetProcessUtilization", r)
		return
	}
	type acc struct {
		sum float64
		n   int
	}
	by := make(map[uint32]acc, len(samples))
	last := s.procSeen[in.GPUUUID]
	for _, smp := range samples {
		if smp.SmUtil > 100 {
			continue
		}
		a := by[smp.Pid]
		a.sum += float64(smp.SmUtil) / 100
		a.n++
		by[smp.Pid] = a
		last = max(last, smp.TimeStamp)
	}
	if len(s.procSeen) > 4096 {
		clear(s.procSeen)
	}
	s.procSeen[in.GPUUUID] = last
	for i := range in.Processes {
		p := &in.Processes[i]
		p.Util, p.UtilKnown = 0, true
		if a, ok := by[p.PID]; ok {
			p.Util = a.sum / float64(a.n)
		}
	}
	in.ProcUtilKnown = true
}
