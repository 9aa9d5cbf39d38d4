package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cardhour/cardhour/internal/watch/alert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeConfig configures the Kubernetes releaser. The API server is reached
// with, in this order of preference: APIServer with TokenFile and CAFile, the
// kubeconfig file Kubeconfig, or the pod's service account (in-cluster).
type KubeConfig struct {
	// AllowedNamespaces are the only namespaces whose pods may be deleted
	// (the service account's Role should grant no more). Required.
	AllowedNamespaces []string
	// GracePeriod is the pod's termination grace period for the delete;
	// nil: the pod's own (terminationGracePeriodSeconds).
	GracePeriod *time.Duration
	Kubeconfig  string        // path of a kubeconfig file (its current context)
	APIServer   string        // API server URL, e.g. https://10.0.0.1:6443
	TokenFile   string        // bearer token file, re-read every minute (projected tokens rotate)
	CAFile      string        // CA bundle of the API server
	Timeout     time.Duration // per request (default 10 s)
	// Rest, when set, is used as is (tests, or a caller that built its own).
	Rest *rest.Config
}

// Kubernetes deletes the pod named by a "k8s:<namespace>/<pod>" reference.
type Kubernetes struct {
	cfg    KubeConfig
	client *rest.RESTClient
	host   string
}

// NewKubernetes builds the client; it contacts nobody.
func NewKubernetes(cfg KubeConfig) (*Kubernetes, error) {
	if len(cfg.AllowedNamespaces) == 0 {
		return nil, errors.New("kubernetes release: allowed_namespaces is required (the namespaces whose pods may be deleted)")
	}
	for _, ns := range cfg.AllowedNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("kubernetes release: allowed namespace %q: %s", ns, errs[0])
		}
	}
	if cfg.GracePeriod != nil && (*cfg.GracePeriod < 0 || *cfg.GracePeriod%time.Second != 0) {
		return nil, fmt.Errorf("kubernetes release: grace period %v: want a whole number of seconds >= 0", *cfg.GracePeriod)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	rc := cfg.Rest
	var err error
	switch {
	case rc != nil:
		rc = rest.CopyConfig(rc)
	case cfg.APIServer != "":
		if cfg.TokenFile == "" {
			return nil, errors.New("kubernetes release: api_server needs token_file")
		}
		rc = &rest.Config{Host: cfg.APIServer, BearerTokenFile: cfg.TokenFile,
			TLSClientConfig: rest.TLSClientConfig{CAFile: cfg.CAFile}}
	case cfg.Kubeconfig != "":
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubernetes release: kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
	default:
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes release: no API server configured and not in a cluster: %w", err)
		}
	}
	rc.ContentType = "application/json" // readable by people and by test servers
	if rc.UserAgent == "" {
		rc.UserAgent = "cardhour-release"
	}
	// A client of the core group that knows DeleteOptions and Status only: the
	// typed clientset's scheme registers every API group (30 MB of binary).
	sch := runtime.NewScheme()
	gv := schema.GroupVersion{Version: "v1"}
	metav1.AddToGroupVersion(sch, gv)
	rc.APIPath, rc.GroupVersion = "/api", &gv
	rc.NegotiatedSerializer = serializer.NewCodecFactory(sch).WithoutConversion()
	client, err := rest.RESTClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes release: %w", err)
	}
	return &Kubernetes{cfg: cfg, client: client, host: rc.Host}, nil
}

// Release deletes the holder's pod (a server-side dry run when r.DryRun).
// Released is true only when the API server accepted the delete; a pod
// already gone (404) is Released false with an Action saying so.
func (k *Kubernetes) Release(ctx context.Context, r alert.ReleaseRequest) (alert.ReleaseOutcome, error) {
	ref := ParseRef(r.Target.HolderRef)
	if ref.Kind != "k8s" {
		return alert.ReleaseOutcome{}, fmt.Errorf("kubernetes release of %s: holder reference %q names no pod: %w", r.Target.InstanceID, r.Target.HolderRef, ErrNoHandle)
	}
	pod := ref.Namespace + "/" + ref.Pod
	if !slices.Contains(k.cfg.AllowedNamespaces, ref.Namespace) {
		return alert.ReleaseOutcome{}, fmt.Errorf("kubernetes release: pod %s: namespace %q is not among the allowed namespaces (%v): %w",
			pod, ref.Namespace, k.cfg.AllowedNamespaces, ErrForbidden)
	}
	if errs := validation.IsDNS1123Subdomain(ref.Pod); len(errs) > 0 {
		return alert.ReleaseOutcome{}, fmt.Errorf("kubernetes release: pod name %q: %s: %w", ref.Pod, errs[0], ErrNoHandle)
	}
	opts := metav1.DeleteOptions{}
	grace := ""
	if k.cfg.GracePeriod != nil {
		s := int64(*k.cfg.GracePeriod / time.Second)
		opts.GracePeriodSeconds = &s
		grace = fmt.Sprintf(" with a grace period of %d s", s)
	}
	if r.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.Timeout)
	defer cancel()
	req := k.client.Delete().Namespace(ref.Namespace).Resource("pods").Name(ref.Pod)
	if r.DryRun {
		req = req.Param("dryRun", metav1.DryRunAll) // in the query too, not only in the body
	}
	err := req.Body(&opts).Do(ctx).Error()
	switch {
	case err == nil && r.DryRun:
		return alert.ReleaseOutcome{Action: "dry run: the API server would delete pod " + pod + grace}, nil
	case err == nil:
		return alert.ReleaseOutcome{Released: true, Action: "deleted pod " + pod + grace}, nil
	case apierrors.IsNotFound(err) && r.DryRun:
		return alert.ReleaseOutcome{Action: "dry run: pod " + pod + " is already gone; nothing would be deleted"}, nil
	case apierrors.IsNotFound(err):
		return alert.ReleaseOutcome{Action: "pod " + pod + " was already gone; nothing deleted"}, nil
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return alert.ReleaseOutcome{}, fmt.Errorf("kubernetes release: the API server %s refused to delete pod %s (check the service account's Role): %v: %w",
			k.host, pod, err, ErrForbidden)
	}
	return alert.ReleaseOutcome{}, fmt.Errorf("kubernetes release: delete pod %s: %w", pod, err)
}
