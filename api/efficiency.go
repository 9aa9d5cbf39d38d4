package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cardhour/cardhour/internal/reads"
)

// Efficiency answers the staff's efficiency routes from the usage store:
// occupancy per GPU model and the utilisation heat map (reads.Occupancy,
// reads.UtilHeatmap). The Usage dependency implements it where its store
// can sum every sample; elsewhere the routes are unavailable.
type Efficiency interface {
	Occupancy(ctx context.Context, from, to time.Time) (*reads.OccupancyReport, error)
	UtilHeatmap(ctx context.Context, from, to time.Time) (*reads.HeatmapReport, error)
}

func (s *Server) routesEfficiency() {
	register(s, huma.Operation{OperationID: "get-occupancy", Method: http.MethodGet, Path: "/api/v1/occupancy", Summary: "read the cluster's occupancy per GPU model",
		Description: "Per GPU model over a period or range (at most 93 days): available_seconds, the instance-seconds the collector sampled " +
			"(it samples every instance, held or not), held_seconds, the held part, and occupancy, held ÷ available as a percent with one decimal. " +
			"A MIG slice or a share is one instance like a whole card; a sample counts in the range its start falls in.", Tags: []string{"usage"}},
		rolesFinance, s.getOccupancy)
	register(s, huma.Operation{OperationID: "get-util-heatmap", Method: http.MethodGet, Path: "/api/v1/utilization/heatmap", Summary: "read utilisation per node and hour",
		Description: "A heat map of nodes × local hours over a period or range (at most 31 days): per node and hour with samples, the instance-seconds " +
			"sampled, held, measured (util known) and held but not measured (util null: MIG without DCGM, for one), and util, the average utilisation " +
			"of the measured samples as a percent with one decimal (absent when none measured it).", Tags: []string{"usage"}},
		rolesFinance, s.getUtilHeatmap)
}

func (s *Server) efficiency() (Efficiency, error) {
	if e, ok := s.cfg.Usage.(Efficiency); ok && s.cfg.Usage != nil {
		return e, nil
	}
	return nil, fmt.Errorf("%w: this server's usage store cannot sum every sample", ErrUnavailable)
}

type efficiencyInput struct {
	RangeParams
}

// efficiencyWindow is the range of an efficiency request, at most max long.
func (s *Server) efficiencyWindow(ctx context.Context, r RangeParams, max time.Duration) (time.Time, time.Time, error) {
	from, to, err := s.window(ctx, r)
	if err == nil && to.Sub(from) > max {
		err = invalid(ctx, "query.to", "the range may span at most %d days", int(max/(24*time.Hour)))
	}
	return from, to, err
}

func (s *Server) getOccupancy(ctx context.Context, in *efficiencyInput) (*body[reads.OccupancyReport], error) {
	e, err := s.efficiency()
	if err != nil {
		return nil, err
	}
	from, to, err := s.efficiencyWindow(ctx, in.RangeParams, reads.MaxOccupancyRange)
	if err != nil {
		return nil, err
	}
	rep, err := e.Occupancy(ctx, from, to)
	if err != nil {
		return nil, err
	}
	return &body[reads.OccupancyReport]{*rep}, nil
}

func (s *Server) getUtilHeatmap(ctx context.Context, in *efficiencyInput) (*body[reads.HeatmapReport], error) {
	e, err := s.efficiency()
	if err != nil {
		return nil, err
	}
	from, to, err := s.efficiencyWindow(ctx, in.RangeParams, reads.MaxHeatmapRange)
	if err != nil {
		return nil, err
	}
	rep, err := e.UtilHeatmap(ctx, from, to)
	if err != nil {
		return nil, err
	}
	return &body[reads.HeatmapReport]{*rep}, nil
}
