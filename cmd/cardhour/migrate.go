//go:build !collector

package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os/signal"
	"syscall"
	"time"

	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
)

func runMigrate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "", "store to create or upgrade: clickhouse://host:port/db or sqlite:///path.db")
	state := fs.String("state", "", "state store to create or upgrade: sqlite:///path.db or postgres://user@host:port/db (the only command besides serve and demo that creates one)")
	clusterName := fs.String("cluster", "", "ClickHouse: create or upgrade the store on this remote_servers cluster: replicated local tables on every server, Distributed tables over them (every replica must answer; see docs/scale.md)")
	retention := fs.Int("raw-retention-days", 0, "ClickHouse: TTL of raw samples, set when the table is created (servers >= 19.6; 0: keep forever)")
	// Deprecated spellings of --store clickhouse://[user:password@]HOST:PORT/DB.
	addr := fs.String("clickhouse", "", "deprecated: use --store clickhouse://HOST:PORT/DB")
	db := fs.String("database", "", "deprecated: use --store clickhouse://HOST:PORT/DB")
	user := fs.String("user", "", "deprecated: use --store clickhouse://USER:PASSWORD@HOST:PORT/DB")
	password := fs.String("password", "", "deprecated: use --store clickhouse://USER:PASSWORD@HOST:PORT/DB")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour migrate [--store DSN [--cluster NAME]] [--state DSN]   (--store clickhouse://host:port/db or sqlite:///path.db; --state sqlite:///path.db or postgres://…)")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case *store != "" && (*addr != "" || *db != "" || *user != "" || *password != ""):
		fmt.Fprintln(stderr, "cardhour migrate: give either --store or the deprecated --clickhouse/--database/--user/--password, not both")
		fs.Usage()
		return 2
	case *store == "" && *addr == "" && *state == "":
		fmt.Fprintln(stderr, "cardhour migrate: --store or --state is required")
		fs.Usage()
		return 2
	case *store == "" && *addr != "":
		u := url.URL{Scheme: "clickhouse", Host: *addr, Path: "/" + cmp.Or(*db, "cardhour")}
		if *user != "" || *password != "" {
			u.User = url.UserPassword(*user, *password)
		}
		*store = u.String()
		u.User = nil
		fmt.Fprintf(stderr, "cardhour migrate: --clickhouse, --database, --user and --password are deprecated; use --store %s\n", u.String())
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *state != "" {
		led, err := ledgerdsn.Open(ctx, *state, ledgerdsn.Options{Clock: time.Now})
		if err != nil {
			fmt.Fprintln(stderr, "cardhour migrate:", err)
			return 1
		}
		_ = led.Close()
		fmt.Fprintf(stdout, "state store %s: ledger schema up to date\n", redactDSN(*state))
	}
	if *store == "" {
		return 0
	}
	st, err := storedsn.Open(ctx, *store, storedsn.Options{Logger: log, Mode: storedsn.Write, Migrate: true, RawRetentionDays: *retention, Cluster: *clusterName})
	if err != nil {
		fmt.Fprintln(stderr, "cardhour migrate:", err)
		return 1
	}
	defer st.Close() //nolint:errcheck // nothing written is pending at close
	switch s := st.(type) {
	case *clickhouse.Store:
		res := s.Migrated()
		on := ""
		if c := s.Cluster(); c != "" {
			on = " on cluster " + c
		}
		fmt.Fprintf(stdout, "ClickHouse %s (TTL: %v, LowCardinality: %v): database %s%s at schema version %d, applied now: %v\n",
			res.ServerVersion, res.Features.TTL, res.Features.LowCardinality, s.Database(), on, res.Current, res.Applied)
	case *sqlite.Store:
		from, to := s.Migrated()
		fmt.Fprintf(stdout, "SQLite %s at schema version %d (was %d)\n", s.Path(), to, from)
	}
	return 0
}

// redactDSN is dsn without its password, for messages.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return dsn
}
