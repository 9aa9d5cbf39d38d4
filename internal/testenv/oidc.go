package testenv

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The variables deployments/testenv/services.sh exports for its Dex.
const (
	EnvOIDCIssuer           = "OIDC_ISSUER"             // http://127.0.0.1:15556/dex
	EnvOIDCClientID         = "OIDC_CLIENT_ID"          // cardhour
	EnvOIDCClientSecret     = "OIDC_CLIENT_SECRET"      // the client's secret
	EnvOIDCClientSecretFile = "OIDC_CLIENT_SECRET_FILE" // a file holding it (read when OIDC_CLIENT_SECRET is unset)
	EnvOIDCRedirectURL      = "OIDC_REDIRECT_URL"       // http://127.0.0.1:18481/auth/callback

	defaultHTTPPort  = "80"
	defaultHTTPSPort = "443"
)

// OIDCProvider is the test OpenID Connect provider (Dex, whose LDAP
// connector signs people in against the test directory, see LDAP) and the
// static client registered there.
type OIDCProvider struct {
	Issuer       string // http://127.0.0.1:15556/dex; discovery at Issuer + "/.well-known/openid-configuration"
	ClientID     string
	ClientSecret string
	RedirectURL  string // registered for ClientID (so is the same URL with host localhost)
}

// OIDC returns the test OpenID Connect provider, or skips (fails under
// CI=true) the test when there is none: OIDC_ISSUER unset or not accepting
// TCP connections, or the client's variables unset.
func OIDC(t testing.TB) OIDCProvider {
	t.Helper()
	value := os.Getenv(EnvOIDCIssuer)
	addrs, err := urlAddrs(value, map[string]string{"http": defaultHTTPPort, "https": defaultHTTPSPort})
	need(t, service{name: "OpenID Connect provider (Dex)", env: EnvOIDCIssuer, defaultPort: defaultHTTPPort}, value, addrs, err)
	p := OIDCProvider{
		Issuer:       strings.TrimSuffix(value, "/"),
		ClientID:     os.Getenv(EnvOIDCClientID),
		ClientSecret: os.Getenv(EnvOIDCClientSecret),
		RedirectURL:  os.Getenv(EnvOIDCRedirectURL),
	}
	var why string
	if p.ClientSecret == "" {
		p.ClientSecret, why = secretFromFile(os.Getenv(EnvOIDCClientSecretFile))
	}
	if why == "" {
		why = missingVars(map[string]string{EnvOIDCClientID: p.ClientID, EnvOIDCRedirectURL: p.RedirectURL})
	}
	incomplete(t, "OpenID Connect provider (Dex)", why)
	return p
}

// secretFromFile reads a client secret (trimmed of surrounding blanks) from
// path; why says what is wrong when it cannot.
func secretFromFile(path string) (secret, why string) {
	if path == "" {
		return "", EnvOIDCClientSecret + " and " + EnvOIDCClientSecretFile + " not set"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Sprintf("%s=%q: %v", EnvOIDCClientSecretFile, path, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Sprintf("%s=%q is empty", EnvOIDCClientSecretFile, path)
	}
	return s, ""
}
