//go:build !collector

package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"flag"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/signin"
)

// The sign-in examples of deployments/examples/signin (the three set-ups of
// docs/auth.md) go through serve's own code: the mapping through
// signin.LoadMapping, each --signin-config file through applyConfig and
// build, and docs/auth.md shows each file as it is, so that the files, the
// docs and the code cannot drift apart.

const signinExamples = "../../deployments/examples/signin"

// exampleSignin parses args as serve's command line, then applies the
// example config file: what serve does with --signin-config FILE.
func exampleSignin(t *testing.T, file string, args ...string) *signinFlags {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	sf := addSigninFlags(fs)
	require.NoError(t, fs.Parse(args))
	*sf.config = filepath.Join(signinExamples, file)
	require.NoError(t, sf.applyConfig(), file)
	return sf
}

// secretFile writes content to a file of the test's and returns its path.
func secretFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func rosters(on map[string][]string) signin.RosterLookup {
	return func(_ context.Context, user string) ([]string, error) { return on[user], nil }
}

func TestSigninExampleMapping(t *testing.T) {
	m, err := signin.LoadMapping(filepath.Join(signinExamples, "mapping.yaml"))
	require.NoError(t, err)
	require.Contains(t, m.Help(), "hpc@example.edu.cn")
	require.Contains(t, m.HelpZH(), "hpc@example.edu.cn")
	require.Contains(t, m.HelpZH(), "学号")
	require.True(t, m.Project("ai101").Roster)
	require.False(t, m.Project("thesis-h100").Roster)

	ctx := context.Background()
	grants := func(id signin.Identity, on map[string][]string) []ledger.Grant {
		t.Helper()
		g, err := m.Grants(ctx, id, rosters(on))
		require.NoError(t, err)
		return g
	}
	// Keycloak's groups claim (full path off) names groups by name.
	require.Equal(t, []ledger.Grant{{Role: ledger.RoleStudent, Project: "cv-lab", User: "2023210007"}},
		grants(signin.Identity{Provider: "oidc", ID: "2023210007", Groups: []string{"cv-lab"}}, nil))
	// LDAP's memberOf names them by DN: the first RDN's value matches.
	require.Equal(t, []ledger.Grant{{Role: ledger.RoleAdmin}, {Role: ledger.RoleLead, Project: "nlp-lab"}},
		grants(signin.Identity{Provider: "ldap", ID: "t0300", Groups: []string{
			"cn=gpu-admins,ou=groups,dc=example,dc=edu,dc=cn", "cn=nlp-lab-leads,ou=groups,dc=example,dc=edu,dc=cn"}}, nil))
	// An attribute and its value; a user by ID.
	require.Equal(t, []ledger.Grant{{Role: ledger.RoleFinance}},
		grants(signin.Identity{Provider: "cas", ID: "f0007", Attributes: map[string][]string{"eduPersonAffiliation": {"staff", "finance"}}}, nil))
	require.Equal(t, []ledger.Grant{{Role: ledger.RoleLead, Project: "ai101"}, {Role: ledger.RoleLead, Project: "thesis-h100"}},
		grants(signin.Identity{Provider: "oidc", ID: "t0100"}, nil))
	// Rosters: ai101's makes students, thesis-h100's does not.
	require.Equal(t, []ledger.Grant{{Role: ledger.RoleStudent, Project: "ai101", User: "2025010104", Via: ledger.GrantViaRoster}},
		grants(signin.Identity{Provider: "oidc", ID: "2025010104"}, map[string][]string{"2025010104": {"ai101", "thesis-h100"}}))
	// Nobody the file names: no grant (the no-role page with the help text).
	require.Empty(t, grants(signin.Identity{Provider: "oidc", ID: "2019000001", Groups: []string{"alumni"}}, nil))
}

// testIssuer is an OpenID provider's discovery document, enough for
// signin.NewOIDC (no sign-in happens here).
func testIssuer(t *testing.T) string {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": srv.URL, "authorization_endpoint": srv.URL + "/auth", "token_endpoint": srv.URL + "/token",
			"jwks_uri": srv.URL + "/keys", "end_session_endpoint": srv.URL + "/logout",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSigninExampleKeycloak(t *testing.T) {
	issuer := testIssuer(t)
	secret := secretFile(t, "oidc-client-secret", "s3cret-from-keycloak\n")
	mapping := filepath.Join(signinExamples, "mapping.yaml")
	// A flag on the command line wins over the file.
	sf := exampleSignin(t, "keycloak.yaml", "--oidc-issuer="+issuer, "--oidc-client-secret-file="+secret, "--role-mapping="+mapping)
	require.Equal(t, issuer, *sf.oidcIssuer)
	require.Equal(t, secret, *sf.oidcSecretFile)
	require.Equal(t, mapping, *sf.mapping)
	require.Equal(t, "cardhour", *sf.oidcClientID)
	require.Equal(t, "https://gpu.example.edu.cn/auth/callback", *sf.oidcRedirect)
	require.Equal(t, "preferred_username", *sf.oidcUserClaim)
	require.Equal(t, "groups", *sf.oidcGroupsClaim)
	require.Equal(t, "Campus SSO 统一身份认证", *sf.oidcName)
	require.Equal(t, "https://gpu.example.edu.cn", *sf.publicURL)
	require.Equal(t, 30*time.Minute, *sf.idle)
	require.Equal(t, 12*time.Hour, *sf.ttl)
	require.Empty(t, *sf.ldapURL)
	require.Empty(t, *sf.casURL)

	// Without the overrides the file's own values are there.
	plain := exampleSignin(t, "keycloak.yaml")
	require.Equal(t, "https://sso.example.edu.cn/realms/campus", *plain.oidcIssuer)
	require.Equal(t, "/etc/cardhour/signin/oidc-client-secret", *plain.oidcSecretFile)
	require.Equal(t, "/etc/cardhour/signin/mapping.yaml", *plain.mapping)

	si, err := sf.build(context.Background(), nil, false)
	require.NoError(t, err)
	require.NotNil(t, si.OIDC)
	require.Nil(t, si.LDAP)
	require.Nil(t, si.CAS)
	require.True(t, si.SecureCookie, "an https public URL makes the cookie Secure")
	require.Equal(t, "https://gpu.example.edu.cn", si.PublicURL)
	auth, err := url.Parse(si.OIDC.AuthURL("st", "no", signin.NewVerifier()))
	require.NoError(t, err)
	q := auth.Query()
	require.Equal(t, "https://gpu.example.edu.cn/auth/callback", q.Get("redirect_uri"))
	require.Equal(t, "S256", q.Get("code_challenge_method"))
	require.Equal(t, "cardhour", q.Get("client_id"))
	require.Contains(t, strings.Fields(q.Get("scope")), "groups", "the groups client scope is asked for")
	out, err := url.Parse(si.OIDC.EndSessionURL("idt", si.PublicURL+"/ui/"))
	require.NoError(t, err)
	require.Equal(t, "https://gpu.example.edu.cn/ui/", out.Query().Get("post_logout_redirect_uri"),
		"the post-logout redirect URI to register with Keycloak")
}

func TestSigninExampleCAS(t *testing.T) {
	mapping := filepath.Join(signinExamples, "mapping.yaml")
	sf := exampleSignin(t, "cas.yaml", "--role-mapping="+mapping)
	require.Equal(t, "https://cas.example.edu.cn/cas", *sf.casURL)
	require.Equal(t, "https://gpu.example.edu.cn/auth/cas/callback", *sf.casService)
	require.Equal(t, "employeeNumber", *sf.casUserAttr)
	require.Equal(t, "memberOf", *sf.casGroupsAttr)
	require.Equal(t, "Campus CAS 统一身份认证", *sf.casName)
	require.Equal(t, 8*time.Hour, *sf.ttl)
	require.Empty(t, *sf.oidcIssuer)
	require.Empty(t, *sf.ldapURL)

	si, err := sf.build(context.Background(), nil, false)
	require.NoError(t, err)
	require.NotNil(t, si.CAS)
	require.Nil(t, si.OIDC)
	require.Nil(t, si.LDAP)
	// The state rides on the service URL: CAS must accept the registered
	// service as a prefix or pattern, not only the bare URL.
	login, err := url.Parse(si.CAS.LoginURL("abc"))
	require.NoError(t, err)
	require.Equal(t, "https://cas.example.edu.cn/cas/login", login.Scheme+"://"+login.Host+login.Path)
	require.Equal(t, "https://gpu.example.edu.cn/auth/cas/callback?state=abc", login.Query().Get("service"))
}

func TestSigninExampleLDAP(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	ca := secretFile(t, "ldap-ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	password := secretFile(t, "ldap-bind-password", "service-pass\n")
	mapping := filepath.Join(signinExamples, "mapping.yaml")
	sf := exampleSignin(t, "ldap.yaml", "--ldap-ca-file="+ca, "--ldap-bind-password-file="+password, "--role-mapping="+mapping)
	require.Equal(t, "ldap://ldap.example.edu.cn:389", *sf.ldapURL)
	require.True(t, *sf.ldapStartTLS)
	require.Equal(t, "cn=cardhour,ou=services,dc=example,dc=edu,dc=cn", *sf.ldapBindDN)
	require.Equal(t, "ou=people,dc=example,dc=edu,dc=cn", *sf.ldapBaseDN)
	require.Equal(t, "(&(objectClass=inetOrgPerson)(uid=%s))", *sf.ldapUserFilter)
	require.Equal(t, "uid", *sf.ldapIDAttr)
	require.Equal(t, "memberOf", *sf.ldapGroupAttr)
	require.Empty(t, *sf.ldapGroupBaseDN)
	require.Equal(t, "Campus account 校园账号", *sf.ldapName)
	plain := exampleSignin(t, "ldap.yaml")
	require.Equal(t, "/etc/cardhour/signin/ldap-ca.pem", *plain.ldapCAFile)
	require.Equal(t, "/etc/cardhour/signin/ldap-bind-password", *plain.ldapPasswordFile)

	// build checks the URL, StartTLS, the filters and the CA file; it
	// does not connect.
	si, err := sf.build(context.Background(), nil, false)
	require.NoError(t, err)
	require.NotNil(t, si.LDAP)
	require.Nil(t, si.OIDC)
	require.Nil(t, si.CAS)

	// The LDAPS variant the file's comment names, and the group search
	// for directories without memberOf.
	ldaps := exampleSignin(t, "ldap.yaml", "--ldap-url=ldaps://ldap.example.edu.cn:636", "--ldap-start-tls=false",
		"--ldap-group-base-dn=ou=groups,dc=example,dc=edu,dc=cn", "--ldap-ca-file="+ca, "--ldap-bind-password-file="+password, "--role-mapping="+mapping)
	_, err = ldaps.build(context.Background(), nil, false)
	require.NoError(t, err)
}

// docs/auth.md shows every example file whole, and its serve command lines
// use only flags serve has.
func TestSigninExamplesInDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/auth.md")
	require.NoError(t, err)
	for _, f := range []string{"mapping.yaml", "keycloak.yaml", "cas.yaml", "ldap.yaml"} {
		b, err := os.ReadFile(filepath.Join(signinExamples, f))
		require.NoError(t, err)
		require.True(t, strings.Contains(string(doc), "```yaml\n"+string(b)+"```\n"), "docs/auth.md shows deployments/examples/signin/%s as it is, in a yaml block", f)
	}

	_, _, usage := runCLI(t, "", "serve", "-h")
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(usage, -1) {
		flags[m[1]] = true
	}
	require.True(t, flags["signin-config"], "serve -h lists its flags:\n%s", usage)
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	commands := 0
	for _, b := range blocks {
		if !strings.Contains(b[1], "cardhour serve") {
			continue
		}
		commands++
		for _, m := range regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(b[1], -1) {
			require.True(t, flags[m[1]], "docs/auth.md: cardhour serve has no flag --%s", m[1])
		}
	}
	require.GreaterOrEqual(t, commands, 3, "docs/auth.md has a serve command per set-up")
}
