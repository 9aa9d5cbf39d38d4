package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The chart's sign-in (signin: values, docs/auth.md): the --signin-config
// file and the mapping in a ConfigMap, the secrets as files of a Secret,
// all mounted read-only under /etc/cardhour/signin and named by serve's
// flags.

const signinDir = "/etc/cardhour/signin"

var serveFlags struct {
	sync.Once
	names map[string]bool
	err   string
}

// serveFlagNames builds cmd/cardhour once and returns serve's flags.
func serveFlagNames(t *testing.T) map[string]bool {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cmd/cardhour")
	}
	serveFlags.Do(func() {
		bin := filepath.Join(os.TempDir(), "cardhour-deploytest-signin")
		build := exec.Command("go", "build", "-o", bin, "./cmd/cardhour")
		build.Dir = root(t)
		build.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		if out, err := build.CombinedOutput(); err != nil {
			serveFlags.err = string(out)
			return
		}
		defer os.Remove(bin)
		serveFlags.names = flagsOf(t, bin, "serve")
	})
	require.Empty(t, serveFlags.err, "go build ./cmd/cardhour")
	return serveFlags.names
}

// writeValues writes a values file of the test's.
func writeValues(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// signinParts is what the chart renders of the sign-in.
type signinParts struct {
	container corev1.Container
	pod       corev1.PodSpec
	config    map[string]any
	data      map[string]string
	annot     map[string]string
}

func signinOf(t *testing.T, o *objects) signinParts {
	t.Helper()
	sv := o.deployments[fullname+"-serve"]
	require.NotNil(t, sv)
	cm := o.configMaps[fullname+"-signin"]
	require.NotNil(t, cm, "the sign-in ConfigMap")
	var cfg map[string]any
	require.NoError(t, yaml.UnmarshalStrict([]byte(cm.Data["signin.yaml"]), &cfg))
	return signinParts{container: sv.Spec.Template.Spec.Containers[0], pod: sv.Spec.Template.Spec, config: cfg, data: cm.Data,
		annot: sv.Spec.Template.Annotations}
}

// requireSigninFiles: every sign-in file flag names a file of the mounted
// volume: a key of the ConfigMap or an item of the Secret.
func requireSigninFiles(t *testing.T, p signinParts, secret string, secretKeys ...string) {
	t.Helper()
	m := mount(p.container, "signin")
	require.NotNil(t, m)
	require.Equal(t, signinDir, m.MountPath)
	require.True(t, m.ReadOnly)
	v := volume(p.pod, "signin")
	require.NotNil(t, v.Projected)
	files := map[string]bool{}
	var items []string
	for _, src := range v.Projected.Sources {
		switch {
		case src.ConfigMap != nil:
			require.Equal(t, fullname+"-signin", src.ConfigMap.Name)
			for k := range p.data {
				files[k] = true
			}
		case src.Secret != nil:
			require.Equal(t, secret, src.Secret.Name)
			for _, it := range src.Secret.Items {
				require.Equal(t, it.Key, it.Path)
				files[it.Path] = true
				items = append(items, it.Key)
			}
		}
	}
	require.ElementsMatch(t, secretKeys, items, "only the secrets the providers need are mounted")
	flags := map[string]string{"--signin-config=": "signin.yaml", "--role-mapping=": "mapping.yaml"}
	for _, k := range secretKeys {
		flags[map[string]string{"oidc-client-secret": "--oidc-client-secret-file=", "ldap-bind-password": "--ldap-bind-password-file="}[k]] = k
	}
	if p.data["ldap-ca.pem"] != "" {
		flags["--ldap-ca-file="] = "ldap-ca.pem"
	}
	for flag, file := range flags {
		got, ok := arg(p.container, flag)
		require.True(t, ok, "serve gets %s", flag)
		require.Equal(t, signinDir+"/"+file, got, flag)
		require.True(t, files[file], "%s names a file of the volume", flag)
	}
}

func TestChartSignin(t *testing.T) {
	// Off by default: nothing of it.
	def := renderDecode(t)
	require.Nil(t, def.configMaps[fullname+"-signin"])
	c := def.deployments[fullname+"-serve"].Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		require.NotContains(t, a, "signin")
	}
	require.Nil(t, mount(c, "signin"))

	// The example values: Keycloak, the secret from the site's Secret.
	o := renderDecode(t, exampleArgs(t)...)
	p := signinOf(t, o)
	require.Equal(t, map[string]any{"public-url": "https://gpu-billing.example.edu", "oidc-issuer": "https://sso.example.edu/realms/campus",
		"oidc-client-id": "cardhour", "oidc-redirect-url": "https://gpu-billing.example.edu/auth/callback",
		"oidc-name": "Campus SSO 统一身份认证", "session-idle": "30m", "session-ttl": "12h"}, p.config)
	require.Contains(t, p.data["mapping.yaml"], "help_zh:")
	requireSigninFiles(t, p, "cardhour-credentials", "oidc-client-secret")
	require.Empty(t, o.secrets, "the client secret is read from cardhour-credentials; the chart makes no Secret")
	require.NotEmpty(t, p.annot["checksum/signin"], "a changed file rolls the pods: serve reads them at start")

	// Every key of the rendered file is a flag of serve's (so serve's
	// applyConfig takes it), and none is one the chart sets itself.
	flags := serveFlagNames(t)
	for k := range p.config {
		require.True(t, flags[k], "signin.yaml: cardhour serve has no flag --%s", k)
	}
}

const signinOIDCAndLDAP = `
signin:
  enabled: true
  config:
    public-url: https://gpu.example.edu.cn
    oidc-issuer: https://sso.example.edu.cn/realms/campus
    oidc-client-id: cardhour
    oidc-redirect-url: https://gpu.example.edu.cn/auth/callback
    ldap-url: ldap://ldap.example.edu.cn:389
    ldap-start-tls: true
    ldap-bind-dn: cn=cardhour,ou=services,dc=example,dc=edu,dc=cn
    ldap-base-dn: ou=people,dc=example,dc=edu,dc=cn
    ldap-user-filter: (&(objectClass=inetOrgPerson)(uid=%s))
  mapping: |
    admin:
      - group: gpu-admins
  ldapCACert: |
    -----BEGIN CERTIFICATE-----
    MIIBkTCB+wIJAKHHIG...
    -----END CERTIFICATE-----
  oidcClientSecret: client-s3cret
  ldapBindPassword: bind-s3cret
`

// With no Secret of the site's, the secrets go into the chart's Secret.
func TestChartSigninOwnSecret(t *testing.T) {
	values := writeValues(t, signinOIDCAndLDAP)
	o := renderDecode(t, "-f", values)
	p := signinOf(t, o)
	require.Equal(t, true, p.config["ldap-start-tls"], "a boolean stays a boolean")
	require.Equal(t, "(&(objectClass=inetOrgPerson)(uid=%s))", p.config["ldap-user-filter"])
	require.True(t, strings.HasPrefix(p.data["ldap-ca.pem"], "-----BEGIN CERTIFICATE-----"))
	requireSigninFiles(t, p, fullname, "oidc-client-secret", "ldap-bind-password")
	s := o.secrets[fullname]
	require.NotNil(t, s)
	require.Equal(t, "client-s3cret", s.StringData["oidc-client-secret"])
	require.Equal(t, "bind-s3cret", s.StringData["ldap-bind-password"])
	for _, v := range p.data {
		require.NotContains(t, v, "s3cret", "no secret in the ConfigMap")
	}
	for _, a := range p.container.Args {
		require.NotContains(t, a, "s3cret", "no secret on the command line")
	}

	// A Secret of signin.existingSecret instead: the chart's Secret holds
	// no sign-in key.
	o = renderDecode(t, "-f", values, "--set", "signin.oidcClientSecret=,signin.ldapBindPassword=,signin.existingSecret=campus-sso")
	requireSigninFiles(t, signinOf(t, o), "campus-sso", "oidc-client-secret", "ldap-bind-password")
	require.NotContains(t, o.secrets[fullname].StringData, "oidc-client-secret")
	require.NotContains(t, o.secrets[fullname].StringData, "ldap-bind-password")

	// CAS needs no secret: none is mounted.
	cas := writeValues(t, "signin:\n  enabled: true\n  config:\n    cas-url: https://cas.example.edu.cn/cas\n"+
		"    cas-service-url: https://gpu.example.edu.cn/auth/cas/callback\n  mapping: |\n    admin:\n      - user: t0001\n")
	o = renderDecode(t, "-f", cas)
	requireSigninFiles(t, signinOf(t, o), fullname)
	require.ElementsMatch(t, []string{"store-dsn", "state-dsn", "kafka-password", "webhook-secret"}, keys(o.secrets[fullname].StringData))

	// Another mapping, another checksum.
	before := signinOf(t, renderDecode(t, "-f", values)).annot["checksum/signin"]
	after := signinOf(t, renderDecode(t, "-f", values, "--set", "signin.mapping=finance: [{user: f0007}]")).annot["checksum/signin"]
	require.NotEqual(t, before, after)
}

// The chart refuses sign-in values serve would refuse, or that would start
// a pod without its files.
func TestChartSigninRefuses(t *testing.T) {
	values := writeValues(t, signinOIDCAndLDAP)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no mapping", []string{"--set", "signin.mapping="}, "signin.enabled needs signin.mapping"},
		{"no provider", []string{"--set", "signin.config=null"}, "signin.config needs a provider"},
		{"no client secret", []string{"--set", "signin.oidcClientSecret="}, "signin.config.oidc-issuer needs signin.oidcClientSecret"},
		{"no bind password", []string{"--set", "signin.ldapBindPassword="}, "signin.config.ldap-url needs signin.ldapBindPassword"},
		{"a secret and an existing Secret", []string{"--set", "secrets.existingSecret=site"}, "put the keys oidc-client-secret and ldap-bind-password in that Secret"},
		{"the chart's own key", []string{"--set-string", "signin.config.role-mapping=/x"}, "signin.config.role-mapping: the chart sets it"},
		{"two CAs", []string{"--set-string", "signin.config.ldap-ca-file=/x"}, "signin.config.ldap-ca-file and signin.ldapCACert"},
		{"a list", []string{"--set", "signin.config.oidc-name={a,b}"}, "signin.config.oidc-name: want a single value"},
	} {
		_, err := render(t, append([]string{"-f", values}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}
