//go:build !collector

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/catalogs"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
)

// stack is the API in process on SQLite with the real invoice flow and
// renderers, as `cardhour serve` builds it.
type stack struct {
	base  string
	led   ledger.Store
	flow  *flow
	token string // finance
}

// startStack ingests samples, seeds the example catalog and serves the API;
// wrap, when set, wraps the invoice flow the API calls.
func startStack(tb testing.TB, samples string, now time.Time, wrap func(*flow) api.Invoicing) *stack {
	tb.Helper()
	dir := tb.TempDir()
	store := "sqlite://" + filepath.Join(dir, "usage.db")
	var out, errOut strings.Builder
	code := run([]string{"ingest", "--store", store, "--from-file", samples, "--listen", ""}, &out, &errOut)
	require.Zero(tb, code, out.String()+errOut.String())
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	log := slog.New(slog.DiscardHandler)
	clock := func() time.Time { return now }
	led, err := ledgerdsn.Open(ctx, store, ledgerdsn.Options{Clock: clock})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = led.Close() })
	require.NoError(tb, seedCatalog(ctx, led, exampleCatalog, io.Discard))
	st, err := storedsn.Open(ctx, store, storedsn.Options{Logger: log, Mode: storedsn.Read})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = st.Close() })
	svc, err := invoicing.New(invoicing.Config{Ledger: led, Usage: st, Clock: clock, Grace: time.Hour, Logger: log})
	require.NoError(tb, err)
	fl := &flow{svc: svc, led: led, docs: invoicing.ExportDocuments{}}
	var inv api.Invoicing = fl
	if wrap != nil {
		inv = wrap(fl)
	}
	srv, err := api.New(api.Config{Ledger: led, Invoicing: inv, Logger: log, Clock: clock,
		Usage: &usageReads{cats: catalogs.New(led), st: st, now: clock}})
	require.NoError(tb, err)
	srv.MarkServing(true)
	hs := httptest.NewServer(srv.Handler())
	tb.Cleanup(hs.Close)
	secret, _, err := led.CreateToken(ctx, "cli:test", ledger.NewToken{Role: ledger.RoleFinance, TTL: time.Hour})
	require.NoError(tb, err)
	return &stack{base: hs.URL, led: led, flow: fl, token: secret}
}

// call sends a request with the finance token and returns status and body.
func (s *stack) call(tb testing.TB, method, path, body string) (int, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close() //nolint:errcheck // read to the end
	b, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return resp.StatusCode, b
}

// must is call expecting 200.
func (s *stack) must(tb testing.TB, method, path, body string, v any) []byte {
	tb.Helper()
	code, b := s.call(tb, method, path, body)
	require.Equal(tb, http.StatusOK, code, "%s %s: %s", method, path, b)
	if v != nil {
		require.NoError(tb, json.Unmarshal(b, v), string(b))
	}
	return b
}

// countingFlow counts the renderings the API asks for.
type countingFlow struct {
	*flow
	renders atomic.Int32
}

func (c *countingFlow) Render(ctx context.Context, w io.Writer, format string, docs ...[]byte) error {
	c.renders.Add(1)
	return c.flow.Render(ctx, w, format, docs...)
}

func (c *countingFlow) RenderVoid(ctx context.Context, w io.Writer, format string, m export.VoidMark, doc []byte) error {
	c.renders.Add(1)
	return c.flow.RenderVoid(ctx, w, format, m, doc)
}

// A finalized invoice's PDF is rendered once however many ask at once; what
// is served is the bytes a fresh rendering of the stored document gives;
// after a void the exports are rendered again with the void mark.
func TestExportCacheServesOneRenderingOfTheStoredDocument(t *testing.T) {
	var cf *countingFlow
	s := startStack(t, exampleSamples, afterNovember, func(f *flow) api.Invoicing { cf = &countingFlow{flow: f}; return cf })
	var run invoicing.RunReport
	s.must(t, http.MethodPost, "/api/v1/billing-runs", `{"period":"2026-11"}`, &run)
	require.NotEmpty(t, run.Drafts)
	d := run.Drafts[0]
	s.must(t, http.MethodPost, fmt.Sprintf("/api/v1/invoices/%d/finalize", d.InvoiceID), fmt.Sprintf(`{"if_sha256":%q}`, d.SHA256), nil)
	inv, err := s.led.Invoice(context.Background(), d.InvoiceID)
	require.NoError(t, err)
	var fresh bytes.Buffer
	require.NoError(t, s.flow.Render(context.Background(), &fresh, api.FormatPDF, inv.Document))
	require.True(t, bytes.HasPrefix(fresh.Bytes(), []byte("%PDF-")))

	path := fmt.Sprintf("/api/v1/invoices/%d/export?format=pdf", d.InvoiceID)
	const n = 16
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code, b := s.call(t, http.MethodGet, path, "")
			if code == http.StatusOK {
				bodies[i] = b
			}
		})
	}
	wg.Wait()
	for i := range n {
		require.Equal(t, fresh.Bytes(), bodies[i], "request %d: the bytes of a fresh rendering", i)
	}
	require.EqualValues(t, 1, cf.renders.Load(), "%d concurrent requests render once", n)
	s.must(t, http.MethodGet, path, "", nil)
	require.EqualValues(t, 1, cf.renders.Load(), "a later request is served the kept rendering")
	csv := s.must(t, http.MethodGet, fmt.Sprintf("/api/v1/invoices/%d/export?format=csv", d.InvoiceID), "", nil)
	require.EqualValues(t, 2, cf.renders.Load(), "another format is another rendering")
	require.Contains(t, string(csv), inv.Number)

	var voided api.VoidedBody
	s.must(t, http.MethodPost, fmt.Sprintf("/api/v1/invoices/%d/void", d.InvoiceID), `{"reason":"wrong SKU"}`, &voided)
	after := s.must(t, http.MethodGet, path, "", nil)
	require.EqualValues(t, 3, cf.renders.Load(), "a void changes the key: rendered again")
	vinv, err := s.led.Invoice(context.Background(), d.InvoiceID)
	require.NoError(t, err)
	require.Equal(t, inv.Document, vinv.Document, "the frozen document keeps its bytes")
	var freshVoid bytes.Buffer
	require.NoError(t, s.flow.RenderVoid(context.Background(), &freshVoid, api.FormatPDF,
		export.VoidMark{CreditNote: voided.CreditNote.Number, VoidedAt: vinv.VoidedAt, Reason: vinv.VoidReason}, vinv.Document))
	require.Equal(t, freshVoid.Bytes(), after, "the voided invoice's PDF is a fresh rendering with its void mark")
	s.must(t, http.MethodGet, path, "", nil)
	require.EqualValues(t, 3, cf.renders.Load())
}
