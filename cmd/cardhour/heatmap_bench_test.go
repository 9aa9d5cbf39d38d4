//go:build !collector

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// BenchmarkHeatmap is the heat map of November 2026 (Asia/Shanghai) at
// fleet size: "cells", the response before the rows were bounded (a JSON
// object per node and hour, every node; the read as it was, replicated
// below), against "rows", the response now (at most 100 rows, nodes
// grouped), and "group", one group opened. Each reports the response's
// bytes. The source: the store CARDHOUR_HEATMAP_BENCH_STORE names (a DSN,
// read-only), else the rows a store returns for CARDHOUR_HEATMAP_BENCH_NODES
// nodes (default 2 059, the fleet of 70 000 instances) of two GPU models,
// every hour, in memory: the engine's cost without the store's.
func BenchmarkHeatmap(b *testing.B) {
	ctx := context.Background()
	var src reads.UtilRows = fleetUtilRows(cmp.Or(atoiEnv("CARDHOUR_HEATMAP_BENCH_NODES"), 2059))
	if dsn := os.Getenv("CARDHOUR_HEATMAP_BENCH_STORE"); dsn != "" {
		st, err := storedsn.Open(ctx, dsn, storedsn.Options{Logger: slog.New(slog.DiscardHandler), Mode: storedsn.Read})
		require.NoError(b, err)
		b.Cleanup(func() { _ = st.Close() })
		rows, ok := st.(reads.UtilRows)
		require.True(b, ok)
		src = rows
	}
	sh, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(b, err)
	cat := &schemas.Catalog{Timezone: "Asia/Shanghai", Location: sh}
	from, to := time.Date(2026, 11, 1, 0, 0, 0, 0, sh), time.Date(2026, 12, 1, 0, 0, 0, 0, sh)
	report := func(b *testing.B, v any) {
		body, err := json.Marshal(v)
		require.NoError(b, err)
		b.ReportMetric(float64(len(body)), "resp-bytes")
	}
	b.Run("cells", func(b *testing.B) {
		for b.Loop() {
			rep, err := heatmapCells(ctx, src, sh, from, to)
			require.NoError(b, err)
			report(b, rep)
		}
	})
	var first reads.HeatmapRow
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			rep, err := reads.UtilHeatmap(ctx, src, cat, reads.HeatmapQuery{From: from, To: to})
			require.NoError(b, err)
			require.NotEmpty(b, rep.Rows)
			first = rep.Rows[0]
			report(b, rep)
		}
	})
	b.Run("group", func(b *testing.B) {
		for b.Loop() {
			rep, err := reads.UtilHeatmap(ctx, src, cat, reads.HeatmapQuery{From: from, To: to, NodeFrom: first.First, NodeTo: first.Last})
			require.NoError(b, err)
			require.Len(b, rep.Rows, first.Nodes)
			report(b, rep)
		}
	})
}

func atoiEnv(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// fleetUtilRows answers the heat map's store query for n nodes of 34
// instances (two GPU models, 17 each), seen every hour, with a util that
// varies by node and hour.
type fleetUtilRows int

func (n fleetUtilRows) UtilRows(ctx context.Context, q schemas.UtilRowQuery, fn func(schemas.UtilRow) error) error {
	models := []string{"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"}
	if q.AllModels {
		models = []string{""}
	}
	per := int64(34/len(models)) * 3_600_000
	for h := q.FromMS - q.FromMS%3_600_000; h < q.ToMS; h += 3_600_000 {
		for node := range int(n) {
			for _, m := range models {
				u := float64((node*7+int(h/3_600_000))%100) / 100
				if err := fn(schemas.UtilRow{Node: fmt.Sprintf("gpu-node-%02d", node), GPUModel: m, BucketMS: h,
					SeenMS: per, HeldMS: per / 2, MeasuredMS: per, UtilMS: u * float64(per)}); err != nil {
					return err
				}
			}
		}
	}
	return ctx.Err()
}

// heatmapCells is the heat map read as it was before its rows were bounded
// (reads.UtilHeatmap at 9ed080e): a cell per node and hour, every node.
func heatmapCells(ctx context.Context, src reads.UtilRows, loc *time.Location, from, to time.Time) (*cellsReport, error) {
	rep := &cellsReport{From: from, To: to, Timezone: loc.String(), Nodes: []string{}, Cells: []cell{}}
	for t := from; t.Before(to); t = t.Add(time.Hour) {
		rep.Hours = append(rep.Hours, t.In(loc).Format(time.RFC3339))
	}
	type key struct{ node, hour string }
	type sum struct {
		row  schemas.UtilRow
		util float64
	}
	cells := map[key]*sum{}
	names := map[int64]string{}
	q := schemas.UtilRowQuery{FromMS: from.UnixMilli(), ToMS: to.UnixMilli(), ByNode: true, BucketMS: 3_600_000}
	err := src.UtilRows(ctx, q, func(r schemas.UtilRow) error {
		h, ok := names[r.BucketMS]
		if !ok {
			h = time.UnixMilli(r.BucketMS).In(loc).Format(time.RFC3339)
			names[r.BucketMS] = h
		}
		c := cells[key{r.Node, h}]
		if c == nil {
			c = &sum{}
			cells[key{r.Node, h}] = c
		}
		c.row.SeenMS += r.SeenMS
		c.row.HeldMS += r.HeldMS
		c.row.MeasuredMS += r.MeasuredMS
		c.row.HeldUnmeasuredMS += r.HeldUnmeasuredMS
		c.util += r.UtilMS
		return nil
	})
	if err != nil {
		return nil, err
	}
	nodes := map[string]bool{}
	for k, c := range cells {
		nodes[k.node] = true
		out := cell{Node: k.node, Hour: k.hour, SeenSeconds: c.row.SeenMS / 1000, HeldSeconds: c.row.HeldMS / 1000,
			MeasuredSeconds: c.row.MeasuredMS / 1000, HeldUnmeasuredSeconds: c.row.HeldUnmeasuredMS / 1000}
		if c.row.MeasuredMS > 0 {
			out.Util = strconv.FormatFloat(math.Round(c.util/float64(c.row.MeasuredMS)*1000)/10, 'f', 1, 64)
		}
		rep.Cells = append(rep.Cells, out)
	}
	for n := range nodes {
		rep.Nodes = append(rep.Nodes, n)
	}
	slices.Sort(rep.Nodes)
	slices.SortFunc(rep.Cells, func(a, b cell) int { return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Hour, b.Hour)) })
	return rep, nil
}

// cellsReport and cell are the heat map's response as it was.
type cellsReport struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Timezone string    `json:"timezone"`
	Nodes    []string  `json:"nodes"`
	Hours    []string  `json:"hours"`
	Cells    []cell    `json:"cells"`
}

type cell struct {
	Node                  string `json:"node"`
	Hour                  string `json:"hour"`
	SeenSeconds           int64  `json:"seen_seconds"`
	HeldSeconds           int64  `json:"held_seconds"`
	MeasuredSeconds       int64  `json:"measured_seconds"`
	HeldUnmeasuredSeconds int64  `json:"held_unmeasured_seconds"`
	Util                  string `json:"util,omitempty"`
}
