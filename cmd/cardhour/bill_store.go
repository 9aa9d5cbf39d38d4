//go:build !collector

package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// rejectsShown is how many rejected samples a billing warning quotes.
const rejectsShown = 3

// billFromStore bills period p from a store written by `cardhour ingest`:
// clickhouse://host:port/db or sqlite:///path.db. It reads occupancy and idle
// intervals, not raw samples, and gives byte-identical invoices to billing the
// same samples from a file. The store is opened read-only: a missing store or
// schema is an error, never an empty invoice. When input of the period was
// rejected at ingest, the result carries a warning saying so.
func billFromStore(ctx context.Context, dsn string, cat *schemas.Catalog, p billing.Period) (*billing.Result, error) {
	st, err := storedsn.Open(ctx, dsn, storedsn.Options{Logger: slog.New(slog.DiscardHandler), Mode: storedsn.Read})
	if err != nil {
		return nil, err
	}
	defer st.Close() //nolint:errcheck // nothing written is pending at close
	res, err := reads.BillFrom(ctx, st, cat, p)
	if err != nil {
		return nil, fmt.Errorf("cannot bill %s from %s: %w", p, dsn, err)
	}
	sum, err := st.RejectSummary(ctx, p.StartMS(), p.EndMS(), rejectsShown)
	if err != nil {
		return nil, fmt.Errorf("cannot bill %s from %s: %w", p, dsn, err)
	}
	if w := ingest.RejectWarning(p, sum); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	return res, nil
}
