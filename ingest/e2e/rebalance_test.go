package e2e

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
)

// heldStore is a Backend whose first write waits until release is closed
// (held is closed when it starts waiting). Only the Backend's methods are
// promoted: the worker writes it batch by batch, not in streamed inserts.
type heldStore struct {
	ingest.Backend
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (s *heldStore) Write(ctx context.Context, b *ingest.Batch) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.held)
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Backend.Write(ctx, b)
}

// committedAndEnd are the group's committed offsets and the end offsets of the
// topic, by partition.
func (e *env) committedAndEnd(t *testing.T) (committed, end map[int]int64) {
	t.Helper()
	ctx := context.Background()
	meta, err := e.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{e.topic}})
	require.NoError(t, err)
	var parts []int
	var reqs []kafka.OffsetRequest
	for _, p := range meta.Topics[0].Partitions {
		parts = append(parts, p.ID)
		reqs = append(reqs, kafka.LastOffsetOf(p.ID))
	}
	lo, err := e.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{e.topic: reqs}})
	require.NoError(t, err)
	of, err := e.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: e.group, Topics: map[string][]int{e.topic: parts}})
	require.NoError(t, err)
	committed, end = map[int]int64{}, map[int]int64{}
	for _, p := range of.Topics[e.topic] {
		committed[p.Partition] = p.CommittedOffset
	}
	for _, p := range lo.Topics[e.topic] {
		end[p.Partition] = p.LastOffset
	}
	return committed, end
}

// A rebalance moves a partition from worker A, which fetched part of it but
// has not stored it yet, to worker B, which consumes it to its end and
// commits that. A then stores what it fetched: it must not commit the offsets
// of the partition it no longer owns (that would move the group's offset back
// for good, B having nothing more to commit). Once A is done, every
// partition's committed offset is its end, every sample is stored, and the
// invoices are those of the file. (A's first batch, fetched before the
// rebalance, is therefore never committed: A says so in its log.)
func TestRebalanceCommitsOnlyOwnedPartitions(t *testing.T) {
	e := newEnv(t, 2)
	st := e.store(t, e.chAddr)
	data := storetest.Trace(t, 20_000, 81)
	e.produce(t, data)

	held := &heldStore{Backend: st, held: make(chan struct{}), release: make(chan struct{})}
	cfgA := e.workerConfig(held, ingest.NewMetrics(nil))
	cfgA.BatchSize, cfgA.StreamPiece = 1500, 300
	var logsA testenv.SyncBuffer
	cfgA.Logger = slog.New(slog.NewJSONHandler(&logsA, nil))
	stopA := start(t, cfgA)
	select {
	case <-held.held: // A fetched its first messages, of both partitions, and waits on the store
	case <-time.After(60 * time.Second):
		t.Fatal("worker A wrote nothing")
	}

	cfgB := e.workerConfig(st, ingest.NewMetrics(nil))
	stopB := start(t, cfgB)
	var owned int // B's partition, consumed to its end
	require.Eventually(t, func() bool {
		committed, end := e.committedAndEnd(t)
		for p, c := range committed {
			if c == end[p] {
				owned = p
				return true
			}
		}
		return false
	}, 90*time.Second, 100*time.Millisecond, "worker B commits the end of its partition")

	close(held.release)
	e.waitCommitted(t, 60*time.Second)
	committed, end := e.committedAndEnd(t)
	require.Equal(t, end, committed, "every partition's committed offset is its end (B owned partition %d)", owned)
	require.NoError(t, stopA())
	require.NoError(t, stopB())
	dropped := false
	for _, r := range logRecords(t, &logsA) {
		dropped = dropped || strings.HasPrefix(r["msg"].(string), "offsets fetched before a rebalance left uncommitted")
	}
	require.True(t, dropped, "worker A left the offsets it fetched before the rebalance uncommitted")
	require.Equal(t, distinctSamples(t, data), countRaw(t, st), "every sample is stored")
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), st)
}
