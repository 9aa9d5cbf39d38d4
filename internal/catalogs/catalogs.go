// Package catalogs is the one cache of the state store's catalog versions,
// parsed: a stored version never changes, so each is parsed once for the
// API, the usage reads, the invoice flow and the watcher of a process,
// while the current version is asked of the store every time (another
// replica or `cardhour catalog put` may have stored a new one).
package catalogs

import (
	"context"
	"fmt"
	"sync"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/schemas"
)

// Source is what the cache reads: the state store's catalog versions.
// Any ledger.Store is one.
type Source interface {
	CurrentCatalog(ctx context.Context) (ledger.CatalogVersion, error)
	Catalog(ctx context.Context, version int64) (ledger.CatalogVersion, error)
}

// Cache parses each catalog version of its Source once. It is safe for
// concurrent use; callers asking for a version being parsed wait for it.
type Cache struct {
	src    Source
	mu     sync.Mutex
	parsed map[int64]*entry
}

// entry is one version: parsed by the first caller, waited for by the
// others. A version that does not parse stays an error (its bytes never
// change).
type entry struct {
	once    sync.Once
	version int64
	content []byte // until parsed
	cat     *schemas.Catalog
	err     error
}

func (e *entry) get() (*schemas.Catalog, error) {
	e.once.Do(func() {
		e.cat, e.err = schemas.ParseCatalog(e.content, fmt.Sprintf("catalog version %d", e.version))
		if e.err != nil {
			e.err = fmt.Errorf("stored catalog version %d does not parse: %w", e.version, e.err)
		}
		e.content = nil
	})
	return e.cat, e.err
}

// New returns an empty cache over src.
func New(src Source) *Cache {
	return &Cache{src: src, parsed: map[int64]*entry{}}
}

// Current is the current catalog version, parsed.
func (c *Cache) Current(ctx context.Context) (*schemas.Catalog, error) {
	_, cat, err := c.CurrentVersion(ctx)
	return cat, err
}

// CurrentVersion is the current catalog version as stored, and parsed.
func (c *Cache) CurrentVersion(ctx context.Context) (ledger.CatalogVersion, *schemas.Catalog, error) {
	v, err := c.src.CurrentCatalog(ctx)
	if err != nil {
		return v, nil, err
	}
	cat, err := c.Parse(v)
	return v, cat, err
}

// Version is catalog version n, parsed; the store is read only the first
// time.
func (c *Cache) Version(ctx context.Context, n int64) (*schemas.Catalog, error) {
	c.mu.Lock()
	e := c.parsed[n]
	c.mu.Unlock()
	if e != nil {
		return e.get()
	}
	v, err := c.src.Catalog(ctx, n)
	if err != nil {
		return nil, err
	}
	return c.Parse(v)
}

// Parse is stored version v parsed, once per version: v as a caller read it
// from the Source.
func (c *Cache) Parse(v ledger.CatalogVersion) (*schemas.Catalog, error) {
	c.mu.Lock()
	e := c.parsed[v.Version]
	if e == nil {
		e = &entry{version: v.Version, content: v.Content}
		c.parsed[v.Version] = e
	}
	c.mu.Unlock()
	return e.get()
}
