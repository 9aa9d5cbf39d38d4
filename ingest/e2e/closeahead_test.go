package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
)

// gatedStore is a MemStore that takes raw samples streamed in pieces, a
// stream's samples reaching the store when it finishes (a database insert is
// acknowledged at its end). The first stream's Finish waits until the next
// stream has received a piece, then calls held (the test looks at the group's
// offsets there) and returns failFirst.
type gatedStore struct {
	*ingest.MemStore
	failFirst error
	held      func()

	mu      sync.Mutex
	streams int
	next    chan struct{} // closed by the second stream's first piece
}

type gatedStream struct {
	s       *gatedStore
	n       int // this stream's number, from 1
	pending []schemas.Sample
	pieces  int
}

func (s *gatedStore) BeginRaw(context.Context) (ingest.RawStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams++
	return &gatedStream{s: s, n: s.streams}, nil
}

func (g *gatedStream) Append(samples []schemas.Sample) error {
	g.pieces++
	if g.n == 2 && g.pieces == 1 {
		close(g.s.next)
	}
	g.pending = append(g.pending, samples...)
	return nil
}

func (g *gatedStream) Finish() error {
	if g.n == 1 {
		select {
		case <-g.s.next:
		case <-time.After(20 * time.Second):
			return errors.New("the next batch did not stream while this one was closing")
		}
		g.s.held()
		if g.s.failFirst != nil {
			return g.s.failFirst
		}
	}
	return g.s.Write(context.Background(), &ingest.Batch{Samples: g.pending})
}

func (g *gatedStream) Abort() {}

// A batch's insert ends in the background: while the server writes it, the
// next batch already streams on another insert. Its offsets are committed only
// once its insert has ended, and when that fails, nothing of it is committed:
// the worker consumes it again, and nothing is missing or billed twice.
func TestBatchClosesWhileTheNextStreams(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail error
	}{
		{"the first insert ends well", nil},
		{"the first insert fails", errors.New("injected failure at the end of the first insert")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			data := storetest.Trace(t, 6_000, 41)
			n := e.produce(t, data)
			mem := ingest.NewMemStore()
			var lagHeld int64 = -1
			st := &gatedStore{MemStore: mem, failFirst: tc.fail, next: make(chan struct{})}
			st.held = func() { lagHeld = e.lag(t) }
			cfg := e.workerConfig(st, ingest.NewMetrics(nil))
			cfg.BatchSize, cfg.StreamPiece, cfg.BatchAge = 1500, 300, time.Hour
			before := e.lag(t) // every message: nothing is committed yet
			stop := start(t, cfg)
			e.waitCommitted(t, 60*time.Second)
			require.NoError(t, stop())

			require.Equal(t, before, lagHeld, "nothing was committed while the first insert was still ending")
			require.GreaterOrEqual(t, st.streams, 3, "the second batch streamed while the first insert ended")
			raw, _, _, _ := mem.Counts()
			require.Equal(t, n, raw, "every sample stored once: a failed or abandoned insert stores nothing")
			storetest.RequireSameInvoices(t, data, storetest.Catalogs(t), mem)
		})
	}
}
