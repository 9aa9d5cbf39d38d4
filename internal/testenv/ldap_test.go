package testenv

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"
)

// TestLDAPDirectory checks the test directory the way the api's LDAP
// sign-in uses it, with a minimal LDAP client (BER by hand, no LDAP
// library in the main module): StartTLS on LDAP_URL and LDAPS on LDAPS_URL
// with certificates that verify against LDAP_CA_FILE for the URL's host,
// binds of the service account and of a student, a refused wrong password,
// and a search as the service account that sees the student's name and
// memberOf but not the password.
func TestLDAPDirectory(t *testing.T) {
	s := LDAP(t)
	pool := caPool(t, s.CAFile)

	c := dialStartTLS(t, s.URL, pool)
	if code := c.bind(t, s.BindDN, s.BindPassword); code != 0 {
		t.Fatalf("StartTLS: bind as %s: result code %d, want 0", s.BindDN, code)
	}
	attrs := c.searchOne(t, s.BaseDN, "uid", "2022110315", "cn", "mail", "memberOf", "userPassword")
	if !slices.Equal(attrs["cn"], []string{"Li Hua"}) || !slices.Equal(attrs["mail"], []string{"2022110315@example.edu"}) {
		t.Errorf("uid=2022110315: cn %q, mail %q; want Li Hua, 2022110315@example.edu", attrs["cn"], attrs["mail"])
	}
	if want := []string{"cn=course-dl-2026," + s.GroupBaseDN}; !slices.Equal(attrs["memberOf"], want) {
		t.Errorf("uid=2022110315: memberOf %q, want %q", attrs["memberOf"], want)
	}
	if pw, ok := attrs["userPassword"]; ok {
		t.Errorf("the service account reads userPassword %q; the ACLs must hide it", pw)
	}

	ls := dialLDAPS(t, s.LDAPSURL, pool)
	student := "uid=2022110315," + s.BaseDN
	if code := ls.bind(t, student, "not-the-password"); code != 49 {
		t.Errorf("LDAPS: bind as %s with a wrong password: result code %d, want 49 (invalidCredentials)", student, code)
	}
	if code := ls.bind(t, student, "student-pass"); code != 0 {
		t.Errorf("LDAPS: bind as %s: result code %d, want 0", student, code)
	}
}

func caPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no PEM certificate", file)
	}
	return pool
}

// ldapConn is one LDAP connection; id numbers the messages.
type ldapConn struct {
	conn net.Conn
	r    *bufio.Reader
	id   int
}

func hostOf(t *testing.T, raw string) (hostport, host string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host, u.Hostname()
}

func newLDAPConn(t *testing.T, c net.Conn) *ldapConn {
	t.Helper()
	t.Cleanup(func() { c.Close() }) //nolint:errcheck // test connection
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return &ldapConn{conn: c, r: bufio.NewReader(c)}
}

func dialLDAPS(t *testing.T, raw string, pool *x509.CertPool) *ldapConn {
	t.Helper()
	hp, host := hostOf(t, raw)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: dialTimeout}, "tcp", hp, &tls.Config{RootCAs: pool, ServerName: host})
	if err != nil {
		t.Fatalf("LDAPS %s: %v", raw, err)
	}
	return newLDAPConn(t, c)
}

// dialStartTLS connects in plain text, asks for StartTLS (RFC 4511 4.14)
// and verifies the server's certificate.
func dialStartTLS(t *testing.T, raw string, pool *x509.CertPool) *ldapConn {
	t.Helper()
	hp, host := hostOf(t, raw)
	plain, err := net.DialTimeout("tcp", hp, dialTimeout)
	if err != nil {
		t.Fatalf("LDAP %s: %v", raw, err)
	}
	c := newLDAPConn(t, plain)
	tag, op := c.roundTrip(t, tlv(0x77, tlv(0x80, []byte("1.3.6.1.4.1.1466.20037"))))
	if tag != 0x78 || resultCode(t, op) != 0 {
		t.Fatalf("StartTLS on %s refused (op %#x, %x)", raw, tag, op)
	}
	tc := tls.Client(plain, &tls.Config{RootCAs: pool, ServerName: host})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("StartTLS on %s: TLS handshake: %v", raw, err)
	}
	return newLDAPConn(t, tc)
}

// bind does a simple bind and returns its result code.
func (c *ldapConn) bind(t *testing.T, dn, password string) int {
	t.Helper()
	tag, op := c.roundTrip(t, tlv(0x60, cat(tlv(0x02, []byte{3}), tlv(0x04, []byte(dn)), tlv(0x80, []byte(password)))))
	if tag != 0x61 {
		t.Fatalf("bind as %s: answer op %#x, want a BindResponse", dn, tag)
	}
	return resultCode(t, op)
}

// searchOne searches base's subtree for (attr=value) and returns the
// asked-for attributes of the one entry found.
func (c *ldapConn) searchOne(t *testing.T, base, attr, value string, attrs ...string) map[string][]string {
	t.Helper()
	var list []byte
	for _, a := range attrs {
		list = append(list, tlv(0x04, []byte(a))...)
	}
	req := tlv(0x63, cat(tlv(0x04, []byte(base)), tlv(0x0a, []byte{2}), tlv(0x0a, []byte{0}),
		tlv(0x02, []byte{0}), tlv(0x02, []byte{0}), tlv(0x01, []byte{0}),
		tlv(0xa3, cat(tlv(0x04, []byte(attr)), tlv(0x04, []byte(value)))), tlv(0x30, list)))
	c.send(t, req)
	var found []map[string][]string
	for {
		tag, op := c.receive(t)
		switch tag {
		case 0x64: // SearchResultEntry
			found = append(found, entryAttrs(t, op))
		case 0x65: // SearchResultDone
			if code := resultCode(t, op); code != 0 || len(found) != 1 {
				t.Fatalf("search (%s=%s) under %s: result code %d, %d entries; want 0 and one entry", attr, value, base, code, len(found))
			}
			return found[0]
		}
	}
}

func (c *ldapConn) roundTrip(t *testing.T, op []byte) (byte, []byte) {
	t.Helper()
	c.send(t, op)
	return c.receive(t)
}

func (c *ldapConn) send(t *testing.T, op []byte) {
	t.Helper()
	c.id++
	if _, err := c.conn.Write(tlv(0x30, cat(tlv(0x02, []byte{byte(c.id)}), op))); err != nil {
		t.Fatalf("LDAP write: %v", err)
	}
}

// receive reads one LDAPMessage and returns its protocolOp's tag and content.
func (c *ldapConn) receive(t *testing.T) (byte, []byte) {
	t.Helper()
	msg, err := readTLV(c.r)
	if err != nil {
		t.Fatalf("LDAP read: %v", err)
	}
	_, _, rest := splitTLV(t, msg) // messageID
	tag, op, _ := splitTLV(t, rest)
	return tag, op
}

// resultCode reads the ENUMERATED resultCode that starts an LDAPResult.
func resultCode(t *testing.T, op []byte) int {
	t.Helper()
	tag, v, _ := splitTLV(t, op)
	if tag != 0x0a || len(v) != 1 {
		t.Fatalf("LDAPResult does not start with a resultCode: %x", op)
	}
	return int(v[0])
}

func entryAttrs(t *testing.T, op []byte) map[string][]string {
	t.Helper()
	_, _, rest := splitTLV(t, op) // objectName
	_, list, _ := splitTLV(t, rest)
	attrs := map[string][]string{}
	for len(list) > 0 {
		var pa []byte
		_, pa, list = splitTLV(t, list)
		_, name, vals := splitTLV(t, pa)
		_, set, _ := splitTLV(t, vals)
		for len(set) > 0 {
			var v []byte
			_, v, set = splitTLV(t, set)
			attrs[string(name)] = append(attrs[string(name)], string(v))
		}
	}
	return attrs
}

func cat(parts ...[]byte) []byte { return slices.Concat(parts...) }

// tlv encodes one BER element with a definite length.
func tlv(tag byte, content []byte) []byte {
	n := len(content)
	switch {
	case n < 0x80:
		return cat([]byte{tag, byte(n)}, content)
	case n < 0x100:
		return cat([]byte{tag, 0x81, byte(n)}, content)
	default:
		return cat([]byte{tag, 0x82, byte(n >> 8), byte(n)}, content)
	}
}

// splitTLV decodes the first BER element of b.
func splitTLV(t *testing.T, b []byte) (tag byte, content, rest []byte) {
	t.Helper()
	if len(b) < 2 {
		t.Fatalf("BER: %x is too short", b)
	}
	n, hdr := int(b[1]), 2
	if n >= 0x80 {
		k := n & 0x7f
		if k == 0 || k > 3 || len(b) < 2+k {
			t.Fatalf("BER: bad length in %x", b)
		}
		n = 0
		for _, x := range b[2 : 2+k] {
			n = n<<8 | int(x)
		}
		hdr += k
	}
	if len(b) < hdr+n {
		t.Fatalf("BER: %x is cut short", b)
	}
	return b[0], b[hdr : hdr+n], b[hdr+n:]
}

// readTLV reads one BER element from r and returns its content.
func readTLV(r *bufio.Reader) ([]byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(h[1])
	if n >= 0x80 {
		k := n & 0x7f
		if k == 0 || k > 3 {
			return nil, errors.New("BER: unsupported length form")
		}
		lb := make([]byte, k)
		if _, err := io.ReadFull(r, lb); err != nil {
			return nil, err
		}
		n = 0
		for _, x := range lb {
			n = n<<8 | int(x)
		}
	}
	content := make([]byte, n)
	if _, err := io.ReadFull(r, content); err != nil {
		return nil, fmt.Errorf("BER: %d-byte element cut short: %w", n, err)
	}
	return content, nil
}
