// Package testenv gives integration tests the addresses of the project's test
// services (ClickHouse, Kafka, PostgreSQL, an SMTP sink) started by
// deployments/testenv/services.sh.
//
// The addresses come from the environment:
//
//	CLICKHOUSE_ADDR       host:port of ClickHouse's native TCP port (e.g. 127.0.0.1:19000)
//	CLICKHOUSE_HTTP_ADDR  host:port of ClickHouse's HTTP interface (e.g. 127.0.0.1:18123)
//	KAFKA_BROKERS         comma-separated host:port list of Kafka brokers (e.g. 127.0.0.1:19092)
//	POSTGRES_DSN          postgres:// URL of a database the tests may create schemas in
//	                      (e.g. postgres://cardhour@127.0.0.1:15432/cardhour?sslmode=disable)
//	SMTP_ADDR             host:port of the SMTP sink (e.g. 127.0.0.1:11025)
//	SMTP_MAILDIR          the directory the sink writes received messages to (new/)
//
// When a service is not configured or does not accept a TCP connection within
// two seconds, the test is skipped with a loud message; under CI=true it fails
// instead, so CI can never pass by silently skipping integration tests.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// EnvClickHouse names the variable holding ClickHouse's native address.
	EnvClickHouse = "CLICKHOUSE_ADDR"
	// EnvClickHouseHTTP names the variable holding ClickHouse's HTTP address.
	EnvClickHouseHTTP = "CLICKHOUSE_HTTP_ADDR"
	// EnvKafka names the variable holding the Kafka bootstrap brokers.
	EnvKafka = "KAFKA_BROKERS"
	// EnvPostgres names the variable holding the PostgreSQL URL.
	EnvPostgres = "POSTGRES_DSN"

	defaultClickHousePort = "9000"
	defaultClickHouseHTTP = "8123"
	defaultKafkaPort      = "9092"
	defaultPostgresPort   = "5432"

	dialTimeout = 2 * time.Second
)

// ClickHouseAddr returns the host:port of the test ClickHouse (native TCP
// protocol), or skips (fails under CI=true) the test when there is none.
func ClickHouseAddr(t testing.TB) string {
	t.Helper()
	return lookup(t, service{name: "ClickHouse", env: EnvClickHouse, defaultPort: defaultClickHousePort})[0]
}

// ClickHouseHTTPAddr returns the host:port (no scheme) of the test
// ClickHouse's HTTP interface, or skips (fails under CI=true) the test when
// there is none. Prefix it with "http://" to make a URL.
func ClickHouseHTTPAddr(t testing.TB) string {
	t.Helper()
	return lookup(t, service{name: "ClickHouse (HTTP)", env: EnvClickHouseHTTP, defaultPort: defaultClickHouseHTTP})[0]
}

// KafkaBrokers returns the bootstrap brokers of the test Kafka, or skips
// (fails under CI=true) the test when there is none.
func KafkaBrokers(t testing.TB) []string {
	t.Helper()
	return lookup(t, service{name: "Kafka", env: EnvKafka, defaultPort: defaultKafkaPort})
}

// UniqueName returns a short identifier, unique per call, that is safe as a
// ClickHouse database/table name and as a Kafka topic name: lower-case
// letters, digits and underscores, starting with a letter, at most 63 bytes.
// It is made of prefix, the test's name and a random suffix.
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testenv: reading random bytes: %v", err)
	}
	return uniqueName(prefix, t.Name(), hex.EncodeToString(b[:]))
}

const maxNameLen = 63

func uniqueName(prefix, testName, suffix string) string {
	p := sanitize(prefix)
	if p == "" {
		p = "t"
	}
	if p[0] < 'a' || p[0] > 'z' {
		p = "t_" + p
	}
	n := sanitize(testName)
	// Room for test name: total minus prefix, suffix and two separators.
	room := maxNameLen - len(p) - len(suffix) - 2
	if room < 0 {
		// Overlong prefix: cut it so that the suffix always fits.
		p = strings.TrimRight(p[:maxNameLen-len(suffix)-1], "_")
		return p + "_" + suffix
	}
	if len(n) > room {
		n = strings.TrimRight(n[:room], "_")
	}
	if n == "" {
		return p + "_" + suffix
	}
	return p + "_" + n + "_" + suffix
}

// sanitize lower-cases s, maps every character outside [a-z0-9] to '_',
// squeezes runs of '_' and trims them from both ends.
func sanitize(s string) string {
	var b strings.Builder
	lastUnderscore := true // drops leading underscores
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			lastUnderscore = false
		default:
			if !lastUnderscore {
				b.WriteByte('_')
				lastUnderscore = true
			}
		}
	}
	return strings.TrimRight(b.String(), "_")
}

type service struct {
	name        string // for messages: "ClickHouse"
	env         string // environment variable
	defaultPort string // added to an address given without a port
}

// action is what a test does about a service.
type action int

const (
	use  action = iota // run, with the returned addresses
	skip               // t.Skip: no service and not CI
	fail               // t.Fatal: no service under CI=true
)

func (a action) String() string {
	switch a {
	case use:
		return "use"
	case skip:
		return "skip"
	case fail:
		return "fail"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// lookup reads, probes and decides; the deciding part is the pure function
// decide, so that it can be tested without any service.
func lookup(t testing.TB, s service) []string {
	t.Helper()
	value := os.Getenv(s.env)
	addrs, err := parseAddrs(value, s.defaultPort)
	var dialErr error
	if err == nil && len(addrs) > 0 {
		dialErr = probe(addrs, dialTimeout, dial)
	}
	got, act, msg := decide(s, value, addrs, err, isCI(os.Getenv("CI")), dialErr)
	switch act {
	case fail:
		t.Fatal(msg)
	case skip:
		t.Skip(msg)
	}
	return got
}

func dial(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	return c.Close()
}

// probe returns nil when at least one of addrs accepts a TCP connection.
func probe(addrs []string, timeout time.Duration, dial func(string, time.Duration) error) error {
	var errs []string
	for _, a := range addrs {
		err := dial(a, timeout)
		if err == nil {
			return nil
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("no address accepts TCP connections: %s", strings.Join(errs, "; "))
}

// isCI reports whether CI mode is on: CI=true (or 1, yes).
func isCI(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes":
		return true
	}
	return false
}

// parseAddrs splits a comma-separated host[:port] list, trimming blanks, a
// leading "scheme://" and a trailing "/", and adding defaultPort where a port
// is missing. An empty value gives no addresses and no error.
func parseAddrs(value, defaultPort string) ([]string, error) {
	var addrs []string
	for _, part := range strings.Split(value, ",") {
		a := strings.TrimSpace(part)
		if i := strings.Index(a, "://"); i >= 0 {
			a = a[i+3:]
		}
		a = strings.TrimSuffix(a, "/")
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			// No port: "host", "::1" or "[::1]".
			h := strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
			if strings.ContainsAny(h, "[]") || strings.HasSuffix(a, ":") {
				return nil, fmt.Errorf("bad address %q", a)
			}
			host, port = h, defaultPort
		}
		if host == "" {
			return nil, fmt.Errorf("bad address %q: no host", a)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("bad address %q: bad port %q", a, port)
		}
		addrs = append(addrs, net.JoinHostPort(host, port))
	}
	return addrs, nil
}

// decide turns what is known about a service into an action and a message.
// value is the raw environment value; addrs and parseErr are parseAddrs'
// result; dialErr is probe's (nil when reachable or not probed).
func decide(s service, value string, addrs []string, parseErr error, ci bool, dialErr error) ([]string, action, string) {
	var why string
	switch {
	case strings.TrimSpace(value) == "":
		why = fmt.Sprintf("%s is not set", s.env)
	case parseErr != nil:
		why = fmt.Sprintf("%s=%q is not a valid address list: %v", s.env, value, parseErr)
	case len(addrs) == 0:
		why = fmt.Sprintf("%s=%q names no address", s.env, value)
	case dialErr != nil:
		why = fmt.Sprintf("%s=%q is not reachable: %v", s.env, value, dialErr)
	default:
		return addrs, use, ""
	}
	if ci {
		return nil, fail, fmt.Sprintf("FAILED integration test: %s not available under CI=true: %s. "+
			"CI must start the test services (deployments/testenv/with-services.sh or `make services-up`).", s.name, why)
	}
	return nil, skip, fmt.Sprintf("SKIPPED integration test: %s not available (%s); "+
		"run `make services-up` (deployments/testenv/services.sh up) and export its output, "+
		"or use deployments/testenv/with-services.sh, or set %s to your own server.", s.name, why, s.env)
}
