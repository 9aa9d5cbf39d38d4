//go:build !collector

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/reads"
)

// utilRows is the store's sums of every sample, for the efficiency routes.
func (u *usageReads) utilRows() (reads.UtilRows, error) {
	rows, ok := u.st.(reads.UtilRows)
	if !ok {
		return nil, fmt.Errorf("%w: this usage store cannot sum every sample", api.ErrUnavailable)
	}
	return rows, nil
}

// Occupancy implements api.Efficiency with reads.Occupancy.
func (u *usageReads) Occupancy(ctx context.Context, from, to time.Time) (*reads.OccupancyReport, error) {
	rows, err := u.utilRows()
	if err != nil {
		return nil, err
	}
	cat, err := u.cats.Current(ctx)
	if err != nil {
		return nil, err
	}
	return reads.Occupancy(ctx, rows, cat, from, to)
}

// UtilHeatmap implements api.Efficiency with reads.UtilHeatmap.
func (u *usageReads) UtilHeatmap(ctx context.Context, q reads.HeatmapQuery) (*reads.HeatmapReport, error) {
	rows, err := u.utilRows()
	if err != nil {
		return nil, err
	}
	cat, err := u.cats.Current(ctx)
	if err != nil {
		return nil, err
	}
	return reads.UtilHeatmap(ctx, rows, cat, q)
}
