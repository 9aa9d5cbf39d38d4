// Package signin signs people in through the site's identity provider and
// decides what they may do. Three providers: OpenID Connect (authorization
// code with PKCE, oidc.go), LDAP (bind as the user, ldap.go) and CAS 3.0
// (serviceValidate, cas.go). Each turns a sign-in into an Identity; the role
// mapping (mapping.go, one YAML file checked at start) turns an Identity and
// the rosters into grants. Sessions themselves live in the state store
// (ledger.SessionStore); the HTTP side is the api package's.
//
// Nothing here trusts what the browser says: an ID token is verified
// (signature, issuer, audience, expiry, nonce), an LDAP user name is checked
// and escaped before it reaches a filter, a CAS ticket is validated for our
// own service URL only.
//
// The role mapping's format is documented on Mapping, with an example in
// testdata/mapping.yaml. How each provider is tested: OpenID Connect against
// an OpenID provider the tests make (discovery, keys and token endpoint over
// httptest, tokens signed with keys the tests hold), and against a real Dex
// in the integration tests; LDAP's name checks and filters by unit tests,
// and the whole bind against the test environment's slapd (LDAP_URL and the
// others set, else skipped); CAS against the protocol's recorded responses
// (testdata/cas/*.xml, in the CAS 3.0 specification's format) served by an
// httptest server, not a live CAS server.
package signin

import "errors"

// Identity is a person as the provider vouches for them.
type Identity struct {
	// Provider is "oidc", "ldap", "cas" or "demo".
	Provider string
	// ID is the student or staff ID (the configured claim or attribute):
	// what usage records name as the user, and what rosters list.
	ID string
	// Name and Email when the provider gave them.
	Name, Email string
	// Groups the provider reports (OIDC groups claim, LDAP group DNs or
	// names, a CAS attribute).
	Groups []string
	// Attributes: every other claim or attribute, as strings.
	Attributes map[string][]string
}

// Person is how the audit log names the identity: "oidc:2022110315".
func (id Identity) Person() string { return id.Provider + ":" + id.ID }

// Refusal is a sign-in refused for a reason the person may be told (shown
// on the refusal page and written to the audit log); Code is stable for
// tests and logs ("bad_state", "bad_token", "wrong_audience",
// "unknown_issuer", "missing_claim", "bad_user_name", "bad_credentials",
// "bad_ticket", "wrong_service", "no_role", "provider_unavailable").
type Refusal struct {
	Code   string
	Reason string // English, names what was wrong; never a secret
	Err    error  // the underlying error, for the log
}

func (r *Refusal) Error() string {
	if r.Err != nil {
		return r.Code + ": " + r.Reason + ": " + r.Err.Error()
	}
	return r.Code + ": " + r.Reason
}

func (r *Refusal) Unwrap() error { return r.Err }

// Refused makes a Refusal.
func Refused(code, reason string, err error) error {
	return &Refusal{Code: code, Reason: reason, Err: err}
}

// AsRefusal returns the Refusal in err, or nil.
func AsRefusal(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}
