package attrib

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/cardhour/cardhour/collector"
)

// DefaultKubeletSocket is where the kubelet serves PodResources.
const DefaultKubeletSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// KubeConfig configures the Kubernetes resolver.
type KubeConfig struct {
	Socket string // kubelet PodResources socket (default DefaultKubeletSocket)
	// NamespaceProjects maps a namespace to a project; a namespace not in the map
	// is the project itself.
	NamespaceProjects map[string]string
	// UserLabel is the pod label that names the user (e.g. cardhour.io/user).
	// Empty: the user stays empty and the API server is never asked.
	UserLabel string
	// APIServer is the API server URL (default from KUBERNETES_SERVICE_HOST/PORT).
	APIServer string
	// TokenFile and CAFile default to the pod's service account.
	TokenFile string
	CAFile    string
	Timeout   time.Duration // per call (default 2 s)
	// HTTPClient overrides the client for the API server (tests).
	HTTPClient *http.Client
	// Shares splits whole cards shared by pods (HAMi, time-slicing) into one
	// instance per (card, pod, container) (Kube.Split). HAMi allocations and
	// the process → container mapping need the API server's pod list.
	Shares bool
	// NodeName is this node, whose pods are listed (default $NODE_NAME).
	NodeName string
	// TimeSlicingReplicas is the device plugin's replicas per card
	// (sharing.timeSlicing.resources[].replicas); 0: counted from the
	// kubelet's allocatable devices.
	TimeSlicingReplicas int
	// ProcRoot is /proc (tests pass a fake tree).
	ProcRoot string
}

// Kube attributes instances to pods: kubelet PodResources gives the pod of each
// device ID (MIG UUID or GPU UUID, with an optional "::N" time-slicing suffix);
// the namespace is the project and a pod label, read from the API server with
// the collector's service account, is the user.
type Kube struct {
	cfg    KubeConfig
	conn   *grpc.ClientConn
	client podresourcesv1.PodResourcesListerClient
	http   *http.Client

	mu     sync.Mutex
	labels map[string]labelEntry // ns/name → user label value
}

type labelEntry struct {
	user string
	at   time.Time
}

// NewKube connects lazily to the kubelet socket.
func NewKube(cfg KubeConfig) (*Kube, error) {
	if cfg.Socket == "" {
		cfg.Socket = DefaultKubeletSocket
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.NodeName == "" {
		cfg.NodeName = os.Getenv("NODE_NAME")
	}
	conn, err := grpc.NewClient("passthrough:///kubelet",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", cfg.Socket)
		}))
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources client: %w", err)
	}
	k := &Kube{cfg: cfg, conn: conn, client: podresourcesv1.NewPodResourcesListerClient(conn), labels: map[string]labelEntry{}}
	if cfg.UserLabel != "" || (cfg.Shares && (cfg.APIServer != "" || os.Getenv("KUBERNETES_SERVICE_HOST") != "")) {
		if err := k.setupAPI(); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	return k, nil
}

func (k *Kube) setupAPI() error {
	if k.cfg.APIServer == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" {
			return errors.New("kube: user label set but no API server (set it, or run in a pod)")
		}
		k.cfg.APIServer = "https://" + net.JoinHostPort(host, port)
	}
	if k.cfg.TokenFile == "" {
		k.cfg.TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	}
	if k.cfg.CAFile == "" {
		k.cfg.CAFile = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	}
	k.http = k.cfg.HTTPClient
	if k.http == nil {
		t := &tls.Config{MinVersion: tls.VersionTLS12}
		if pem, err := os.ReadFile(k.cfg.CAFile); err == nil {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			t.RootCAs = pool
		}
		k.http = &http.Client{Timeout: k.cfg.Timeout, Transport: &http.Transport{TLSClientConfig: t}}
	}
	return nil
}

// Close closes the kubelet connection.
func (k *Kube) Close() error { return k.conn.Close() }

// Name is "kube".
func (k *Kube) Name() string { return "kube" }

// DeviceID normalises a device ID from PodResources: the "::N" replica suffix of
// time-sliced devices is cut off.
func DeviceID(id string) string {
	if i := strings.Index(id, "::"); i >= 0 {
		return id[:i]
	}
	return id
}

// Resolve lists the pods' devices once and attributes the instances found.
func (k *Kube) Resolve(ctx context.Context, insts []collector.Instance) (map[string]collector.Holder, error) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.Timeout)
	defer cancel()
	resp, err := k.client.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources List: %w", err)
	}
	type pod struct{ ns, name string }
	byDev := map[string]pod{}
	for _, p := range resp.GetPodResources() {
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDevices() {
				for _, id := range d.GetDeviceIds() {
					byDev[DeviceID(id)] = pod{p.GetNamespace(), p.GetName()}
				}
			}
		}
	}
	out := map[string]collector.Holder{}
	var errs []error
	for _, in := range insts {
		p, ok := byDev[in.InstanceID]
		if in.Pod != "" { // a share of a card: the splitter named its pod
			p, ok = pod{in.Namespace, in.Pod}, true
		}
		if !ok {
			continue
		}
		project := p.ns
		if m, ok := k.cfg.NamespaceProjects[p.ns]; ok {
			project = m
		}
		h := collector.Holder{Project: project, Ref: "k8s:" + p.ns + "/" + p.name}
		if k.cfg.UserLabel != "" {
			u, err := k.userOf(ctx, p.ns, p.name)
			if err != nil {
				errs = append(errs, err)
			}
			h.User = u
		}
		out[in.InstanceID] = h
	}
	return out, errors.Join(errs...)
}

const labelTTL = 5 * time.Minute

func (k *Kube) userOf(ctx context.Context, ns, name string) (string, error) {
	key := ns + "/" + name
	k.mu.Lock()
	e, ok := k.labels[key]
	k.mu.Unlock()
	if ok && time.Since(e.at) < labelTTL {
		return e.user, nil
	}
	tok, err := os.ReadFile(k.cfg.TokenFile) // re-read: projected tokens rotate
	if err != nil {
		return "", fmt.Errorf("kube: cannot read service account token: %w", err)
	}
	url := fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s", strings.TrimSuffix(k.cfg.APIServer, "/"), ns, name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("Accept", "application/json")
	resp, err := k.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("kube: get pod %s: %w", key, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("kube: get pod %s: HTTP %d", key, resp.StatusCode)
	}
	var pod struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 4<<20)).Decode(&pod); err != nil {
		return "", fmt.Errorf("kube: decode pod %s: %w", key, err)
	}
	user := pod.Metadata.Labels[k.cfg.UserLabel]
	k.mu.Lock()
	if len(k.labels) > 10000 {
		clear(k.labels)
	}
	k.labels[key] = labelEntry{user: user, at: time.Now()}
	k.mu.Unlock()
	return user, nil
}
