package api

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// DefaultExportCacheBytes is the size of the export cache when
// Config.ExportCacheBytes is 0.
const DefaultExportCacheBytes = 64 << 20

// exportKey names one rendering. A rendering depends only on the document's
// bytes (a draft's change with it), the format, whose statement it is and
// the void mark: the same key always renders the same bytes.
type exportKey struct {
	sha    [sha256.Size]byte // of the document(s) rendered
	format string
	user   string // the statement's user; "" for the invoice or period
	void   string // the credit note's number; "" when not voided
}

func newExportKey(format, user string, void *export.VoidMark, docs ...[]byte) exportKey {
	k := exportKey{format: format, user: user}
	if void != nil {
		k.void = void.CreditNote + "\x00" + void.VoidedAt.UTC().Format(time.RFC3339Nano) + "\x00" + void.Reason
	}
	if len(docs) == 1 {
		k.sha = sha256.Sum256(docs[0])
		return k
	}
	h := sha256.New()
	for _, d := range docs {
		s := sha256.Sum256(d)
		h.Write(s[:])
	}
	copy(k.sha[:], h.Sum(nil))
	return k
}

// exportCache keeps rendered exports, least recently used out first, up to
// a number of bytes. Concurrent first requests for one key render once: the
// others wait for that rendering (single flight). Failed renderings are not
// kept.
type exportCache struct {
	max int64 // bytes kept at most; <= 0: nothing is kept

	mu     sync.Mutex
	size   int64
	lru    *list.List // of *exportEntry, most recent first
	items  map[exportKey]*list.Element
	flight map[exportKey]*exportCall

	hits, renders atomic.Int64
}

type exportEntry struct {
	key  exportKey
	body []byte
}

type exportCall struct {
	done    chan struct{}
	body    []byte
	err     error
	waiters int // requests waiting for it (under exportCache.mu)
}

func newExportCache(maxBytes int64) *exportCache {
	return &exportCache{max: maxBytes, lru: list.New(), items: map[exportKey]*list.Element{}, flight: map[exportKey]*exportCall{}}
}

// get returns the rendering of key: kept, being rendered (waited for), or
// rendered now by render. The bytes returned are shared: never modify them.
// The rendering is not cancelled when the request that started it goes
// away (others may wait for it); a waiting request gives up with its
// context.
func (c *exportCache) get(ctx context.Context, key exportKey, render func(context.Context) ([]byte, error)) ([]byte, error) {
	if c.max <= 0 {
		c.renders.Add(1)
		return render(ctx)
	}
	c.mu.Lock()
	if el, ok := c.items[key]; ok {
		c.lru.MoveToFront(el)
		c.mu.Unlock()
		c.hits.Add(1)
		return el.Value.(*exportEntry).body, nil
	}
	if call, ok := c.flight[key]; ok {
		call.waiters++
		c.mu.Unlock()
		select {
		case <-call.done:
			if call.err == nil {
				c.hits.Add(1)
			}
			return call.body, call.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	call := &exportCall{done: make(chan struct{})}
	c.flight[key] = call
	c.mu.Unlock()

	c.renders.Add(1)
	call.body, call.err = render(context.WithoutCancel(ctx))
	c.mu.Lock()
	delete(c.flight, key)
	if call.err == nil {
		c.add(key, call.body)
	}
	c.mu.Unlock()
	close(call.done)
	return call.body, call.err
}

// add keeps body under key and drops the least recently used renderings
// beyond max; a rendering larger than max is not kept. c.mu is held.
func (c *exportCache) add(key exportKey, body []byte) {
	n := int64(len(body))
	if n > c.max {
		return
	}
	c.items[key] = c.lru.PushFront(&exportEntry{key: key, body: body})
	c.size += n
	for c.size > c.max {
		el := c.lru.Back()
		e := el.Value.(*exportEntry)
		c.lru.Remove(el)
		delete(c.items, e.key)
		c.size -= int64(len(e.body))
	}
}

// export renders docs in format through the cache: user names a
// statement's user, void the void mark of a voided invoice (nil
// otherwise; a PDF or statement holds one document).
func (s *Server) export(ctx context.Context, format, name, user string, void *export.VoidMark, docs ...[]byte) (*fileOutput, error) {
	inv, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	key := newExportKey(format, user, void, docs...)
	body, err := s.exports.get(ctx, key, func(ctx context.Context) ([]byte, error) {
		var buf bytes.Buffer
		var rerr error
		if void != nil && len(docs) == 1 {
			rerr = inv.RenderVoid(ctx, &buf, format, *void, docs[0])
		} else {
			rerr = inv.Render(ctx, &buf, format, docs...)
		}
		if rerr != nil {
			return nil, rerr
		}
		return buf.Bytes(), nil
	})
	if err != nil {
		return nil, err
	}
	return &fileOutput{ContentType: formatTypes[format], ContentDisposition: fmt.Sprintf(`attachment; filename="%s.%s"`, name, format), Body: body}, nil
}

// voidMark is the void mark of a voided invoice's exports (nil when inv is
// not void): they differ from the frozen ones (已作废 / VOID and the credit
// note's number), whose document keeps its bytes.
func (s *Server) voidMark(ctx context.Context, inv ledger.Invoice) (*export.VoidMark, error) {
	if inv.Status != ledger.StatusVoid {
		return nil, nil
	}
	cns, err := s.cfg.Ledger.CreditNotes(ctx, inv.ID)
	if err != nil {
		return nil, err
	}
	m := invoicing.VoidMarkOf(inv, cns)
	return &m, nil
}
