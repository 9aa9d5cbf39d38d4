//go:build !collector

package main

import (
	"context"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/schemas"
)

// adviceReads answers the advice route from the usage store: the window's
// months billed with billing.BillFrom, then billing/advice.
type adviceReads struct {
	st billing.UsageSource
}

func (a adviceReads) Advise(ctx context.Context, cat *schemas.Catalog, opt advice.Options) (*advice.Report, error) {
	return advice.Advise(ctx, cat, advice.FromSource(a.st, cat), opt)
}
