package fleet

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/nvmlmock"
)

// DefaultModelNames maps the names go-nvml's mocks report to the product names
// real drivers report, so that catalog SKUs resolve.
var defaultModelNames = map[string]string{
	"Mock NVIDIA A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
}

// Fleet is a built, running simulation.
type Fleet struct {
	Spec     *Spec
	Interval time.Duration
	Nodes    []*Node
	clock    collector.Clock
	start    time.Time

	mu       sync.RWMutex
	released map[*HolderSpec]map[time.Duration]bool // holder → starts of its windows released
}

// Node is one simulated server.
type Node struct {
	Name string
	Sim  *nvmlmock.Node
	// Lib is the nvml.Interface to hand to nvmlsource.
	Lib     nvml.Interface
	holders []*HolderSpec
	inst    map[string]*nvmlmock.Instance // instance UUID → instance
	byHold  map[*HolderSpec]*nvmlmock.Instance
	spec    NodeSpec
	vgpus   map[string]slotRef // vGPU UUID → its card and slot
}

// slotRef is a slot of a split card: GPU index and slot.
type slotRef struct{ gpu, slot int }

// ModelNames returns the gpu_model overrides of this fleet (defaults plus the file's).
func (f *Fleet) ModelNames() map[string]string {
	m := map[string]string{}
	for k, v := range defaultModelNames {
		m[k] = v
	}
	for k, v := range f.Spec.ModelNames {
		m[k] = v
	}
	return m
}

// Build creates the mock servers. Holder scripts are evaluated at clock.Now(),
// relative to start.
func Build(spec *Spec, clock collector.Clock, start time.Time) (*Fleet, error) {
	f := &Fleet{Spec: spec, Interval: time.Duration(spec.Interval), clock: clock, start: start,
		released: map[*HolderSpec]map[time.Duration]bool{}}
	if f.Interval == 0 {
		f.Interval = time.Minute
	}
	byName := map[string]*Node{}
	for _, ns := range spec.Nodes {
		layouts := make([]nvmlmock.Layout, len(ns.GPUs))
		for i, g := range ns.GPUs {
			layouts[i] = g.MIG
		}
		sim, err := nvmlmock.New(ns.Model, layouts, ns.Name)
		if err != nil {
			return nil, fmt.Errorf("node %q: %w", ns.Name, err)
		}
		n := &Node{Name: ns.Name, Sim: sim, Lib: sim.Lib(), inst: map[string]*nvmlmock.Instance{},
			byHold: map[*HolderSpec]*nvmlmock.Instance{}, spec: ns, vgpus: map[string]slotRef{}}
		n.enableVGPUs()
		for _, g := range sim.GPUs {
			for _, in := range g.Instances {
				n.inst[in.UUID] = in
			}
		}
		f.Nodes = append(f.Nodes, n)
		byName[ns.Name] = n
	}
	for i := range spec.Holders {
		h := &spec.Holders[i]
		n := byName[h.node]
		n.holders = append(n.holders, h)
		g := n.Sim.GPUs[h.gpu]
		switch {
		case h.hasSlot && !g.MIG:
			// A slot of a vGPU or shared card: found by onSlot, not by instance.
		case h.hasSlot:
			n.byHold[h] = g.Instances[h.slot]
		default:
			n.byHold[h] = g.Instances[0]
		}
	}
	for _, n := range f.Nodes {
		for gi, g := range n.Sim.GPUs {
			for _, in := range g.Instances {
				if n.shared(gi) {
					in.Dynamic(func() State { return f.sharedState(n, gi, in) })
					continue
				}
				in.Dynamic(func() State { return f.state(n, in) })
			}
			for slot, v := range g.VGPUs {
				v.Dynamic(func() nvmlmock.VGPUState { return f.vgpuState(n, gi, slot) })
			}
		}
	}
	return f, nil
}

// State aliases the mock's state so the closures above read naturally.
type State = nvmlmock.State

// active returns the holder of in at the current simulated time, and the
// position inside its window.
func (f *Fleet) active(n *Node, in *nvmlmock.Instance) (*HolderSpec, int, time.Duration, time.Duration) {
	return f.activeWhere(n, func(h *HolderSpec) bool { return n.byHold[h] == in })
}

// activeWhere is active for the holders on returns true for.
func (f *Fleet) activeWhere(n *Node, on func(h *HolderSpec) bool) (*HolderSpec, int, time.Duration, time.Duration) {
	rel := f.clock.Now().Sub(f.start)
	for idx, h := range n.holders {
		if !on(h) {
			continue
		}
		start := time.Duration(h.Start)
		if rel < start {
			continue
		}
		w := rel - start
		if h.Every > 0 {
			w %= time.Duration(h.Every)
		}
		if h.Duration != 0 && w >= time.Duration(h.Duration) {
			continue
		}
		if f.isReleased(h, rel-w) {
			continue // freed for the rest of this window
		}
		if h.Behaviour == Jobs {
			if w%h.jobEvery >= h.jobLn {
				continue // between jobs nobody holds the instance
			}
			return h, idx, w % h.jobEvery, rel
		}
		return h, idx, w, rel
	}
	return nil, 0, 0, rel
}

func (f *Fleet) isReleased(h *HolderSpec, windowStart time.Duration) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.released[h][windowStart]
}

// Release frees the instance instanceID (a MIG or GPU UUID, a vGPU
// instance's UUID, or a share's <gpu_uuid>/share/<ns>/<pod>/<container>) from the holder
// that holds it now, as a scheduler that deletes the holder's job or pod
// would: nobody holds it, and nothing runs on it, for the rest of the
// holder's current window (a later window of a repeating holder holds it
// again). It returns the holder's name, or false when nobody holds the
// instance now.
func (f *Fleet) Release(instanceID string) (holder string, ok bool) {
	for _, n := range f.Nodes {
		var h *HolderSpec
		var rel time.Duration
		if in := n.inst[instanceID]; in != nil {
			h, _, _, rel = f.active(n, in)
		} else if on := n.slotHolder(instanceID); on != nil {
			h, _, _, rel = f.activeWhere(n, on)
		} else {
			continue
		}
		if h == nil {
			return "", false
		}
		w := rel - time.Duration(h.Start)
		if h.Every > 0 {
			w %= time.Duration(h.Every)
		}
		f.mu.Lock()
		if f.released[h] == nil {
			f.released[h] = map[time.Duration]bool{}
		}
		f.released[h][rel-w] = true
		f.mu.Unlock()
		return h.Name, true
	}
	return "", false
}

// noise returns a deterministic value in [0,1) for (holder, time).
func noise(idx int, t time.Duration) float64 {
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(idx))
	binary.LittleEndian.PutUint64(b[8:], uint64(t/time.Second))
	_, _ = h.Write(b[:])
	return float64(h.Sum64()>>11) / float64(1<<53)
}

func (f *Fleet) state(n *Node, in *nvmlmock.Instance) State {
	h, idx, w, rel := f.active(n, in)
	if h == nil {
		return State{}
	}
	return behave(h, idx, w, rel, in.MemTotal)
}

// behave is what the holder's script runs at w into its window, on memTotal
// bytes of memory.
func behave(h *HolderSpec, idx int, w, rel time.Duration, memTotal uint64) State {
	pid := uint32(10000 + 100*idx)
	frac := func(p float64) uint64 { return uint64(float64(memTotal) * p) }
	switch h.Behaviour {
	case Training:
		mem := frac(0.85 + 0.1*noise(idx, rel))
		return State{MemUsed: mem, Util: 0.88 + 0.1*noise(idx+1, rel), Processes: []nvml.ProcessInfo{
			{Pid: pid, UsedGpuMemory: mem - mem/8}, {Pid: pid + 1, UsedGpuMemory: mem / 8}}}
	case Notebook:
		mem := frac(0.4)
		if w < h.activeFor {
			return State{MemUsed: mem, Util: 0.3 + 0.4*noise(idx, rel), Processes: []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: mem}}}
		}
		return State{MemUsed: mem, Util: 0.01 * noise(idx, rel), Processes: []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: mem}}}
	case Jobs:
		mem := frac(0.6)
		jobPID := pid + 2 + uint32(((rel-w)/time.Minute)%90) // a new PID per job
		return State{MemUsed: mem, Util: 0.6 + 0.3*noise(idx, rel), Processes: []nvml.ProcessInfo{{Pid: jobPID, UsedGpuMemory: mem}}}
	default: // Abandoned
		return State{}
	}
}

// Resolver attributes a node's instances to the holders active now, the way a
// scheduler's allocation (Kubernetes, Slurm) would.
func (f *Fleet) Resolver(n *Node) collector.Resolver { return &resolver{f: f, n: n} }

type resolver struct {
	f *Fleet
	n *Node
}

func (r *resolver) Name() string { return "simulated" }

func (r *resolver) Resolve(_ context.Context, insts []collector.Instance) (map[string]collector.Holder, error) {
	out := map[string]collector.Holder{}
	for _, ci := range insts {
		in := r.n.inst[ci.InstanceID]
		if in == nil {
			if h := r.f.slotHolderNow(r.n, &ci); h != nil {
				out[ci.InstanceID] = *h
			}
			continue
		}
		if h, _, _, _ := r.f.active(r.n, in); h != nil {
			out[ci.InstanceID] = collector.Holder{Project: h.Project, User: h.User}
		}
	}
	return out, nil
}
