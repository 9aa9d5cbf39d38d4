//go:build !collector

package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing/ledger"
	"github.com/cardhour/cardhour/ingest"
)

// serveBackends builds what the API reads and does besides the state store:
// the usage reads and the invoice flow over the usage store.
func serveBackends(_ context.Context, _ ledger.Store, st ingest.Backend, _ time.Duration, _ *slog.Logger) (api.Config, error) {
	return api.Config{UsagePing: func(ctx context.Context) error {
		_, err := st.RejectSummary(ctx, 0, 1, 0)
		return err
	}}, nil
}
