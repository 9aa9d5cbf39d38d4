//go:build !collector

package main

import (
	"context"

	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/internal/advicerun"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// adviceReads answers the advice route from the usage store: the window's
// months billed with reads.BillFrom, then billing/advice (internal/advicerun).
type adviceReads struct {
	st reads.UsageSource
}

func (a adviceReads) Advise(ctx context.Context, cat *schemas.Catalog, opt advice.Options) (*advice.Report, error) {
	return advicerun.Advise(ctx, cat, reads.Biller(a.st, cat), opt, advicerun.Config{})
}
