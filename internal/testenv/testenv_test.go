package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var safeName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

func TestUniqueNameIsSafeAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		n := UniqueName(t, "ch")
		if !safeName.MatchString(n) || len(n) > maxNameLen {
			t.Fatalf("UniqueName = %q: not a safe identifier of at most %d bytes", n, maxNameLen)
		}
		if !strings.HasPrefix(n, "ch_testuniquenameissafeandunique_") {
			t.Fatalf("UniqueName = %q: want prefix and test name in it", n)
		}
		if seen[n] {
			t.Fatalf("UniqueName returned %q twice", n)
		}
		seen[n] = true
	}
}

func TestUniqueNameSubtest(t *testing.T) {
	t.Run("Kafka topic/with spaces & ümlauts", func(t *testing.T) {
		n := UniqueName(t, "topic")
		if !safeName.MatchString(n) {
			t.Fatalf("UniqueName = %q: not safe", n)
		}
		if !strings.HasPrefix(n, "topic_testuniquenamesubtest_kafka_topic_with_spaces_") {
			t.Fatalf("UniqueName = %q", n)
		}
	})
}

func TestUniqueNameShapes(t *testing.T) {
	long := strings.Repeat("VeryLongTestName", 10)
	cases := []struct {
		prefix, test, suffix, want string
	}{
		{"db", "TestFoo", "0a1b2c3d", "db_testfoo_0a1b2c3d"},
		{"", "TestFoo", "0a1b2c3d", "t_testfoo_0a1b2c3d"},
		{"9lives", "TestFoo", "00000000", "t_9lives_testfoo_00000000"},
		{"__x__", "TestA/b-c", "00000000", "x_testa_b_c_00000000"},
		{"My-Prefix", "", "00000000", "my_prefix_00000000"},
		{"db", "///", "00000000", "db_00000000"},
		{"db", long, "0a1b2c3d", "db_" + strings.ToLower(long)[:63-3-9] + "_0a1b2c3d"},
		{strings.Repeat("p", 80), "TestFoo", "0a1b2c3d", strings.Repeat("p", 54) + "_0a1b2c3d"},
	}
	for _, c := range cases {
		got := uniqueName(c.prefix, c.test, c.suffix)
		if got != c.want {
			t.Errorf("uniqueName(%q, %q, %q) = %q, want %q", c.prefix, c.test, c.suffix, got, c.want)
		}
		if !safeName.MatchString(got) || len(got) > maxNameLen {
			t.Errorf("uniqueName(%q, %q, %q) = %q: unsafe or too long (%d)", c.prefix, c.test, c.suffix, got, len(got))
		}
		if strings.Contains(got, "__") {
			t.Errorf("uniqueName(%q, %q, %q) = %q: doubled underscore", c.prefix, c.test, c.suffix, got)
		}
	}
}

func TestIsCI(t *testing.T) {
	for v, want := range map[string]bool{
		"true": true, "TRUE": true, "1": true, "yes": true, " true ": true,
		"": false, "false": false, "0": false, "no": false,
	} {
		if got := isCI(v); got != want {
			t.Errorf("isCI(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestParseAddrs(t *testing.T) {
	cases := []struct {
		value   string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{" , ", nil, false},
		{"127.0.0.1:19092", []string{"127.0.0.1:19092"}, false},
		{"a:1, b:2 ,,c:3", []string{"a:1", "b:2", "c:3"}, false},
		{"localhost", []string{"localhost:9092"}, false},
		{"::1", []string{"[::1]:9092"}, false},
		{"[::1]", []string{"[::1]:9092"}, false},
		{"[::1]:19092", []string{"[::1]:19092"}, false},
		{"http://127.0.0.1:18123/", []string{"127.0.0.1:18123"}, false},
		{"PLAINTEXT://k1:9093,k2", []string{"k1:9093", "k2:9092"}, false},
		{"host:", nil, true},
		{"host:notaport", nil, true},
		{"host:70000", nil, true},
		{":9092", nil, true},
	}
	for _, c := range cases {
		got, err := parseAddrs(c.value, "9092")
		if (err != nil) != c.wantErr {
			t.Errorf("parseAddrs(%q) error = %v, wantErr %v", c.value, err, c.wantErr)
			continue
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("parseAddrs(%q) = %q, want %q", c.value, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	ch := service{name: "ClickHouse", env: EnvClickHouse, defaultPort: "9000"}
	refused := errors.New("connection refused")
	cases := []struct {
		name     string
		value    string
		ci       bool
		dialErr  error
		wantAct  action
		wantAddr string
		wantMsg  []string
	}{
		{"set and reachable", "127.0.0.1:19000", false, nil, use, "127.0.0.1:19000", nil},
		{"set and reachable in CI", "127.0.0.1:19000", true, nil, use, "127.0.0.1:19000", nil},
		{"unset", "", false, nil, skip, "", []string{"SKIPPED integration test", "ClickHouse", "CLICKHOUSE_ADDR is not set", "make services-up"}},
		{"unset in CI", "", true, nil, fail, "", []string{"ClickHouse", "CI=true", "CLICKHOUSE_ADDR is not set"}},
		{"blank", "  ", false, nil, skip, "", []string{"is not set"}},
		{"unreachable", "127.0.0.1:1", false, refused, skip, "", []string{"SKIPPED", "not reachable", "connection refused"}},
		{"unreachable in CI", "127.0.0.1:1", true, refused, fail, "", []string{"not reachable", "connection refused"}},
		{"malformed", "host:nope", false, nil, skip, "", []string{"not a valid address"}},
		{"malformed in CI", "host:nope", true, nil, fail, "", []string{"not a valid address"}},
		{"only commas", ",", true, nil, fail, "", []string{"names no address"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addrs, perr := parseAddrs(c.value, ch.defaultPort)
			got, act, msg := decide(ch, c.value, addrs, perr, c.ci, c.dialErr)
			if act != c.wantAct {
				t.Fatalf("action = %v, want %v (msg %q)", act, c.wantAct, msg)
			}
			if act == use {
				if len(got) != 1 || got[0] != c.wantAddr || msg != "" {
					t.Fatalf("got %q, msg %q; want [%q] and no message", got, msg, c.wantAddr)
				}
				return
			}
			if got != nil {
				t.Errorf("addresses = %q, want none", got)
			}
			for _, w := range c.wantMsg {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestProbe(t *testing.T) {
	var tried []string
	fake := func(ok string) func(string, time.Duration) error {
		return func(a string, _ time.Duration) error {
			tried = append(tried, a)
			if a == ok {
				return nil
			}
			return errors.New("refused " + a)
		}
	}
	if err := probe([]string{"a:1", "b:2"}, time.Second, fake("b:2")); err != nil {
		t.Fatalf("probe with a reachable second broker: %v", err)
	}
	if strings.Join(tried, ",") != "a:1,b:2" {
		t.Fatalf("tried %q", tried)
	}
	err := probe([]string{"a:1", "b:2"}, time.Second, fake("none"))
	if err == nil || !strings.Contains(err.Error(), "refused a:1") || !strings.Contains(err.Error(), "refused b:2") {
		t.Fatalf("probe with nothing reachable = %v", err)
	}
}

// TestLookupAgainstLocalListener runs the whole path (env, parse, dial,
// decide) against a listener of its own on loopback, and against a port
// that was just closed.
func TestLookupAgainstLocalListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("cannot listen on loopback: %v", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()

	t.Setenv("CI", "false")
	t.Setenv(EnvKafka, " "+addr+" ")
	if got := KafkaBrokers(t); len(got) != 1 || got[0] != addr {
		t.Fatalf("KafkaBrokers = %q, want [%q]", got, addr)
	}
	t.Setenv(EnvClickHouse, addr)
	if got := ClickHouseAddr(t); got != addr {
		t.Fatalf("ClickHouseAddr = %q, want %q", got, addr)
	}
	t.Setenv(EnvClickHouseHTTP, "http://"+addr)
	if got := ClickHouseHTTPAddr(t); got != addr {
		t.Fatalf("ClickHouseHTTPAddr = %q, want %q", got, addr)
	}

	ln.Close()
	if err := dial(addr, time.Second); err == nil {
		t.Skip("closed port still accepts connections; cannot test the unreachable path")
	}
	t.Setenv(EnvClickHouse, addr)
	t.Setenv("CI", "")
	if r := runRecorded(t, func(tb testing.TB) { ClickHouseAddr(tb) }); !strings.Contains(r.skipped, "SKIPPED integration test: ClickHouse") || r.failed != "" {
		t.Fatalf("closed port without CI: skipped %q, failed %q; want a skip", r.skipped, r.failed)
	}
	t.Setenv("CI", "true")
	if r := runRecorded(t, func(tb testing.TB) { KafkaBrokers(tb) }); !strings.Contains(r.failed, "Kafka not available under CI=true") || r.skipped != "" {
		t.Fatalf("closed port with CI=true: skipped %q, failed %q; want a failure", r.skipped, r.failed)
	}
}

// recorder is a testing.TB whose Fatal and Skip record the message and end
// the goroutine, as the real ones do.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

func runRecorded(t *testing.T, f func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestPostgresAddrs(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		bad  bool
	}{
		{"", nil, false},
		{"postgres://cardhour@127.0.0.1:15432/cardhour?sslmode=disable", []string{"127.0.0.1:15432"}, false},
		{"postgresql://u:p@db.example/x", []string{"db.example:5432"}, false},
		{"host=127.0.0.1 port=5432", nil, true},
		{"mysql://h/x", nil, true},
		{"postgres:///x", nil, true},
	}
	for _, c := range cases {
		got, err := postgresAddrs(c.in)
		if (err != nil) != c.bad {
			t.Errorf("postgresAddrs(%q) error = %v, want error %v", c.in, err, c.bad)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("postgresAddrs(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestWithSearchPath(t *testing.T) {
	got, err := withSearchPath("postgres://cardhour@127.0.0.1:15432/cardhour?sslmode=disable", "t_x_0a1b2c3d")
	if err != nil {
		t.Fatal(err)
	}
	if want := "postgres://cardhour@127.0.0.1:15432/cardhour?search_path=t_x_0a1b2c3d&sslmode=disable"; got != want {
		t.Errorf("withSearchPath = %q, want %q", got, want)
	}
}

func TestPostgresDSNGivesAnEmptySchemaOfItsOwn(t *testing.T) {
	dsn := PostgresDSN(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test
	var schema string
	var tables int
	if err := c.QueryRow(ctx, `SELECT current_schema(), (SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema())`).Scan(&schema, &tables); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(schema, "t_testpostgresdsngivesanemptyschemaofitsown_") || tables != 0 {
		t.Fatalf("current schema %q with %d tables: want a fresh schema named after the test", schema, tables)
	}
	if _, err := c.Exec(ctx, `CREATE TABLE x (a int)`); err != nil {
		t.Fatal(err)
	}
}
