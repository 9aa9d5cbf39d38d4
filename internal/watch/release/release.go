// Package release carries out the release of a GPU instance left idle: it
// ends the workload that holds it, named by the holder reference the collector
// attached to its samples (schemas.Sample.HolderRef). Three releasers: the
// Kubernetes API server (delete the pod), a command (e.g. Slurm's scancel, run
// without a shell) and a signed webhook. A Set routes a request to the
// releasers configured for its project (Config, from YAML).
//
// A releaser reports Released only when something was released; a dry run
// checks what would happen and reports it in Action, never Released.
package release

import (
	"context"
	"errors"
	"strings"

	"github.com/cardhour/cardhour/internal/watch/alert"
)

// Releaser releases the instance of a request. Errors wrapping ErrNoHandle or
// ErrForbidden are permanent; the others may succeed when retried.
type Releaser interface {
	Release(ctx context.Context, r alert.ReleaseRequest) (alert.ReleaseOutcome, error)
}

var (
	// ErrNoHandle: the target's HolderRef gives this releaser nothing to act on
	// (no pod for Kubernetes, no Slurm job for scancel, …).
	ErrNoHandle = errors.New("nothing to act on for this releaser")
	// ErrForbidden: the policy does not allow this release (a namespace not in
	// the allowed list, or the API server refused the service account).
	ErrForbidden = errors.New("release not allowed")
)

// Permanent reports whether err is one that retrying cannot cure.
func Permanent(err error) bool {
	return errors.Is(err, ErrNoHandle) || errors.Is(err, ErrForbidden)
}

// Ref is a parsed holder reference.
type Ref struct {
	Kind      string // "k8s", "slurm", "pid", or "" when empty or unknown
	Namespace string // k8s
	Pod       string // k8s
	SlurmJob  string // slurm
	PID       string // pid
}

// ParseRef splits a holder reference: "k8s:<namespace>/<pod>",
// "slurm:<jobid>" or "pid:<pid>". Anything else (including "") has Kind "".
func ParseRef(s string) Ref {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok || rest == "" {
		return Ref{}
	}
	switch kind {
	case "k8s":
		ns, pod, ok := strings.Cut(rest, "/")
		if !ok || ns == "" || pod == "" || strings.Contains(pod, "/") {
			return Ref{}
		}
		return Ref{Kind: kind, Namespace: ns, Pod: pod}
	case "slurm":
		if !digits(rest) {
			return Ref{}
		}
		return Ref{Kind: kind, SlurmJob: rest}
	case "pid":
		if !digits(rest) {
			return Ref{}
		}
		return Ref{Kind: kind, PID: rest}
	}
	return Ref{}
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
