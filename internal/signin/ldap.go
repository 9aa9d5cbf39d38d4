package signin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// LDAPConfig is how to reach the directory and read a person from it.
type LDAPConfig struct {
	// URL is ldaps://host:636 or ldap://host:389 (then StartTLS, or
	// AllowPlaintext on a loopback host).
	URL      string
	StartTLS bool
	// CAFile is a PEM file of the CAs that sign the directory's
	// certificate ("" for the system's).
	CAFile string
	// AllowPlaintext lets an ldap:// URL without StartTLS through when its
	// host is loopback (a test directory); never otherwise.
	AllowPlaintext bool
	// BindDN and BindPassword: the service account that finds people.
	BindDN, BindPassword string
	// BaseDN is where people are searched (the whole subtree).
	BaseDN string
	// UserFilter finds a person by the name they typed; %s is the name,
	// escaped. Default "(uid=%s)".
	UserFilter string
	// IDAttribute (default uid), NameAttribute (cn), MailAttribute (mail),
	// GroupAttribute (memberOf): what the person's entry is read for.
	IDAttribute, NameAttribute, MailAttribute, GroupAttribute string
	// GroupBaseDN, for directories without memberOf: groups are also
	// searched there with GroupFilter (default "(member=%s)", %s the
	// person's DN, escaped) and their DNs added.
	GroupBaseDN, GroupFilter string
	// Timeout bounds connecting and each request (default 10s).
	Timeout time.Duration
}

// LDAP signs people in by binding as them: the service account finds the
// one entry of the name typed, then a bind as that entry with the password
// typed proves it.
type LDAP struct {
	cfg LDAPConfig
	url *url.URL
	tls *tls.Config
}

// maxUserName is the longest user name accepted, in bytes.
const maxUserName = 128

// NewLDAP checks cfg (every problem at once) and fills its defaults; it
// does not connect.
func NewLDAP(cfg LDAPConfig) (*LDAP, error) {
	defaults(&cfg.UserFilter, "(uid=%s)")
	defaults(&cfg.IDAttribute, "uid")
	defaults(&cfg.NameAttribute, "cn")
	defaults(&cfg.MailAttribute, "mail")
	defaults(&cfg.GroupAttribute, "memberOf")
	defaults(&cfg.GroupFilter, "(member=%s)")
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	var errs []error
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "ldap" && u.Scheme != "ldaps") || u.Hostname() == "" {
		errs = append(errs, fmt.Errorf("url %q: want ldaps://host[:port] or ldap://host[:port]", cfg.URL))
	} else if u.Scheme == "ldap" && !cfg.StartTLS && !(cfg.AllowPlaintext && isLoopback(u.Hostname())) {
		errs = append(errs, fmt.Errorf("url %q: passwords would cross the network in the clear: use ldaps://, or StartTLS (plain ldap:// is allowed only to a loopback host, with AllowPlaintext)", cfg.URL))
	}
	if u != nil && u.Scheme == "ldaps" && cfg.StartTLS {
		errs = append(errs, errors.New("StartTLS goes with ldap://, not ldaps:// (already TLS)"))
	}
	if cfg.BaseDN == "" {
		errs = append(errs, errors.New("base DN is required"))
	}
	if cfg.BindDN == "" || cfg.BindPassword == "" {
		errs = append(errs, errors.New("bind DN and bind password (the service account) are required"))
	}
	errs = append(errs, checkFilter("user filter", cfg.UserFilter), checkFilter("group filter", cfg.GroupFilter))
	l := &LDAP{cfg: cfg, url: u}
	if err := l.loadTLS(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ldap: %w", err)
	}
	return l, nil
}

func defaults(s *string, d string) {
	if *s == "" {
		*s = d
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkFilter: one %s, and a valid filter once it is filled.
func checkFilter(what, f string) error {
	if strings.Count(f, "%s") != 1 {
		return fmt.Errorf("%s %q: needs %%s exactly once (where the name goes)", what, f)
	}
	if _, err := ldap.CompileFilter(fillFilter(f, "x")); err != nil {
		return fmt.Errorf("%s %q: %w", what, f, err)
	}
	return nil
}

// fillFilter puts value, escaped, where the filter's %s is.
func fillFilter(f, value string) string {
	return strings.Replace(f, "%s", ldap.EscapeFilter(value), 1)
}

func (l *LDAP) loadTLS() error {
	if l.url == nil {
		return nil
	}
	l.tls = &tls.Config{ServerName: l.url.Hostname(), MinVersion: tls.VersionTLS12}
	if l.cfg.CAFile == "" {
		return nil
	}
	pem, err := os.ReadFile(l.cfg.CAFile)
	if err != nil {
		return fmt.Errorf("ca file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("ca file %s: no PEM certificate in it", l.cfg.CAFile)
	}
	l.tls.RootCAs = pool
	return nil
}

// checkUserName refuses a name that is empty, too long, or has a character
// outside [A-Za-z0-9._@-].
func checkUserName(user string) error {
	if user == "" {
		return Refused("bad_user_name", "the user name is empty", nil)
	}
	if len(user) > maxUserName {
		return Refused("bad_user_name", fmt.Sprintf("the user name is longer than %d bytes", maxUserName), nil)
	}
	for _, r := range user {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@-", r)) {
			return Refused("bad_user_name", "the user name may hold only letters, digits and . _ @ -", nil)
		}
	}
	return nil
}

// badCredentials is the one refusal of a wrong password and of a name that
// finds no one (or more than one): who exists is not told.
func badCredentials(err error) error {
	return Refused("bad_credentials", "wrong user name or password", err)
}

func unavailable(what string, err error) error {
	return Refused("provider_unavailable", "the directory could not be asked ("+what+")", err)
}

// Authenticate checks user and password against the directory and returns
// the person's Identity{Provider: "ldap"}.
func (l *LDAP) Authenticate(ctx context.Context, user, password string) (Identity, error) {
	if err := checkUserName(user); err != nil {
		return Identity{}, err
	}
	if password == "" {
		// An empty password is an unauthenticated bind, which succeeds.
		return Identity{}, Refused("bad_credentials", "the password is empty", nil)
	}
	return l.withConn(ctx, func(conn *ldap.Conn) (Identity, error) { return l.authenticate(conn, user, password) })
}

// withConn runs f on a new connection, closed when f returns or ctx ends.
func (l *LDAP) withConn(ctx context.Context, f func(*ldap.Conn) (Identity, error)) (Identity, error) {
	conn, err := l.dial()
	if err != nil {
		return Identity{}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	id, err := f(conn)
	if err != nil && ctx.Err() != nil {
		return Identity{}, unavailable("the request was cancelled", ctx.Err())
	}
	return id, err
}

func (l *LDAP) dial() (*ldap.Conn, error) {
	dialer := &net.Dialer{Timeout: l.cfg.Timeout}
	conn, err := ldap.DialURL(l.cfg.URL, ldap.DialWithDialer(dialer), ldap.DialWithTLSConfig(l.tls))
	if err != nil {
		return nil, unavailable("connecting to "+l.url.Host, err)
	}
	conn.SetTimeout(l.cfg.Timeout)
	if l.cfg.StartTLS {
		if err := conn.StartTLS(l.tls); err != nil {
			conn.Close()
			return nil, unavailable("StartTLS with "+l.url.Host, err)
		}
	}
	return conn, nil
}

func (l *LDAP) authenticate(conn *ldap.Conn, user, password string) (Identity, error) {
	if err := conn.Bind(l.cfg.BindDN, l.cfg.BindPassword); err != nil {
		return Identity{}, unavailable("the service account's bind", err)
	}
	entry, err := l.findUser(conn, user)
	if err != nil {
		return Identity{}, err
	}
	groups, err := l.searchGroups(conn, entry.DN)
	if err != nil {
		return Identity{}, err
	}
	if err := conn.Bind(entry.DN, password); err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
			return Identity{}, badCredentials(err)
		}
		return Identity{}, unavailable("the person's bind", err)
	}
	return l.identity(entry, groups)
}

// Lookup reads the person whose ID is id again through the service account,
// without their password: what a session re-checks its grants with, so that
// a person taken out of a group loses what the group gave within the
// session's idle limit. A person no longer in the directory is a Refusal
// with code "gone".
func (l *LDAP) Lookup(ctx context.Context, id string) (Identity, error) {
	if err := checkUserName(id); err != nil {
		return Identity{}, err
	}
	return l.withConn(ctx, func(conn *ldap.Conn) (Identity, error) { return l.lookup(conn, id) })
}

func (l *LDAP) lookup(conn *ldap.Conn, id string) (Identity, error) {
	if err := conn.Bind(l.cfg.BindDN, l.cfg.BindPassword); err != nil {
		return Identity{}, unavailable("the service account's bind", err)
	}
	entry, err := l.findEntry(conn, "("+l.cfg.IDAttribute+"=%s)", id)
	if r := AsRefusal(err); r != nil && r.Code == "bad_credentials" {
		return Identity{}, Refused("gone", "the directory no longer has "+id, err)
	}
	if err != nil {
		return Identity{}, err
	}
	groups, err := l.searchGroups(conn, entry.DN)
	if err != nil {
		return Identity{}, err
	}
	return l.identity(entry, groups)
}

// findUser searches exactly one entry for user.
func (l *LDAP) findUser(conn *ldap.Conn, user string) (*ldap.Entry, error) {
	return l.findEntry(conn, l.cfg.UserFilter, user)
}

// findEntry searches exactly one entry of filter with value (escaped).
func (l *LDAP) findEntry(conn *ldap.Conn, filter, user string) (*ldap.Entry, error) {
	req := ldap.NewSearchRequest(l.cfg.BaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
		2, int(l.cfg.Timeout/time.Second), false, fillFilter(filter, user),
		[]string{"*", l.cfg.GroupAttribute}, nil)
	res, err := conn.Search(req)
	if ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded) {
		return nil, badCredentials(fmt.Errorf("more than one entry for %q", user))
	}
	if err != nil {
		return nil, unavailable("searching people", err)
	}
	if len(res.Entries) != 1 {
		return nil, badCredentials(fmt.Errorf("%d entries for %q", len(res.Entries), user))
	}
	return res.Entries[0], nil
}

// searchGroups returns the DNs of the groups under GroupBaseDN that list
// dn (none when no GroupBaseDN is set).
func (l *LDAP) searchGroups(conn *ldap.Conn, dn string) ([]string, error) {
	if l.cfg.GroupBaseDN == "" {
		return nil, nil
	}
	req := ldap.NewSearchRequest(l.cfg.GroupBaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
		0, int(l.cfg.Timeout/time.Second), false, fillFilter(l.cfg.GroupFilter, dn), []string{"1.1"}, nil)
	res, err := conn.Search(req)
	if err != nil {
		return nil, unavailable("searching groups", err)
	}
	out := make([]string, 0, len(res.Entries))
	for _, e := range res.Entries {
		out = append(out, e.DN)
	}
	return out, nil
}

// identity reads the entry; the groups searched come after the entry's own.
func (l *LDAP) identity(e *ldap.Entry, groups []string) (Identity, error) {
	id := Identity{
		Provider: "ldap",
		ID:       e.GetAttributeValue(l.cfg.IDAttribute),
		Name:     e.GetAttributeValue(l.cfg.NameAttribute),
		Email:    e.GetAttributeValue(l.cfg.MailAttribute),
	}
	if id.ID == "" {
		return Identity{}, Refused("missing_claim", "the directory entry has no "+l.cfg.IDAttribute, nil)
	}
	for _, g := range append(e.GetAttributeValues(l.cfg.GroupAttribute), groups...) {
		if !containsFold(id.Groups, g) {
			id.Groups = append(id.Groups, g)
		}
	}
	id.Attributes = entryAttributes(e, l.cfg.GroupAttribute)
	return id, nil
}

// entryAttributes is every attribute of e but the groups and anything
// holding a password.
func entryAttributes(e *ldap.Entry, groupAttr string) map[string][]string {
	out := map[string][]string{}
	for _, a := range e.Attributes {
		if strings.EqualFold(a.Name, groupAttr) || strings.Contains(strings.ToLower(a.Name), "password") {
			continue
		}
		out[a.Name] = append(out[a.Name], a.Values...)
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
