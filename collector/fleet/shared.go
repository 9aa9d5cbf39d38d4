package fleet

import (
	"context"
	"fmt"
	"strings"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/nvmlmock"
	"github.com/cardhour/cardhour/schemas"
)

// Shared cards: a vGPU host's card (one VM per slot, running while a holder
// holds the slot) and a card shared by pods (HAMi or time-slicing: the card's
// processes and per-process utilisation are those of the holders of its
// slots, and the fleet's splitter turns it into one share per held slot, as
// collector/attrib's Kube does from the kubelet and the API server).

// enableVGPUs creates the vGPU instances of the node's vGPU cards.
func (n *Node) enableVGPUs() {
	for gi, g := range n.spec.GPUs {
		if g.VGPU == nil {
			continue
		}
		card := n.Sim.GPUs[gi]
		fb := card.Instances[0].MemTotal / uint64(g.VGPU.Count)
		card.EnableVGPU(g.VGPU.Type, fb, g.VGPU.Count, n.Name, gi)
		for slot, v := range card.VGPUs {
			v.VMName = fmt.Sprintf("%s-vm-%d-%02d", n.Name, gi, slot)
			n.vgpus[v.UUID] = slotRef{gpu: gi, slot: slot}
		}
	}
}

func (n *Node) shared(gi int) bool { return n.spec.GPUs[gi].Shares != nil }

func (n *Node) hasVGPU() bool {
	for _, g := range n.spec.GPUs {
		if g.VGPU != nil {
			return true
		}
	}
	return false
}

func (n *Node) hasShares() bool {
	for gi := range n.spec.GPUs {
		if n.shared(gi) {
			return true
		}
	}
	return false
}

// vmName names a VM by its ID, as a hypervisor would.
func (n *Node) vmName(id string) string {
	for _, g := range n.Sim.GPUs {
		for _, v := range g.VGPUs {
			if v.VMID == id {
				return v.VMName
			}
		}
	}
	return ""
}

func onSlot(gi, slot int) func(h *HolderSpec) bool {
	return func(h *HolderSpec) bool { return h.gpu == gi && h.hasSlot && h.slot == slot }
}

// slotHolder is the holders' filter of a vGPU instance or share instance ID
// of the node (nil: not one).
func (n *Node) slotHolder(id string) func(h *HolderSpec) bool {
	if ref, ok := n.vgpus[id]; ok {
		return onSlot(ref.gpu, ref.slot)
	}
	gpu, rest, ok := strings.Cut(id, "/share/")
	if !ok {
		return nil
	}
	parts := strings.Split(rest, "/")
	for gi, g := range n.Sim.GPUs {
		if g.Device.UUID == gpu && len(parts) == 3 {
			return func(h *HolderSpec) bool { return h.gpu == gi && h.hasSlot && h.Name == parts[1] }
		}
	}
	return nil
}

func (f *Fleet) vgpuState(n *Node, gi, slot int) nvmlmock.VGPUState {
	h, idx, w, rel := f.activeWhere(n, onSlot(gi, slot))
	if h == nil {
		return nvmlmock.VGPUState{} // no VM runs on it
	}
	st := behave(h, idx, w, rel, n.Sim.GPUs[gi].VGPUs[slot].FbBytes)
	return nvmlmock.VGPUState{Active: true, FbUsed: st.MemUsed, Util: st.Util, Licensed: true}
}

// slotShare is the memory (bytes) and fraction of compute of one slot of a
// shared card.
func (n *Node) slotShare(gi int, cardMem uint64) (uint64, float64) {
	sh := n.spec.GPUs[gi].Shares
	if sh.Kind == "hami" {
		mem := min(uint64(sh.MemMB)<<20, cardMem)
		if sh.Cores > 0 {
			return mem, float64(sh.Cores) / 100
		}
		return mem, float64(mem) / float64(cardMem)
	}
	return cardMem / uint64(sh.Count), 1 / float64(sh.Count)
}

// sharedState is a shared card: the sum of what its slots' holders run, each
// on its share of the memory and the compute.
func (f *Fleet) sharedState(n *Node, gi int, in *nvmlmock.Instance) State {
	mem, cores := n.slotShare(gi, in.MemTotal)
	var out State
	for slot := 0; slot < n.spec.GPUs[gi].Shares.Count; slot++ {
		h, idx, w, rel := f.activeWhere(n, onSlot(gi, slot))
		if h == nil {
			continue
		}
		st := behave(h, idx, w, rel, mem)
		out.MemUsed += st.MemUsed
		out.Util += st.Util * cores
		out.Processes = append(out.Processes, st.Processes...)
		if len(st.Processes) > 0 {
			if out.ProcUtil == nil {
				out.ProcUtil = map[uint32]float64{}
			}
			out.ProcUtil[st.Processes[0].Pid] = st.Util * cores
		}
	}
	out.MemUsed, out.Util = min(out.MemUsed, in.MemTotal), min(out.Util, 1)
	return out
}

// Splitter splits the node's shared cards into the shares held now.
func (f *Fleet) Splitter(n *Node) collector.Splitter { return &splitter{f: f, n: n} }

type splitter struct {
	f *Fleet
	n *Node
}

func (s *splitter) Name() string { return "simulated" }

func (s *splitter) Split(_ context.Context, insts []collector.Instance) ([]collector.Instance, error) {
	out := make([]collector.Instance, 0, len(insts))
	for _, in := range insts {
		gi := in.GPUIndex
		if in.InstanceID != in.GPUUUID || gi < 0 || gi >= len(s.n.spec.GPUs) || !s.n.shared(gi) {
			out = append(out, in)
			continue
		}
		allocs := s.allocs(gi, uint64(in.MemTotal))
		if len(allocs) == 0 {
			out = append(out, in)
			continue
		}
		out = append(out, collector.SplitCard(in, allocs, s.owner)...)
	}
	return out, nil
}

// allocs are the shares of card gi held now, in slot order.
func (s *splitter) allocs(gi int, cardMem uint64) []collector.ShareAlloc {
	sh := s.n.spec.GPUs[gi].Shares
	var out []collector.ShareAlloc
	for slot := 0; slot < sh.Count; slot++ {
		h, _, _, _ := s.f.activeWhere(s.n, onSlot(gi, slot))
		if h == nil {
			continue
		}
		a := collector.ShareAlloc{Namespace: h.Project, Pod: h.Name, Container: "main"}
		if sh.Kind == "hami" {
			a.Kind, a.MemBytes, a.CoresPercent = schemas.ShareHAMi, int64(min(uint64(sh.MemMB)<<20, cardMem)), sh.Cores
		} else {
			a.Kind, a.Slots, a.Replicas = schemas.ShareTimeslice, 1, sh.Count
		}
		out = append(out, a)
	}
	return out
}

// owner is the container of a process: the holder whose PIDs it has
// (behave gives holder idx the PIDs 10000+100·idx and up).
func (s *splitter) owner(pid uint32) (string, bool) {
	idx := (int(pid) - 10000) / 100
	if pid < 10000 || idx >= len(s.n.holders) {
		return "", false
	}
	h := s.n.holders[idx]
	return h.Project + "/" + h.Name + "/main", true
}

// slotHolderNow attributes a vGPU instance or a share to its holder now.
func (f *Fleet) slotHolderNow(n *Node, ci *collector.Instance) *collector.Holder {
	on := n.slotHolder(ci.InstanceID)
	if on == nil {
		return nil
	}
	h, _, _, _ := f.activeWhere(n, on)
	if h == nil {
		return nil
	}
	out := collector.Holder{Project: h.Project, User: h.User}
	switch {
	case ci.VMID != "":
		out.Ref = "vm:" + ci.VMID
	case ci.Pod != "":
		out.Ref = "k8s:" + ci.Namespace + "/" + ci.Pod
	}
	return &out
}
