package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

func TestIsPermanent(t *testing.T) {
	require.False(t, ingest.IsPermanent(nil))
	require.False(t, ingest.IsPermanent(errors.New("connection reset")))
	require.False(t, ingest.IsPermanent(fmt.Errorf("write: %w", syscall.ECONNREFUSED)))
	require.False(t, ingest.IsPermanent(context.DeadlineExceeded))
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOSPC} {
		err := fmt.Errorf("store: %w", &fs.PathError{Op: "open", Path: "/x.db", Err: errno})
		require.True(t, ingest.IsPermanent(err), errno.Error())
	}
	p := ingest.Permanent(errors.New("schema too new"))
	require.True(t, ingest.IsPermanent(fmt.Errorf("open: %w", p)))
	require.True(t, ingest.IsPermanent(errors.Join(errors.New("transient"), p)), "one permanent part makes the whole permanent")
	require.Same(t, p, ingest.Permanent(p), "marking twice wraps once")
	require.NoError(t, ingest.Permanent(nil))
}

// failingStore fails every write with err and counts the attempts.
type failingStore struct {
	ingest.MemStore
	err      error
	attempts atomic.Int64
}

func (f *failingStore) Write(context.Context, *ingest.Batch) error {
	f.attempts.Add(1)
	return f.err
}

func (f *failingStore) WriteRejects(context.Context, []ingest.Reject) error {
	f.attempts.Add(1)
	return f.err
}

// A permanent store error (here a read-only file system) is returned after
// exactly one attempt, classified; a transient one is retried until the
// context ends.
func TestWriterFailsAtOnceOnPermanentError(t *testing.T) {
	samples := storetest.Samples(t, storetest.Trace(t, 100, 1))
	ro := &failingStore{err: fmt.Errorf("cannot write: %w", &fs.PathError{Op: "open", Path: "/ro/x.db", Err: syscall.EROFS})}
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: ro, Logger: quietLogger(), RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // only reached if it were retried
	defer cancel()
	err = w.Write(ctx, samples)
	require.Error(t, err)
	require.True(t, ingest.IsPermanent(err))
	require.ErrorContains(t, err, "read-only file system")
	require.EqualValues(t, 1, ro.attempts.Load())

	flaky := &failingStore{err: errors.New("connection reset by peer")}
	w, err = ingest.NewWriter(ingest.WriterConfig{Store: flaky, Logger: quietLogger(), RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = w.Write(ctx, samples)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ingest.IsPermanent(err))
	require.Greater(t, flaky.attempts.Load(), int64(2), "a transient error is retried")
}

// Every invalid line of a back-fill is recorded as a reject, dated by its own
// ts when it has one; a second back-fill of the same input counts nothing
// twice; billing's warning names the count and the first reasons.
func TestBackfillRecordsRejects(t *testing.T) {
	data := storetest.Trace(t, 2000, 5)
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	lines[10] = []byte(`{"ts": "2026-11-05T00:00:00+08:00", "interval_s": -5}`)
	cutTS := storetest.Samples(t, lines[20])[0].StartMS
	lines[20] = lines[20][:len(lines[20])/2] // cut in the middle: its ts is still readable
	lines[30] = []byte(`not json at all`)
	input := bytes.Join(lines, []byte("\n"))
	store := ingest.NewMemStore()
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger()})
	require.NoError(t, err)
	before := time.Now()
	for range 2 {
		stats, err := ingest.Backfill(context.Background(), bytes.NewReader(input), ingest.FileConfig{Writer: w, BatchSize: 300, Workers: 3, Source: "file:/data/x.jsonl"})
		require.NoError(t, err)
		require.EqualValues(t, 3, stats.InvalidCount)
	}
	p := billing.NewPeriod(2026, time.November, storetest.Shanghai(t))
	sum, err := store.RejectSummary(context.Background(), 0, 1<<62, 10)
	require.NoError(t, err)
	require.EqualValues(t, 3, sum.Count, "a second back-fill of the same file records no new rejects")
	bySource := map[string]ingest.Reject{}
	for _, r := range sum.First {
		bySource[r.Source] = r
	}
	require.Equal(t, time.Date(2026, 11, 4, 16, 0, 0, 0, time.UTC).UnixMilli(), bySource["file:/data/x.jsonl:11"].TimeMS)
	require.Equal(t, schemas.RejectInvalidField, bySource["file:/data/x.jsonl:11"].Reason)
	require.Equal(t, cutTS, bySource["file:/data/x.jsonl:21"].TimeMS, "dated by its ts, not by now")
	require.Equal(t, schemas.RejectMalformedJSON, bySource["file:/data/x.jsonl:31"].Reason)
	require.GreaterOrEqual(t, bySource["file:/data/x.jsonl:31"].TimeMS, before.UnixMilli(), "no ts: dated when rejected")

	sum, err = store.RejectSummary(context.Background(), p.StartMS(), p.EndMS(), 3)
	require.NoError(t, err)
	want := 1 // line 11; line 31 has no ts and is dated today, outside 2026-11
	if cutTS >= p.StartMS() {
		want++
	}
	require.EqualValues(t, want, sum.Count)
	warning := ingest.RejectWarning(p, sum)
	require.Contains(t, warning, fmt.Sprintf("period 2026-11: %d sample", want))
	require.Contains(t, warning, "invalid_field at file:/data/x.jsonl:11: ")
	require.Empty(t, ingest.RejectWarning(p, ingest.RejectSummary{}))
}

// A store that cannot keep the rejects stops the back-fill like a failed
// write: nothing is silently lost.
func TestBackfillFailsWhenRejectsCannotBeStored(t *testing.T) {
	ro := &failingStore{err: ingest.Permanent(errors.New("read-only"))}
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: ro, Logger: quietLogger()})
	require.NoError(t, err)
	_, err = ingest.Backfill(context.Background(), bytes.NewReader([]byte("garbage\n")), ingest.FileConfig{Writer: w})
	require.Error(t, err)
	require.True(t, ingest.IsPermanent(err))
}
