package attrib_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/attrib"
)

// BenchmarkKubeSplitHAMi80 is one tick of the kube splitter on a HAMi node
// of 4 A100s with 20 shares of 4 GB each (80 pods, one process each): the
// kubelet's PodResources List and allocatable devices over its socket, the
// API server's pod list of the node over HTTP (decoded), each process placed
// through its /proc/PID/cgroup, and the cards split into their shares. The
// collector's cost per tick on such a node is this plus the NVML reads
// (docs/benchmarks.md, collector).
func BenchmarkKubeSplitHAMi80(b *testing.B) {
	const cards, per = 4, 20
	dir := b.TempDir()
	sock := filepath.Join(dir, "kubelet.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	var pods []string
	var prs []*podresourcesv1.PodResources
	proc := filepath.Join(dir, "proc")
	var insts []collector.Instance
	pid := uint32(1000)
	for c := 0; c < cards; c++ {
		gpu := fmt.Sprintf("GPU-3c9d4e5f-0000-4000-8000-%012d", c)
		in := collector.Instance{GPUUUID: gpu, GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: gpu, Profile: "full", GIID: -1,
			MemTotal: 80 << 30, GPUIndex: c, ProcUtilKnown: true, UtilKnown: true, Util: 0.5}
		for s := 0; s < per; s++ {
			uid := fmt.Sprintf("%08d-2222-3333-4444-%012d", c, s)
			cid := fmt.Sprintf("%064x", c*per+s+1)
			name := fmt.Sprintf("nb-%d-%02d", c, s)
			pods = append(pods, `{"metadata":{"name":"`+name+`","namespace":"ai101","uid":"`+uid+`","labels":{"app":"jupyter"},`+
				`"annotations":{"hami.io/vgpu-devices-allocated":"`+gpu+`,NVIDIA,4096,5:;","hami.io/vgpu-node":"gpu-07"}},`+
				`"spec":{"containers":[{"name":"jupyter"}]},"status":{"phase":"Running","containerStatuses":[{"name":"jupyter","containerID":"containerd://`+cid+`"}]}}`)
			prs = append(prs, &podresourcesv1.PodResources{Name: name, Namespace: "ai101", Containers: []*podresourcesv1.ContainerResources{{Name: "jupyter",
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{fmt.Sprintf("%s-%d", gpu, s)}}}}}})
			p := filepath.Join(proc, fmt.Sprint(pid))
			if err := os.MkdirAll(p, 0o755); err != nil {
				b.Fatal(err)
			}
			cg := "0::/kubepods/burstable/pod" + uid + "/" + cid + "\n"
			if err := os.WriteFile(filepath.Join(p, "cgroup"), []byte(cg), 0o644); err != nil {
				b.Fatal(err)
			}
			in.Processes = append(in.Processes, collector.Process{PID: pid, UsedMemory: 1 << 30, Util: 0.02, UtilKnown: true})
			pid++
		}
		insts = append(insts, in)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, &fakeShareKubelet{
		list:  &podresourcesv1.ListPodResourcesResponse{PodResources: prs},
		alloc: &podresourcesv1.AllocatableResourcesResponse{},
	})
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(srv.Stop)
	list := []byte(`{"items":[` + strings.Join(pods, ",") + `]}`)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(list) }))
	b.Cleanup(api.Close)
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("tok"), 0o600); err != nil {
		b.Fatal(err)
	}
	k, err := attrib.NewKube(attrib.KubeConfig{Socket: sock, APIServer: api.URL, NodeName: "gpu-07",
		TokenFile: tok, HTTPClient: api.Client(), Shares: true, ProcRoot: proc})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = k.Close() })
	ctx := context.Background()
	got, err := k.Split(ctx, insts)
	if err != nil || len(got) != cards*per {
		b.Fatalf("split: %d instances, err %v; want %d shares", len(got), err, cards*per)
	}
	for _, in := range got {
		if in.Profile != "1/20" || !in.UtilKnown || in.Util < 0.39 || in.Util > 0.41 {
			b.Fatalf("share %s: profile %q util %v (known %v); want 1/20, 0.4 (2 %% of the card on a 5 %% share)", in.InstanceID, in.Profile, in.Util, in.UtilKnown)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := k.Split(ctx, insts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(list))/1024, "KiB/list")
}
