package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/yamlwalk"
)

// Config says which releasers release the instances of each project. YAML
// (the release: section of the watch configuration):
//
//	default: [k8s]                # for projects not listed; absent or []: none
//	projects:
//	  hpc-lab: [scancel]          # tried in order: the next when one has nothing to act on
//	  vision: [k8s, site-hook]
//	releasers:
//	  k8s:
//	    kind: kubernetes
//	    allowed_namespaces: [nlp-lab, vision]
//	    grace_period: 30s
//	  scancel:
//	    kind: command
//	    argv: [scancel, "{slurm_job}"]
//	    timeout: 30s
//	  site-hook:
//	    kind: webhook
//	    url: https://hooks.example.edu/cardhour/release
//	    secret_file: /etc/cardhour/release-hook.secret
type Config struct {
	Default   []string
	Projects  map[string][]string
	Releasers map[string]ReleaserConfig
}

// Kinds of releaser.
const (
	KindKubernetes = "kubernetes"
	KindCommand    = "command"
	KindWebhook    = "webhook"
)

// ReleaserConfig is one named releaser; only the options of its Kind are set.
type ReleaserConfig struct {
	Kind       string
	Line       int // where it is defined
	Kubernetes KubeConfig
	Command    CommandConfig
	Webhook    WebhookConfig
	SecretFile string // webhook: the secret is read from this file by Build
}

var kindKeys = map[string][]string{
	KindKubernetes: {"kind", "allowed_namespaces", "grace_period", "kubeconfig", "api_server", "token_file", "ca_file", "timeout"},
	KindCommand:    {"kind", "argv", "timeout", "max_output_bytes"},
	KindWebhook:    {"kind", "url", "secret", "secret_file", "timeout"},
}

// ParseConfig reads the release configuration strictly: unknown fields,
// wrong types, unknown releasers and bad options are errors, each naming its
// line and field, all reported at once. Empty input is an empty Config (no
// releases).
func ParseConfig(b []byte) (*Config, error) {
	c := &Config{Projects: map[string][]string{}, Releasers: map[string]ReleaserConfig{}}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return c, nil
		}
		return nil, fmt.Errorf("release config: invalid YAML: %w", err)
	}
	p := &parser{failed: map[string]bool{}}
	root := doc.Content[0]
	if yamlwalk.IsNull(root) {
		return c, nil
	}
	refs := map[string][]*yaml.Node{} // releaser name → where it is used
	p.mapping(root, "", []string{"default", "projects", "releasers"}, func(k, v *yaml.Node, path string) {
		switch k.Value {
		case "default":
			c.Default = p.names(v, path, refs)
		case "projects":
			p.mapping(v, path, nil, func(k, v *yaml.Node, path string) {
				if k.Value == "" {
					p.errf(k, path, "a project name must not be empty")
				}
				c.Projects[k.Value] = p.names(v, path, refs)
			})
		case "releasers":
			p.mapping(v, path, nil, func(k, v *yaml.Node, path string) {
				if k.Value == "" {
					p.errf(k, path, "a releaser name must not be empty")
				}
				if rc, ok := p.releaser(v, path); ok {
					c.Releasers[k.Value] = rc
				} else {
					p.failed[k.Value] = true
				}
			})
		}
	})
	names := make([]string, 0, len(refs))
	for n := range refs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := c.Releasers[n]; !ok && !p.failed[n] {
			for _, at := range refs[n] {
				p.errf(at, "", "releaser %q is not defined under releasers", n)
			}
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return c, nil
}

type parser struct {
	errs   []string
	failed map[string]bool // releasers defined with errors (no "not defined" follow-up)
}

func (p *parser) errf(n *yaml.Node, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	p.errs = append(p.errs, fmt.Sprintf("line %d: %s", n.Line, msg))
}

func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return errors.New("release config: " + strings.Join(p.errs, "; "))
}

// mapping walks a mapping node; allowed nil means any key.
func (p *parser) mapping(n *yaml.Node, path string, allowed []string, fn func(k, v *yaml.Node, path string)) {
	yamlwalk.Mapping(n, path, allowed, p.errf, fn)
}

func (p *parser) str(v *yaml.Node, path string) string {
	if v.Kind != yaml.ScalarNode || yamlwalk.IsNull(v) || v.Tag == "!!bool" {
		p.errf(v, path, "must be a string")
		return ""
	}
	return v.Value
}

func (p *parser) list(v *yaml.Node, path string) []string {
	if yamlwalk.IsNull(v) {
		return []string{}
	}
	if v.Kind != yaml.SequenceNode {
		p.errf(v, path, "must be a list (lines starting with '- ', or [a, b])")
		return nil
	}
	out := make([]string, 0, len(v.Content))
	for i, e := range v.Content {
		out = append(out, p.str(yamlwalk.Deref(e), fmt.Sprintf("%s[%d]", path, i)))
	}
	return out
}

func (p *parser) names(v *yaml.Node, path string, refs map[string][]*yaml.Node) []string {
	out := p.list(v, path)
	if v.Kind == yaml.SequenceNode {
		for i, n := range out {
			if n != "" {
				refs[n] = append(refs[n], v.Content[i])
			}
		}
	}
	return out
}

func (p *parser) duration(v *yaml.Node, path string) time.Duration {
	s := p.str(v, path)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		p.errf(v, path, "%q is not a duration >= 0 (e.g. 30s, 2m)", s)
		return 0
	}
	return d
}

func (p *parser) releaser(n *yaml.Node, path string) (_ ReleaserConfig, ok bool) {
	rc := ReleaserConfig{Line: n.Line}
	before := len(p.errs)
	defer func() { ok = ok && len(p.errs) == before }()
	if rc.Kind, ok = p.releaserKind(n, path); !ok {
		return rc, false
	}
	p.mapping(n, path, kindKeys[rc.Kind], func(k, v *yaml.Node, path string) {
		p.releaserOption(&rc, k.Value, v, path)
	})
	switch rc.Kind {
	case KindKubernetes:
		p.checkKubernetes(n, path, rc.Kubernetes)
	case KindCommand:
		if err := rc.Command.Validate(); err != nil {
			p.errf(n, path, "%v", err)
		}
	case KindWebhook:
		p.checkWebhook(n, path, rc)
	}
	return rc, true
}

// releaserKind reads the kind first: it decides which options are allowed.
func (p *parser) releaserKind(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.MappingNode {
		p.errf(n, path, "expected a mapping with a kind (%s, %s or %s)", KindKubernetes, KindCommand, KindWebhook)
		return "", false
	}
	kind := ""
	for k, v := range yamlwalk.Pairs(n) { // every kind given: the walk reports a repeated one
		if k.Value == "kind" {
			v = yamlwalk.Deref(v)
			kind = p.str(v, yamlwalk.Join(path, "kind"))
			if _, ok := kindKeys[kind]; !ok && kind != "" {
				p.errf(v, yamlwalk.Join(path, "kind"), "unknown kind %q (want %s, %s or %s)", kind, KindKubernetes, KindCommand, KindWebhook)
				return kind, false
			}
		}
	}
	if kind == "" {
		p.errf(n, path, "kind is required (%s, %s or %s)", KindKubernetes, KindCommand, KindWebhook)
		return "", false
	}
	return kind, true
}

// releaserOption sets option key of rc (one kindKeys allows for its kind).
func (p *parser) releaserOption(rc *ReleaserConfig, key string, v *yaml.Node, path string) {
	switch key {
	case "kind":
	case "allowed_namespaces":
		rc.Kubernetes.AllowedNamespaces = p.list(v, path)
	case "grace_period":
		d := p.duration(v, path)
		if d%time.Second != 0 {
			p.errf(v, path, "%v: want whole seconds", d)
		}
		rc.Kubernetes.GracePeriod = &d
	case "kubeconfig":
		rc.Kubernetes.Kubeconfig = p.str(v, path)
	case "api_server":
		rc.Kubernetes.APIServer = p.str(v, path)
	case "token_file":
		rc.Kubernetes.TokenFile = p.str(v, path)
	case "ca_file":
		rc.Kubernetes.CAFile = p.str(v, path)
	case "timeout":
		d := p.duration(v, path)
		rc.Kubernetes.Timeout, rc.Command.Timeout, rc.Webhook.Timeout = d, d, d
	case "argv":
		rc.Command.Argv = p.list(v, path)
	case "max_output_bytes":
		s := p.str(v, path)
		m, err := strconv.Atoi(s)
		if err != nil || m <= 0 {
			p.errf(v, path, "%q is not a positive number of bytes", s)
		}
		rc.Command.MaxOutput = m
	case "url":
		rc.Webhook.URL = p.str(v, path)
	case "secret":
		rc.Webhook.Secret = p.str(v, path)
	case "secret_file":
		rc.SecretFile = p.str(v, path)
	}
}

func (p *parser) checkKubernetes(n *yaml.Node, path string, k KubeConfig) {
	if len(k.AllowedNamespaces) == 0 {
		p.errf(n, yamlwalk.Join(path, "allowed_namespaces"), "is required: the namespaces whose pods may be deleted")
	}
	if k.APIServer != "" && k.TokenFile == "" {
		p.errf(n, yamlwalk.Join(path, "token_file"), "is required with api_server")
	}
	if k.APIServer != "" && k.Kubeconfig != "" {
		p.errf(n, yamlwalk.Join(path, "kubeconfig"), "give either kubeconfig or api_server, not both")
	}
	if k.APIServer == "" && (k.TokenFile != "" || k.CAFile != "") {
		p.errf(n, yamlwalk.Join(path, "api_server"), "is required with token_file and ca_file")
	}
}

func (p *parser) checkWebhook(n *yaml.Node, path string, rc ReleaserConfig) {
	if rc.Webhook.URL == "" {
		p.errf(n, yamlwalk.Join(path, "url"), "is required")
	} else if err := rc.Webhook.Validate(); err != nil {
		p.errf(n, path, "%v", err)
	}
	if rc.Webhook.Secret != "" && rc.SecretFile != "" {
		p.errf(n, yamlwalk.Join(path, "secret_file"), "give either secret or secret_file, not both")
	}
	if rc.Webhook.Secret == "" && rc.SecretFile == "" {
		p.errf(n, yamlwalk.Join(path, "secret_file"), "a secret (secret_file, or secret) is required: receivers check the signature")
	}
}

// Build makes the releasers (reading webhook secret files) and the Set that
// routes requests to them.
func (c *Config) Build() (*Set, error) {
	rs := map[string]Releaser{}
	var errs []error
	for _, name := range sortedKeys(c.Releasers) {
		rc := c.Releasers[name]
		switch rc.Kind {
		case KindKubernetes:
			k, err := NewKubernetes(rc.Kubernetes)
			if err != nil {
				errs = append(errs, fmt.Errorf("release config: line %d: releasers.%s: %w", rc.Line, name, err))
				continue
			}
			rs[name] = k
		case KindCommand:
			rs[name] = NewCommand(rc.Command)
		case KindWebhook:
			wc := rc.Webhook
			if rc.SecretFile != "" {
				b, err := os.ReadFile(rc.SecretFile)
				if err != nil {
					errs = append(errs, fmt.Errorf("release config: line %d: releasers.%s.secret_file: %w", rc.Line, name, err))
					continue
				}
				wc.Secret = strings.TrimSpace(string(b))
				if wc.Secret == "" {
					errs = append(errs, fmt.Errorf("release config: line %d: releasers.%s.secret_file: %s is empty", rc.Line, name, rc.SecretFile))
					continue
				}
			}
			rs[name] = NewWebhook(wc)
		default:
			errs = append(errs, fmt.Errorf("release config: line %d: releasers.%s: unknown kind %q", rc.Line, name, rc.Kind))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return NewSet(rs, c.Default, c.Projects)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Set routes a request to the releasers of its project, in order.
type Set struct {
	releasers map[string]Releaser
	def       []string
	projects  map[string][]string
}

// NewSet checks that every name used is a releaser.
func NewSet(releasers map[string]Releaser, def []string, projects map[string][]string) (*Set, error) {
	var errs []error
	check := func(where string, names []string) {
		for _, n := range names {
			if releasers[n] == nil {
				errs = append(errs, fmt.Errorf("release: %s: releaser %q is not defined", where, n))
			}
		}
	}
	check("default", def)
	for _, p := range sortedKeys(projects) {
		check("project "+p, projects[p])
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Set{releasers: releasers, def: def, projects: projects}, nil
}

// Permanent is the package's Permanent: a Set is the watcher's releaser.
func (s *Set) Permanent(err error) bool { return Permanent(err) }

// For returns the names of the releasers of a project, in order (empty: none).
func (s *Set) For(project string) []string {
	if names, ok := s.projects[project]; ok {
		return names
	}
	return s.def
}

// Release tries the project's releasers in order: one that has nothing to act
// on (ErrNoHandle) passes to the next; the first other answer is the outcome.
// No releaser, or none with a handle, is ErrNoHandle.
func (s *Set) Release(ctx context.Context, r alert.ReleaseRequest) (alert.ReleaseOutcome, error) {
	names := s.For(r.Target.Project)
	if len(names) == 0 {
		return alert.ReleaseOutcome{}, fmt.Errorf("release: no releaser is configured for project %q: %w", r.Target.Project, ErrNoHandle)
	}
	var skipped []error
	for _, n := range names {
		out, err := s.releasers[n].Release(ctx, r)
		if errors.Is(err, ErrNoHandle) {
			skipped = append(skipped, fmt.Errorf("%s: %w", n, err))
			continue
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", n, err)
		}
		return out, nil
	}
	return alert.ReleaseOutcome{}, errors.Join(skipped...)
}
