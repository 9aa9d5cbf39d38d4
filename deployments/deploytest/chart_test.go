package deploytest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

const fullname = "cardhour" // release "cardhour" of chart "cardhour"

func renderDecode(t *testing.T, args ...string) *objects {
	t.Helper()
	out, err := render(t, args...)
	require.NoError(t, err)
	o, err := decode(out)
	require.NoError(t, err)
	return o
}

func exampleArgs(t *testing.T) []string {
	return []string{"-f", filepath.Join(root(t), "deployments/helm/cardhour/ci/example-values.yaml"),
		"--set-file", "serve.catalog=" + filepath.Join(root(t), "schemas/examples/catalog.yaml")}
}

func mount(c corev1.Container, name string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func arg(c corev1.Container, prefix string) (string, bool) {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, prefix); ok {
			return v, true
		}
	}
	return "", false
}

// requireLeastPrivilege: no privileged mode, no escalation, every capability
// dropped, read-only root file system.
func requireLeastPrivilege(t *testing.T, what string, sc *corev1.SecurityContext) {
	t.Helper()
	require.NotNil(t, sc, what)
	require.NotNil(t, sc.Privileged, what)
	require.False(t, *sc.Privileged, what)
	require.NotNil(t, sc.AllowPrivilegeEscalation, what)
	require.False(t, *sc.AllowPrivilegeEscalation, what)
	require.NotNil(t, sc.ReadOnlyRootFilesystem, what)
	require.True(t, *sc.ReadOnlyRootFilesystem, what)
	require.NotNil(t, sc.Capabilities, what)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, what)
	require.Empty(t, sc.Capabilities.Add, what)
}

func requireHTTPProbe(t *testing.T, what string, p *corev1.Probe, path, port string) {
	t.Helper()
	require.NotNil(t, p, what)
	require.NotNil(t, p.HTTPGet, what)
	require.Equal(t, path, p.HTTPGet.Path, what)
	require.Equal(t, port, p.HTTPGet.Port.String(), what)
}

func checkCollector(t *testing.T, o *objects, nvmlHost string) {
	ds := o.daemonSets[fullname+"-collector"]
	require.NotNil(t, ds, "collector DaemonSet")
	spec := ds.Spec.Template.Spec
	require.Equal(t, "true", spec.NodeSelector["nvidia.com/gpu.present"])
	require.Contains(t, spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	require.Equal(t, fullname+"-collector", spec.ServiceAccountName)
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	require.Equal(t, "collect", c.Args[0])

	// Host paths: PodResources and NVML read-only, the spool writable.
	pr := mount(c, "pod-resources")
	require.NotNil(t, pr)
	require.True(t, pr.ReadOnly, "pod-resources mounted read-only")
	require.Equal(t, "/var/lib/kubelet/pod-resources", pr.MountPath)
	v := volume(spec, "pod-resources")
	require.NotNil(t, v.HostPath)
	require.Equal(t, "/var/lib/kubelet/pod-resources", v.HostPath.Path)
	sock, ok := arg(c, "--kubelet-socket=")
	require.True(t, ok)
	require.Equal(t, pr.MountPath+"/kubelet.sock", sock)

	nv := mount(c, "nvml")
	require.NotNil(t, nv, "NVML library mounted")
	require.True(t, nv.ReadOnly, "NVML mounted read-only")
	require.Equal(t, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", nv.MountPath)
	v = volume(spec, "nvml")
	require.Equal(t, nvmlHost, v.HostPath.Path)
	require.Equal(t, corev1.HostPathFile, *v.HostPath.Type)

	sp := mount(c, "spool")
	require.NotNil(t, sp)
	require.False(t, sp.ReadOnly)
	dir, _ := arg(c, "--spool-dir=")
	require.Equal(t, sp.MountPath, dir)
	v = volume(spec, "spool")
	require.NotNil(t, v.HostPath, "spool on a host path")
	require.Equal(t, corev1.HostPathDirectoryOrCreate, *v.HostPath.Type)
	require.Len(t, c.VolumeMounts, 3, "nothing else of the host is mounted")
	for _, v := range spec.Volumes {
		require.NotEqual(t, "/", v.HostPath.Path)
	}
	require.False(t, spec.HostNetwork || spec.HostPID || spec.HostIPC)

	requireLeastPrivilege(t, "collector", c.SecurityContext)
	requireHTTPProbe(t, "collector liveness", c.LivenessProbe, "/healthz", "metrics")
	requireHTTPProbe(t, "collector readiness", c.ReadinessProbe, "/readyz", "metrics")
	listen, _ := arg(c, "--listen=")
	require.Equal(t, ":"+strconv.Itoa(int(c.Ports[0].ContainerPort)), listen)

	// The collector reads pods (the user label): get only.
	cr := o.clusterRoles[fullname+"-collector"]
	require.NotNil(t, cr)
	require.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}, cr.Rules)
}

func checkNonRoot(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	require.NotNil(t, spec.SecurityContext, what)
	require.NotNil(t, spec.SecurityContext.RunAsNonRoot, what)
	require.True(t, *spec.SecurityContext.RunAsNonRoot, what)
	require.NotZero(t, *spec.SecurityContext.RunAsUser, what)
	for _, c := range spec.Containers {
		requireLeastPrivilege(t, what+"/"+c.Name, c.SecurityContext)
		if c.SecurityContext.RunAsUser != nil {
			require.NotZero(t, *c.SecurityContext.RunAsUser, what)
		}
	}
}

func checkIngestServe(t *testing.T, o *objects, secret string) {
	in := o.deployments[fullname+"-ingest"]
	require.NotNil(t, in)
	c := in.Spec.Template.Spec.Containers[0]
	require.Equal(t, "ingest", c.Args[0])
	group, ok := arg(c, "--group=")
	require.True(t, ok, "replicas share one named consumer group")
	require.NotEmpty(t, group)
	require.Nil(t, c.LivenessProbe, "a restart would not cure a store or Kafka outage")
	requireHTTPProbe(t, "ingest readiness", c.ReadinessProbe, "/healthz", "metrics")
	checkNonRoot(t, "ingest", in.Spec.Template.Spec)
	require.False(t, *in.Spec.Template.Spec.AutomountServiceAccountToken, "ingest needs no API access")
	requireSecretEnv(t, c, "CARDHOUR_STORE", secret, "store-dsn")

	sv := o.deployments[fullname+"-serve"]
	require.NotNil(t, sv)
	c = sv.Spec.Template.Spec.Containers[0]
	require.Equal(t, "serve", c.Args[0])
	requireHTTPProbe(t, "serve liveness", c.LivenessProbe, "/healthz", "http")
	requireHTTPProbe(t, "serve readiness", c.ReadinessProbe, "/readyz", "http")
	checkNonRoot(t, "serve", sv.Spec.Template.Spec)
	require.Equal(t, fullname+"-serve", sv.Spec.Template.Spec.ServiceAccountName)
	requireSecretEnv(t, c, "CARDHOUR_STORE", secret, "store-dsn")
	requireSecretEnv(t, c, "CARDHOUR_STATE", secret, "state-dsn")
	addr, _ := arg(c, "--addr=")
	require.Equal(t, ":"+strconv.Itoa(int(c.Ports[0].ContainerPort)), addr)
	// No DSN (credentials) in the arguments: they come from the Secret.
	for _, a := range append(c.Args, in.Spec.Template.Spec.Containers[0].Args...) {
		if strings.HasPrefix(a, "--store=") || strings.HasPrefix(a, "--state=") {
			require.Regexp(t, `^--(store|state)=\$\(CARDHOUR_(STORE|STATE)\)$`, a)
		}
		require.NotRegexp(t, `(clickhouse|postgres)://`, a)
	}

	svc := o.services[fullname+"-serve"]
	require.NotNil(t, svc)
	require.Equal(t, sv.Spec.Selector.MatchLabels, svc.Spec.Selector)
	require.Equal(t, "http", svc.Spec.Ports[0].TargetPort.String())
}

func requireSecretEnv(t *testing.T, c corev1.Container, name, secret, key string) {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			require.NotNil(t, e.ValueFrom, name)
			require.NotNil(t, e.ValueFrom.SecretKeyRef, name)
			require.Equal(t, secret, e.ValueFrom.SecretKeyRef.Name, name)
			require.Equal(t, key, e.ValueFrom.SecretKeyRef.Key, name)
			return
		}
	}
	t.Fatalf("container %s has no env %s", c.Name, name)
}

func TestChartDefaults(t *testing.T) {
	o := renderDecode(t)
	checkCollector(t, o, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")
	checkIngestServe(t, o, fullname)

	// Safe defaults: no release permission, no Ingress, no ServiceMonitor,
	// serve reachable only inside the cluster.
	require.Empty(t, o.roles)
	require.Empty(t, o.roleBindings)
	require.Empty(t, o.ingresses)
	require.Empty(t, o.serviceMonitors)
	require.Equal(t, corev1.ServiceTypeClusterIP, o.services[fullname+"-serve"].Spec.Type)
	for name := range o.clusterRoles {
		require.Equal(t, fullname+"-collector", name, "the only ClusterRole is the collector's")
	}
	s := o.secrets[fullname]
	require.NotNil(t, s, "the chart's Secret")
	require.ElementsMatch(t, []string{"store-dsn", "state-dsn", "kafka-password", "webhook-secret"}, keys(s.StringData))
	c := o.daemonSets[fullname+"-collector"].Spec.Template.Spec.Containers[0]
	_, sasl := arg(c, "--kafka-sasl=")
	require.False(t, sasl)
}

func keys[M ~map[string]V, V any](m M) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestChartExample(t *testing.T) {
	o := renderDecode(t, exampleArgs(t)...)
	checkCollector(t, o, "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")
	checkIngestServe(t, o, "cardhour-credentials")
	require.Empty(t, o.secrets, "an existing Secret: the chart makes none")

	// Release RBAC: a Role per listed namespace, get and delete on pods only,
	// bound to serve's ServiceAccount; no ClusterRole for it.
	require.Len(t, o.roles, 2)
	for _, ns := range []string{"ai101-2026", "vision"} {
		r := o.roles[ns+"/"+fullname+"-release"]
		require.NotNil(t, r, ns)
		require.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "delete"}}}, r.Rules)
		b := o.roleBindings[ns+"/"+fullname+"-release"]
		require.NotNil(t, b, ns)
		require.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: r.Name}, b.RoleRef)
		require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname + "-serve", Namespace: "cardhour"}}, b.Subjects)
	}
	for name, cr := range o.clusterRoles {
		for _, rule := range cr.Rules {
			require.NotContains(t, rule.Verbs, "delete", name)
		}
	}
	for name, b := range o.clusterBindings {
		for _, s := range b.Subjects {
			require.NotEqual(t, fullname+"-serve", s.Name, name)
		}
	}

	// The collector's SASL password comes from the Secret.
	c := o.daemonSets[fullname+"-collector"].Spec.Template.Spec.Containers[0]
	requireSecretEnv(t, c, "CARDHOUR_KAFKA_PASSWORD", "cardhour-credentials", "kafka-password")
	v, _ := arg(c, "--kafka-sasl=")
	require.Equal(t, "scram-sha-512", v)

	// serve: catalog from a ConfigMap, webhook secret from a file of the Secret.
	sv := o.deployments[fullname+"-serve"]
	sc := sv.Spec.Template.Spec.Containers[0]
	cat, _ := arg(sc, "--catalog=")
	require.Equal(t, mount(sc, "catalog").MountPath, cat)
	want, err := os.ReadFile(filepath.Join(root(t), "schemas/examples/catalog.yaml"))
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(want)), strings.TrimSpace(o.configMaps[fullname+"-catalog"].Data["catalog.yaml"]))
	wsf, _ := arg(sc, "--webhook-secret-file=")
	require.True(t, strings.HasPrefix(wsf, mount(sc, "secret").MountPath+"/"))
	require.True(t, mount(sc, "secret").ReadOnly)
	require.Equal(t, "cardhour-credentials", volume(sv.Spec.Template.Spec, "secret").Secret.SecretName)
	require.Equal(t, int32(2), *sv.Spec.Replicas)
	in := o.deployments[fullname+"-ingest"].Spec.Template.Spec.Containers[0]
	n, _ := arg(in, "--consumers=")
	require.Equal(t, "4", n)
	n, _ = arg(in, "--raw-retention-days=")
	require.Equal(t, "400", n)

	ing := o.ingresses[fullname+"-serve"]
	require.NotNil(t, ing)
	require.Equal(t, "gpu-billing.example.edu", ing.Spec.Rules[0].Host)
	require.Equal(t, "gpu-billing-tls", ing.Spec.TLS[0].SecretName)
	require.Equal(t, fullname+"-serve", ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name)

	sm := o.serviceMonitors[fullname]
	require.NotNil(t, sm)
	require.Equal(t, "kube-prometheus-stack", sm.Metadata.Labels["release"])
	// Every component's metrics port is behind a Service the monitor selects.
	for _, comp := range []string{"collector-metrics", "ingest-metrics", "serve"} {
		svc := o.services[fullname+"-"+comp]
		require.NotNil(t, svc, comp)
		for k, v := range sm.Spec.Selector.MatchLabels {
			require.Equal(t, v, svc.Labels[k], comp)
		}
	}
}

// The chart refuses a webhook without its signing secret.
func TestChartWebhookNeedsSecret(t *testing.T) {
	_, err := render(t, "--set", "serve.webhook=https://finance.example.edu/x")
	require.ErrorContains(t, err, "serve.webhook needs secrets.webhookSecret")
}

// deployments/kubernetes/cardhour.yaml is the chart rendered with
// deployments/kubernetes/values.yaml (make manifests).
func TestPlainManifestsMatchChart(t *testing.T) {
	out, err := render(t, "-f", filepath.Join(root(t), "deployments/kubernetes/values.yaml"))
	require.NoError(t, err)
	_, err = decode(out)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root(t), "deployments/kubernetes/cardhour.yaml"))
	require.NoError(t, err)
	got := string(b)
	// The file is a comment header followed by the rendered chart.
	i := strings.Index(got, "\n---\n")
	require.GreaterOrEqual(t, i, 0, "deployments/kubernetes/cardhour.yaml: no rendered chart after the header")
	for _, line := range strings.Split(got[:i], "\n") {
		require.True(t, strings.HasPrefix(line, "#"), "header line %q is not a comment", line)
	}
	require.Equal(t, string(out), got[i+1:], "deployments/kubernetes/cardhour.yaml is stale: run make manifests")
}

// Components switched off render nothing of theirs; without a host NVML
// library and runtime class the collector mounts neither.
func TestChartToggles(t *testing.T) {
	o := renderDecode(t, "--set", "collector.nvml.hostLibrary=", "--set", "collector.runtimeClassName=",
		"--set", "serve.enabled=false", "--set", "ingest.enabled=false", "--set", "release.namespaces={a,b}")
	require.Empty(t, o.deployments)
	require.Empty(t, o.roles, "no serve, no release permission")
	require.NotContains(t, o.serviceAccounts, fullname+"-serve")
	spec := o.daemonSets[fullname+"-collector"].Spec.Template.Spec
	require.Nil(t, spec.RuntimeClassName)
	require.Nil(t, mount(spec.Containers[0], "nvml"))
	require.Nil(t, volume(spec, "nvml"))
	require.NotNil(t, mount(spec.Containers[0], "pod-resources"))

	o = renderDecode(t, "--set", "collector.enabled=false")
	require.Empty(t, o.daemonSets)
	require.Empty(t, o.clusterRoles)
	require.Empty(t, o.clusterBindings)
}

// The watcher's file goes into a Secret, mounted read-only, and --watch
// points at it; an existing Secret may be named instead, never both.
func TestChartWatchFile(t *testing.T) {
	watchFile := filepath.Join(t.TempDir(), "watch.yaml")
	content := "watch:\n  interval: 30s\nnotify:\n  channels:\n    - {name: ops, type: webhook, url: https://ops.example.edu/hook, secret: 0123456789abcdef}\n"
	require.NoError(t, os.WriteFile(watchFile, []byte(content), 0o600))
	o := renderDecode(t, "--set-file", "serve.watch="+watchFile)
	sv := o.deployments[fullname+"-serve"]
	sc := sv.Spec.Template.Spec.Containers[0]
	path, ok := arg(sc, "--watch=")
	require.True(t, ok, "serve gets --watch")
	m := mount(sc, "watch")
	require.True(t, m.ReadOnly)
	require.Equal(t, m.MountPath+"/watch.yaml", path)
	v := volume(sv.Spec.Template.Spec, "watch")
	require.Equal(t, fullname+"-watch", v.Secret.SecretName)
	sec := o.secrets[fullname+"-watch"]
	require.NotNil(t, sec, "the file is kept in a Secret, not a ConfigMap")
	require.Equal(t, strings.TrimSpace(content), strings.TrimSpace(sec.StringData["watch.yaml"]))
	require.NotEmpty(t, sv.Spec.Template.Annotations["checksum/watch"], "a changed file rolls the pods")

	o = renderDecode(t, "--set", "serve.watchSecret=site-watch")
	sv = o.deployments[fullname+"-serve"]
	require.Equal(t, "site-watch", volume(sv.Spec.Template.Spec, "watch").Secret.SecretName)
	require.Nil(t, o.secrets[fullname+"-watch"])

	_, err := render(t, "--set-file", "serve.watch="+watchFile, "--set", "serve.watchSecret=site-watch")
	require.ErrorContains(t, err, "serve.watch and serve.watchSecret")

	// Without either, no watcher.
	o = renderDecode(t)
	_, ok = arg(o.deployments[fullname+"-serve"].Spec.Template.Spec.Containers[0], "--watch=")
	require.False(t, ok)
}
