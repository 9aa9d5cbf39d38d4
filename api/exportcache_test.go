package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/ledger"
)

// voidingFlow is the fake flow that renders a voided invoice with its void
// mark, counting renderings.
type voidingFlow struct {
	*fakeFlow
	renders atomic.Int32
}

func (v *voidingFlow) Render(ctx context.Context, w io.Writer, format string, docs ...[]byte) error {
	v.renders.Add(1)
	return v.fakeFlow.Render(ctx, w, format, docs...)
}

func (v *voidingFlow) RenderVoid(ctx context.Context, w io.Writer, format string, m export.VoidMark, doc []byte) error {
	v.renders.Add(1)
	fmt.Fprintf(w, "VOID %s\n", m.CreditNote)
	return v.fakeFlow.Render(ctx, w, format, doc)
}

// Over HTTP: a finalized invoice's export is rendered once and served as a
// fresh rendering; after a void it carries the void mark (other bytes).
func TestExportServedOnceAndVoidChangesIt(t *testing.T) {
	f := newFixture(t)
	vf := &voidingFlow{fakeFlow: f.flow}
	srv, err := api.New(api.Config{Ledger: f.led, Invoicing: vf, Clock: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv.MarkServing(true)
	h := srv.Handler()
	get := func(path string) []byte {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+f.tokens["finance"])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		return w.Body.Bytes()
	}
	id := f.ids["inv-oct-ai101"]
	path := fmt.Sprintf("/api/v1/invoices/%d/export?format=csv", id)
	first := get(path)
	inv, err := f.led.Invoice(context.Background(), id)
	require.NoError(t, err)
	var fresh = &writerBuf{}
	require.NoError(t, f.flow.Render(context.Background(), fresh, api.FormatCSV, inv.Document))
	require.Equal(t, string(fresh.b), string(first), "the bytes of a fresh rendering")
	for range 5 {
		require.Equal(t, first, get(path))
	}
	require.EqualValues(t, 1, vf.renders.Load())

	_, err = f.led.Void(context.Background(), "cli:test", id, "wrong SKU", ledger.VoidOptions{})
	require.NoError(t, err)
	after := get(path)
	require.NotEqual(t, first, after, "a void changes the exports")
	require.Contains(t, string(after), "VOID "+inv.Number+"-CN1")
	require.Equal(t, after, get(path))
	require.EqualValues(t, 2, vf.renders.Load())
}

type writerBuf struct{ b []byte }

func (w *writerBuf) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
