// Package storedsn opens an ingest backend from a URL:
//
//	clickhouse://host:port/database   ClickHouse, native protocol (user and
//	                                  password may be given as user:pass@;
//	                                  ?compress=lz4|zstd|none, default none
//	                                  on a loopback address, lz4 otherwise;
//	                                  ?cluster=NAME: a store replicated and
//	                                  sharded over the remote_servers cluster
//	                                  NAME, read through the server named;
//	                                  ?quorum_timeout=60s: its writes'
//	                                  insert_quorum_timeout)
//	sqlite:///path/to/file.db          embedded SQLite (sqlite://relative.db too)
package storedsn

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/ingest/sqlite"
)

// Mode says whether opening may create the store.
type Mode uint8

const (
	// Read opens an existing store (billing): it fails, creating nothing,
	// when the store, its database or its schema is missing, older or newer
	// than this build's. SQLite files are opened read-only.
	Read Mode = iota
	// Write opens a store to ingest into: a SQLite file is created and
	// migrated if needed; a ClickHouse database is created and migrated when
	// Options.Migrate is set, and must otherwise hold this build's schema.
	Write
)

// Options are the settings that do not fit in the URL.
type Options struct {
	Logger           *slog.Logger
	Mode             Mode   // Read unless set
	Migrate          bool   // Write mode, ClickHouse: create the database and apply pending migrations (SQLite always does)
	RawRetentionDays int    // ClickHouse: raw sample TTL at table creation
	Cluster          string // ClickHouse: as ?cluster=NAME (which, when given too, must agree)
}

// Open parses dsn and opens the backend it names. Errors that no retry cures
// (a missing store, a read-only file, a schema newer than this build) are
// ingest.Permanent.
func Open(ctx context.Context, dsn string, opt Options) (ingest.Backend, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("store %q: %w", dsn, err)
	}
	switch u.Scheme {
	case "clickhouse":
		db := strings.Trim(u.Path, "/")
		if u.Host == "" || db == "" {
			return nil, fmt.Errorf("store %q: want clickhouse://host:port/database", dsn)
		}
		cfg := clickhouse.Config{Addr: u.Host, Database: db, Logger: opt.Logger, Migrate: opt.Mode == Write && opt.Migrate, RawRetentionDays: opt.RawRetentionDays}
		for k, v := range u.Query() {
			switch k {
			case "compress":
				cfg.Compression = v[len(v)-1]
			case "cluster":
				cfg.Cluster = v[len(v)-1]
			case "quorum_timeout":
				d, err := time.ParseDuration(v[len(v)-1])
				if err != nil || d <= 0 {
					return nil, fmt.Errorf("store %q: quorum_timeout %q: want a positive duration such as 60s", dsn, v[len(v)-1])
				}
				cfg.QuorumTimeout = d
			default:
				return nil, fmt.Errorf("store %q: unknown parameter %q (want compress, cluster or quorum_timeout)", dsn, k)
			}
		}
		if opt.Cluster != "" {
			if cfg.Cluster != "" && cfg.Cluster != opt.Cluster {
				return nil, fmt.Errorf("store %q names cluster %q, and %q is asked for", dsn, cfg.Cluster, opt.Cluster)
			}
			cfg.Cluster = opt.Cluster
		}
		if u.User != nil {
			cfg.Username = u.User.Username()
			cfg.Password, _ = u.User.Password()
		}
		return clickhouse.Open(ctx, cfg)
	case "sqlite":
		if opt.Cluster != "" {
			return nil, fmt.Errorf("store %q: a cluster (%s) is for ClickHouse stores only", dsn, opt.Cluster)
		}
		path := u.Host + u.Path // sqlite:///abs.db → /abs.db; sqlite://rel.db → rel.db
		if path == "" {
			return nil, fmt.Errorf("store %q: want sqlite:///path/to/file.db", dsn)
		}
		return sqlite.Open(ctx, sqlite.Config{Path: path, Logger: opt.Logger, ReadOnly: opt.Mode == Read})
	}
	return nil, fmt.Errorf("store %q: unknown scheme %q (want clickhouse:// or sqlite://)", dsn, u.Scheme)
}
