package attrib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/schemas"
)

// HAMiAllocatedAnnotation is the pod annotation in which HAMi's scheduler
// records the devices it bound to each container of the pod (HAMi
// pkg/device/devices.go, EncodePodSingleDevice): containers in the order of
// spec.containers separated by ";", each a list of devices
// "<GPU UUID>,<type>,<memory MiB>,<cores %>" each ended by ":", e.g.
// "GPU-8c1…,NVIDIA,4096,25:;".
const HAMiAllocatedAnnotation = "hami.io/vgpu-devices-allocated"

// Name is "kube" (as a splitter too).

// Split replaces each whole card that pods share, by HAMi allocations or by
// time-sliced replicas (device IDs GPU-…::N), with one instance per (card,
// pod, container): see collector.SplitCard. Cards nobody shares are
// returned unchanged. It does nothing unless KubeConfig.Shares is set.
func (k *Kube) Split(ctx context.Context, insts []collector.Instance) ([]collector.Instance, error) {
	if !k.cfg.Shares {
		return insts, nil
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.Timeout)
	defer cancel()
	var errs []error
	allocs := map[string][]collector.ShareAlloc{} // GPU UUID → allocations
	if err := k.timeSliced(ctx, allocs); err != nil {
		errs = append(errs, err)
	}
	pods, err := k.nodePods(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	hamiAllocs(pods, allocs)
	if len(allocs) == 0 {
		return insts, errors.Join(errs...)
	}
	owner, known := k.processOwners(pods)
	out := make([]collector.Instance, 0, len(insts))
	for _, in := range insts {
		as := allocs[in.GPUUUID]
		if len(as) == 0 || in.Profile != collector.ProfileFull || in.ShareKind != "" || in.InstanceID != in.GPUUUID {
			out = append(out, in)
			continue
		}
		sort.Slice(as, func(i, j int) bool { return as[i].Key() < as[j].Key() })
		if !known {
			in.ProcUtilKnown = false // no process can be placed in a share: util null
		}
		out = append(out, collector.SplitCard(in, as, owner)...)
	}
	return out, errors.Join(errs...)
}

// timeSliced adds the time-sliced allocations PodResources lists: the
// device IDs GPU-…::N of each container, per card, with the card's replicas
// from KubeConfig.TimeSlicingReplicas, else the kubelet's allocatable
// devices, else the replicas allocated.
func (k *Kube) timeSliced(ctx context.Context, allocs map[string][]collector.ShareAlloc) error {
	resp, err := k.client.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return fmt.Errorf("kubelet PodResources List: %w", err)
	}
	held := map[string]int{} // GPU UUID → replicas allocated
	start := map[string]int{}
	for _, p := range resp.GetPodResources() {
		for _, c := range p.GetContainers() {
			slots := map[string]int{}
			for _, d := range c.GetDevices() {
				for _, id := range d.GetDeviceIds() {
					if gpu, _, ok := strings.Cut(id, "::"); ok {
						slots[gpu]++
					}
				}
			}
			for gpu, n := range slots {
				if _, ok := start[gpu]; !ok {
					start[gpu] = len(allocs[gpu])
				}
				allocs[gpu] = append(allocs[gpu], collector.ShareAlloc{Kind: schemas.ShareTimeslice,
					Namespace: p.GetNamespace(), Pod: p.GetName(), Container: c.GetName(), Slots: n})
				held[gpu] += n
			}
		}
	}
	if len(held) == 0 {
		return nil
	}
	replicas := k.replicas(ctx)
	for gpu, n := range held {
		r := k.cfg.TimeSlicingReplicas
		if r == 0 {
			r = replicas[gpu]
		}
		r = max(r, n) // at least what is allocated
		for i := start[gpu]; i < len(allocs[gpu]); i++ {
			allocs[gpu][i].Replicas = r
		}
	}
	return nil
}

// replicas counts the time-sliced replicas of each card the kubelet can
// allocate (GetAllocatableResources); empty when the kubelet does not say.
func (k *Kube) replicas(ctx context.Context) map[string]int {
	out := map[string]int{}
	resp, err := k.client.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		return out
	}
	for _, d := range resp.GetDevices() {
		for _, id := range d.GetDeviceIds() {
			if gpu, _, ok := strings.Cut(id, "::"); ok {
				out[gpu]++
			}
		}
	}
	return out
}

// kubePod is the part of a pod object the splitter reads.
type kubePod struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		UID         string            `json:"uid"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Containers []struct {
			Name string `json:"name"`
		} `json:"containers"`
	} `json:"spec"`
	Status struct {
		Phase             string `json:"phase"`
		ContainerStatuses []struct {
			Name        string `json:"name"`
			ContainerID string `json:"containerID"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// nodePods lists the pods of this node from the API server (nil, nil when
// no API server is configured).
func (k *Kube) nodePods(ctx context.Context) ([]kubePod, error) {
	if k.http == nil {
		return nil, nil
	}
	tok, err := os.ReadFile(k.cfg.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("kube: cannot read service account token: %w", err)
	}
	u := strings.TrimSuffix(k.cfg.APIServer, "/") + "/api/v1/pods?fieldSelector=" + url.QueryEscape("spec.nodeName="+k.cfg.NodeName)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("Accept", "application/json")
	resp, err := k.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kube: list pods of node %s: %w", k.cfg.NodeName, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kube: list pods of node %s: HTTP %d", k.cfg.NodeName, resp.StatusCode)
	}
	var list struct {
		Items []kubePod `json:"items"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 64<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("kube: decode pods of node %s: %w", k.cfg.NodeName, err)
	}
	return list.Items, nil
}

// hamiAllocs adds the HAMi allocations of running and pending pods.
func hamiAllocs(pods []kubePod, allocs map[string][]collector.ShareAlloc) {
	for i := range pods {
		p := &pods[i]
		ann, ok := p.Metadata.Annotations[HAMiAllocatedAnnotation]
		if !ok || p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed" {
			continue
		}
		for ci, devs := range ParseHAMiAllocated(ann) {
			if ci >= len(p.Spec.Containers) {
				break
			}
			for _, d := range devs {
				allocs[d.UUID] = append(allocs[d.UUID], collector.ShareAlloc{Kind: schemas.ShareHAMi,
					Namespace: p.Metadata.Namespace, Pod: p.Metadata.Name, Container: p.Spec.Containers[ci].Name,
					MemBytes: d.MemMiB << 20, CoresPercent: d.Cores})
			}
		}
	}
}

// HAMiDevice is one device of a container in HAMiAllocatedAnnotation.
type HAMiDevice struct {
	UUID   string
	Type   string
	MemMiB int64
	Cores  int
}

// ParseHAMiAllocated splits the annotation into containers (in the order of
// the pod's spec.containers) and their devices; malformed devices are left
// out.
func ParseHAMiAllocated(v string) [][]HAMiDevice {
	v = strings.TrimSuffix(v, ";")
	if v == "" {
		return nil
	}
	var out [][]HAMiDevice
	for _, ctr := range strings.Split(v, ";") {
		var devs []HAMiDevice
		for _, d := range strings.Split(ctr, ":") {
			f := strings.Split(d, ",")
			if len(f) < 4 || f[0] == "" {
				continue
			}
			mem, err1 := strconv.ParseInt(f[2], 10, 64)
			cores, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || mem < 0 || cores < 0 {
				continue
			}
			devs = append(devs, HAMiDevice{UUID: f[0], Type: f[1], MemMiB: mem, Cores: cores})
		}
		out = append(out, devs)
	}
	return out
}

var (
	podUIDRe      = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`)
	containerIDRe = regexp.MustCompile(`[0-9a-f]{64}`)
)

// processOwners maps a PID to its container (namespace/pod/container)
// through its cgroup: the pod UID and the container ID in
// /proc/PID/cgroup (cgroupfs and systemd drivers), and the pod list. known
// is false when there is no pod list to map them with.
func (k *Kube) processOwners(pods []kubePod) (owner func(uint32) (string, bool), known bool) {
	byUID := map[string]*kubePod{}
	for i := range pods {
		byUID[pods[i].Metadata.UID] = &pods[i]
	}
	if len(byUID) == 0 {
		return func(uint32) (string, bool) { return "", false }, false
	}
	return func(pid uint32) (string, bool) {
		cg, err := os.ReadFile(filepath.Join(k.cfg.ProcRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
		if err != nil {
			return "", false
		}
		m := podUIDRe.FindSubmatch(cg)
		if m == nil {
			return "", false
		}
		p := byUID[strings.ReplaceAll(string(m[1]), "_", "-")]
		if p == nil {
			return "", false
		}
		ids := containerIDRe.FindAll(cg, -1)
		if len(ids) == 0 {
			return "", false
		}
		cid := string(ids[len(ids)-1])
		for _, cs := range p.Status.ContainerStatuses {
			if _, id, ok := strings.Cut(cs.ContainerID, "://"); ok && id == cid {
				return p.Metadata.Namespace + "/" + p.Metadata.Name + "/" + cs.Name, true
			}
		}
		return "", false
	}, true
}
