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
	UtilHeatmap(ctx context.Context, q reads.HeatmapQuery) (*reads.HeatmapReport, error)
}

func (s *Server) routesEfficiency() {
	register(s, huma.Operation{OperationID: "get-occupancy", Method: http.MethodGet, Path: "/api/v1/occupancy", Summary: "read the cluster's occupancy per GPU model",
		Description: "Per GPU model over a period or range (at most 93 days): available_seconds, the instance-seconds the collector sampled " +
			"(it samples every instance, held or not), held_seconds, the held part, and occupancy, held ÷ available as a percent with one decimal. " +
			"A MIG slice or a share is one instance like a whole card; a sample counts in the range its start falls in.", Tags: []string{"usage"}},
		rolesFinance, s.getOccupancy)
	register(s, huma.Operation{OperationID: "get-util-heatmap", Method: http.MethodGet, Path: "/api/v1/utilization/heatmap", Summary: "read utilisation per node and hour",
		Description: "A heat map of nodes × local hours over a period or range (at most 31 days), in at most `rows` rows (default 100, at most 500): " +
			"a row per node, or, when more nodes match than rows, a row per group of group_size consecutive nodes in node order (by name, runs of " +
			"digits compared as numbers), labelled with its first and last node and its node count. Per row and hour: util, the average utilisation " +
			"of the measured samples as a percent with one decimal (\"\" when none measured it) and held_unmeasured_seconds (held, util " +
			"null: MIG without DCGM, for one); per row, its sums over the range. A group's figures are the sums of its nodes' sample intervals, its " +
			"util their util × interval sum over their measured time. node_prefix, node_from and node_to choose the nodes (one group: its first " +
			"and last node).", Tags: []string{"usage"}},
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

type heatmapInput struct {
	RangeParams
	Rows       int    `query:"rows" minimum:"0" maximum:"500" doc:"the most rows (0: 100); more nodes than rows are grouped"`
	NodePrefix string `query:"node_prefix" maxLength:"256" doc:"only the nodes whose name starts with it"`
	NodeFrom   string `query:"node_from" maxLength:"256" doc:"only the nodes from this one on, in node order (included)"`
	NodeTo     string `query:"node_to" maxLength:"256" doc:"only the nodes up to this one, in node order (included); node_from and node_to of a row: its nodes"`
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

func (s *Server) getUtilHeatmap(ctx context.Context, in *heatmapInput) (*body[reads.HeatmapReport], error) {
	e, err := s.efficiency()
	if err != nil {
		return nil, err
	}
	from, to, err := s.efficiencyWindow(ctx, in.RangeParams, reads.MaxHeatmapRange)
	if err != nil {
		return nil, err
	}
	if in.NodeFrom != "" && in.NodeTo != "" && reads.CompareNodes(in.NodeFrom, in.NodeTo) > 0 {
		return nil, invalid(ctx, "query.node_to", "node_to must not come before node_from")
	}
	rep, err := e.UtilHeatmap(ctx, reads.HeatmapQuery{From: from, To: to, Rows: in.Rows, NodePrefix: in.NodePrefix, NodeFrom: in.NodeFrom, NodeTo: in.NodeTo})
	if err != nil {
		return nil, err
	}
	return &body[reads.HeatmapReport]{*rep}, nil
}
