//go:build !collector

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/cardhour/cardhour/ingest/clickhouse"
)

func runMigrate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("clickhouse", "", "ClickHouse native address host:port")
	db := fs.String("database", "cardhour", "database to create and migrate")
	user := fs.String("user", "", "ClickHouse user (default: the server's default user)")
	password := fs.String("password", "", "ClickHouse password")
	retention := fs.Int("raw-retention-days", 0, "TTL of raw samples, set when the table is created (servers >= 19.6; 0: keep forever)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour migrate --clickhouse HOST:PORT --database DB")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *addr == "" {
		fmt.Fprintln(stderr, "cardhour migrate: --clickhouse is required")
		fs.Usage()
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := clickhouse.Open(ctx, clickhouse.Config{Addr: *addr, Database: *db, Username: *user, Password: *password,
		Logger: log, RawRetentionDays: *retention})
	if err != nil {
		fmt.Fprintln(stderr, "cardhour migrate:", err)
		return 1
	}
	defer st.Close() //nolint:errcheck // nothing written is pending at close
	res, err := st.Migrate(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "cardhour migrate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "ClickHouse %s (TTL: %v, LowCardinality: %v): database %s at schema version %d, applied now: %v\n",
		res.ServerVersion, res.Features.TTL, res.Features.LowCardinality, *db, res.Current, res.Applied)
	return 0
}
