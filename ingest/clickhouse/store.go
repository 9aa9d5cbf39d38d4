// Package clickhouse is the ClickHouse implementation of ingest.Store and
// billing.UsageSource, written for ClickHouse 18.16 and current releases: native
// protocol, explicit column lists in every INSERT, DateTime plus millisecond
// integer columns (no DateTime64), GROUP BY … max() instead of trusting merges.
package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// Config configures a Store.
type Config struct {
	Addr     string // host:port of the native protocol
	Database string
	Username string
	Password string
	Logger   *slog.Logger
	// DialTimeout and ReadTimeout bound each connection attempt and each query.
	DialTimeout time.Duration
	ReadTimeout time.Duration
	// Migrate applies pending migrations on Open.
	Migrate bool
	// RawRetentionDays sets a TTL on raw samples at table creation (servers that
	// support TTL; 0: keep forever).
	RawRetentionDays int
}

var identPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("clickhouse: addr is required"))
	}
	if !identPattern.MatchString(c.Database) {
		errs = append(errs, fmt.Errorf("clickhouse: database %q: want letters, digits and underscores", c.Database))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("clickhouse: logger is required"))
	}
	if c.RawRetentionDays < 0 {
		errs = append(errs, errors.New("clickhouse: raw retention must be >= 0 days"))
	}
	return errors.Join(errs...)
}

// Store writes batches to and bills from one ClickHouse database.
type Store struct {
	cfg  Config
	conn driver.Conn
	db   string // quoted database name
}

// Open connects (the database need not exist yet when cfg.Migrate is set).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 5 * time.Minute
	}
	// Connect to the default database and qualify every table with cfg.Database,
	// so that one connection can create the database it then uses.
	conn, err := ch.Open(&ch.Options{
		Addr:         []string{cfg.Addr},
		Auth:         ch.Auth{Username: cfg.Username, Password: cfg.Password},
		DialTimeout:  cfg.DialTimeout,
		ReadTimeout:  cfg.ReadTimeout,
		Compression:  &ch.Compression{Method: ch.CompressionLZ4},
		MaxOpenConns: 8,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot connect to ClickHouse at %s: %w", cfg.Addr, err)
	}
	s := &Store{cfg: cfg, conn: conn, db: "`" + cfg.Database + "`"}
	if err := conn.Ping(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("cannot reach ClickHouse at %s: %w", cfg.Addr, err)
	}
	if cfg.Migrate {
		if _, err := s.Migrate(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	return s, nil
}

// Conn is the underlying connection (for tests and tools).
func (s *Store) Conn() driver.Conn { return s.conn }

// Close implements ingest.Store.
func (s *Store) Close() error { return s.conn.Close() }

func (s *Store) table(name string) string { return s.db + "." + name }

const rawColumns = "ts, start_ms, interval_ms, node, gpu_uuid, gpu_model, instance_id, profile, project, user, util, mem_used_bytes, mem_total_bytes, processes, util_source, ingested_at"

// Write implements ingest.Store: raw samples, then occupancy and idle runs, each
// one native batch insert. It returns nil only when all three were accepted; on
// error the caller retries the whole batch, which is harmless (ReplacingMergeTree
// and readers' max(end_ms) absorb the repeats).
func (s *Store) Write(ctx context.Context, b *ingest.Batch) error {
	if len(b.Samples) > 0 {
		if err := s.writeRaw(ctx, b.Samples); err != nil {
			return err
		}
	}
	if len(b.Occupancy) > 0 {
		if err := s.writeRuns(ctx, "occupancy", b.Occupancy, nil); err != nil {
			return err
		}
	}
	if len(b.Idle) > 0 {
		runs := make([]ingest.Run, len(b.Idle))
		for i := range b.Idle {
			runs[i] = b.Idle[i].Run
		}
		if err := s.writeRuns(ctx, "idle_runs", runs, b.Idle); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) writeRaw(ctx context.Context, samples []schemas.Sample) error {
	n := len(samples)
	var (
		ts                                                       = make([]time.Time, n)
		startMS, intervalMS, memUsed, memTotal, procs            = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		node, gpuUUID, model, inst, profile, project, user, usrc = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		util                                                     = make([]*float64, n)
		ingested                                                 = make([]time.Time, n)
		utilVals                                                 = make([]float64, n)
	)
	now := time.Now().UTC().Truncate(time.Second)
	for i := range samples {
		x := &samples[i]
		ts[i] = time.UnixMilli(x.StartMS - x.StartMS%1000).UTC()
		if x.StartMS < 0 || ts[i].Unix() > 4294967295 {
			ts[i] = time.Unix(0, 0).UTC() // outside DateTime's range; start_ms stays exact
		}
		startMS[i], intervalMS[i] = x.StartMS, x.IntervalMS
		node[i], gpuUUID[i], model[i], inst[i], profile[i] = x.Node, x.GPUUUID, x.GPUModel, x.InstanceID, x.Profile
		project[i], user[i], usrc[i] = x.Project, x.User, x.UtilSource
		if x.UtilKnown {
			utilVals[i] = x.Util
			util[i] = &utilVals[i]
		}
		memUsed[i], memTotal[i], procs[i] = x.MemUsed, x.MemTotal, x.Processes
		ingested[i] = now
	}
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table("raw_samples")+" ("+rawColumns+")")
	if err != nil {
		return fmt.Errorf("cannot prepare insert into raw_samples: %w", err)
	}
	defer func() { _ = batch.Close() }()
	cols := []any{ts, startMS, intervalMS, node, gpuUUID, model, inst, profile, project, user, util, memUsed, memTotal, procs, usrc, ingested}
	for i, c := range cols {
		if err := batch.Column(i).Append(c); err != nil {
			return fmt.Errorf("cannot append raw_samples column %d: %w", i, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("cannot insert %d rows into raw_samples: %w", n, err)
	}
	return nil
}

func (s *Store) writeRuns(ctx context.Context, table string, runs []ingest.Run, idle []ingest.IdleRun) error {
	n := len(runs)
	start := make([]time.Time, n)
	project, user, inst, model, profile := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	startMS, endMS := make([]int64, n), make([]int64, n)
	for i, r := range runs {
		start[i] = time.UnixMilli(ingest.MonthStartMS(r.StartMS)).UTC()
		project[i], user[i], inst[i], model[i], profile[i] = r.Key.Project, r.Key.User, r.Key.InstanceID, r.Key.GPUModel, r.Key.Profile
		startMS[i], endMS[i] = r.StartMS, r.EndMS
	}
	cols := []any{start, project, user, inst, model, profile}
	q := "INSERT INTO " + s.table(table) + " (start, project, user, instance_id, gpu_model, profile"
	if idle != nil {
		known, util := make([]uint8, n), make([]float64, n)
		for i := range idle {
			if idle[i].UtilKnown {
				known[i] = 1
			}
			util[i] = idle[i].Util
		}
		cols = append(cols, known, util)
		q += ", util_known, util"
	}
	cols = append(cols, startMS, endMS)
	q += ", start_ms, end_ms)"
	batch, err := s.conn.PrepareBatch(ctx, q)
	if err != nil {
		return fmt.Errorf("cannot prepare insert into %s: %w", table, err)
	}
	defer func() { _ = batch.Close() }()
	for i, c := range cols {
		if err := batch.Column(i).Append(c); err != nil {
			return fmt.Errorf("cannot append %s column %d: %w", table, i, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("cannot insert %d rows into %s: %w", n, table, err)
	}
	return nil
}

// Scan implements billing.UsageSource. It reads the occupancy runs of the scan
// window (the period widened by the gap tolerance on both sides) and the idle
// runs overlapping the period, streaming them into acc: memory grows with the
// number of sessions, not with raw samples, and no raw sample is read.
func (s *Store) Scan(ctx context.Context, cat *schemas.Catalog, p billing.Period, acc *billing.Accumulator) error {
	lo, hi := billing.ScanWindow(cat, p)
	// Runs never cross a UTC month boundary, so a run ending at or after lo starts
	// in lo's UTC month or later (lo-1: a run ending exactly at lo counts).
	partLo := ingest.MonthStartMS(lo-1) / 1000
	key := "project, user, instance_id, gpu_model, profile"
	q := "SELECT " + key + ", start_ms, max(end_ms) AS e FROM " + s.table("occupancy") +
		" WHERE start >= toDateTime(" + itoa(partLo) + ") AND start_ms <= " + itoa(hi) +
		" GROUP BY " + key + ", start_ms HAVING e >= " + itoa(lo) +
		" ORDER BY " + key + ", start_ms"
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("cannot read occupancy: %w", err)
	}
	var k billing.Key
	var st, en int64
	for rows.Next() {
		if err := rows.Scan(&k.Project, &k.User, &k.InstanceID, &k.GPUModel, &k.Profile, &st, &en); err != nil {
			_ = rows.Close()
			return fmt.Errorf("cannot read occupancy row: %w", err)
		}
		acc.AddOccupancy(k, st, en, false)
	}
	if err := rows.Err(); err != nil {
		_ = rows.Close()
		return fmt.Errorf("cannot read occupancy: %w", err)
	}
	_ = rows.Close()

	// Idle candidates: null util (always idle) or util below the largest
	// threshold of the catalog, pre-filtered loosely here and checked exactly in
	// Go with the project's own threshold (no float text round trip decides).
	p0, p1 := p.StartMS(), p.EndMS()
	maxT := strconv.FormatFloat(billing.MaxIdleThreshold(cat)+1e-9, 'g', -1, 64)
	q = "SELECT " + key + ", util_known, util, start_ms, max(end_ms) AS e FROM " + s.table("idle_runs") +
		" WHERE start >= toDateTime(" + itoa(ingest.MonthStartMS(p0-1)/1000) + ") AND start_ms < " + itoa(p1) +
		" AND (util_known = 0 OR util < " + maxT + ")" +
		" GROUP BY " + key + ", util_known, util, start_ms HAVING e > " + itoa(p0) +
		" ORDER BY " + key + ", start_ms"
	rows, err = s.conn.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("cannot read idle runs: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var r ingest.IdleRun
	var known uint8
	for rows.Next() {
		if err := rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &known, &r.Util, &r.StartMS, &r.EndMS); err != nil {
			return fmt.Errorf("cannot read idle run: %w", err)
		}
		r.UtilKnown = known == 1
		ingest.FeedIdle(acc, cat, p, r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot read idle runs: %w", err)
	}
	return nil
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// Database is the database the store uses.
func (s *Store) Database() string { return s.cfg.Database }
