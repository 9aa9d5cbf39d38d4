package release_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/watch/release"
)

const exampleConfig = `
default: [k8s]
projects:
  hpc-lab: [scancel]
  vision: [k8s, site-hook]
  frozen: []
releasers:
  k8s:
    kind: kubernetes
    allowed_namespaces: [nlp-lab, vision]
    grace_period: 30s
    api_server: https://10.0.0.1:6443
    token_file: /var/run/secrets/token
    ca_file: /var/run/secrets/ca.crt
  scancel:
    kind: command
    argv: [scancel, "{slurm_job}"]
    timeout: 20s
    max_output_bytes: 2048
  site-hook:
    kind: webhook
    url: https://hooks.example.edu/cardhour/release
    secret_file: SECRET
    timeout: 5s
`

func TestParseConfig(t *testing.T) {
	c, err := release.ParseConfig([]byte(exampleConfig))
	require.NoError(t, err)
	grace := 30 * time.Second
	require.Equal(t, []string{"k8s"}, c.Default)
	require.Equal(t, map[string][]string{"hpc-lab": {"scancel"}, "vision": {"k8s", "site-hook"}, "frozen": {}}, c.Projects)
	require.Equal(t, release.ReleaserConfig{Kind: "kubernetes", Line: 9, Kubernetes: release.KubeConfig{
		AllowedNamespaces: []string{"nlp-lab", "vision"}, GracePeriod: &grace, APIServer: "https://10.0.0.1:6443",
		TokenFile: "/var/run/secrets/token", CAFile: "/var/run/secrets/ca.crt"}}, c.Releasers["k8s"])
	require.Equal(t, release.CommandConfig{Argv: []string{"scancel", "{slurm_job}"}, Timeout: 20 * time.Second, MaxOutput: 2048},
		c.Releasers["scancel"].Command)
	require.Equal(t, "https://hooks.example.edu/cardhour/release", c.Releasers["site-hook"].Webhook.URL)
	require.Equal(t, 5*time.Second, c.Releasers["site-hook"].Webhook.Timeout)
	require.Equal(t, "SECRET", c.Releasers["site-hook"].SecretFile)

	empty, err := release.ParseConfig(nil)
	require.NoError(t, err)
	require.Empty(t, empty.Default)
	set, err := empty.Build()
	require.NoError(t, err)
	_, err = set.Release(context.Background(), slurmRequest("slurm:1", false))
	require.ErrorIs(t, err, release.ErrNoHandle)
	require.ErrorContains(t, err, `no releaser is configured for project "hpc-lab"`)
}

func TestParseConfigErrorsNameLineAndField(t *testing.T) {
	f := func(y string, want ...string) {
		t.Helper()
		_, err := release.ParseConfig([]byte(y))
		require.Error(t, err)
		for _, w := range want {
			require.ErrorContains(t, err, w)
		}
	}
	f("default: [k8s]\nreleasers:\n  k8s:\n    kind: kubernetes\n    allowed_namespace: [a]\n",
		"line 5: releasers.k8s.allowed_namespace: unknown field (allowed: kind, allowed_namespaces,",
		"line 4: releasers.k8s.allowed_namespaces: is required")
	f("default: [nope]\n", `line 1: releaser "nope" is not defined under releasers`)
	f("projects:\n  a: scancel\n", "line 2: projects.a: must be a list")
	f("releasers:\n  x:\n    kind: shell\n", `line 3: releasers.x.kind: unknown kind "shell"`)
	f("releasers:\n  x:\n    argv: [true]\n", "line 3: releasers.x: kind is required")
	f("releasers:\n  x:\n    kind: command\n    argv: [scancel, \"{job}\"]\n", "line 3: releasers.x: argv[1] \"{job}\": unknown placeholder {job}")
	f("releasers:\n  x:\n    kind: command\n    argv: [scancel]\n    timeout: soon\n", `line 5: releasers.x.timeout: "soon" is not a duration`)
	f("releasers:\n  x:\n    kind: command\n    argv: [scancel]\n    max_output_bytes: -1\n", `line 5: releasers.x.max_output_bytes: "-1" is not a positive number`)
	f("releasers:\n  x:\n    kind: webhook\n    url: https://h\n", "line 3: releasers.x.secret_file: a secret")
	f("releasers:\n  x:\n    kind: webhook\n    url: not a url\n    secret: s\n", `line 3: releasers.x: url "not a url"`)
	f("releasers:\n  x:\n    kind: kubernetes\n    allowed_namespaces: [a]\n    grace_period: 1500ms\n", "line 5: releasers.x.grace_period: 1.5s: want whole seconds")
	f("releasers:\n  x:\n    kind: kubernetes\n    allowed_namespaces: [a]\n    token_file: /t\n", "releasers.x.api_server: is required with token_file")
	f("releasers:\n  x:\n    kind: kubernetes\n    allowed_namespaces: [a]\n    kind: webhook\n", "line 5: releasers.x.kind: appears more than once (first at line 3)")
	f("watch: {}\n", "line 1: watch: unknown field (allowed: default, projects, releasers)")
	f("default: [a\n", "invalid YAML")
	f("- a\n", "line 1: expected a mapping")
}

// fake is a releaser that answers as told and counts its calls.
type fake struct {
	out   alert.ReleaseOutcome
	err   error
	calls int
}

func (f *fake) Release(context.Context, alert.ReleaseRequest) (alert.ReleaseOutcome, error) {
	f.calls++
	return f.out, f.err
}

func TestSetRoutesByProject(t *testing.T) {
	ctx := context.Background()
	k8s := &fake{err: release.ErrNoHandle}
	hook := &fake{out: alert.ReleaseOutcome{Released: true, Action: "hook released"}}
	broken := &fake{err: errors.New("connection refused")}
	set, err := release.NewSet(map[string]release.Releaser{"k8s": k8s, "hook": hook, "broken": broken}, []string{"k8s"},
		map[string][]string{"hpc-lab": {"k8s", "hook"}, "down": {"broken", "hook"}, "frozen": {}})
	require.NoError(t, err)

	out, err := set.Release(ctx, slurmRequest("slurm:1", false)) // hpc-lab: k8s has no handle, hook releases
	require.NoError(t, err)
	require.Equal(t, alert.ReleaseOutcome{Released: true, Action: "hook released"}, out)
	require.Equal(t, []int{1, 1}, []int{k8s.calls, hook.calls})

	r := slurmRequest("slurm:1", false)
	r.Target.Project = "down"
	_, err = set.Release(ctx, r)
	require.ErrorContains(t, err, "broken: connection refused")
	require.False(t, release.Permanent(err))
	require.Equal(t, 1, hook.calls, "a retryable error stops the chain: the next try starts again from the first")

	r.Target.Project = "other" // the default: only k8s, which has no handle
	_, err = set.Release(ctx, r)
	require.ErrorIs(t, err, release.ErrNoHandle)
	r.Target.Project = "frozen"
	_, err = set.Release(ctx, r)
	require.ErrorIs(t, err, release.ErrNoHandle)
	require.Empty(t, set.For("frozen"))

	_, err = release.NewSet(map[string]release.Releaser{}, []string{"x"}, nil)
	require.ErrorContains(t, err, `default: releaser "x" is not defined`)
}

func TestBuildReadsSecretFile(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("s3cret\n"), 0o600))
	y := []byte("default: [hook]\nreleasers:\n  hook:\n    kind: webhook\n    url: http://127.0.0.1:1/x\n    secret_file: " + secret + "\n")
	c, err := release.ParseConfig(y)
	require.NoError(t, err)
	_, err = c.Build()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(secret, nil, 0o600))
	_, err = c.Build()
	require.ErrorContains(t, err, "line 4: releasers.hook.secret_file: "+secret+" is empty")
	require.NoError(t, os.Remove(secret))
	_, err = c.Build()
	require.ErrorContains(t, err, "releasers.hook.secret_file")
	// A Kubernetes releaser outside a cluster without a server: Build says so.
	c, err = release.ParseConfig([]byte("releasers:\n  k:\n    kind: kubernetes\n    allowed_namespaces: [a]\n"))
	require.NoError(t, err)
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		_, err = c.Build()
		require.ErrorContains(t, err, "line 3: releasers.k: kubernetes release: no API server configured and not in a cluster")
	}
}

func TestParseRef(t *testing.T) {
	require.Equal(t, release.Ref{Kind: "k8s", Namespace: "ns", Pod: "p-0"}, release.ParseRef("k8s:ns/p-0"))
	require.Equal(t, release.Ref{Kind: "slurm", SlurmJob: "812345"}, release.ParseRef("slurm:812345"))
	require.Equal(t, release.Ref{Kind: "pid", PID: "42"}, release.ParseRef("pid:42"))
	for _, bad := range []string{"", "k8s:", "k8s:ns", "k8s:/p", "k8s:ns/", "slurm:", "slurm:12a", "pid:x", "lsf:1", "812345"} {
		require.Equal(t, release.Ref{}, release.ParseRef(bad), bad)
	}
}

// The release section is walked as notify's is (internal/yamlwalk): YAML
// anchors and aliases stand for what they name.
func TestParseConfigFollowsAliases(t *testing.T) {
	c, err := release.ParseConfig([]byte(`
default: &order [k8s]
projects:
  vision: *order
releasers:
  k8s: &kube
    kind: kubernetes
    allowed_namespaces: [vision]
  k8s-copy: *kube
`))
	require.NoError(t, err)
	require.Equal(t, []string{"k8s"}, c.Projects["vision"])
	require.Equal(t, release.KindKubernetes, c.Releasers["k8s-copy"].Kind)
	require.Equal(t, []string{"vision"}, c.Releasers["k8s-copy"].Kubernetes.AllowedNamespaces)
}

// A releaser's kind is read before its options are walked (it decides which
// are allowed): each problem word for word, a repeated kind included.
func TestParseConfigKindWordForWord(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"releasers:\n  x:\n    kind: command\n    kind: shell\n    argv: [a]\n",
			`release config: line 4: releasers.x.kind: unknown kind "shell" (want kubernetes, command or webhook)`},
		{"releasers:\n  x:\n    kind: command\n    kind: webhook\n    argv: [a]\n",
			"release config: line 4: releasers.x.kind: appears more than once (first at line 3); line 5: releasers.x.argv: unknown field (allowed: kind, url, secret, secret_file, timeout); " +
				"line 3: releasers.x.url: is required; line 3: releasers.x.secret_file: a secret (secret_file, or secret) is required: receivers check the signature"},
		{"releasers:\n  x:\n    kind: ''\n    argv: [a]\n", "release config: line 3: releasers.x: kind is required (kubernetes, command or webhook)"},
		{"releasers:\n  x:\n    kind: [a]\n", "release config: line 3: releasers.x.kind: must be a string; line 3: releasers.x: kind is required (kubernetes, command or webhook)"},
		{"releasers:\n  x: [a]\n", "release config: line 2: releasers.x: expected a mapping with a kind (kubernetes, command or webhook)"},
		{"releasers:\n  x: &k {kind: command, argv: [a]}\n  y:\n    kind: *k\n",
			"release config: line 2: releasers.y.kind: must be a string; line 4: releasers.y: kind is required (kubernetes, command or webhook)"},
	} {
		_, err := release.ParseConfig([]byte(c.in))
		require.EqualError(t, err, c.want, "ParseConfig(%q)", c.in)
	}
}
