package collector

import (
	"github.com/cardhour/cardhour/schemas"
)

// ProfileShare is the profile of a share whose size is not known
// (schemas.ShareProfile).
const ProfileShare = "share"

// ShareAlloc is one share of a whole card as a scheduler allocated it to a
// container: a HAMi allocation or time-sliced replicas.
type ShareAlloc struct {
	Kind                      string // schemas.ShareHAMi or schemas.ShareTimeslice
	Namespace, Pod, Container string
	// MemBytes is the memory allocated to the share (HAMi nvidia.com/gpumem);
	// 0: not known (time-slicing shares the whole memory).
	MemBytes int64
	// CoresPercent is HAMi's nvidia.com/gpucores (1..100); 0: not set.
	CoresPercent int
	// Slots and Replicas: time-slicing, the container holds Slots of the
	// card's Replicas replicas (device IDs GPU-…::N); 0: not time-sliced.
	Slots, Replicas int
}

// Key is the container the share belongs to: namespace/pod/container.
func (a *ShareAlloc) Key() string { return a.Namespace + "/" + a.Pod + "/" + a.Container }

// ShareInstanceID is the instance_id of a Kubernetes share of a card:
// <gpu_uuid>/share/<namespace>/<pod>/<container>.
func ShareInstanceID(gpuUUID, namespace, pod, container string) string {
	return gpuUUID + "/share/" + namespace + "/" + pod + "/" + container
}

// SplitCard returns the shares of the whole card `card`, one per allocation,
// in the order of allocs. owner names the container (ShareAlloc.Key) a
// process runs in, by PID (false: not known). A share's memory used is the
// memory of its processes; its utilisation is the sum of its processes'
// utilisation (a fraction of the card), relative to its share of the
// compute when that is known and capped at 1, and null when the card's
// per-process utilisation is not known. Processes of no allocation are in no
// share.
func SplitCard(card Instance, allocs []ShareAlloc, owner func(pid uint32) (string, bool)) []Instance {
	byKey := make(map[string]int, len(allocs))
	out := make([]Instance, len(allocs))
	for i := range allocs {
		out[i] = shareOf(&card, &allocs[i])
		byKey[allocs[i].Key()] = i
	}
	for _, p := range card.Processes {
		key, ok := owner(p.PID)
		if !ok {
			continue
		}
		i, ok := byKey[key]
		if !ok {
			continue
		}
		sh := &out[i]
		sh.Processes = append(sh.Processes, p)
		sh.MemUsed += clampMem(p.UsedMemory)
		sh.Util += p.Util
	}
	for i := range out {
		sh := &out[i]
		if !sh.UtilKnown {
			sh.Util = 0
			continue
		}
		if sh.ShareCores > 0 {
			sh.Util /= sh.ShareCores
		}
		sh.Util = min(max(sh.Util, 0), 1)
	}
	return out
}

// shareOf is the share instance of one allocation, without its processes.
func shareOf(card *Instance, a *ShareAlloc) Instance {
	sh := Instance{GPUUUID: card.GPUUUID, GPUModel: card.GPUModel, GPUIndex: card.GPUIndex, GIID: -1,
		InstanceID: ShareInstanceID(card.GPUUUID, a.Namespace, a.Pod, a.Container),
		ShareKind:  a.Kind, Namespace: a.Namespace, Pod: a.Pod, Container: a.Container,
		MemTotal: card.MemTotal, Profile: ProfileShare, UtilSource: UtilSourceNone}
	if card.ProcUtilKnown {
		sh.UtilKnown, sh.UtilSource, sh.ProcUtilKnown = true, UtilSourceNVML, true
	}
	switch a.Kind {
	case schemas.ShareHAMi:
		if a.MemBytes > 0 && card.MemTotal > 0 {
			sh.MemTotal = min(a.MemBytes, card.MemTotal)
			sh.ShareMem = float64(sh.MemTotal) / float64(card.MemTotal)
		}
		if a.CoresPercent > 0 && a.CoresPercent <= 100 {
			sh.ShareCores = float64(a.CoresPercent) / 100
		}
	case schemas.ShareTimeslice:
		if a.Replicas > 0 && a.Slots > 0 && a.Slots <= a.Replicas {
			sh.ShareCores = float64(a.Slots) / float64(a.Replicas)
		}
	}
	// The profile states the share, so that a SKU priced by share prices it
	// and the shares of a card can be added up (docs/billing.md, rule 11).
	sh.Profile = schemas.ShareProfile(sh.ShareMem, sh.ShareCores)
	return sh
}

func clampMem(v uint64) int64 {
	const maxInt64 = 1<<63 - 1
	if v > maxInt64 {
		return maxInt64
	}
	return int64(v)
}
