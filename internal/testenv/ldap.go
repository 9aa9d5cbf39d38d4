package testenv

import (
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
)

// The variables deployments/testenv/services.sh exports for its OpenLDAP.
const (
	EnvLDAPURL          = "LDAP_URL"           // ldap://127.0.0.1:13389 (StartTLS)
	EnvLDAPSURL         = "LDAPS_URL"          // ldaps://127.0.0.1:13636
	EnvLDAPCAFile       = "LDAP_CA_FILE"       // PEM file of the CA that signed the server's certificate
	EnvLDAPBindDN       = "LDAP_BIND_DN"       // the service account
	EnvLDAPBindPassword = "LDAP_BIND_PASSWORD" // its password
	EnvLDAPBaseDN       = "LDAP_BASE_DN"       // where the people are
	EnvLDAPGroupBaseDN  = "LDAP_GROUP_BASE_DN" // where the groups are

	defaultLDAPPort  = "389"
	defaultLDAPSPort = "636"
)

// LDAPServer is the test directory (OpenLDAP): dc=example,dc=edu with the
// people, groups and service account of deployments/testenv/ldap/.
type LDAPServer struct {
	URL          string // ldap://host:port; StartTLS with CAFile
	LDAPSURL     string // ldaps://host:port
	CAFile       string // the CA of the server's certificate (127.0.0.1, localhost)
	BindDN       string // the service account, which reads everything but passwords
	BindPassword string
	BaseDN       string // ou=people,dc=example,dc=edu
	GroupBaseDN  string // ou=groups,dc=example,dc=edu
}

// LDAP returns the test directory, or skips (fails under CI=true) the test
// when there is none: LDAP_URL unset or not accepting TCP connections, one
// of the other LDAP_* variables unset, or LDAP_CA_FILE not a file.
func LDAP(t testing.TB) LDAPServer {
	t.Helper()
	value := os.Getenv(EnvLDAPURL)
	addrs, err := urlAddrs(value, map[string]string{"ldap": defaultLDAPPort, "ldaps": defaultLDAPSPort})
	need(t, service{name: "OpenLDAP", env: EnvLDAPURL, defaultPort: defaultLDAPPort}, value, addrs, err)
	s := LDAPServer{
		URL:          value,
		LDAPSURL:     os.Getenv(EnvLDAPSURL),
		CAFile:       os.Getenv(EnvLDAPCAFile),
		BindDN:       os.Getenv(EnvLDAPBindDN),
		BindPassword: os.Getenv(EnvLDAPBindPassword),
		BaseDN:       os.Getenv(EnvLDAPBaseDN),
		GroupBaseDN:  os.Getenv(EnvLDAPGroupBaseDN),
	}
	why := missingVars(map[string]string{
		EnvLDAPSURL: s.LDAPSURL, EnvLDAPCAFile: s.CAFile, EnvLDAPBindDN: s.BindDN,
		EnvLDAPBindPassword: s.BindPassword, EnvLDAPBaseDN: s.BaseDN, EnvLDAPGroupBaseDN: s.GroupBaseDN,
	})
	if why == "" {
		if st, err := os.Stat(s.CAFile); err != nil || !st.Mode().IsRegular() {
			why = fmt.Sprintf("%s=%q is not a file", EnvLDAPCAFile, s.CAFile)
		}
	}
	incomplete(t, "OpenLDAP", why)
	return s
}

// need probes addrs and skips or fails the test, like lookup, when the
// service is not configured or not reachable.
func need(t testing.TB, s service, value string, addrs []string, parseErr error) {
	t.Helper()
	var dialErr error
	if parseErr == nil && len(addrs) > 0 {
		dialErr = probe(addrs, dialTimeout, dial)
	}
	_, act, msg := decide(s, value, addrs, parseErr, isCI(os.Getenv("CI")), dialErr)
	switch act {
	case fail:
		t.Fatal(msg)
	case skip:
		t.Skip(msg)
	}
}

// incomplete skips (fails under CI=true) the test when why is not empty:
// a service answers, but what the test needs besides its address is missing.
func incomplete(t testing.TB, name, why string) {
	t.Helper()
	if why == "" {
		return
	}
	if isCI(os.Getenv("CI")) {
		t.Fatalf("FAILED integration test: %s not available under CI=true: %s. "+
			"CI must start the test services (deployments/testenv/with-services.sh or `make services-up`).", name, why)
	}
	t.Skipf("SKIPPED integration test: %s not available (%s); "+
		"run `make services-up` (deployments/testenv/services.sh up) and export its output, "+
		"or use deployments/testenv/with-services.sh.", name, why)
}

// missingVars names the variables of vars (name to value) that are empty,
// in a stable order; "" when none is.
func missingVars(vars map[string]string) string {
	var names []string
	for n, v := range vars {
		if strings.TrimSpace(v) == "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return strings.Join(names, ", ") + " not set"
}

// urlAddrs reads the host:port of a URL whose scheme is one of the keys of
// ports (the value: the port when the URL has none).
func urlAddrs(value string, ports map[string]string) ([]string, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	u, err := url.Parse(strings.TrimSpace(value))
	if err != nil {
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	port, ok := ports[u.Scheme]
	if !ok {
		var schemes []string
		for s := range ports {
			schemes = append(schemes, s+"://")
		}
		sort.Strings(schemes)
		return nil, fmt.Errorf("scheme %q: want %s", u.Scheme, strings.Join(schemes, " or "))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("no host")
	}
	return parseAddrs(u.Host, port)
}
