package ingest_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Batches of any size, in any order, replayed, split between workers whose
// compactors know nothing of each other, and restarted compactors: the store
// bills exactly like the file, for every catalog.
func TestCompactedStoreBillsLikeFile(t *testing.T) {
	data := storetest.Trace(t, 60_000, 3)
	samples := storetest.Samples(t, data)
	cats := storetest.Catalogs(t)
	rng := rand.New(rand.NewPCG(1, 2))

	store := ingest.NewMemStore()
	newWriter := func() *ingest.Writer {
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger(), MaxOpenRuns: 1 + rng.IntN(200)})
		require.NoError(t, err)
		return w
	}
	workers := []*ingest.Writer{newWriter(), newWriter(), newWriter()}
	for i := 0; i < len(samples); {
		n := 1 + rng.IntN(5000)
		batch := append([]schemas.Sample(nil), samples[i:min(i+n, len(samples))]...)
		if rng.IntN(4) == 0 { // a batch out of order
			rng.Shuffle(len(batch), func(a, b int) { batch[a], batch[b] = batch[b], batch[a] })
		}
		w := workers[rng.IntN(len(workers))]
		require.NoError(t, w.Write(context.Background(), batch))
		if rng.IntN(5) == 0 { // a crash: replay the batch through a fresh compactor
			workers[0] = newWriter()
			require.NoError(t, workers[0].Write(context.Background(), batch))
		}
		i += n
	}
	raw, _, _, _ := store.Counts()
	require.GreaterOrEqual(t, raw, len(samples))
	storetest.RequireSameInvoices(t, data, cats, store)
	require.Equal(t, storetest.LatestOf(samples), storetest.Latest(t, store, 0), "the latest held sample of each instance")
}

// In order, one worker, batches of a few seconds: rows are far fewer than samples.
func TestCompaction(t *testing.T) {
	data := storetest.Trace(t, 60_000, 3)
	samples := storetest.Samples(t, data)
	store := ingest.NewMemStore()
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger()})
	require.NoError(t, err)
	for i := 0; i < len(samples); i += 5000 {
		require.NoError(t, w.Write(context.Background(), samples[i:min(i+5000, len(samples))]))
	}
	raw, occ, idle, _ := store.Counts()
	t.Logf("samples %d, raw rows %d, occupancy rows %d, idle rows %d", len(samples), raw, occ, idle)
	require.Less(t, occ, len(samples)/20, "occupancy rows must be far fewer than samples")
	storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), store)
}

func TestWriterRetriesUntilStoreAccepts(t *testing.T) {
	store := ingest.NewMemStore()
	store.FailNext(3)
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger(), RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
	require.NoError(t, err)
	samples := storetest.Samples(t, storetest.Trace(t, 100, 1))
	require.NoError(t, w.Write(context.Background(), samples))
	raw, _, _, writes := store.Counts()
	require.Equal(t, len(samples), raw)
	require.Equal(t, 1, writes)

	// A store that never recovers: Write gives up when the context ends, and says so.
	store.FailNext(1 << 30)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = w.Write(ctx, samples)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestBackfillReportsInvalidLines(t *testing.T) {
	data := storetest.Trace(t, 2000, 5)
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	lines[10] = []byte(`{"ts": "2026-11-01T00:00:00Z", "interval_s": -5}`)
	lines[20] = lines[20][:len(lines[20])/2]
	store := ingest.NewMemStore()
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger()})
	require.NoError(t, err)
	stats, err := ingest.Backfill(context.Background(), bytes.NewReader(bytes.Join(lines, []byte("\n"))), ingest.FileConfig{Writer: w, BatchSize: 300})
	require.NoError(t, err)
	require.EqualValues(t, 2, stats.InvalidCount)
	require.Len(t, stats.Invalid, 2)
	require.EqualValues(t, 11, stats.Invalid[0].Line)
	require.EqualValues(t, 21, stats.Invalid[1].Line)
	raw, _, _, _ := store.Counts()
	require.EqualValues(t, stats.Valid, raw)
}

// Every decoding error is classified as one of schemas.RejectReasons, and
// every reason of the list is what some input gets.
func TestReason(t *testing.T) {
	seen := map[schemas.RejectReason]bool{}
	f := func(line string, want schemas.RejectReason) {
		t.Helper()
		_, err := schemas.DecodeSample([]byte(line))
		require.Error(t, err)
		require.Equal(t, want, ingest.Reason(err), line)
		seen[want] = true
	}
	good := string(storetest.Trace(t, 1, 1))
	good = good[:strings.IndexByte(good, '\n')]
	f(good[:len(good)/2], schemas.RejectMalformedJSON)
	f(strings.Replace(good, `"interval_s":10`, `"interval_s":-10`, 1), schemas.RejectInvalidField)
	f(strings.Replace(good, `"interval_s":10`, `"interval_s":"10"`, 1), schemas.RejectInvalidField)
	f(strings.Replace(good, `"cardhour.sample.v1"`, `"cardhour.sample.v9"`, 1), schemas.RejectUnknownSchema)
	f(strings.Replace(good, `"interval_s":10`, `"interval_s":2592000`, 1), schemas.RejectIntervalTooLong)
	future := schemas.NewDecoderWith(schemas.DecoderOptions{MaxClockSkew: time.Minute})
	future.SetNow(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // before the trace
	var s schemas.Sample
	err := future.Decode([]byte(good), &s)
	require.Equal(t, schemas.RejectFutureTS, ingest.Reason(err), err)
	seen[schemas.RejectFutureTS] = true
	for _, r := range schemas.RejectReasons {
		require.True(t, seen[r], "no input is rejected as %s", r)
	}
	require.Len(t, seen, len(schemas.RejectReasons))
}

// ingest --from-file: a line over the interval bound or ending beyond the clock
// skew is reported with its line number and reason, and not stored.
func TestBackfillRejectsLongAndFutureSamples(t *testing.T) {
	data := storetest.Trace(t, 2000, 5)
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	lines[4] = bytes.Replace(lines[4], []byte(`"interval_s":10`), []byte(`"interval_s":2592000`), 1)
	require.Contains(t, string(lines[4]), "2592000")
	samples := storetest.Samples(t, data)
	last := slices.MaxFunc(samples, func(a, b schemas.Sample) int { return cmp.Compare(a.EndMS(), b.EndMS()) })
	clock := time.UnixMilli(last.EndMS()).Add(-6 * time.Minute) // the last sample lies 6 min ahead
	store := ingest.NewMemStore()
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger()})
	require.NoError(t, err)
	stats, err := ingest.Backfill(context.Background(), bytes.NewReader(bytes.Join(lines, []byte("\n"))), ingest.FileConfig{
		Writer: w, BatchSize: 300, DecoderOptions: schemas.DecoderOptions{MaxClockSkew: 5 * time.Minute},
		Now: func() time.Time { return clock }})
	require.NoError(t, err)
	require.GreaterOrEqual(t, stats.InvalidCount, int64(2))
	require.EqualValues(t, 5, stats.Invalid[0].Line)
	require.ErrorIs(t, stats.Invalid[0], schemas.ErrIntervalTooLong)
	for _, le := range stats.Invalid[1:] {
		require.ErrorIs(t, le, schemas.ErrFutureSample, "line %d", le.Line)
		require.Contains(t, le.Error(), "--max-clock-skew")
	}
	raw, _, _, _ := store.Counts()
	require.EqualValues(t, stats.Valid, raw)
	require.EqualValues(t, int64(len(lines)), stats.Valid+stats.InvalidCount)
}

// Idle runs are merged by utilisation class: thresholds on a class bound are
// decided from runs alone; others cut through some runs, which wait for their
// raw samples, and without them billing fails instead of guessing.
func TestIdleClassesAndRawFallback(t *testing.T) {
	data := storetest.Trace(t, 60_000, 5)
	samples := storetest.Samples(t, data)
	cats := storetest.Catalogs(t)
	b := ingest.NewCompactor(0).Build(samples)
	candidates := 0
	for i := range samples {
		if ingest.IdleCandidate(&samples[i]) {
			candidates++
		}
	}
	t.Logf("%d idle candidates, %d idle rows", candidates, len(b.Idle))
	require.Less(t, len(b.Idle), candidates/10, "idle runs must be far fewer than idle samples")

	for name, want := range map[string]bool{"example": false, "thr-bounds": false, "thr-cuts": true, "tol0-thr": true} {
		cat := cats[name]
		for _, period := range storetest.Periods {
			p, err := billing.ParsePeriod(period, cat.Location)
			require.NoError(t, err)
			f := billing.NewIdleFeeder(billing.NewAccumulator(cat, p), cat, p)
			for i := range b.Idle {
				f.Add(&b.Idle[i])
			}
			require.Equal(t, want, f.Pending(), "catalog %s, %s: runs waiting for raw samples", name, period)
			if want {
				require.ErrorContains(t, f.Resolve(), "no longer stored", "missing raw samples are an error")
			} else {
				require.NoError(t, f.Resolve())
			}
		}
	}
}

func TestIdleClassOf(t *testing.T) {
	for _, c := range []struct {
		known bool
		util  float64
		procs int64
		class uint8
		ok    bool
	}{
		{false, 0, 0, 0, true}, {false, 0, 2, 0, false},
		{true, 0, 1, 1, true}, {true, 0.049, 0, 1, true}, {true, 0.05, 0, 2, true}, {true, 0.1, 0, 3, true},
		{true, 0.2, 0, 4, true}, {true, 0.5, 0, 5, true}, {true, 0.99, 0, 5, true}, {true, 1, 0, 0, false},
	} {
		s := schemas.Sample{UtilKnown: c.known, Util: c.util, Processes: c.procs}
		class, ok := ingest.IdleClassOf(&s)
		require.Equal(t, c.ok, ok, "%+v", c)
		if ok {
			require.Equal(t, c.class, class, "%+v", c)
		}
	}
}

// streamStore is a MemStore that also takes raw samples streamed in pieces: a
// stream's samples reach the store only when it finishes, as with a database
// insert acknowledged at its end. failAppend/failFinish make the n-th piece or
// the finish of every stream fail.
type streamStore struct {
	*ingest.MemStore
	failAppend, failFinish int // 1-based piece to fail; failFinish != 0: Finish fails
	pieces, finished       int
}

type memStream struct {
	st      *streamStore
	pending []schemas.Sample
	aborted bool
}

func (s *streamStore) BeginRaw(context.Context) (ingest.RawStream, error) {
	return &memStream{st: s}, nil
}

func (m *memStream) Append(samples []schemas.Sample) error {
	m.st.pieces++
	if m.st.failAppend == m.st.pieces {
		return errors.New("injected piece failure")
	}
	m.pending = append(m.pending, samples...)
	return nil
}

func (m *memStream) Finish() error {
	if m.st.failFinish != 0 {
		return errors.New("injected finish failure")
	}
	m.st.finished++
	return m.st.Write(context.Background(), &ingest.Batch{Samples: m.pending})
}

func (m *memStream) Abort() { m.aborted = true }

// A batch streamed in pieces is stored exactly like one written whole. When a
// piece or the end of the streamed insert fails, the stream reports it and
// keeps nothing; consuming everything not yet flushed again with a fresh
// writer (what the Kafka worker does) leaves nothing missing and the invoices
// unchanged.
func TestStreamStoresLikeWrite(t *testing.T) {
	data := storetest.Trace(t, 20_000, 5)
	samples := storetest.Samples(t, data)
	cats := storetest.Catalogs(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name                   string
		failAppend, failFinish int
	}{
		{name: "streamed"},
		{name: "a piece of the second batch fails", failAppend: 9},
		{name: "finish fails", failFinish: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &streamStore{MemStore: ingest.NewMemStore(), failAppend: tc.failAppend, failFinish: tc.failFinish}
			w, err := ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger()})
			require.NoError(t, err)
			const batch, piece = 6000, 1000
			flushed := 0 // samples of flushed batches: what a worker would have committed
			var failed error
			for i := 0; i < len(samples) && failed == nil; i += batch {
				b := samples[i:min(i+batch, len(samples))]
				st := w.BeginStream(ctx, 0)
				for j := 0; j < len(b) && failed == nil; j += piece {
					failed = st.Write(ctx, b[j:min(j+piece, len(b))])
				}
				if failed == nil {
					failed = st.Close()
				} else {
					st.Abort()
				}
				if failed == nil {
					require.NoError(t, w.FlushRuns(ctx))
					flushed += len(b)
				}
			}
			if tc.failAppend+tc.failFinish == 0 {
				require.NoError(t, failed)
			} else {
				require.ErrorContains(t, failed, "injected")
				require.Less(t, flushed, len(samples))
				if tc.failAppend > 0 {
					require.Equal(t, batch, flushed, "the first batch was stored and flushed")
				}
				// Consume again from the last commit, with a fresh writer.
				store.failAppend, store.failFinish = 0, 0
				w, err = ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger()})
				require.NoError(t, err)
				storetest.WriteStreamed(t, w, samples[flushed:], batch, piece)
			}
			raw, _, _, _ := store.Counts()
			require.Equal(t, len(samples), raw, "every sample stored once: a failed insert stores nothing")
			storetest.RequireSameInvoices(t, data, cats, store)
			require.Equal(t, storetest.LatestOf(samples), storetest.Latest(t, store, 0), "FlushRuns writes the latest samples")
		})
	}
}

// Batches whose runs are flushed together (a backlog: the worker's
// CommitInterval) store the same intervals as batches flushed one by one, in
// fewer rows and fewer writes. Streamed batches are not covered until
// FlushRuns: the runs they extend are written only then.
func TestStagedBatchesFlushTogether(t *testing.T) {
	data := storetest.Trace(t, 20_000, 5)
	samples := storetest.Samples(t, data)
	cats := storetest.Catalogs(t)
	ctx := context.Background()
	occRows := map[int]int{}
	for _, every := range []int{1, 4, 1000} {
		store := &streamStore{MemStore: ingest.NewMemStore()}
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: store, Logger: quietLogger()})
		require.NoError(t, err)
		batches := 0
		for i := 0; i < len(samples); i += 2000 {
			st := w.BeginStream(ctx, time.Second)
			require.NoError(t, st.Write(ctx, samples[i:min(i+2000, len(samples))]))
			require.NoError(t, st.Close())
			if batches++; batches%every == 0 {
				require.NoError(t, w.FlushRuns(ctx))
			}
		}
		_, occBefore, _, _ := store.Counts()
		require.NoError(t, w.FlushRuns(ctx))
		raw, occ, _, writes := store.Counts()
		require.Equal(t, len(samples), raw)
		if every > batches {
			require.Less(t, occBefore, occ, "the open runs of unflushed batches are written by FlushRuns")
		}
		occRows[every] = occ
		t.Logf("flush every %d batches: %d occupancy rows, %d writes", every, occ, writes)
		storetest.RequireSameInvoices(t, data, cats, store)
		require.Equal(t, storetest.LatestOf(samples), storetest.Latest(t, store, 0))
	}
	require.Less(t, occRows[4], occRows[1], "open runs are written once per flush, not once per batch")
}
