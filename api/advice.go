package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/schemas"
)

// Advisor answers the advice route: reservations each project would have paid
// least for over the last whole months, and the reservations that covered
// little (billing/advice over the usage store).
type Advisor interface {
	Advise(ctx context.Context, cat *schemas.Catalog, opt advice.Options) (*advice.Report, error)
}

// AdviceParams select the advice.
type AdviceParams struct {
	Months      int    `query:"months" minimum:"0" maximum:"24" doc:"whole months before the current one (0: 3)"`
	Project     string `query:"project" doc:"one project (a lead token: its own, whatever is asked)"`
	MinCoverage string `query:"min_coverage" pattern:"^(0(\\.[0-9]{1,6})?|1(\\.0{1,6})?)$" doc:"a share in [0, 1] with at most 6 decimals, e.g. 0.5: report a reservation whose covered hours are below this share of its hours (default 0.5)"`
}

func (s *Server) routesAdvice() {
	register(s, huma.Operation{OperationID: "get-advice", Method: http.MethodGet, Path: "/api/v1/advice", Summary: "advise reservations",
		Description: "For each project and SKU over the last whole months: the concurrency profile, the mix of reservations " +
			"(month, quarter, year) and hourly use that would have cost least, priced by the billing engine, the saving against " +
			"what was billed, each term's break-even utilisation, the cost if use halves, and the reservations that covered less " +
			"than min_coverage of their hours. Sentences in English and Chinese. A lead sees its own project.", Tags: []string{"usage"}},
		rolesStaff, s.getAdvice)
}

func (s *Server) getAdvice(ctx context.Context, in *AdviceParams) (*body[*advice.Report], error) {
	project, err := projectScope(ctx, in.Project)
	if err != nil {
		return nil, err
	}
	cov := advice.DefaultMinCoverage
	if in.MinCoverage != "" {
		cov, err = decimal.NewFromString(strings.TrimSpace(in.MinCoverage))
		if err != nil || cov.Sign() < 0 || cov.GreaterThan(decimal.NewFromInt(1)) {
			return nil, invalid(ctx, "query.min_coverage", "min_coverage %q: want a share in [0, 1], e.g. 0.5", in.MinCoverage)
		}
	}
	if s.cfg.Advice == nil {
		return nil, fmt.Errorf("%w: this server has no usage store configured for advice", ErrUnavailable)
	}
	_, cat, err := s.currentCatalog(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := s.cfg.Advice.Advise(ctx, cat, advice.Options{Months: in.Months, Now: s.now(), Project: project, MinCoverage: cov})
	if err != nil {
		return nil, err
	}
	return &body[*advice.Report]{rep}, nil
}
