// Package nvmlsource is the collector's device Source over NVIDIA's NVML
// (github.com/NVIDIA/go-nvml). It takes an nvml.Interface, so tests and the
// simulated fleet pass go-nvml mocks and production passes nvml.New().
//
// Per GPU it reports the whole card (profile "full") when MIG is off, or every
// MIG device when MIG is on. Utilisation is reported only where NVML measures
// it: utilisation rates of a whole card (util_source "nvml"), GPM SM utilisation
// of a MIG instance on Hopper and newer (util_source "gpm"); otherwise util is
// null (util_source "none"), never guessed.
//
// With VGPU on (a vGPU host), a GPU that has active vGPU instances is reported
// as those instances (share_kind "vgpu"). With ProcessUtilization on, a whole
// card's processes carry their NVML per-process utilisation, which the
// Kubernetes splitter sums per share (collector.SplitCard).
package nvmlsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/collector"
)

// ErrNoNVML is returned by New when the NVML library cannot be loaded.
var ErrNoNVML = errors.New("NVML library (libnvidia-ml.so.1) not found: is the NVIDIA driver installed and the library on the loader path?")

// Config configures a Source.
type Config struct {
	Lib        nvml.Interface // required: nvml.New() or a mock
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: metrics are not registered
	// DisableGPM turns GPM off (util of MIG instances is then null).
	DisableGPM bool
	// VGPU reads the active vGPU instances of each GPU (a vGPU host:
	// nvmlDeviceGetActiveVgpus); a GPU with none is reported whole.
	VGPU bool
	// VMName names the VM of a vGPU instance by its VM ID (NVML gives the
	// ID only); nil: vGPU instances carry no VM name.
	VMName func(vmID string) string
	// ProcessUtilization reads per-process utilisation of whole cards
	// (nvmlDeviceGetProcessUtilization), for shares of a card.
	ProcessUtilization bool
}

// Validate reports every problem of the configuration.
func (c *Config) Validate() error {
	if c.Lib == nil {
		return errors.New("nvmlsource: Lib is required")
	}
	return nil
}

// Source reads GPU instances through NVML. It is safe for use by one goroutine
// at a time (the collector's tick loop).
type Source struct {
	lib    nvml.Interface
	log    *slog.Logger
	gpmOff bool
	errs   *prometheus.CounterVec

	vgpu, procUtil bool
	vmName         func(string) string
	licensed       *prometheus.GaugeVec

	mu       sync.Mutex
	profiles map[string]string    // MIG UUID → profile name
	gpm      map[string]*gpmState // MIG UUID → GPM samples
	gpmOK    map[string]bool      // GPU UUID → GPM supported
	metrics  *nvml.GpmMetricsGetType

	vgpuSeen    map[string]uint64  // GPU UUID → last vGPU utilisation sample seen
	procSeen    map[string]uint64  // GPU UUID → last process utilisation sample seen
	licenseSeen map[string]float64 // vGPU instance → last license state
}

type gpmState struct {
	prev, cur nvml.GpmSample
	havePrev  bool
	seen      bool
}

// New initialises NVML and returns a Source. When the library is missing it
// returns an error that wraps ErrNoNVML.
func New(cfg Config) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cardhour_collector_nvml_errors_total",
		Help: "NVML calls that failed, per call.",
	}, []string{"call"})
	licensed := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cardhour_collector_vgpu_licensed",
		Help: "License state of a vGPU instance: 1 licensed, 0 not licensed (reduced capability).",
	}, []string{"instance_id", "vm_id"})
	if cfg.Registerer != nil {
		var err error
		if errs, err = register(cfg.Registerer, errs); err != nil {
			return nil, err
		}
		if licensed, err = register(cfg.Registerer, licensed); err != nil {
			return nil, err
		}
	}
	switch r := cfg.Lib.Init(); r {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, ErrNoNVML
	default:
		return nil, fmt.Errorf("cannot initialise NVML: %s", errString(r))
	}
	s := &Source{lib: cfg.Lib, log: cfg.Logger.With("component", "nvml"), gpmOff: cfg.DisableGPM, errs: errs,
		profiles: map[string]string{}, gpm: map[string]*gpmState{}, gpmOK: map[string]bool{},
		vgpu: cfg.VGPU, procUtil: cfg.ProcessUtilization, vmName: cfg.VMName, licensed: licensed,
		vgpuSeen: map[string]uint64{}, procSeen: map[string]uint64{}, licenseSeen: map[string]float64{}}
	if v, r := cfg.Lib.SystemGetDriverVersion(); r == nvml.SUCCESS {
		s.log.Info("NVML initialised", "driver", v)
	}
	return s, nil
}

// register registers c, or returns the collector already registered under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return c, err
		}
		if prev, ok := are.ExistingCollector.(C); ok {
			return prev, nil
		}
		return c, err
	}
	return c, nil
}

func joinErrs(errs []error) error { return errors.Join(errs...) }

// Close frees GPM buffers and shuts NVML down.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, st := range s.gpm {
		s.freeGPM(st)
		delete(s.gpm, id)
	}
	if r := s.lib.Shutdown(); r != nvml.SUCCESS {
		return fmt.Errorf("cannot shut NVML down: %s", errString(r))
	}
	return nil
}

// callError is one failed NVML call.
type callError struct {
	call string
	ret  nvml.Return
}

func (e *callError) Error() string { return e.call + ": " + errString(e.ret) }

func errString(r nvml.Return) string {
	defer func() { _ = recover() }() // Error() needs the library for some codes
	return r.Error()
}

func (s *Source) fail(call string, r nvml.Return) error {
	s.errs.WithLabelValues(call).Inc()
	return &callError{call: call, ret: r}
}

// Sample reads every instance of every GPU. A failing GPU is reported in the
// joined error and skipped; the others are still read.
func (s *Source) Sample(ctx context.Context) ([]collector.Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, r := s.lib.DeviceGetCount()
	if r != nvml.SUCCESS {
		return nil, s.fail("DeviceGetCount", r)
	}
	for _, st := range s.gpm {
		st.seen = false
	}
	var out []collector.Instance
	var errs []error
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		insts, err := s.sampleGPU(i)
		out = append(out, insts...)
		if err != nil {
			errs = append(errs, fmt.Errorf("GPU %d: %w", i, err))
		}
	}
	for id, st := range s.gpm {
		if !st.seen { // the MIG instance is gone
			s.freeGPM(st)
			delete(s.gpm, id)
		}
	}
	return out, errors.Join(errs...)
}

// sampleGPU reads one GPU; a panic inside (a broken binding or mock) becomes an error.
func (s *Source) sampleGPU(i int) (out []collector.Instance, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.errs.WithLabelValues("panic").Inc()
			err = fmt.Errorf("NVML call panicked: %v", p)
		}
	}()
	dev, r := s.lib.DeviceGetHandleByIndex(i)
	if r != nvml.SUCCESS {
		return nil, s.fail("DeviceGetHandleByIndex", r)
	}
	uuid, r := dev.GetUUID()
	if r != nvml.SUCCESS {
		return nil, s.fail("GetUUID", r)
	}
	name, r := dev.GetName()
	if r != nvml.SUCCESS {
		return nil, s.fail("GetName", r)
	}
	mig := false
	if cur, _, r := dev.GetMigMode(); r == nvml.SUCCESS {
		mig = cur == nvml.DEVICE_MIG_ENABLE
	} else if r != nvml.ERROR_NOT_SUPPORTED {
		return nil, s.fail("GetMigMode", r)
	}
	if !mig && s.vgpu {
		switch vgpus, r := dev.GetActiveVgpus(); r {
		case nvml.SUCCESS:
			if len(vgpus) > 0 {
				return s.vgpuInstances(dev, i, uuid, name, vgpus)
			}
		case nvml.ERROR_NOT_SUPPORTED:
		default:
			_ = s.fail("GetActiveVgpus", r) // the card is still reported whole
		}
	}
	if !mig {
		in, err := s.wholeCard(dev, i, uuid, name)
		if err != nil {
			return nil, err
		}
		return []collector.Instance{in}, nil
	}
	return s.migDevices(dev, i, uuid, name)
}

func (s *Source) wholeCard(dev nvml.Device, idx int, uuid, name string) (collector.Instance, error) {
	in := collector.Instance{GPUUUID: uuid, GPUModel: name, GPUIndex: idx, InstanceID: uuid,
		Profile: collector.ProfileFull, GIID: -1, UtilSource: collector.UtilSourceNone}
	mem, r := dev.GetMemoryInfo()
	if r != nvml.SUCCESS {
		return in, s.fail("GetMemoryInfo", r)
	}
	in.MemUsed, in.MemTotal = clampInt64(mem.Used), clampInt64(mem.Total)
	procs, r := dev.GetComputeRunningProcesses()
	if r != nvml.SUCCESS {
		return in, s.fail("GetComputeRunningProcesses", r)
	}
	in.Processes = convertProcs(procs)
	if s.procUtil {
		s.processUtil(dev, &in)
	}
	switch u, r := dev.GetUtilizationRates(); r {
	case nvml.SUCCESS:
		if u.Gpu <= 100 {
			in.Util, in.UtilKnown, in.UtilSource = float64(u.Gpu)/100, true, collector.UtilSourceNVML
		}
	case nvml.ERROR_NOT_SUPPORTED:
	default:
		// Memory and processes are known: report the instance with util null.
		_ = s.fail("GetUtilizationRates", r)
	}
	return in, nil
}

func (s *Source) migDevices(dev nvml.Device, idx int, uuid, name string) ([]collector.Instance, error) {
	max, r := dev.GetMaxMigDeviceCount()
	if r != nvml.SUCCESS {
		return nil, s.fail("GetMaxMigDeviceCount", r)
	}
	gpmOK := s.gpmSupported(dev, uuid)
	var out []collector.Instance
	var errs []error
	for j := 0; j < max; j++ {
		h, r := dev.GetMigDeviceHandleByIndex(j)
		if r == nvml.ERROR_NOT_FOUND || r == nvml.ERROR_INVALID_ARGUMENT {
			continue // no MIG device at this index
		}
		if r != nvml.SUCCESS {
			errs = append(errs, s.fail("GetMigDeviceHandleByIndex", r))
			continue
		}
		in, err := s.migDevice(dev, h, idx, uuid, name, gpmOK)
		if err != nil {
			errs = append(errs, fmt.Errorf("MIG device %d: %w", j, err))
			continue
		}
		out = append(out, in)
	}
	return out, errors.Join(errs...)
}

func (s *Source) migDevice(parent, h nvml.Device, idx int, gpuUUID, name string, gpmOK bool) (collector.Instance, error) {
	in := collector.Instance{GPUUUID: gpuUUID, GPUModel: name, GPUIndex: idx, UtilSource: collector.UtilSourceNone}
	uuid, r := h.GetUUID()
	if r != nvml.SUCCESS {
		return in, s.fail("GetUUID", r)
	}
	in.InstanceID = uuid
	giID, r := h.GetGpuInstanceId()
	if r != nvml.SUCCESS {
		return in, s.fail("GetGpuInstanceId", r)
	}
	in.GIID = giID
	prof, err := s.profile(parent, uuid, giID)
	if err != nil {
		return in, err
	}
	in.Profile = prof
	mem, r := h.GetMemoryInfo()
	if r != nvml.SUCCESS {
		return in, s.fail("GetMemoryInfo", r)
	}
	in.MemUsed, in.MemTotal = clampInt64(mem.Used), clampInt64(mem.Total)
	procs, r := h.GetComputeRunningProcesses()
	if r != nvml.SUCCESS {
		return in, s.fail("GetComputeRunningProcesses", r)
	}
	in.Processes = convertProcs(procs)
	if gpmOK {
		if u, ok := s.gpmUtil(parent, uuid, giID); ok {
			in.Util, in.UtilKnown, in.UtilSource = u, true, collector.UtilSourceGPM
		}
	}
	return in, nil
}

// profile returns the MIG profile name of a MIG device, cached by its UUID (a
// reconfigured GPU instance gets a new UUID).
func (s *Source) profile(parent nvml.Device, migUUID string, giID int) (string, error) {
	if p, ok := s.profiles[migUUID]; ok {
		return p, nil
	}
	gi, r := parent.GetGpuInstanceById(giID)
	if r != nvml.SUCCESS {
		return "", s.fail("GetGpuInstanceById", r)
	}
	info, r := gi.GetInfo()
	if r != nvml.SUCCESS {
		return "", s.fail("GpuInstanceGetInfo", r)
	}
	mem, r := parent.GetMemoryInfo()
	if r != nvml.SUCCESS {
		return "", s.fail("GetMemoryInfo", r)
	}
	for k := 0; k < nvml.GPU_INSTANCE_PROFILE_COUNT; k++ {
		pi, r := parent.GetGpuInstanceProfileInfo(k)
		if r != nvml.SUCCESS || pi.Id != info.ProfileId {
			continue
		}
		p := ProfileName(k, pi, mem.Total)
		if len(s.profiles) > 4096 { // bound the cache against endless reconfiguration
			clear(s.profiles)
		}
		s.profiles[migUUID] = p
		return p, nil
	}
	return "", fmt.Errorf("no GPU instance profile has id %d", info.ProfileId)
}

func (s *Source) gpmSupported(dev nvml.Device, gpuUUID string) bool {
	if s.gpmOff {
		return false
	}
	if ok, known := s.gpmOK[gpuUUID]; known {
		return ok
	}
	sup, r := s.lib.GpmQueryDeviceSupport(dev)
	ok := r == nvml.SUCCESS && sup.IsSupportedDevice != 0
	if r != nvml.SUCCESS && r != nvml.ERROR_NOT_SUPPORTED {
		_ = s.fail("GpmQueryDeviceSupport", r)
		return false // ask again next time
	}
	s.gpmOK[gpuUUID] = ok
	return ok
}

// gpmUtil takes a GPM sample of the GPU instance and returns the SM utilisation
// since the previous one (false on the first sample or on any error).
func (s *Source) gpmUtil(parent nvml.Device, migUUID string, giID int) (float64, bool) {
	st := s.gpm[migUUID]
	if st == nil {
		a, r1 := s.lib.GpmSampleAlloc()
		b, r2 := s.lib.GpmSampleAlloc()
		if r1 != nvml.SUCCESS || r2 != nvml.SUCCESS {
			_ = s.fail("GpmSampleAlloc", max(r1, r2))
			if r1 == nvml.SUCCESS {
				_ = s.lib.GpmSampleFree(a)
			}
			if r2 == nvml.SUCCESS {
				_ = s.lib.GpmSampleFree(b)
			}
			return 0, false
		}
		st = &gpmState{prev: a, cur: b}
		s.gpm[migUUID] = st
	}
	st.seen = true
	if r := s.lib.GpmMigSampleGet(parent, giID, st.cur); r != nvml.SUCCESS {
		_ = s.fail("GpmMigSampleGet", r)
		st.havePrev = false
		return 0, false
	}
	defer func() { st.prev, st.cur, st.havePrev = st.cur, st.prev, true }()
	if !st.havePrev {
		return 0, false
	}
	// GpmMetricsGetType holds 477 metrics (tens of kB): reuse one.
	if s.metrics == nil {
		s.metrics = new(nvml.GpmMetricsGetType)
	}
	m := s.metrics
	m.NumMetrics, m.Sample1, m.Sample2 = 1, st.prev, st.cur
	m.Metrics[0] = nvml.GpmMetric{MetricId: uint32(nvml.GPM_METRIC_SM_UTIL)}
	if r := s.lib.GpmMetricsGet(m); r != nvml.SUCCESS {
		_ = s.fail("GpmMetricsGet", r)
		return 0, false
	}
	if nvml.Return(m.Metrics[0].NvmlReturn) != nvml.SUCCESS {
		_ = s.fail("GpmMetricsGet(SM_UTIL)", nvml.Return(m.Metrics[0].NvmlReturn))
		return 0, false
	}
	v := m.Metrics[0].Value / 100
	if math.IsNaN(v) || v < 0 {
		return 0, false
	}
	return min(v, 1), true
}

func (s *Source) freeGPM(st *gpmState) {
	_ = s.lib.GpmSampleFree(st.prev)
	_ = s.lib.GpmSampleFree(st.cur)
}

func convertProcs(ps []nvml.ProcessInfo) []collector.Process {
	if len(ps) == 0 {
		return nil
	}
	out := make([]collector.Process, 0, len(ps))
	for _, p := range ps {
		mem := p.UsedGpuMemory
		if mem == math.MaxUint64 { // NVML_VALUE_NOT_AVAILABLE
			mem = 0
		}
		out = append(out, collector.Process{PID: p.Pid, UsedMemory: mem})
	}
	return out
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
