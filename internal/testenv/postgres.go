package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresDSN returns the URL of a schema of its own in the test
// PostgreSQL, or skips (fails under CI=true) the test when there is none.
// The schema is created empty for the test (a UniqueName) and dropped with
// everything in it when the test ends; the URL selects it with search_path,
// so every connection made with it, by any driver that passes run-time
// parameters (pgx does), works in that schema only.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	s := service{name: "PostgreSQL", env: EnvPostgres, defaultPort: defaultPostgresPort}
	value := os.Getenv(s.env)
	addrs, err := postgresAddrs(value)
	var dialErr error
	if err == nil && len(addrs) > 0 {
		dialErr = probe(addrs, dialTimeout, dial)
	}
	_, act, msg := decide(s, value, addrs, err, isCI(os.Getenv("CI")), dialErr)
	switch act {
	case fail:
		t.Fatal(msg)
	case skip:
		t.Skip(msg)
	}
	schema := UniqueName(t, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pgExec(ctx, value, `CREATE SCHEMA "`+schema+`"`); err != nil {
		t.Fatalf("testenv: PostgreSQL at %s=%q answers but cannot create schema %s: %v", s.env, value, schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pgExec(ctx, value, `DROP SCHEMA "`+schema+`" CASCADE`); err != nil {
			t.Errorf("testenv: cannot drop PostgreSQL schema %s: %v", schema, err)
		}
	})
	dsn, err := withSearchPath(value, schema)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

func pgExec(ctx context.Context, dsn, stmt string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.Background()) //nolint:errcheck // nothing to do about a failed goodbye
	_, err = c.Exec(ctx, stmt)
	return err
}

// postgresAddrs reads the host:port of a postgres:// URL (one host: the
// multi-host form of libpq is not a URL that net/url parses).
func postgresAddrs(value string) ([]string, error) {
	if value == "" {
		return nil, nil
	}
	u, err := url.Parse(value)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("scheme %q: want postgres://user@host:port/database", u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("no host: want postgres://user@host:port/database")
	}
	return parseAddrs(u.Host, defaultPostgresPort)
}

// withSearchPath adds search_path=schema to a postgres:// URL.
func withSearchPath(value, schema string) (string, error) {
	u, err := url.Parse(value)
	if err != nil {
		return "", fmt.Errorf("testenv: %s: %w", EnvPostgres, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// DurablePostgresDSN is PostgresDSN for the fault tests (a process killed,
// a server stopped, a restart): they check that what was acknowledged
// survives, which holds only when the server writes commits durably. It
// checks fsync, synchronous_commit and full_page_writes; a server with any
// of them off fails the test under CI=true and skips it otherwise (an
// older test cluster: `services.sh up` rewrites its settings, see
// deployments/testenv/README.md).
func DurablePostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("testenv: PostgreSQL: %v", err)
	}
	defer c.Close(context.Background()) //nolint:errcheck // nothing to do about a failed goodbye
	var off []string
	for _, name := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		var v string
		if err := c.QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil {
			t.Fatalf("testenv: PostgreSQL: SHOW %s: %v", name, err)
		}
		if v == "off" {
			off = append(off, name+"=off")
		}
	}
	if len(off) > 0 {
		msg := fmt.Sprintf("testenv: this fault test needs a durable PostgreSQL; the server runs with %s (restart it with deployments/testenv/services.sh up, which writes fsync, synchronous_commit and full_page_writes on)",
			strings.Join(off, ", "))
		if isCI(os.Getenv("CI")) {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dsn
}
