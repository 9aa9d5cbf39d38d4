package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/schemas"
)

// Utilisation sources reported in util_source.
const (
	UtilSourceNVML = "nvml" // nvmlDeviceGetUtilizationRates on a whole (non-MIG) GPU
	UtilSourceGPM  = "gpm"  // GPU Performance Monitoring, SM utilisation of a MIG instance
	UtilSourceDCGM = "dcgm" // dcgm-exporter's DCGM_FI_PROF_GR_ENGINE_ACTIVE (collector/dcgm)
	UtilSourceNone = "none" // nothing measures it: util is null
)

// ProfileFull is the profile of a whole card that is not split by MIG.
const ProfileFull = "full"

// Process is one compute process seen on an instance.
type Process struct {
	PID        uint32
	UsedMemory uint64 // bytes; 0 when NVML does not report it
	// Util is the process's share of the card's SMs in [0,1] over the last
	// interval (NVML per-process utilisation), valid when UtilKnown.
	Util      float64
	UtilKnown bool
}

// Instance is what a Source read about one GPU instance (a MIG device, or a whole
// card) at one moment.
type Instance struct {
	GPUUUID    string
	GPUModel   string
	GPUIndex   int
	InstanceID string // MIG UUID, or the GPU UUID for a whole card
	Profile    string // e.g. "1g.10gb", or ProfileFull
	GIID       int    // GPU instance ID; -1 for a whole card
	MemUsed    int64
	MemTotal   int64
	Processes  []Process
	Util       float64 // valid when UtilKnown
	UtilKnown  bool
	UtilSource string // UtilSourceNVML, UtilSourceGPM, UtilSourceDCGM or UtilSourceNone
	// ProcUtilKnown: every process of Processes has its utilisation
	// (UtilKnown), so shares of the card can be measured (SplitCard).
	ProcUtilKnown bool

	// A share of the card (schemas.ShareVGPU, ShareHAMi, ShareTimeslice) and
	// its fractions of the card's memory and compute (0: not known); empty
	// on whole cards and MIG devices.
	ShareKind  string
	ShareMem   float64
	ShareCores float64
	// VMID and VMName: the VM of a vGPU instance (empty otherwise); VMID
	// makes the holder reference vm:<VMID>.
	VMID, VMName string
	// Namespace, Pod and Container: the container a Kubernetes share
	// (HAMi, time-sliced) belongs to (empty otherwise).
	Namespace, Pod, Container string
}

// Source reads every GPU instance the node has now.
//
// Sample returns what it could read and, joined, the errors of the devices it
// could not read: an error on one device never hides the others.
type Source interface {
	Sample(ctx context.Context) ([]Instance, error)
}

// Holder is who holds an instance.
type Holder struct {
	Project string
	User    string
	// Ref says how to reach the workload that holds the instance, for a
	// release: "k8s:<namespace>/<pod>", "slurm:<jobid>", "pid:<pid>", or
	// empty when the resolver knows none (a static map).
	Ref string
}

// Resolver attributes instances to holders. Resolve returns a holder for the
// instances it knows (keyed by InstanceID) and leaves the others out; the
// Collector asks the next resolver about those.
type Resolver interface {
	Name() string
	Resolve(ctx context.Context, insts []Instance) (map[string]Holder, error)
}

// Splitter replaces instances by the shares they are split into (a whole
// card shared by several pods: collector/attrib's Kube). Split returns the
// instances to sample, the ones it does not split unchanged; on error it
// still returns every instance it could not split, unchanged.
type Splitter interface {
	Name() string
	Split(ctx context.Context, insts []Instance) ([]Instance, error)
}

// Publisher ships samples. Publish may keep them (a spool) and send them later;
// it returns an error only when the samples could not be accepted at all.
type Publisher interface {
	Publish(ctx context.Context, samples []schemas.Sample) error
}

// Config configures a Collector.
type Config struct {
	Node     string        // host name written into every sample (required)
	Interval time.Duration // sampling interval, 1 s .. 1 h, whole milliseconds (default 10 s)
	// ModelNames maps an NVML product name to the name written into gpu_model,
	// so that catalog SKUs resolve when a driver reports a different spelling.
	ModelNames map[string]string
	// StopAt, when set, stops Run after the tick at or after this time
	// (used by fast-forward simulation); zero runs until the context ends.
	StopAt time.Time

	Source    Source     // required
	Splitters []Splitter // applied in order to what Source read; may be empty
	Resolvers []Resolver // tried in order; may be empty
	Publisher Publisher  // required
	Clock     Clock      // default RealClock
	Logger    *slog.Logger
	// Registerer receives the collector's metrics; nil registers nowhere.
	Registerer prometheus.Registerer
}

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("collector: node must not be empty"))
	}
	if c.Interval != 0 && (c.Interval < time.Second || c.Interval > time.Hour || c.Interval%time.Millisecond != 0) {
		errs = append(errs, fmt.Errorf("collector: interval %v: want 1s..1h in whole milliseconds", c.Interval))
	}
	if c.Source == nil {
		errs = append(errs, errors.New("collector: source is required"))
	}
	if c.Publisher == nil {
		errs = append(errs, errors.New("collector: publisher is required"))
	}
	for i, r := range c.Resolvers {
		if r == nil {
			errs = append(errs, fmt.Errorf("collector: resolver %d is nil", i))
		}
	}
	for i, sp := range c.Splitters {
		if sp == nil {
			errs = append(errs, fmt.Errorf("collector: splitter %d is nil", i))
		}
	}
	return errors.Join(errs...)
}

// DefaultInterval is the sampling interval when none is configured.
const DefaultInterval = 10 * time.Second

// Collector samples a node on aligned ticks and publishes one sample per instance
// per interval.
type Collector struct {
	cfg     Config
	log     *slog.Logger
	clock   Clock
	m       *metrics
	buf     []schemas.Sample
	lastOK  atomic.Int64 // unix nanos of the last tick that published
	started atomic.Int64

	errMu      sync.Mutex
	lastErrLog map[string]time.Time // throttles repeated error logs
}

// New returns a Collector for a valid configuration.
func New(cfg Config) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Collector{cfg: cfg, log: cfg.Logger.With("component", "collector", "node", cfg.Node),
		clock: cfg.Clock, m: m, lastErrLog: map[string]time.Time{}}, nil
}

// maxCatchUp bounds how much time one sample may claim after a stall (a
// suspended host, a stuck device call): a late tick claims at most this many
// intervals, never the whole outage.
const maxCatchUp = 3

// Run samples until ctx ends (or StopAt passes), then takes a final sample of the
// interval since the last tick. It returns nil on a normal stop.
func (c *Collector) Run(ctx context.Context) error {
	iv := c.cfg.Interval
	start := c.clock.Now()
	c.started.Store(start.UnixNano())
	c.log.Info("collector started", "interval", iv.String())
	prevNominal, prevMono := start, start
	for {
		now := c.clock.Now()
		wait := iv - time.Duration(now.UnixNano()%int64(iv))
		nominal := now.Round(0).Add(wait) // the aligned boundary we wait for
		if !c.cfg.StopAt.IsZero() && nominal.After(c.cfg.StopAt) {
			nominal, wait = c.cfg.StopAt, max(0, c.cfg.StopAt.Sub(now))
		}
		select {
		case <-ctx.Done():
			end := c.clock.Now()
			if end.Sub(prevMono) >= time.Millisecond {
				// The final sample must not be lost because ctx is done.
				c.tick(context.WithoutCancel(ctx), prevNominal, end, end.Sub(prevMono))
			}
			c.log.Info("collector stopped")
			return nil
		case <-c.clock.After(wait):
		}
		fired := c.clock.Now()
		c.m.lag.Observe(max(0, fired.Sub(nominal).Seconds()))
		c.tick(ctx, prevNominal, nominal, fired.Sub(prevMono))
		prevNominal, prevMono = nominal, fired
		if !c.cfg.StopAt.IsZero() && !nominal.Before(c.cfg.StopAt) {
			c.log.Info("collector reached its stop time", "stop_at", c.cfg.StopAt)
			return nil
		}
	}
}

// tick samples the node once; the samples cover [from, to). mono is the elapsed
// monotonic time since the previous tick, used to detect stalls and clock steps.
func (c *Collector) tick(ctx context.Context, from, to time.Time, mono time.Duration) {
	iv := c.cfg.Interval
	if d := to.Sub(from); d <= 0 || d > maxCatchUp*iv || mono > maxCatchUp*iv {
		// Wall clock stepped, or we stalled: claim one interval, not the gap.
		c.m.clockAnomalies.Inc()
		from = to.Add(-iv)
	}
	startMS, endMS := from.UnixMilli(), to.UnixMilli()
	if endMS <= startMS {
		return
	}
	t0 := time.Now()
	insts, err := c.cfg.Source.Sample(ctx)
	if err != nil {
		c.m.sourceErrors.Inc()
		c.logThrottled("source", "cannot read some devices", err)
	}
	insts = c.split(ctx, insts)
	holders := c.attribute(ctx, insts)
	c.buf = c.buf[:0]
	for i := range insts {
		in := &insts[i]
		s := schemas.Sample{
			StartMS: startMS, IntervalMS: endMS - startMS,
			Node: c.cfg.Node, GPUUUID: in.GPUUUID, GPUModel: c.model(in.GPUModel),
			InstanceID: in.InstanceID, Profile: in.Profile,
			Util: in.Util, UtilKnown: in.UtilKnown, UtilSource: in.UtilSource,
			MemUsed: in.MemUsed, MemTotal: in.MemTotal, Processes: int64(len(in.Processes)),
			ShareKind: in.ShareKind, ShareMem: in.ShareMem, ShareCores: in.ShareCores,
		}
		if s.UtilSource == "" {
			s.UtilSource = UtilSourceNone
		}
		if h, ok := holders[in.InstanceID]; ok {
			s.Project, s.User, s.HolderRef = h.Project, h.User, h.Ref
		}
		if err := s.Validate(); err != nil {
			c.m.invalid.Inc()
			c.logThrottled("invalid", "dropping an invalid sample", err, "instance_id", in.InstanceID)
			continue
		}
		c.buf = append(c.buf, s)
	}
	c.m.sampleDuration.Observe(time.Since(t0).Seconds())
	if len(c.buf) == 0 {
		return
	}
	if err := c.cfg.Publisher.Publish(ctx, c.buf); err != nil {
		c.m.publishErrors.Inc()
		c.logThrottled("publish", "cannot publish samples", err, "samples", len(c.buf))
		return
	}
	c.m.produced.Add(float64(len(c.buf)))
	c.m.lastSample.Set(float64(to.UnixMilli()) / 1000)
	c.lastOK.Store(time.Now().UnixNano())
}

func (c *Collector) model(name string) string {
	if m, ok := c.cfg.ModelNames[name]; ok {
		return m
	}
	return name
}

// split applies the splitters in order.
func (c *Collector) split(ctx context.Context, insts []Instance) []Instance {
	for _, sp := range c.cfg.Splitters {
		out, err := sp.Split(ctx, insts)
		if err != nil {
			c.m.resolverErrors.WithLabelValues(sp.Name()).Inc()
			c.logThrottled("splitter:"+sp.Name(), "cannot split shared cards", err, "splitter", sp.Name())
		}
		insts = out
	}
	return insts
}

// attribute asks the resolvers in order about the instances still without a holder.
func (c *Collector) attribute(ctx context.Context, insts []Instance) map[string]Holder {
	holders := make(map[string]Holder, len(insts))
	pending := insts
	for _, r := range c.cfg.Resolvers {
		if len(pending) == 0 {
			break
		}
		got, err := r.Resolve(ctx, pending)
		if err != nil {
			c.m.resolverErrors.WithLabelValues(r.Name()).Inc()
			c.logThrottled("resolver:"+r.Name(), "attribution failed", err, "resolver", r.Name())
		}
		if len(got) == 0 {
			continue
		}
		next := make([]Instance, 0, len(pending))
		for _, in := range pending {
			if h, ok := got[in.InstanceID]; ok && h.Project != "" {
				holders[in.InstanceID] = h
				continue
			}
			next = append(next, in)
		}
		pending = next
	}
	return holders
}

// logThrottled logs an error at most once a minute per key.
func (c *Collector) logThrottled(key, msg string, err error, attrs ...any) {
	c.errMu.Lock()
	last, seen := c.lastErrLog[key]
	now := time.Now()
	if seen && now.Sub(last) < time.Minute {
		c.errMu.Unlock()
		return
	}
	c.lastErrLog[key] = now
	c.errMu.Unlock()
	c.log.Warn(msg, append(attrs, "err", err.Error())...)
}

// Healthy reports whether the collector published samples recently (within
// three intervals, or it started less than three intervals ago).
func (c *Collector) Healthy() error {
	limit := int64(maxCatchUp * c.cfg.Interval)
	now := time.Now().UnixNano()
	if s := c.started.Load(); s == 0 {
		return errors.New("collector not started")
	}
	last := c.lastOK.Load()
	if last == 0 {
		last = c.started.Load()
	}
	if now-last > limit {
		return fmt.Errorf("no samples published for %v", time.Duration(now-last).Round(time.Second))
	}
	return nil
}

// SortInstances orders instances by GPU index, then instance ID, so that output
// is stable.
func SortInstances(insts []Instance) {
	sort.Slice(insts, func(i, j int) bool {
		if insts[i].GPUIndex != insts[j].GPUIndex {
			return insts[i].GPUIndex < insts[j].GPUIndex
		}
		return insts[i].InstanceID < insts[j].InstanceID
	})
}
