package deploytest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// root is the repository root.
func root(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func ci() bool {
	switch os.Getenv("CI") {
	case "true", "1", "yes":
		return true
	}
	return false
}

// skipOrFail skips a test whose tool is missing, and fails it under CI=true.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if ci() {
		t.Fatalf("%s (CI=true: failing)", msg)
	}
	t.Skipf("SKIPPED: %s (set CI=true to make this an error)", msg)
}

var helmOnce struct {
	sync.Once
	path string
	err  error
}

// helm returns the helm CLI of deployments/testenv/helm.sh (built once into
// the test cache).
func helm(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(root(t), "deployments/testenv/helm.sh"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmOnce.err = fmt.Errorf("deployments/testenv/helm.sh: %v: %s", err, stderr.String())
			return
		}
		helmOnce.path = strings.TrimSpace(string(out))
	})
	if helmOnce.err != nil {
		skipOrFail(t, "no helm CLI: %v", helmOnce.err)
	}
	return helmOnce.path
}

// render runs helm template on the chart with args (-f, --set, ...).
func render(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	full := append([]string{"template", "cardhour", filepath.Join(root(t), "deployments/helm/cardhour"), "--namespace", "cardhour"}, args...)
	cmd := exec.Command(helm(t), full...)
	cmd.Dir = root(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %v: %s", strings.Join(full, " "), err, stderr.String())
	}
	return out, nil
}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart writes (the type is not in k8s.io/api); decoded strictly like the rest.
type serviceMonitor struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   metav1ObjectMeta   `json:"metadata"`
	Spec       serviceMonitorSpec `json:"spec"`
}

type metav1ObjectMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
}

type serviceMonitorSpec struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	NamespaceSelector struct {
		MatchNames []string `json:"matchNames"`
	} `json:"namespaceSelector"`
	Endpoints []struct {
		Port     string `json:"port"`
		Path     string `json:"path"`
		Interval string `json:"interval"`
	} `json:"endpoints"`
}

// objects is a rendered chart, every object decoded strictly into its type.
type objects struct {
	all             []any
	daemonSets      map[string]*appsv1.DaemonSet
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	secrets         map[string]*corev1.Secret
	configMaps      map[string]*corev1.ConfigMap
	serviceAccounts map[string]*corev1.ServiceAccount
	roles           map[string]*rbacv1.Role // by namespace/name
	roleBindings    map[string]*rbacv1.RoleBinding
	clusterRoles    map[string]*rbacv1.ClusterRole
	clusterBindings map[string]*rbacv1.ClusterRoleBinding
	ingresses       map[string]*networkingv1.Ingress
	serviceMonitors map[string]*serviceMonitor
}

// decode splits a multi-document YAML stream and decodes every document
// strictly (unknown or duplicate fields fail) into its k8s.io/api type.
func decode(stream []byte) (*objects, error) {
	o := &objects{
		daemonSets: map[string]*appsv1.DaemonSet{}, deployments: map[string]*appsv1.Deployment{},
		services: map[string]*corev1.Service{}, secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{},
		serviceAccounts: map[string]*corev1.ServiceAccount{}, roles: map[string]*rbacv1.Role{}, roleBindings: map[string]*rbacv1.RoleBinding{},
		clusterRoles: map[string]*rbacv1.ClusterRole{}, clusterBindings: map[string]*rbacv1.ClusterRoleBinding{},
		ingresses: map[string]*networkingv1.Ingress{}, serviceMonitors: map[string]*serviceMonitor{},
	}
	for i, doc := range splitDocs(stream) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", i+1, err, doc)
		}
		if head.Kind == "" || head.APIVersion == "" || head.Metadata.Name == "" {
			return nil, fmt.Errorf("document %d: no apiVersion, kind or metadata.name\n%s", i+1, doc)
		}
		nsName := head.Metadata.Namespace + "/" + head.Metadata.Name
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 DaemonSet":
			x := &appsv1.DaemonSet{}
			o.daemonSets[head.Metadata.Name], obj = x, x
		case "apps/v1 Deployment":
			x := &appsv1.Deployment{}
			o.deployments[head.Metadata.Name], obj = x, x
		case "v1 Service":
			x := &corev1.Service{}
			o.services[head.Metadata.Name], obj = x, x
		case "v1 Secret":
			x := &corev1.Secret{}
			o.secrets[head.Metadata.Name], obj = x, x
		case "v1 ConfigMap":
			x := &corev1.ConfigMap{}
			o.configMaps[head.Metadata.Name], obj = x, x
		case "v1 ServiceAccount":
			x := &corev1.ServiceAccount{}
			o.serviceAccounts[head.Metadata.Name], obj = x, x
		case "rbac.authorization.k8s.io/v1 Role":
			x := &rbacv1.Role{}
			o.roles[nsName], obj = x, x
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			x := &rbacv1.RoleBinding{}
			o.roleBindings[nsName], obj = x, x
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			x := &rbacv1.ClusterRole{}
			o.clusterRoles[head.Metadata.Name], obj = x, x
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			x := &rbacv1.ClusterRoleBinding{}
			o.clusterBindings[head.Metadata.Name], obj = x, x
		case "networking.k8s.io/v1 Ingress":
			x := &networkingv1.Ingress{}
			o.ingresses[head.Metadata.Name], obj = x, x
		case "monitoring.coreos.com/v1 ServiceMonitor":
			x := &serviceMonitor{}
			o.serviceMonitors[head.Metadata.Name], obj = x, x
		default:
			return nil, fmt.Errorf("document %d: unexpected %s %s", i+1, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("document %d (%s %s): %w\n%s", i+1, head.Kind, nsName, err, doc)
		}
		o.all = append(o.all, obj)
	}
	if len(o.all) == 0 {
		return nil, errors.New("no objects rendered")
	}
	return o, nil
}

// splitDocs splits a YAML stream at "---" lines, dropping documents that hold
// only comments or nothing.
func splitDocs(stream []byte) [][]byte {
	var out [][]byte
	for _, d := range strings.Split("\n"+string(stream), "\n---") {
		d = strings.TrimPrefix(d, "\n")
		empty := true
		for _, line := range strings.Split(d, "\n") {
			if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
				empty = false
				break
			}
		}
		if !empty {
			out = append(out, []byte(d))
		}
	}
	return out
}
