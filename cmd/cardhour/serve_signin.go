//go:build !collector

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/signin"
	"github.com/cardhour/cardhour/internal/yamlwalk"
)

// Sign-in for people (docs/auth.md): serve's --oidc-*, --ldap-*, --cas-*,
// --role-mapping and --session-* flags, or the same keys in the file
// --signin-config names (a flag given on the command line wins).

// signinFlags are serve's sign-in flags.
type signinFlags struct {
	fs     *flag.FlagSet
	config *string
	names  []string // the flags a config file may set

	oidcIssuer, oidcClientID, oidcSecretFile, oidcRedirect, oidcUserClaim, oidcGroupsClaim, oidcName *string
	ldapURL, ldapCAFile, ldapBindDN, ldapPasswordFile, ldapBaseDN, ldapUserFilter                    *string
	ldapIDAttr, ldapGroupAttr, ldapGroupBaseDN, ldapGroupFilter, ldapName                            *string
	ldapStartTLS                                                                                     *bool
	casURL, casService, casUserAttr, casGroupsAttr, casName                                          *string
	mapping, publicURL                                                                               *string
	idle, ttl                                                                                        *time.Duration
}

func addSigninFlags(fs *flag.FlagSet) *signinFlags {
	f := &signinFlags{fs: fs}
	str := func(name, def, usage string) *string {
		f.names = append(f.names, name)
		return fs.String(name, def, usage)
	}
	f.config = fs.String("signin-config", "", "sign-in configuration (YAML): the --oidc-*, --ldap-*, --cas-*, --role-mapping and --session-* flags as keys without the dashes; a flag given here wins (docs/auth.md)")
	f.oidcIssuer = str("oidc-issuer", "", "OpenID Connect issuer URL: people sign in there (authorization code with PKCE)")
	f.oidcClientID = str("oidc-client-id", "", "OpenID Connect client ID registered for cardhour")
	f.oidcSecretFile = str("oidc-client-secret-file", "", "file holding the OpenID Connect client secret")
	f.oidcRedirect = str("oidc-redirect-url", "", "the callback URL registered with the provider: https://<dashboard host>/auth/callback")
	f.oidcUserClaim = str("oidc-user-claim", "preferred_username", "the ID token claim holding the student or staff ID")
	f.oidcGroupsClaim = str("oidc-groups-claim", "groups", "the ID token claim holding the person's groups")
	f.oidcName = str("oidc-name", "", "the sign-in button's name (default: OpenID Connect), e.g. 统一身份认证")
	f.ldapURL = str("ldap-url", "", "LDAP directory for the dashboard's login form: ldaps://host:636, or ldap://host:389 with --ldap-start-tls")
	f.names = append(f.names, "ldap-start-tls")
	f.ldapStartTLS = fs.Bool("ldap-start-tls", false, "upgrade the ldap:// connection with StartTLS")
	f.ldapCAFile = str("ldap-ca-file", "", "PEM file of the CAs that sign the directory's certificate (default: the system's)")
	f.ldapBindDN = str("ldap-bind-dn", "", "the service account that finds people")
	f.ldapPasswordFile = str("ldap-bind-password-file", "", "file holding the service account's password")
	f.ldapBaseDN = str("ldap-base-dn", "", "where people are searched")
	f.ldapUserFilter = str("ldap-user-filter", "(uid=%s)", "filter finding a person by the name typed (%s: the name, escaped)")
	f.ldapIDAttr = str("ldap-id-attribute", "uid", "the attribute holding the student or staff ID")
	f.ldapGroupAttr = str("ldap-group-attribute", "memberOf", "the person's attribute listing their groups")
	f.ldapGroupBaseDN = str("ldap-group-base-dn", "", "for directories without memberOf: where groups are searched")
	f.ldapGroupFilter = str("ldap-group-filter", "(member=%s)", "with --ldap-group-base-dn: filter of a person's groups (%s: the person's DN, escaped)")
	f.ldapName = str("ldap-name", "", "the login form's name (default: LDAP)")
	f.casURL = str("cas-url", "", "CAS 3.0 server base URL, e.g. https://cas.example.edu.cn/cas")
	f.casService = str("cas-service-url", "", "our CAS callback as registered with CAS: https://<dashboard host>/auth/cas/callback")
	f.casUserAttr = str("cas-user-attribute", "", "the CAS attribute holding the student or staff ID (default: the CAS user)")
	f.casGroupsAttr = str("cas-groups-attribute", "", "the CAS attribute listing the person's groups")
	f.casName = str("cas-name", "", "the sign-in button's name (default: CAS)")
	f.mapping = str("role-mapping", "", "role mapping (YAML): groups, attributes and IDs → admin, finance, lead or student of a project (docs/auth.md)")
	f.publicURL = str("public-url", "", "where people reach the dashboard, e.g. https://gpu.example.edu.cn (for the provider's logout redirect)")
	f.names = append(f.names, "session-idle", "session-ttl")
	f.idle = fs.Duration("session-idle", api.DefaultSessionIdle, "a signed-in session ends after this long without a request")
	f.ttl = fs.Duration("session-ttl", api.DefaultSessionTTL, "a signed-in session ends this long after sign-in, whatever it did")
	return f
}

// applyConfig sets, from --signin-config, every sign-in flag not given on
// the command line; errors name the file, line and key.
func (f *signinFlags) applyConfig() error {
	if *f.config == "" {
		return nil
	}
	data, err := os.ReadFile(*f.config)
	if err != nil {
		return fmt.Errorf("--signin-config: %w", err)
	}
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", *f.config, err)
	}
	var errs []error
	report := func(n *yaml.Node, path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s: %s", *f.config, n.Line, path, fmt.Sprintf(format, args...)))
	}
	var top *yaml.Node
	if len(doc.Content) > 0 {
		top = doc.Content[0]
	}
	if top == nil {
		return fmt.Errorf("%s: empty", *f.config)
	}
	yamlwalk.Mapping(top, "", f.names, report, func(k, v *yaml.Node, path string) {
		if v.Kind != yaml.ScalarNode {
			report(v, path, "want a value, got %s", yamlwalk.Kind(v))
			return
		}
		if given[k.Value] {
			return
		}
		if err := f.fs.Set(k.Value, v.Value); err != nil {
			report(v, path, "%v", err)
		}
	})
	return errors.Join(errs...)
}

// readSecret reads a secret file, trimmed; what names the flag.
func readSecret(what, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	s := string(bytes.TrimSpace(b))
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", what, path)
	}
	return s, nil
}

// build makes the API's sign-in from the flags: nil when no provider is
// configured (tokens only). Every problem is reported at once.
func (f *signinFlags) build(ctx context.Context, store api.SignInStore, tls bool) (*api.SignIn, error) {
	if *f.oidcIssuer == "" && *f.ldapURL == "" && *f.casURL == "" {
		if *f.mapping != "" {
			return nil, errors.New("--role-mapping needs a provider: --oidc-issuer, --ldap-url or --cas-url")
		}
		return nil, nil
	}
	if *f.mapping == "" {
		return nil, errors.New("sign-in needs --role-mapping: who may do what (docs/auth.md)")
	}
	m, err := signin.LoadMapping(*f.mapping)
	if err != nil {
		return nil, err
	}
	si := &api.SignIn{Store: store, Mapping: m, Idle: *f.idle, TTL: *f.ttl, SecureCookie: tls || strings.HasPrefix(*f.publicURL, "https://"),
		PublicURL: strings.TrimRight(*f.publicURL, "/"), OIDCName: *f.oidcName, LDAPName: *f.ldapName, CASName: *f.casName}
	var errs []error
	if *f.oidcIssuer != "" {
		errs = append(errs, f.buildOIDC(ctx, si))
	}
	if *f.ldapURL != "" {
		errs = append(errs, f.buildLDAP(si))
	}
	if *f.casURL != "" {
		c, err := signin.NewCAS(signin.CASConfig{URL: *f.casURL, ServiceURL: *f.casService, UserAttribute: *f.casUserAttr, GroupsAttribute: *f.casGroupsAttr})
		si.CAS = c
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return si, nil
}

func (f *signinFlags) buildOIDC(ctx context.Context, si *api.SignIn) error {
	var problems []string
	if *f.oidcClientID == "" {
		problems = append(problems, "--oidc-client-id is required")
	}
	if *f.oidcRedirect == "" {
		problems = append(problems, "--oidc-redirect-url is required (https://<dashboard host>/auth/callback)")
	}
	if *f.oidcSecretFile == "" {
		problems = append(problems, "--oidc-client-secret-file is required")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	secret, err := readSecret("--oidc-client-secret-file", *f.oidcSecretFile)
	if err != nil {
		return err
	}
	o, err := signin.NewOIDC(ctx, signin.OIDCConfig{Issuer: *f.oidcIssuer, ClientID: *f.oidcClientID, ClientSecret: secret,
		RedirectURL: *f.oidcRedirect, UserClaim: *f.oidcUserClaim, GroupsClaim: *f.oidcGroupsClaim})
	if err != nil {
		return err
	}
	si.OIDC = o
	return nil
}

func (f *signinFlags) buildLDAP(si *api.SignIn) error {
	password := ""
	if *f.ldapPasswordFile != "" {
		p, err := readSecret("--ldap-bind-password-file", *f.ldapPasswordFile)
		if err != nil {
			return err
		}
		password = p
	}
	l, err := signin.NewLDAP(signin.LDAPConfig{URL: *f.ldapURL, StartTLS: *f.ldapStartTLS, CAFile: *f.ldapCAFile, BindDN: *f.ldapBindDN,
		BindPassword: password, BaseDN: *f.ldapBaseDN, UserFilter: *f.ldapUserFilter, IDAttribute: *f.ldapIDAttr,
		GroupAttribute: *f.ldapGroupAttr, GroupBaseDN: *f.ldapGroupBaseDN, GroupFilter: *f.ldapGroupFilter})
	if err != nil {
		return err
	}
	si.LDAP = l
	return nil
}
