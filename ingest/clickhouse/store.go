// Package clickhouse is the ClickHouse implementation of ingest.Store and
// reads.UsageSource, written for ClickHouse 18.16 and current releases: native
// protocol, explicit column lists in every INSERT, DateTime plus millisecond
// integer columns (no DateTime64), GROUP BY … max() instead of trusting merges.
package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"sync"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

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
	// Compression of the data sent and received: lz4, zstd or none; unset,
	// none for a server on a loopback address (compressing would cost both
	// ends CPU and save no network) and lz4 for any other.
	Compression string
	// Migrate creates the database if needed and applies pending migrations on
	// Open. Without it, Open checks that the database holds this build's schema
	// and fails (ingest.Permanent) when it is missing, older or newer.
	Migrate bool
	// RawRetentionDays sets a TTL on raw samples at table creation (servers that
	// support TTL; 0: keep forever).
	RawRetentionDays int
	// Cluster names a cluster of the server's remote_servers: the store is
	// replicated local tables on every server of it and Distributed tables
	// over them (see cluster.go); Addr is the server reads go through.
	Cluster string
	// QuorumTimeout is a cluster store's insert_quorum_timeout (default 60 s).
	QuorumTimeout time.Duration
	// ClockSkew is how far the servers' clocks may differ (default 5 s;
	// negative: 0): an hour written less than this before a computation of
	// its sums began counts as written after it (utilhours.go).
	ClockSkew time.Duration
}

var compressions = map[string]ch.CompressionMethod{"": ch.CompressionLZ4, "lz4": ch.CompressionLZ4, "zstd": ch.CompressionZSTD, "none": ch.CompressionNone}

// CompressionMethod is the compression a connection of c uses: the one
// named, or, none named, none for a loopback address and lz4 for any other.
func (c *Config) CompressionMethod() ch.CompressionMethod {
	if c.Compression != "" {
		return compressions[c.Compression]
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		host = c.Addr
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return ch.CompressionNone
	}
	return ch.CompressionLZ4
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
	if _, ok := compressions[c.Compression]; !ok {
		errs = append(errs, fmt.Errorf("clickhouse: compression %q: want lz4, zstd or none", c.Compression))
	}
	if c.RawRetentionDays < 0 {
		errs = append(errs, errors.New("clickhouse: raw retention must be >= 0 days"))
	}
	if c.Cluster != "" && !identPattern.MatchString(c.Cluster) {
		errs = append(errs, fmt.Errorf("clickhouse: cluster %q: want letters, digits and underscores", c.Cluster))
	}
	return errors.Join(errs...)
}

// Store writes batches to and bills from one ClickHouse database.
type Store struct {
	cfg      Config
	conn     driver.Conn
	db       string          // quoted database name
	migrated MigrationResult // what Open's migration did
	cluster  *cluster        // nil unless cfg.Cluster
}

// Open connects and migrates (cfg.Migrate) or checks the schema (otherwise):
// readers never create anything.
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
	if cfg.QuorumTimeout == 0 {
		cfg.QuorumTimeout = time.Minute
	}
	// Connect to the default database and qualify every table with cfg.Database,
	// so that one connection can create the database it then uses.
	conn, err := ch.Open(&ch.Options{
		Addr:        []string{cfg.Addr},
		Auth:        ch.Auth{Username: cfg.Username, Password: cfg.Password},
		DialTimeout: cfg.DialTimeout,
		ReadTimeout: cfg.ReadTimeout,
		Compression: &ch.Compression{Method: cfg.CompressionMethod()},
		// Each consumer holds at most five connections at once: the raw
		// insert of the batch being read and of the one whose insert is
		// ending, that one's activity rollup, and at a commit the intervals
		// and the latest samples. Reads take two more.
		MaxOpenConns: 32,
		// A connection's encoding buffer grows to its largest block (a rollup
		// insert of tens of thousands of rows: megabytes); idle connections
		// would keep it. A raw stream holds its connection, and reuses the
		// buffer, for its whole batch.
		FreeBufOnConnRelease: true,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot connect to ClickHouse at %s: %w", cfg.Addr, unavailable(err))
	}
	s := &Store{cfg: cfg, conn: classifiedConn{conn}, db: "`" + cfg.Database + "`"}
	if err := s.conn.Ping(ctx); err != nil {
		_ = conn.Close()
		return nil, classify(fmt.Errorf("cannot reach ClickHouse at %s: %w", cfg.Addr, err))
	}
	if cfg.Cluster != "" {
		if s.cluster, err = s.discoverCluster(ctx); err == nil {
			err = s.checkSipHash(ctx)
		}
		if err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	if cfg.Migrate {
		s.migrated, err = s.Migrate(ctx)
	} else {
		err = s.CheckSchema(ctx)
	}
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Migrated is what Open's migration did (cfg.Migrate).
func (s *Store) Migrated() MigrationResult { return s.migrated }

// Conn is the connection, its errors classified (for tests and tools).
func (s *Store) Conn() driver.Conn { return s.conn }

// Close implements ingest.Store.
func (s *Store) Close() error {
	if s.cluster != nil {
		s.cluster.close()
	}
	return s.conn.Close()
}

func (s *Store) table(name string) string { return s.db + "." + name }

const rawColumns = "ts, start_ms, interval_ms, node, gpu_uuid, gpu_model, instance_id, profile, project, user, util, mem_used_bytes, mem_total_bytes, processes, util_source, holder_ref, share_kind, share_mem, share_cores, ingested_at"

// Write implements ingest.Store: raw samples, occupancy runs, idle runs (and
// their packs, schemas.RunPack) and latest samples, each one native columnar batch insert; the raw insert, the
// two rollup inserts and the latest samples' insert run concurrently on
// separate connections; once the raw insert is accepted, the batch's hours are
// marked written (sample_hours). It returns nil only when all were accepted; on error
// the caller retries the whole batch, which is harmless (ReplacingMergeTree and
// the readers' max(end_ms) and argMax(…, start_ms) absorb the repeats).
func (s *Store) Write(ctx context.Context, b *ingest.Batch) error {
	var rollErr, latestErr error
	done := make(chan struct{})
	latestDone := make(chan struct{})
	go func() {
		defer close(latestDone)
		if len(b.Latest) > 0 {
			latestErr = s.writeLatest(ctx, b.Latest)
		}
		if latestErr == nil {
			latestErr = s.writeActivity(ctx, ingest.ActivityOf(b.Samples))
		}
	}()
	go func() {
		defer close(done)
		if len(b.Occupancy) > 0 {
			if rollErr = s.writeOccupancy(ctx, b.Occupancy); rollErr != nil {
				return
			}
		}
		if len(b.Idle) > 0 {
			if rollErr = s.writeIdle(ctx, b.Idle); rollErr != nil {
				return
			}
		}
		rollErr = s.writePacks(ctx, schemas.PackRuns(b.Occupancy, b.Idle))
	}()
	var rawErr error
	if len(b.Samples) > 0 {
		if rawErr = s.writeRaw(ctx, b.Samples); rawErr == nil {
			rawErr = s.markHours(ctx, hoursOf(b.Samples))
		}
	}
	<-done
	<-latestDone
	return errors.Join(rawErr, rollErr, latestErr)
}

// rawCols are the columns of one raw insert, kept between batches so that a
// worker's steady state allocates nothing per batch.
type rawCols struct {
	ts, ingested                                             []time.Time
	startMS, intervalMS, memUsed, memTotal, procs            []int64
	node, gpuUUID, model, inst, profile, project, user, usrc []string
	ref, shareKind                                           []string
	util, shareMem, shareCores                               []*float64
	utilVals, memVals, coresVals                             []float64
}

var rawPool = sync.Pool{New: func() any { return new(rawCols) }}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (s *Store) writeRaw(ctx context.Context, samples []schemas.Sample) error {
	c := rawPool.Get().(*rawCols)
	defer c.release()
	c.fill(samples)
	return s.insert(ctx, "raw_samples", rawColumns, len(samples), c.columns()...)
}

// fill sets the columns to samples' values.
func (c *rawCols) fill(samples []schemas.Sample) {
	n := len(samples)
	c.ts, c.ingested = grow(c.ts, n), grow(c.ingested, n)
	c.startMS, c.intervalMS, c.memUsed, c.memTotal, c.procs = grow(c.startMS, n), grow(c.intervalMS, n), grow(c.memUsed, n), grow(c.memTotal, n), grow(c.procs, n)
	c.node, c.gpuUUID, c.model, c.inst = grow(c.node, n), grow(c.gpuUUID, n), grow(c.model, n), grow(c.inst, n)
	c.profile, c.project, c.user, c.usrc = grow(c.profile, n), grow(c.project, n), grow(c.user, n), grow(c.usrc, n)
	c.util, c.utilVals = grow(c.util, n), grow(c.utilVals, n)
	c.ref, c.shareKind = grow(c.ref, n), grow(c.shareKind, n)
	c.shareMem, c.shareCores, c.memVals, c.coresVals = grow(c.shareMem, n), grow(c.shareCores, n), grow(c.memVals, n), grow(c.coresVals, n)
	now := time.Now().UTC().Truncate(time.Second)
	for i := range samples {
		x := &samples[i]
		sec := x.StartMS / 1000
		if x.StartMS < 0 || sec > 4294967295 {
			sec = 0 // outside DateTime's range; start_ms stays exact
		}
		c.ts[i] = time.Unix(sec, 0).UTC()
		c.startMS[i], c.intervalMS[i] = x.StartMS, x.IntervalMS
		c.node[i], c.gpuUUID[i], c.model[i], c.inst[i], c.profile[i] = x.Node, x.GPUUUID, x.GPUModel, x.InstanceID, x.Profile
		c.project[i], c.user[i], c.usrc[i], c.ref[i] = x.Project, x.User, x.UtilSource, x.HolderRef
		c.util[i] = nil
		if x.UtilKnown {
			c.utilVals[i] = x.Util
			c.util[i] = &c.utilVals[i]
		}
		c.memUsed[i], c.memTotal[i], c.procs[i] = x.MemUsed, x.MemTotal, x.Processes
		c.shareKind[i] = x.ShareKind
		c.memVals[i], c.coresVals[i] = x.ShareMem, x.ShareCores
		c.shareMem[i], c.shareCores[i] = fraction(&c.memVals[i]), fraction(&c.coresVals[i])
		c.ingested[i] = now
	}
}

// fraction is a share fraction as raw_samples keeps it: NULL when absent
// (0 in schemas.Sample).
func fraction(f *float64) *float64 {
	if *f == 0 {
		return nil
	}
	return f
}

// columns are the columns in the order of rawColumns.
func (c *rawCols) columns() []any {
	return []any{c.ts, c.startMS, c.intervalMS, c.node, c.gpuUUID, c.model, c.inst, c.profile,
		c.project, c.user, c.util, c.memUsed, c.memTotal, c.procs, c.usrc, c.ref, c.shareKind, c.shareMem, c.shareCores, c.ingested}
}

// release drops the references to the batch's strings and pools c.
func (c *rawCols) release() {
	for _, col := range [][]string{c.node, c.gpuUUID, c.model, c.inst, c.profile, c.project, c.user, c.usrc, c.ref, c.shareKind} {
		clear(col)
	}
	rawPool.Put(c)
}

// BeginRaw implements ingest.RawStreamer: one INSERT INTO raw_samples that
// receives each piece as a block while the batch is still being read. The
// server squashes the blocks of one insert into parts as large as a one-block
// insert would make, and acknowledges the insert only at its end (Finish).
func (s *Store) BeginRaw(ctx context.Context) (ingest.RawStream, error) {
	if s.cluster != nil {
		return &bufferedRaw{s: s, ctx: ctx}, nil
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table("raw_samples")+" ("+rawColumns+")")
	if err != nil {
		return nil, classify(fmt.Errorf("cannot prepare insert into raw_samples: %w", err))
	}
	return &rawStream{b: b, c: rawPool.Get().(*rawCols), s: s, ctx: ctx}, nil
}

type rawStream struct {
	b    driver.Batch
	c    *rawCols // nil once released
	n    int      // rows sent
	done bool     // sent or aborted
	// The data-quality rollup of the samples appended, written by Finish.
	s   *Store
	ctx context.Context
	act ingest.Activity
}

func (r *rawStream) Append(samples []schemas.Sample) error {
	r.act.Add(samples)
	r.c.fill(samples)
	for i, col := range r.c.columns() {
		if err := r.b.Column(i).Append(col); err != nil {
			return fmt.Errorf("cannot append raw_samples column %d: %w", i, err)
		}
	}
	// Flush sends the block and empties the batch's columns, keeping their
	// capacity: the next piece is encoded into the same buffers.
	if err := r.b.Flush(); err != nil {
		return classify(fmt.Errorf("cannot send %d rows to raw_samples: %w", len(samples), err))
	}
	r.n += len(samples)
	return nil
}

// Finish ends the insert, and inserts the batch's data-quality rollup on
// another connection meanwhile (as Write does with the runs), then marks the
// batch's hours written (sample_hours): nil only when all were accepted.
func (r *rawStream) Finish() error {
	r.done = true
	// Every row is sent: the columns are not needed while the server ends
	// the insert (the next batch streams meanwhile, with columns of its own).
	r.releaseCols()
	r.act.Seal()
	act := make(chan error, 1)
	go func() { act <- r.s.writeActivity(r.ctx, &r.act) }()
	err := r.b.Send()
	actErr := <-act
	if err != nil {
		return classify(fmt.Errorf("cannot insert %d rows into raw_samples: %w", r.n, err))
	}
	if actErr != nil {
		return actErr
	}
	return r.s.markHours(r.ctx, hoursOfActivity(&r.act))
}

// Abort ends an unfinished insert by closing its connection: the server
// discards the blocks it has not yet written (a partly written insert is
// written again whole by the caller, which is harmless).
func (r *rawStream) Abort() {
	if !r.done {
		r.done = true
		_ = r.b.Abort()
	}
	r.releaseCols()
}

func (r *rawStream) releaseCols() {
	if r.c != nil {
		r.c.release()
		r.c = nil
	}
}

// insert sends one columnar batch: cols in the order of the column list.
func (s *Store) insert(ctx context.Context, table, columns string, n int, cols ...any) error {
	if s.cluster != nil {
		return s.insertCluster(ctx, table, columns, n, cols...)
	}
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table(table)+" ("+columns+")")
	if err != nil {
		return classify(fmt.Errorf("cannot prepare insert into %s: %w", table, err))
	}
	defer func() { _ = batch.Close() }()
	for i, c := range cols {
		if err := batch.Column(i).Append(c); err != nil {
			return fmt.Errorf("cannot append %s column %d: %w", table, i, err)
		}
	}
	if err := batch.Send(); err != nil {
		return classify(fmt.Errorf("cannot insert %d rows into %s: %w", n, table, err))
	}
	return nil
}

// keyCols are the key columns of a rollup insert.
func keyCols(n int, key func(i int) (*schemas.Key, int64)) (start []time.Time, project, user, inst, model, profile []string, startMS []int64) {
	start = make([]time.Time, n)
	project, user, inst, model, profile = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	startMS = make([]int64, n)
	for i := range n {
		k, st := key(i)
		start[i] = time.UnixMilli(ingest.MonthStartMS(st)).UTC()
		project[i], user[i], inst[i], model[i], profile[i] = k.Project, k.User, k.InstanceID, k.GPUModel, k.Profile
		startMS[i] = st
	}
	return
}

func (s *Store) writeOccupancy(ctx context.Context, runs []schemas.Run) error {
	n := len(runs)
	start, project, user, inst, model, profile, startMS := keyCols(n, func(i int) (*schemas.Key, int64) { return &runs[i].Key, runs[i].StartMS })
	endMS := make([]int64, n)
	for i := range runs {
		endMS[i] = runs[i].EndMS
	}
	return s.insert(ctx, "occupancy", "start, project, user, instance_id, gpu_model, profile, start_ms, end_ms", n,
		start, project, user, inst, model, profile, startMS, endMS)
}

func (s *Store) writeIdle(ctx context.Context, runs []schemas.IdleRun) error {
	n := len(runs)
	start, project, user, inst, model, profile, startMS := keyCols(n, func(i int) (*schemas.Key, int64) { return &runs[i].Key, runs[i].StartMS })
	endMS, class, lo, hi := make([]int64, n), make([]uint8, n), make([]float64, n), make([]float64, n)
	for i := range runs {
		endMS[i], class[i], lo[i], hi[i] = runs[i].EndMS, runs[i].Class, runs[i].MinUtil, runs[i].MaxUtil
	}
	return s.insert(ctx, "idle_spans", "start, project, user, instance_id, gpu_model, profile, class, min_util, max_util, start_ms, end_ms", n,
		start, project, user, inst, model, profile, class, lo, hi, startMS, endMS)
}

// writeActivity inserts the data-quality rollup of a batch's samples
// (ingest.Activity): its node minutes, then its busy unheld samples. A
// replay inserts rows that readers collapse (GROUP BY, FINAL).
func (s *Store) writeActivity(ctx context.Context, a *ingest.Activity) error {
	if n := len(a.Nodes); n > 0 {
		ts, minute, node := make([]time.Time, n), make([]int64, n), make([]string, n)
		for i, m := range a.Nodes {
			ts[i], minute[i], node[i] = dateTime(m.MinuteMS), m.MinuteMS, m.Node
		}
		if err := s.insert(ctx, "node_minutes", "ts, minute_ms, node", n, ts, minute, node); err != nil {
			return err
		}
	}
	n := len(a.Unheld)
	if n == 0 {
		return nil
	}
	ts, ingested := make([]time.Time, n), make([]time.Time, n)
	startMS, intervalMS, procs := make([]int64, n), make([]int64, n), make([]int64, n)
	inst, user, node := make([]string, n), make([]string, n), make([]string, n)
	util, utilVals := make([]*float64, n), make([]float64, n)
	now := time.Now().UTC().Truncate(time.Second)
	for i := range a.Unheld {
		x := &a.Unheld[i]
		ts[i], ingested[i] = dateTime(x.StartMS), now
		startMS[i], intervalMS[i], procs[i] = x.StartMS, x.IntervalMS, x.Processes
		inst[i], user[i], node[i] = x.InstanceID, x.User, x.Node
		if x.UtilKnown {
			utilVals[i] = x.Util
			util[i] = &utilVals[i]
		}
	}
	return s.insert(ctx, "unheld_busy", "ts, start_ms, instance_id, user, node, interval_ms, processes, util, ingested_at", n,
		ts, startMS, inst, user, node, intervalMS, procs, util, ingested)
}

// dateTime is the DateTime column of a time in milliseconds, 0 outside
// DateTime's range (the millisecond column stays exact), as for raw samples.
func dateTime(ms int64) time.Time {
	sec := ms / 1000
	if ms < 0 || sec > 4294967295 {
		sec = 0
	}
	return time.Unix(sec, 0).UTC()
}

const latestColumns = "instance_id, start_ms, interval_ms, node, gpu_uuid, gpu_model, profile, project, user, util, util_known, processes, holder_ref, share_kind, share_mem, share_cores"

// writeLatest inserts the latest held samples (unheld ones, which no
// compactor emits, are skipped: the table holds held samples only).
func (s *Store) writeLatest(ctx context.Context, samples []schemas.Sample) error {
	n := len(samples)
	inst, node, uuid, model, profile, project, user, ref := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n),
		make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	startMS, intervalMS, procs, util, known := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]float64, 0, n), make([]uint8, 0, n)
	shareKind, shareMem, shareCores := make([]string, 0, n), make([]float64, 0, n), make([]float64, 0, n)
	for i := range samples {
		x := &samples[i]
		if x.Project == "" {
			continue
		}
		inst, node, uuid, model, profile = append(inst, x.InstanceID), append(node, x.Node), append(uuid, x.GPUUUID), append(model, x.GPUModel), append(profile, x.Profile)
		project, user, ref = append(project, x.Project), append(user, x.User), append(ref, x.HolderRef)
		startMS, intervalMS, procs = append(startMS, x.StartMS), append(intervalMS, x.IntervalMS), append(procs, x.Processes)
		shareKind, shareMem, shareCores = append(shareKind, x.ShareKind), append(shareMem, x.ShareMem), append(shareCores, x.ShareCores)
		if x.UtilKnown {
			util, known = append(util, x.Util), append(known, 1)
		} else {
			util, known = append(util, 0), append(known, 0)
		}
	}
	if len(inst) == 0 {
		return nil
	}
	return s.insert(ctx, "latest_samples", latestColumns, len(inst),
		inst, startMS, intervalMS, node, uuid, model, profile, project, user, util, known, procs, ref, shareKind, shareMem, shareCores)
}

// LatestSamples implements reads.LatestRows: per instance the row with the
// greatest start_ms, decided by argMax in the query (rows that no merge has
// collapsed yet are read too; the table holds instances × unmerged inserts).
// The WHERE on start_ms only drops rows older than fromMS, which never win
// for an instance whose latest start is at or after fromMS.
func (s *Store) LatestSamples(ctx context.Context, fromMS int64, fn func(*schemas.Sample) error) error {
	rows, err := s.conn.Query(ctx, "SELECT instance_id, max(start_ms), argMax(interval_ms, start_ms), argMax(node, start_ms), "+
		"argMax(gpu_uuid, start_ms), argMax(gpu_model, start_ms), argMax(profile, start_ms), argMax(project, start_ms), "+
		"argMax(user, start_ms), argMax(util, start_ms), argMax(util_known, start_ms), argMax(processes, start_ms), "+
		"argMax(holder_ref, start_ms), argMax(share_kind, start_ms), argMax(share_mem, start_ms), argMax(share_cores, start_ms) FROM "+s.table("latest_samples")+" WHERE start_ms >= "+itoa(fromMS)+" GROUP BY instance_id")
	if err != nil {
		return classify(fmt.Errorf("cannot read latest samples: %w", err))
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var x schemas.Sample
		var known uint8
		if err := rows.Scan(&x.InstanceID, &x.StartMS, &x.IntervalMS, &x.Node, &x.GPUUUID, &x.GPUModel, &x.Profile,
			&x.Project, &x.User, &x.Util, &known, &x.Processes, &x.HolderRef, &x.ShareKind, &x.ShareMem, &x.ShareCores); err != nil {
			return fmt.Errorf("cannot read latest sample: %w", err)
		}
		x.UtilKnown = known == 1
		if !x.UtilKnown {
			x.Util = 0
		}
		if err := fn(&x); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot read latest samples: %w", err)
	}
	return nil
}

const keyColumns = "project, user, instance_id, gpu_model, profile"

// Occupancy implements reads.UsageSource: the runs of [lo, hi], replays
// merged to their longest end in the query, streamed in chunks (memory grows
// with the number of runs, not with raw samples). BillFrom runs it
// concurrently with IdleRuns.
func (s *Store) Occupancy(ctx context.Context, lo, hi int64, fn func([]schemas.Run) error) error {
	// Runs never cross a UTC month boundary, so a run ending at or after lo starts
	// in lo's UTC month or later (lo-1: a run ending exactly at lo counts).
	q := "SELECT " + keyColumns + ", start_ms, max(end_ms) AS e FROM " + s.table("occupancy") +
		" WHERE start >= toDateTime(" + itoa(ingest.MonthStartMS(lo-1)/1000) + ") AND start_ms <= " + itoa(hi) +
		" GROUP BY " + keyColumns + ", start_ms HAVING e >= " + itoa(lo)
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return classify(fmt.Errorf("cannot read occupancy: %w", err))
	}
	defer func() { _ = rows.Close() }()
	in := interner{}
	buf := make([]schemas.Run, 0, chunk)
	for rows.Next() {
		var r schemas.Run
		if err := rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.StartMS, &r.EndMS); err != nil {
			return fmt.Errorf("cannot read occupancy row: %w", err)
		}
		in.key(&r.Key)
		if buf = append(buf, r); len(buf) == chunk {
			if err := fn(buf); err != nil {
				return err
			}
			buf = make([]schemas.Run, 0, chunk)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot read occupancy: %w", err)
	}
	if len(buf) > 0 {
		return fn(buf)
	}
	return nil
}

// IdleRuns implements reads.UsageSource: the idle runs overlapping [from,
// to) of class 0 or with a util below maxUtil, replays merged in the query.
func (s *Store) IdleRuns(ctx context.Context, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error {
	q := "SELECT " + keyColumns + ", class, start_ms, max(end_ms) AS e, min(min_util), max(max_util) FROM " + s.table("idle_spans") +
		" WHERE start >= toDateTime(" + itoa(ingest.MonthStartMS(from-1)/1000) + ") AND start_ms < " + itoa(to) +
		" AND (class = 0 OR min_util < " + strconv.FormatFloat(maxUtil, 'g', -1, 64) + ")" +
		" GROUP BY " + keyColumns + ", class, start_ms HAVING e > " + itoa(from)
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return classify(fmt.Errorf("cannot read idle runs: %w", err))
	}
	defer func() { _ = rows.Close() }()
	in := interner{}
	buf := make([]schemas.IdleRun, 0, chunk)
	for rows.Next() {
		var r schemas.IdleRun
		if err := rows.Scan(&r.Key.Project, &r.Key.User, &r.Key.InstanceID, &r.Key.GPUModel, &r.Key.Profile, &r.Class,
			&r.StartMS, &r.EndMS, &r.MinUtil, &r.MaxUtil); err != nil {
			return fmt.Errorf("cannot read idle run: %w", err)
		}
		in.key(&r.Key)
		if buf = append(buf, r); len(buf) == chunk {
			if err := fn(buf); err != nil {
				return err
			}
			buf = make([]schemas.IdleRun, 0, chunk)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot read idle runs: %w", err)
	}
	if len(buf) > 0 {
		return fn(buf)
	}
	return nil
}

const chunk = 8192

// interner shares the key strings of consecutive rows: rows come grouped, so a
// key's strings are allocated once, not once per row.
type interner map[string]string

func (in interner) of(s *string) {
	if v, ok := in[*s]; ok {
		*s = v
		return
	}
	if len(in) > 1<<16 {
		clear(in)
	}
	in[*s] = *s
}

func (in interner) key(k *schemas.Key) {
	in.of(&k.Project)
	in.of(&k.User)
	in.of(&k.InstanceID)
	in.of(&k.GPUModel)
	in.of(&k.Profile)
}

// RawIdle implements reads.UsageSource, the exact fallback: the raw samples
// of the instances whose idle runs a threshold cuts through. The instances
// travel as an external table (sent with the query as data, any number of
// them), not as a literal list in the query text, which the server's
// max_query_size would bound.
func (s *Store) RawIdle(ctx context.Context, insts []string, lo, hi int64, below float64, fn func([]schemas.RawPoint) error) error {
	pending, err := ext.NewTable("pending_instances", ext.Column("instance_id", "String"))
	if err != nil {
		return fmt.Errorf("cannot build the instance table for idle time: %w", err)
	}
	for _, id := range insts {
		if err := pending.Append(id); err != nil {
			return fmt.Errorf("cannot build the instance table for idle time: %w", err)
		}
	}
	q := "SELECT " + keyColumns + ", start_ms, interval_ms, assumeNotNull(util) FROM " + s.table("raw_samples") +
		" WHERE instance_id IN pending_instances AND start_ms >= " + itoa(lo) + " AND start_ms < " + itoa(hi) +
		" AND ts >= toDateTime(" + itoa(max(lo/1000-1, 0)) + ") AND project != '' AND isNotNull(util) AND util < " +
		strconv.FormatFloat(below, 'g', -1, 64)
	rows, err := s.conn.Query(ch.Context(ctx, ch.WithExternalTable(pending)), q)
	if err != nil {
		return classify(fmt.Errorf("cannot read raw samples for idle time: %w", err))
	}
	defer func() { _ = rows.Close() }()
	in := interner{}
	buf := make([]schemas.RawPoint, 0, chunk)
	for rows.Next() {
		var pt schemas.RawPoint
		var interval int64
		if err := rows.Scan(&pt.Key.Project, &pt.Key.User, &pt.Key.InstanceID, &pt.Key.GPUModel, &pt.Key.Profile, &pt.StartMS, &interval, &pt.Util); err != nil {
			return fmt.Errorf("cannot read raw sample: %w", err)
		}
		in.key(&pt.Key)
		pt.EndMS = pt.StartMS + interval
		if buf = append(buf, pt); len(buf) == chunk {
			if err := fn(buf); err != nil {
				return err
			}
			buf = make([]schemas.RawPoint, 0, chunk)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot read raw samples for idle time: %w", err)
	}
	if len(buf) > 0 {
		return fn(buf)
	}
	return nil
}

// WriteRejects implements ingest.Rejects: one insert; a source written again
// (a replay) is collapsed by merges and counted once by readers.
func (s *Store) WriteRejects(ctx context.Context, rs []ingest.Reject) error {
	n := len(rs)
	ts, tsMS, source, reason, msg, ingested := make([]time.Time, n), make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([]time.Time, n)
	now := time.Now().UTC().Truncate(time.Second)
	for i, r := range rs {
		sec := r.TimeMS / 1000
		if r.TimeMS < 0 || sec > 4294967295 {
			sec = 0 // outside DateTime's range; ts_ms stays exact
		}
		ts[i], tsMS[i], source[i], reason[i], msg[i], ingested[i] = time.Unix(sec, 0).UTC(), r.TimeMS, r.Source, string(r.Reason), r.Error, now
	}
	return s.insert(ctx, "rejects", "ts, ts_ms, source, reason, error, ingested_at", n, ts, tsMS, source, reason, msg, ingested)
}

// RejectSummary implements ingest.Rejects: distinct sources in [fromMS, toMS)
// and the earliest first of them.
func (s *Store) RejectSummary(ctx context.Context, fromMS, toMS int64, first int) (ingest.RejectSummary, error) {
	var sum ingest.RejectSummary
	where := " WHERE ts >= toDateTime(" + itoa(max(fromMS/1000-1, 0)) + ") AND ts_ms >= " + itoa(fromMS) + " AND ts_ms < " + itoa(toMS)
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT uniqExact(source) FROM "+s.table("rejects")+where).Scan(&n); err != nil {
		return sum, classify(fmt.Errorf("cannot read rejects: %w", err))
	}
	sum.Count = int64(n)
	if n == 0 || first <= 0 {
		return sum, nil
	}
	rows, err := s.conn.Query(ctx, "SELECT source, min(ts_ms) AS t, any(reason), any(error) FROM "+s.table("rejects")+where+
		" GROUP BY source ORDER BY t, source LIMIT "+strconv.Itoa(first))
	if err != nil {
		return sum, classify(fmt.Errorf("cannot read rejects: %w", err))
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var r ingest.Reject
		var reason string
		if err := rows.Scan(&r.Source, &r.TimeMS, &reason, &r.Error); err != nil {
			return sum, fmt.Errorf("cannot read reject: %w", err)
		}
		r.Reason = schemas.RejectReason(reason)
		sum.First = append(sum.First, r)
	}
	return sum, rows.Err()
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// Database is the database the store uses.
func (s *Store) Database() string { return s.cfg.Database }

// Cluster is the cluster the store spans ("" for one server).
func (s *Store) Cluster() string { return s.cfg.Cluster }
