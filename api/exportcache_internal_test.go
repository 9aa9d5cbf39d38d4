package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing/export"
)

// N concurrent first requests for one key render once: the rendering is
// held until every other request waits for it.
func TestExportCacheConcurrentFirstRequestsRenderOnce(t *testing.T) {
	c := newExportCache(1 << 20)
	key := newExportKey(FormatPDF, "", nil, []byte(`{"number":"2026-000001"}`))
	release := make(chan struct{})
	var renders atomic.Int32
	render := func(context.Context) ([]byte, error) {
		renders.Add(1)
		<-release
		return []byte("%PDF-rendered"), nil
	}
	const n = 32
	var wg sync.WaitGroup
	bodies := make([][]byte, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { bodies[i], errs[i] = c.get(context.Background(), key, render) })
	}
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		call := c.flight[key]
		return call != nil && call.waiters == n-1
	}, 10*time.Second, time.Millisecond, "every other request waits for the one rendering")
	close(release)
	wg.Wait()
	require.EqualValues(t, 1, renders.Load())
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, "%PDF-rendered", string(bodies[i]))
	}
	// Later requests are served what was kept.
	b, err := c.get(context.Background(), key, render)
	require.NoError(t, err)
	require.Equal(t, "%PDF-rendered", string(b))
	require.EqualValues(t, 1, renders.Load())
}

// The key tells apart what renders differently: format, statement user,
// void mark, the document's bytes.
func TestExportKeyParts(t *testing.T) {
	doc := []byte(`{"number":"2026-000001"}`)
	void := &export.VoidMark{CreditNote: "2026-000001-CN1", VoidedAt: time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC), Reason: "wrong SKU"}
	keys := map[exportKey]string{}
	for name, k := range map[string]exportKey{
		"pdf":       newExportKey(FormatPDF, "", nil, doc),
		"csv":       newExportKey(FormatCSV, "", nil, doc),
		"statement": newExportKey(FormatPDF, "2026010203", nil, doc),
		"void":      newExportKey(FormatPDF, "", void, doc),
		"other doc": newExportKey(FormatPDF, "", nil, []byte(`{"number":"2026-000002"}`)),
		"two docs":  newExportKey(FormatPDF, "", nil, doc, doc),
	} {
		require.NotContains(t, keys, k, "%s has the key of %s", name, keys[k])
		keys[k] = name
	}
	require.Equal(t, newExportKey(FormatPDF, "", nil, doc), newExportKey(FormatPDF, "", nil, []byte(string(doc))), "same bytes, same key")
}

// A failed rendering is not kept; the cache holds at most its bytes,
// dropping the least recently used.
func TestExportCacheBoundAndFailures(t *testing.T) {
	c := newExportCache(250)
	ctx := context.Background()
	fail := true
	var renders int
	render := func(i int) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) {
			renders++
			if fail {
				return nil, errors.New("font missing")
			}
			return fmt.Appendf(nil, "%0100d", i), nil
		}
	}
	key := func(i int) exportKey { return newExportKey(FormatPDF, "", nil, fmt.Appendf(nil, "doc %d", i)) }
	_, err := c.get(ctx, key(0), render(0))
	require.Error(t, err)
	fail = false
	b, err := c.get(ctx, key(0), render(0))
	require.NoError(t, err)
	require.Len(t, b, 100)
	require.Equal(t, 2, renders, "the failure was not kept")
	_, _ = c.get(ctx, key(1), render(1))
	_, _ = c.get(ctx, key(0), render(0)) // 0 is now the most recent
	_, _ = c.get(ctx, key(2), render(2)) // 300 bytes > 250: 1 goes
	require.Equal(t, 4, renders)
	require.LessOrEqual(t, c.size, int64(250))
	_, _ = c.get(ctx, key(0), render(0))
	require.Equal(t, 4, renders, "0 was kept")
	_, _ = c.get(ctx, key(1), render(1))
	require.Equal(t, 5, renders, "1 was dropped")

	off := newExportCache(-1)
	for range 3 {
		_, _ = off.get(ctx, key(0), render(0))
	}
	require.Equal(t, 8, renders, "a disabled cache renders every request")
}
