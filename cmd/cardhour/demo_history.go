//go:build !collector

package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/fleet"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// demoHistoryInterval is the sampling interval of the demo's history: the
// month before its start, back-filled at start so that the Monthly review
// (the last closed month), month over month and the trends have a month to
// show from the first simulated hour.
const demoHistoryInterval = 15 * time.Minute

// demoHistory back-fills the calendar month before start's month (in
// start's zone): the demo fleet simulated over it, sampled every
// demoHistoryInterval, through the box's writer and into its samples file,
// as a collector that ran then would have. The month is the fleet before
// cardhour's watcher: no alert, no release. It returns the month and how
// many samples it stored.
func demoHistory(ctx context.Context, b *box, spec *fleet.Spec, start time.Time) (month string, n int64, err error) {
	cur := time.Date(start.Year(), start.Month(), 1, 0, 0, 0, 0, start.Location())
	from := cur.AddDate(0, -1, 0)
	p := &writerPublisher{w: b.iw, tee: b.Tee}
	err = fleet.Simulate(ctx, fleet.SimulateConfig{Spec: spec, From: from, To: cur, Interval: demoHistoryInterval, Publisher: p,
		Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		err = p.flush(ctx)
	}
	if err != nil {
		return "", p.n, fmt.Errorf("demo history of %s: %w", from.Format("2006-01"), err)
	}
	return from.Format("2006-01"), p.n, nil
}

// writerPublisher stores what a simulation publishes through an ingest
// Writer in batches, and copies each batch to tee (when set) once stored.
type writerPublisher struct {
	w   *ingest.Writer
	tee collector.Publisher
	buf []schemas.Sample
	n   int64
}

func (p *writerPublisher) Publish(ctx context.Context, s []schemas.Sample) error {
	p.buf = append(p.buf, s...) // a copy: the collector reuses its buffer
	if len(p.buf) >= 20_000 {
		return p.flush(ctx)
	}
	return nil
}

func (p *writerPublisher) flush(ctx context.Context) error {
	if len(p.buf) == 0 {
		return nil
	}
	if err := p.w.Write(ctx, p.buf); err != nil {
		return err
	}
	if p.tee != nil {
		if err := p.tee.Publish(ctx, p.buf); err != nil {
			return err
		}
	}
	p.n += int64(len(p.buf))
	p.buf = p.buf[:0]
	return nil
}
