package attrib_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/attrib"
	"github.com/cardhour/cardhour/schemas"
)

type fakeShareKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	list  *podresourcesv1.ListPodResourcesResponse
	alloc *podresourcesv1.AllocatableResourcesResponse
}

func (f *fakeShareKubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return f.list, nil
}

func (f *fakeShareKubelet) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	return f.alloc, nil
}

const (
	t4   = "GPU-7e5b1f2a-0000-4000-8000-00000000000a"
	a100 = "GPU-3c9d4e5f-0000-4000-8000-00000000000b"
	idle = "GPU-00000000-0000-4000-8000-00000000000c"
)

// podsJSON is the API server's pod list of the node: two HAMi pods on the
// A100 (one with two containers, one of them without a GPU) and two
// time-sliced notebooks on the T4.
var podsJSON = `{"items":[
 {"metadata":{"name":"nb-alice","namespace":"ai101","uid":"11111111-2222-3333-4444-555555555555","labels":{"cardhour.io/user":"alice"},
   "annotations":{"hami.io/vgpu-devices-allocated":"` + a100 + `,NVIDIA,4096,5:;"}},
  "spec":{"containers":[{"name":"jupyter"}]},"status":{"phase":"Running","containerStatuses":[{"name":"jupyter","containerID":"containerd://` + cidA + `"}]}},
 {"metadata":{"name":"train-0","namespace":"nlp-lab","uid":"66666666-7777-8888-9999-000000000000",
   "annotations":{"hami.io/vgpu-devices-allocated":"` + a100 + `,NVIDIA,40960,50:;;"}},
  "spec":{"containers":[{"name":"main"},{"name":"sidecar"}]},"status":{"phase":"Running","containerStatuses":[{"name":"main","containerID":"containerd://` + cidB + `"}]}},
 {"metadata":{"name":"done","namespace":"nlp-lab","uid":"aaaaaaaa-7777-8888-9999-000000000000",
   "annotations":{"hami.io/vgpu-devices-allocated":"` + a100 + `,NVIDIA,4096,5:;"}},
  "spec":{"containers":[{"name":"main"}]},"status":{"phase":"Succeeded"}},
 {"metadata":{"name":"nb-0","namespace":"cv","uid":"bbbbbbbb-7777-8888-9999-000000000000"},"spec":{"containers":[{"name":"nb"}]},
  "status":{"phase":"Running","containerStatuses":[{"name":"nb","containerID":"containerd://` + cidC + `"}]}},
 {"metadata":{"name":"nb-1","namespace":"cv","uid":"cccccccc-7777-8888-9999-000000000000"},"spec":{"containers":[{"name":"nb"}]},
  "status":{"phase":"Running","containerStatuses":[{"name":"nb","containerID":"containerd://` + cidD + `"}]}}
]}`

var (
	cidA = strings.Repeat("a", 64)
	cidB = strings.Repeat("b", 64)
	cidC = strings.Repeat("c", 64)
	cidD = strings.Repeat("d", 64)
)

func shareKube(t *testing.T, shares bool) *attrib.Kube {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := grpc.NewServer()
	ts := func(ns, name string, ids ...string) *podresourcesv1.PodResources {
		return &podresourcesv1.PodResources{Name: name, Namespace: ns, Containers: []*podresourcesv1.ContainerResources{{Name: "nb",
			Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: ids}}}}}
	}
	var all []string
	for _, n := range []string{"0", "1", "2", "3"} {
		all = append(all, t4+"::"+n)
	}
	podresourcesv1.RegisterPodResourcesListerServer(srv, &fakeShareKubelet{
		list: &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
			ts("cv", "nb-0", t4+"::0"), ts("cv", "nb-1", t4+"::2", t4+"::3")}},
		alloc: &podresourcesv1.AllocatableResourcesResponse{Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: all}}},
	})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("fieldSelector") == "spec.nodeName=gpu-07":
			_, _ = w.Write([]byte(podsJSON))
		case r.URL.Path == "/api/v1/namespaces/ai101/pods/nb-alice":
			_, _ = w.Write([]byte(`{"metadata":{"labels":{"cardhour.io/user":"alice"}}}`))
		default:
			_, _ = w.Write([]byte(`{"metadata":{"labels":{}}}`))
		}
	}))
	t.Cleanup(api.Close)
	proc := t.TempDir()
	mk := func(pid, cgroup string) {
		require.NoError(t, os.MkdirAll(filepath.Join(proc, pid), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(proc, pid, "cgroup"), []byte(cgroup), 0o644))
	}
	// systemd and cgroupfs drivers
	mk("100", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice/cri-containerd-"+cidA+".scope\n")
	mk("200", "0::/kubepods/burstable/pod66666666-7777-8888-9999-000000000000/"+cidB+"\n")
	mk("300", "0::/kubepods/besteffort/podbbbbbbbb-7777-8888-9999-000000000000/"+cidC+"\n")
	mk("400", "0::/kubepods/besteffort/podcccccccc-7777-8888-9999-000000000000/"+cidD+"\n")
	mk("500", "0::/user.slice\n") // a process of the host: in no share
	k, err := attrib.NewKube(attrib.KubeConfig{Socket: sock, UserLabel: "cardhour.io/user", APIServer: api.URL, NodeName: "gpu-07",
		TokenFile: write(t, "token", "tok"), HTTPClient: api.Client(), Shares: shares, ProcRoot: proc})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	return k
}

func cards() []collector.Instance {
	p := func(pid uint32, mem uint64, u float64) collector.Process {
		return collector.Process{PID: pid, UsedMemory: mem, Util: u, UtilKnown: true}
	}
	return []collector.Instance{
		{GPUUUID: a100, GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: a100, Profile: "full", GIID: -1, MemTotal: 80 << 30,
			Processes: []collector.Process{p(100, 1<<30, 0.05), p(200, 30<<30, 0.25), p(500, 1, 0.1)}, ProcUtilKnown: true, UtilKnown: true, Util: 0.4},
		{GPUUUID: t4, GPUModel: "Tesla T4", InstanceID: t4, Profile: "full", GIID: -1, MemTotal: 15 << 30, GPUIndex: 1,
			Processes: []collector.Process{p(300, 2<<30, 0), p(400, 3<<30, 0.9)}, ProcUtilKnown: true},
		{GPUUUID: idle, GPUModel: "Tesla T4", InstanceID: idle, Profile: "full", GIID: -1, MemTotal: 15 << 30, GPUIndex: 2},
	}
}

func TestKubeSplitShares(t *testing.T) {
	k := shareKube(t, true)
	ctx := context.Background()
	got, err := k.Split(ctx, cards())
	require.NoError(t, err)
	ids := []string{}
	by := map[string]collector.Instance{}
	for _, in := range got {
		ids = append(ids, in.InstanceID)
		by[in.InstanceID] = in
	}
	hA := a100 + "/share/ai101/nb-alice/jupyter"
	hB := a100 + "/share/nlp-lab/train-0/main"
	tC := t4 + "/share/cv/nb-0/nb"
	tD := t4 + "/share/cv/nb-1/nb"
	require.Equal(t, []string{hA, hB, tC, tD, idle}, ids, "one instance per (card, pod, container); the sidecar and the finished pod hold nothing")

	a := by[hA]
	require.Equal(t, schemas.ShareHAMi, a.ShareKind)
	require.Equal(t, "1/20", a.Profile)
	require.InDelta(t, 0.05, a.ShareMem, 1e-12)
	require.InDelta(t, 0.05, a.ShareCores, 1e-12)
	require.Equal(t, int64(4<<30), a.MemTotal)
	require.Equal(t, int64(1<<30), a.MemUsed)
	require.True(t, a.UtilKnown)
	require.InDelta(t, 1, a.Util, 1e-9, "5 % of the card on a 5 % share: busy")
	b := by[hB]
	require.Equal(t, "1/2", b.Profile)
	require.InDelta(t, 0.5, b.Util, 1e-9)
	require.Len(t, b.Processes, 1)

	c, d := by[tC], by[tD]
	require.Equal(t, schemas.ShareTimeslice, c.ShareKind)
	require.Equal(t, "1/4", c.Profile)
	require.InDelta(t, 0.25, c.ShareCores, 1e-12)
	require.Zero(t, c.ShareMem, "time-slicing shares no memory limit")
	require.Equal(t, "1/2", d.Profile, "two of the four replicas")
	require.InDelta(t, 0.5, d.ShareCores, 1e-12)
	require.True(t, c.UtilKnown)
	require.InDelta(t, 0, c.Util, 1e-12)
	require.InDelta(t, 1, d.Util, 1e-12, "0.9 of the card on half of it, capped")
	require.Equal(t, int64(3<<30), d.MemUsed)

	// Each share is attributed to its own pod: no conflict on the card.
	holders, err := k.Resolve(ctx, got)
	require.NoError(t, err)
	require.Equal(t, collector.Holder{Project: "ai101", User: "alice", Ref: "k8s:ai101/nb-alice"}, holders[hA])
	require.Equal(t, collector.Holder{Project: "nlp-lab", Ref: "k8s:nlp-lab/train-0"}, holders[hB])
	require.Equal(t, collector.Holder{Project: "cv", Ref: "k8s:cv/nb-0"}, holders[tC])
	require.Equal(t, collector.Holder{Project: "cv", Ref: "k8s:cv/nb-1"}, holders[tD])

	// Every share makes a valid sample.
	for _, in := range got[:4] {
		s := schemas.Sample{StartMS: 1, IntervalMS: 1000, Node: "n", GPUUUID: in.GPUUUID, GPUModel: in.GPUModel, InstanceID: in.InstanceID,
			Profile: in.Profile, ShareKind: in.ShareKind, ShareMem: in.ShareMem, ShareCores: in.ShareCores, Util: in.Util, UtilKnown: in.UtilKnown}
		require.NoError(t, s.Validate(), in.InstanceID)
	}

	// Without per-process utilisation, shares have util null.
	cs := cards()
	cs[1].ProcUtilKnown = false
	got, err = k.Split(ctx, cs)
	require.NoError(t, err)
	for _, in := range got {
		if in.GPUUUID == t4 {
			require.False(t, in.UtilKnown, in.InstanceID)
		}
	}
}

func TestKubeSplitOff(t *testing.T) {
	k := shareKube(t, false)
	got, err := k.Split(context.Background(), cards())
	require.NoError(t, err)
	require.Equal(t, cards(), got)
}

func TestParseHAMiAllocated(t *testing.T) {
	got := attrib.ParseHAMiAllocated("GPU-a,NVIDIA,4096,25:GPU-b,NVIDIA,2048,0:;;GPU-c,NVIDIA,x,1:;")
	require.Equal(t, [][]attrib.HAMiDevice{
		{{UUID: "GPU-a", Type: "NVIDIA", MemMiB: 4096, Cores: 25}, {UUID: "GPU-b", Type: "NVIDIA", MemMiB: 2048}},
		nil, nil,
	}, got)
	require.Nil(t, attrib.ParseHAMiAllocated(";"))
}

func TestStaticVMs(t *testing.T) {
	s, err := attrib.LoadStatic(write(t, "map.yaml", `
instances:
  GPU-x/vgpu/1: {project: fixed}
vms:
  vm-uuid-1: {project: rent-42, user: bob}
  lab-special: {project: ai102}
vm_patterns:
  - {pattern: '^(?P<project>[a-z0-9]+)-vm-(?P<user>\d+)$'}
  - {pattern: '^lab-', project: ai101}
`))
	require.NoError(t, err)
	in := []collector.Instance{
		{InstanceID: "v1", VMID: "vm-uuid-1", VMName: "whatever"},
		{InstanceID: "v2", VMID: "vm-uuid-2", VMName: "ai101-vm-2025010107"},
		{InstanceID: "v3", VMID: "vm-uuid-3", VMName: "lab-special"},
		{InstanceID: "v4", VMID: "vm-uuid-4", VMName: "lab-07"},
		{InstanceID: "v5", VMID: "vm-uuid-5", VMName: "other"},
		{InstanceID: "GPU-x/vgpu/1", VMID: "vm-uuid-6"},
	}
	got, err := s.Resolve(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, map[string]collector.Holder{
		"v1":           {Project: "rent-42", User: "bob", Ref: "vm:vm-uuid-1"},
		"v2":           {Project: "ai101", User: "2025010107", Ref: "vm:vm-uuid-2"},
		"v3":           {Project: "ai102", Ref: "vm:vm-uuid-3"},
		"v4":           {Project: "ai101", Ref: "vm:vm-uuid-4"},
		"GPU-x/vgpu/1": {Project: "fixed", Ref: "vm:vm-uuid-6"},
	}, got)
	_, err = attrib.LoadStatic(write(t, "bad.yaml", "vm_patterns:\n  - {pattern: '^x'}\n"))
	require.ErrorContains(t, err, "named group")
	_, err = attrib.LoadStatic(write(t, "bad2.yaml", "vm_patterns:\n  - {pattern: '(', project: p}\n"))
	require.ErrorContains(t, err, "vm_patterns[0]")
}
