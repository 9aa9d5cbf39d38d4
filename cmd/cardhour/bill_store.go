//go:build !collector

package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/schemas"
)

// billFromStore bills period p from a store written by `cardhour ingest`:
// clickhouse://host:port/db or sqlite:///path.db. It reads occupancy and idle
// intervals, not raw samples, and gives byte-identical invoices to billing the
// same samples from a file.
func billFromStore(ctx context.Context, dsn string, cat *schemas.Catalog, p billing.Period) (*billing.Result, error) {
	st, err := storedsn.Open(ctx, dsn, storedsn.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	defer st.Close() //nolint:errcheck // nothing written is pending at close
	res, err := billing.BillFrom(ctx, st, cat, p)
	if err != nil {
		return nil, fmt.Errorf("cannot bill %s from %s: %w", p, dsn, err)
	}
	return res, nil
}
