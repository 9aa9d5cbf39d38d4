package attrib_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/attrib"
)

func insts(ids ...string) []collector.Instance {
	var out []collector.Instance
	for _, id := range ids {
		out = append(out, collector.Instance{InstanceID: id})
	}
	return out
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestStatic(t *testing.T) {
	s, err := attrib.LoadStatic(write(t, "map.yaml", "instances:\n  MIG-a: {project: nlp-lab, user: \"42\"}\n  GPU-b: {project: cv-lab}\n"))
	require.NoError(t, err)
	got, err := s.Resolve(context.Background(), insts("MIG-a", "GPU-b", "MIG-c"))
	require.NoError(t, err)
	require.Equal(t, map[string]collector.Holder{"MIG-a": {Project: "nlp-lab", User: "42"}, "GPU-b": {Project: "cv-lab"}}, got)

	_, err = attrib.LoadStatic(write(t, "bad.yaml", "instances:\n  MIG-a: {project: p, owner: x}\n"))
	require.ErrorContains(t, err, "line 2")
	_, err = attrib.LoadStatic(write(t, "bad2.yaml", "instances:\n  MIG-a: {user: x}\n"))
	require.ErrorContains(t, err, "project is required")
}

func TestUnixAndSlurm(t *testing.T) {
	proc := t.TempDir()
	mk := func(pid, uid, cgroup string) {
		d := filepath.Join(proc, pid)
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "status"), []byte("Name:\tpython\nUid:\t"+uid+"\t"+uid+"\t"+uid+"\t"+uid+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(d, "cgroup"), []byte(cgroup), 0o644))
	}
	mk("100", "1001", "0::/user.slice/user-1001.slice\n")
	mk("200", "1002", "0::/system.slice/slurmstepd.scope/job_812345/step_0/user/task_0\n")
	mk("300", "1003", "0::/\n")
	mk("400", "1001", "0::/\n")
	// A job the roster does not list: attributed by login, still reached through the job.
	mk("500", "1001", "0::/system.slice/slurmstepd.scope/job_900001/step_batch/user/task_0\n")
	r := attrib.NewUnix(attrib.UnixConfig{ProcRoot: proc,
		Roster: attrib.RosterFile{
			Logins: map[string]attrib.Entry{"alice": {Project: "nlp-lab", User: "2023110042"}, "bob": {Project: "wrong"}},
			Jobs:   map[string]attrib.Entry{"812345": {Project: "cv-lab", User: "2022110315"}},
		},
		LookupUID: func(uid string) (string, error) {
			switch uid {
			case "1001":
				return "alice", nil
			case "1002":
				return "bob", nil
			}
			return "", errors.New("unknown uid " + uid)
		}})
	in := []collector.Instance{
		{InstanceID: "MIG-alice", Processes: []collector.Process{{PID: 100}}},
		{InstanceID: "MIG-job", Processes: []collector.Process{{PID: 200}}},
		{InstanceID: "MIG-unknown", Processes: []collector.Process{{PID: 300}}},
		{InstanceID: "MIG-gone", Processes: []collector.Process{{PID: 999}}},
		{InstanceID: "MIG-empty"},
		{InstanceID: "MIG-mixed", Processes: []collector.Process{{PID: 200, UsedMemory: 1}, {PID: 400, UsedMemory: 9}}},
		{InstanceID: "MIG-login-job", Processes: []collector.Process{{PID: 500}}},
	}
	got, err := r.Resolve(context.Background(), in)
	require.ErrorContains(t, err, "unknown uid 1003")
	require.Equal(t, map[string]collector.Holder{
		"MIG-alice":     {Project: "nlp-lab", User: "2023110042", Ref: "pid:100"},
		"MIG-job":       {Project: "cv-lab", User: "2022110315", Ref: "slurm:812345"},
		"MIG-mixed":     {Project: "nlp-lab", User: "2023110042", Ref: "pid:400"},
		"MIG-login-job": {Project: "nlp-lab", User: "2023110042", Ref: "slurm:900001"},
	}, got)
}

type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resp *podresourcesv1.ListPodResourcesResponse
}

func (f *fakeKubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return f.resp, nil
}

func TestKubePodResources(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, &fakeKubelet{resp: &podresourcesv1.ListPodResourcesResponse{
		PodResources: []*podresourcesv1.PodResources{
			{Name: "train-0", Namespace: "nlp-lab", Containers: []*podresourcesv1.ContainerResources{{Name: "main",
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/mig-1g.10gb", DeviceIds: []string{"MIG-a"}}}}}},
			{Name: "nb", Namespace: "ns-cv", Containers: []*podresourcesv1.ContainerResources{{Name: "jupyter",
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-b::3"}}}}}},
		}}})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/api/v1/namespaces/nlp-lab/pods/train-0":
			_, _ = w.Write([]byte(`{"metadata":{"labels":{"cardhour.io/user":"2023110042"}}}`))
		default:
			_, _ = w.Write([]byte(`{"metadata":{"labels":{}}}`))
		}
	}))
	defer api.Close()

	k, err := attrib.NewKube(attrib.KubeConfig{Socket: sock, UserLabel: "cardhour.io/user", APIServer: api.URL,
		TokenFile: write(t, "token", "tok\n"), NamespaceProjects: map[string]string{"ns-cv": "cv-lab"}, HTTPClient: api.Client()})
	require.NoError(t, err)
	defer k.Close()
	got, err := k.Resolve(context.Background(), insts("MIG-a", "GPU-b", "MIG-free"))
	require.NoError(t, err)
	require.Equal(t, map[string]collector.Holder{
		"MIG-a": {Project: "nlp-lab", User: "2023110042", Ref: "k8s:nlp-lab/train-0"},
		"GPU-b": {Project: "cv-lab", Ref: "k8s:ns-cv/nb"},
	}, got)

	// Without a user label the API server is never asked.
	k2, err := attrib.NewKube(attrib.KubeConfig{Socket: sock})
	require.NoError(t, err)
	defer k2.Close()
	got, err = k2.Resolve(context.Background(), insts("MIG-a"))
	require.NoError(t, err)
	require.Equal(t, collector.Holder{Project: "nlp-lab", Ref: "k8s:nlp-lab/train-0"}, got["MIG-a"])

	// A missing socket is an error, not a crash.
	k3, err := attrib.NewKube(attrib.KubeConfig{Socket: filepath.Join(t.TempDir(), "none.sock")})
	require.NoError(t, err)
	defer k3.Close()
	_, err = k3.Resolve(context.Background(), insts("MIG-a"))
	require.Error(t, err)
}

func TestDeviceID(t *testing.T) {
	require.Equal(t, "MIG-a", attrib.DeviceID("MIG-a::2"))
	require.Equal(t, "GPU-b", attrib.DeviceID("GPU-b"))
}
