package clickhouse

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// A cluster store (Config.Cluster) keeps every table as a Replicated* table
// named TABLE_local on every server of the cluster, and a Distributed table
// under the table's own name over them. Reads go through the Distributed
// tables, on the server of Config.Addr. Writes go to the local tables of the
// shard each row belongs to, one live replica of it, with insert_quorum: the
// insert is acknowledged once that many replicas of the shard hold it. A
// quorum cannot be asked through a Distributed table of a cluster whose shards
// have different replica counts (ClickHouse applies one insert_quorum to every
// shard, and a one-replica shard never meets 2), hence the direct writes.
//
// A row's shard is Distributed's: sipHash64(key) modulo the sum of the shard
// weights, the shards taking consecutive ranges in shard_num order. The key
// of a table keeps on one shard every row that a read collapses or merges
// (FINAL, argMax, max(end_ms) per run): instance_id for the tables of samples
// and runs, project for run packs, node for node minutes and hourly sums
// (a read picks one computation's rows per hour, wherever they lie),
// writer for the marks of written hours, source for rejects.
// Data migrations (INSERT … SELECT) insert through the Distributed tables, so
// the server's sharding and this one agree; Open checks that sipHash64 is
// computed here as the server computes it.

// shardKeys is the sharding key column of every sharded table.
var shardKeys = map[string]string{
	"raw_samples":    "instance_id",
	"occupancy":      "instance_id",
	"idle_runs":      "instance_id",
	"idle_spans":     "instance_id",
	"latest_samples": "instance_id",
	"unheld_busy":    "instance_id",
	"node_minutes":   "node",
	"rejects":        "source",
	"run_packs":      "project",
	"util_hours":     "node",
	"sample_hours":   "writer",
}

// localSuffix names the replicated table under a Distributed one.
const localSuffix = "_local"

// cluster is the topology of Config.Cluster, read from system.clusters.
type cluster struct {
	name   string
	shards []*shard
	total  uint64 // sum of the shard weights
	// quorumTimeout is insert_quorum_timeout of the writes.
	quorumTimeout time.Duration
	// busyRetries counts inserts sent again because another client's quorum
	// insert into the same table was under way (insertOn).
	busyRetries atomic.Int64
}

type shard struct {
	num      uint32
	weight   uint64
	replicas []string // host:port of the native protocol
	conn     driver.Conn
	quorum   int        // insert_quorum of the writes: 2 with two replicas or more, else 0
	mu       sync.Mutex // one quorum insert per table at a time (see insertOn)
	busy     map[string]*sync.Mutex
}

// replicaCount is the number of replicas of all shards.
func (c *cluster) replicaCount() int {
	n := 0
	for _, sh := range c.shards {
		n += len(sh.replicas)
	}
	return n
}

// shardOf is the shard of a sharding key value, as Distributed chooses it.
func (c *cluster) shardOf(key string) int {
	slot := sipHash64([]byte(key)) % c.total
	for i, sh := range c.shards {
		if slot < sh.weight {
			return i
		}
		slot -= sh.weight
	}
	return len(c.shards) - 1
}

// discoverCluster reads cfg.Cluster's shards and replicas from
// system.clusters of the server s is connected to, and opens one connection
// (failing over between the shard's replicas) per shard. It fails
// (ingest.Permanent) when the server knows no such cluster.
func (s *Store) discoverCluster(ctx context.Context) (*cluster, error) {
	rows, err := s.conn.Query(ctx, "SELECT shard_num, toUInt64(shard_weight), host_address, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", s.cfg.Cluster)
	if err != nil {
		return nil, classify(fmt.Errorf("cannot read system.clusters on ClickHouse %s: %w", s.cfg.Addr, err))
	}
	defer func() { _ = rows.Close() }()
	c := &cluster{name: s.cfg.Cluster, quorumTimeout: s.cfg.QuorumTimeout}
	for rows.Next() {
		var num uint32
		var weight uint64
		var host string
		var port uint16
		if err := rows.Scan(&num, &weight, &host, &port); err != nil {
			return nil, fmt.Errorf("cannot read system.clusters: %w", err)
		}
		if len(c.shards) == 0 || c.shards[len(c.shards)-1].num != num {
			c.shards = append(c.shards, &shard{num: num, weight: weight, busy: map[string]*sync.Mutex{}})
			c.total += weight
		}
		sh := c.shards[len(c.shards)-1]
		sh.replicas = append(sh.replicas, fmt.Sprintf("%s:%d", host, port))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cannot read system.clusters: %w", err)
	}
	if len(c.shards) == 0 {
		known, _ := s.clusterNames(ctx)
		return nil, ingest.Permanent(fmt.Errorf("ClickHouse %s knows no cluster %q (remote_servers in its config; system.clusters has: %s)", s.cfg.Addr, s.cfg.Cluster, known))
	}
	if c.total == 0 {
		return nil, ingest.Permanent(fmt.Errorf("cluster %q: every shard has weight 0", s.cfg.Cluster))
	}
	for _, sh := range c.shards {
		if len(sh.replicas) >= 2 {
			sh.quorum = 2
		}
		if sh.conn, err = s.dial(sh.replicas); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

func (s *Store) clusterNames(ctx context.Context) (string, error) {
	names, err := s.strings(ctx, "SELECT DISTINCT cluster FROM system.clusters ORDER BY cluster")
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "none", nil
	}
	return strings.Join(names, ", "), nil
}

// dial opens a connection to the first reachable of addrs (lazily: the
// first query dials).
func (s *Store) dial(addrs []string) (driver.Conn, error) {
	conn, err := ch.Open(&ch.Options{
		Addr:                 addrs,
		Auth:                 ch.Auth{Username: s.cfg.Username, Password: s.cfg.Password},
		DialTimeout:          s.cfg.DialTimeout,
		ReadTimeout:          s.cfg.ReadTimeout,
		Compression:          &ch.Compression{Method: s.cfg.CompressionMethod()},
		ConnOpenStrategy:     ch.ConnOpenInOrder,
		MaxOpenConns:         16,
		FreeBufOnConnRelease: true,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot connect to ClickHouse at %s: %w", strings.Join(addrs, ","), unavailable(err))
	}
	return classifiedConn{conn}, nil
}

func (c *cluster) close() {
	for _, sh := range c.shards {
		if sh.conn != nil {
			_ = sh.conn.Close()
		}
	}
}

// checkReplicas fails unless every replica of the cluster answers, ZooKeeper
// is reachable from the server s is connected to, and sipHash64 is computed
// here as there: what a cluster migration needs.
func (s *Store) checkReplicas(ctx context.Context) error {
	for _, sh := range s.cluster.shards {
		for i, addr := range sh.replicas {
			conn, err := s.dial([]string{addr})
			if err == nil {
				err = conn.Ping(ctx)
				_ = conn.Close()
			}
			if err != nil {
				return fmt.Errorf("cluster %q: replica %d of shard %d (%s) is unreachable: %w; every replica must answer to migrate the cluster", s.cluster.name, i+1, sh.num, addr, err)
			}
		}
	}
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '/'").Scan(&n); err != nil {
		return classify(fmt.Errorf("cluster %q: ClickHouse %s cannot reach ZooKeeper, which replicated tables and ON CLUSTER need: %w", s.cluster.name, s.cfg.Addr, err))
	}
	return s.checkSipHash(ctx)
}

// checkSipHash compares sipHash64 here and on the server for a few keys.
func (s *Store) checkSipHash(ctx context.Context) error {
	keys := []string{"", "a", "MIG-0a1b2c3d-4e5f-6789-abcd-ef0123456789", "node-17/GPU-3/2g.20gb"}
	for _, k := range keys {
		var h uint64
		if err := s.conn.QueryRow(ctx, "SELECT sipHash64("+quote(k)+")").Scan(&h); err != nil {
			return classify(fmt.Errorf("cannot compute sipHash64 on ClickHouse %s: %w", s.cfg.Addr, err))
		}
		if h != sipHash64([]byte(k)) {
			return ingest.Permanent(fmt.Errorf("ClickHouse %s computes sipHash64(%q) = %d, cardhour %d: rows would land on other shards than Distributed puts them", s.cfg.Addr, k, h, sipHash64([]byte(k))))
		}
	}
	return nil
}

// insertCluster sends one columnar batch to the local tables: the rows of
// each shard to that shard, all shards at once. cols are in the order of
// columns; the sharding key column of table is a []string.
func (s *Store) insertCluster(ctx context.Context, table, columns string, n int, cols ...any) error {
	key, ok := shardKeys[table]
	if !ok {
		return fmt.Errorf("table %s has no sharding key", table)
	}
	idx := -1
	for i, c := range strings.Split(columns, ",") {
		if strings.TrimSpace(c) == key {
			idx = i
		}
	}
	if idx < 0 {
		return fmt.Errorf("insert into %s names no %s, its sharding key", table, key)
	}
	keys := cols[idx].([]string)
	rows := make([][]int, len(s.cluster.shards))
	for i := range n {
		sh := s.cluster.shardOf(keys[i])
		rows[sh] = append(rows[sh], i)
	}
	errs := make([]error, len(rows))
	var wg sync.WaitGroup
	for i, r := range rows {
		if len(r) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := make([]any, len(cols))
			for j, c := range cols {
				part[j] = pick(c, r)
			}
			errs[i] = s.insertOn(ctx, s.cluster.shards[i], table, columns, len(r), part)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// insertOn inserts into one shard's local table with the shard's quorum.
// ClickHouse refuses a quorum insert into a table while an earlier one
// waits for its quorum (without insert_quorum_parallel, which 18.16 lacks),
// so this process sends one at a time per table, and an insert refused
// because another process's is under way (several ingest workers) is sent
// again after a pause, for up to the quorum timeout: the refused one wrote
// nothing, and failing it would make the writer write the whole batch again.
func (s *Store) insertOn(ctx context.Context, sh *shard, table, columns string, n int, cols []any) error {
	sh.mu.Lock()
	mu := sh.busy[table]
	if mu == nil {
		mu = new(sync.Mutex)
		sh.busy[table] = mu
	}
	sh.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	deadline := time.Now().Add(s.cluster.quorumTimeout)
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		err := s.insertOnce(ctx, sh, table, columns, n, cols)
		if !quorumBusy(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		s.cluster.busyRetries.Add(1)
		s.cfg.Logger.Debug("quorum insert of another client under way; sending again", "table", table, "shard", sh.num, "pause", pause)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause/2 + rand.N(pause/2+1)):
		}
	}
}

// QuorumRetries is how many of this store's inserts were sent again because
// another client's quorum insert into the same table was under way (0 off a
// cluster).
func (s *Store) QuorumRetries() int64 {
	if s.cluster == nil {
		return 0
	}
	return s.cluster.busyRetries.Load()
}

// errQuorumBusy is ClickHouse's UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE: a
// quorum insert into the table, from another client, has not reached its
// quorum yet ("Another quorum insert has been already started").
const errQuorumBusy = 286

func quorumBusy(err error) bool {
	var ex *ch.Exception
	return errors.As(err, &ex) && ex.Code == errQuorumBusy
}

// insertOnce is one insert of insertOn.
func (s *Store) insertOnce(ctx context.Context, sh *shard, table, columns string, n int, cols []any) error {
	settings := ch.Settings{}
	if sh.quorum > 1 {
		settings["insert_quorum"] = sh.quorum
		settings["insert_quorum_timeout"] = int(s.cluster.quorumTimeout.Milliseconds())
	}
	ctx = ch.Context(ctx, ch.WithSettings(settings))
	batch, err := sh.conn.PrepareBatch(ctx, "INSERT INTO "+s.table(table+localSuffix)+" ("+columns+")")
	if err != nil {
		return classify(fmt.Errorf("cannot prepare insert into %s on shard %d: %w", table, sh.num, err))
	}
	defer func() { _ = batch.Close() }()
	for i, c := range cols {
		if err := batch.Column(i).Append(c); err != nil {
			return fmt.Errorf("cannot append %s column %d: %w", table, i, err)
		}
	}
	if err := batch.Send(); err != nil {
		return classify(fmt.Errorf("cannot insert %d rows into %s on shard %d (quorum %d): %w", n, table, sh.num, sh.quorum, err))
	}
	return nil
}

// pick is the rows idx of a column.
func pick(col any, idx []int) any {
	switch c := col.(type) {
	case []string:
		return pickOf(c, idx)
	case []int64:
		return pickOf(c, idx)
	case []uint8:
		return pickOf(c, idx)
	case []uint64:
		return pickOf(c, idx)
	case []float64:
		return pickOf(c, idx)
	case []*float64:
		return pickOf(c, idx)
	case []time.Time:
		return pickOf(c, idx)
	}
	panic(fmt.Sprintf("clickhouse: no column split for %T", col))
}

func pickOf[T any](c []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, j := range idx {
		out[i] = c[j]
	}
	return out
}

// dataVersionCluster is DataVersion over every shard: each shard's parts,
// read from one replica of it, in shard order.
func (s *Store) dataVersionCluster(ctx context.Context) (string, error) {
	parts := make([]string, 0, len(s.cluster.shards))
	for _, sh := range s.cluster.shards {
		v, err := dataVersionOn(ctx, sh.conn, s.cfg.Database)
		if err != nil {
			return "", fmt.Errorf("shard %d: %w", sh.num, err)
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, ";"), nil
}

// sipHash64 is ClickHouse's sipHash64 of one String: SipHash-2-4 with a
// zero key.
func sipHash64(p []byte) uint64 {
	v0, v1, v2, v3 := uint64(0x736f6d6570736575), uint64(0x646f72616e646f6d), uint64(0x6c7967656e657261), uint64(0x7465646279746573)
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13) ^ v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16) ^ v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21) ^ v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17) ^ v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(p)
	for ; len(p) >= 8; p = p[8:] {
		m := binary.LittleEndian.Uint64(p)
		v3 ^= m
		round()
		round()
		v0 ^= m
	}
	var last [8]byte
	copy(last[:], p)
	last[7] = byte(n)
	m := binary.LittleEndian.Uint64(last[:])
	v3 ^= m
	round()
	round()
	v0 ^= m
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

// bufferedRaw is a cluster store's ingest.RawStream: the pieces are kept and
// written at Finish, each shard's rows in one quorum insert (a streamed
// insert would hold the table's quorum while the batch is still being read).
type bufferedRaw struct {
	s       *Store
	ctx     context.Context
	samples []schemas.Sample
}

func (r *bufferedRaw) Append(samples []schemas.Sample) error {
	r.samples = append(r.samples, samples...)
	return nil
}

// Finish writes the raw samples and, meanwhile, their data-quality rollup,
// then marks their hours written: nil only when all were accepted.
func (r *bufferedRaw) Finish() error {
	act := make(chan error, 1)
	go func() { act <- r.s.writeActivity(r.ctx, ingest.ActivityOf(r.samples)) }()
	var err error
	if len(r.samples) > 0 {
		err = r.s.writeRaw(r.ctx, r.samples)
	}
	actErr := <-act
	hours := hoursOf(r.samples)
	r.samples = nil
	if err != nil {
		return err
	}
	if actErr != nil {
		return actErr
	}
	return r.s.markHours(r.ctx, hours)
}

func (r *bufferedRaw) Abort() { r.samples = nil }
