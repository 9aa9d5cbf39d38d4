package catalogs_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cardhour/cardhour/internal/catalogs"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/schemas"
)

// store is a Source with versions by number and a current one; it counts
// the reads of a version by number.
type store struct {
	mu       sync.Mutex
	versions map[int64][]byte
	current  int64
	reads    atomic.Int64
	down     bool
}

func (s *store) CurrentCatalog(context.Context) (ledger.CatalogVersion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return ledger.CatalogVersion{}, errors.New("state store down")
	}
	return ledger.CatalogVersion{Version: s.current, Content: s.versions[s.current]}, nil
}

func (s *store) Catalog(_ context.Context, v int64) (ledger.CatalogVersion, error) {
	s.reads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.versions[v]
	if !ok {
		return ledger.CatalogVersion{}, ledger.ErrNotFound
	}
	return ledger.CatalogVersion{Version: v, Content: b}, nil
}

func (s *store) put(v int64, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions[v], s.current = b, v
}

func example(t *testing.T) []byte {
	b, err := os.ReadFile("../../schemas/examples/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Callers at once get the one parse of the current version; a new current
// version is picked up at the next call, and the old one stays parsed.
func TestAVersionIsParsedOnceAndANewOneIsPickedUp(t *testing.T) {
	ctx := context.Background()
	b := example(t)
	st := &store{versions: map[int64][]byte{}}
	st.put(1, b)
	c := catalogs.New(st)

	const n = 32
	got := make([]*schemas.Catalog, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cat, err := c.Current(ctx)
			if err != nil {
				t.Error(err)
			}
			got[i] = cat
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] == nil || got[i] != got[0] {
			t.Fatalf("caller %d got catalog %p, caller 0 %p: parsed more than once", i, got[i], got[0])
		}
	}
	if v1, err := c.Version(ctx, 1); err != nil || v1 != got[0] || st.reads.Load() != 0 {
		t.Fatalf("version 1: %p %v, %d store reads; want the parsed current one, no read", v1, err, st.reads.Load())
	}

	changed := bytes.Replace(b, []byte("currency: CNY"), []byte("currency: USD"), 1)
	if bytes.Equal(changed, b) {
		t.Fatal("the example catalog's currency moved")
	}
	st.put(2, changed)
	v, cat, err := c.CurrentVersion(ctx)
	if err != nil || v.Version != 2 || cat.Currency != "USD" {
		t.Fatalf("after a new version: version %d, currency %v, %v", v.Version, cat, err)
	}
	if again, _ := c.Current(ctx); again != cat {
		t.Fatal("version 2 parsed twice")
	}
	if v1, err := c.Version(ctx, 1); err != nil || v1 != got[0] {
		t.Fatalf("version 1 after version 2: %p %v", v1, err)
	}
}

// A version read by number is read from the store once; a missing one and
// a store that is down are errors, not cached.
func TestVersionsAndErrors(t *testing.T) {
	ctx := context.Background()
	st := &store{versions: map[int64][]byte{}}
	st.put(1, example(t))
	st.put(2, []byte("currency: [")) // stored and broken
	c := catalogs.New(st)
	a, err := c.Version(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := c.Version(ctx, 1); err != nil || b != a || st.reads.Load() != 1 {
		t.Fatalf("version 1 again: %v, %d store reads, want 1", err, st.reads.Load())
	}
	if _, err := c.Version(ctx, 7); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("missing version: %v", err)
	}
	if _, err := c.Current(ctx); err == nil || err.Error()[:36] != "stored catalog version 2 does not pa" {
		t.Fatalf("broken version: %v", err)
	}
	st.down = true
	if _, err := c.Current(ctx); err == nil {
		t.Fatal("a store that is down gave a catalog")
	}
	st.down = false
	st.put(3, example(t))
	if cat, err := c.Current(ctx); err != nil || cat == nil {
		t.Fatalf("after the store came back: %v", err)
	}
}
