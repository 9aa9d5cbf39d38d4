package watch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// settleStale settles the releases left pending longer than
// ledger.ReleaseStale: an attempt whose process stopped (kill -9, a crash)
// while the releaser was being called, so that its outcome was never
// recorded nor told. Each is checked against the latest samples of its
// instance:
//   - still held by the same holder, idle in the same streak, reporting
//     since the attempt began: left to the idle policy, which begins the
//     attempt again (BeginRelease retries a stale one);
//   - no sample since the attempt began (the instance is no longer held,
//     or its samples stopped then): released (a dry run: nothing was to
//     be released), recorded done and told by idle_release;
//   - reporting since, in another streak or busy: not released, recorded
//     failed for good and told by idle_release_failed.
//
// It runs every cycle, before the idle policy, whether or not the instance
// is still held.
func (w *Watcher) settleStale(ctx context.Context, cat *schemas.Catalog, st *state, held []reads.Held, now time.Time, rep *CycleReport) error {
	var stale []ledger.Release
	cursor := ""
	for {
		page, next, err := w.cfg.Ledger.Releases(ctx, ledger.ReleaseFilter{Status: ledger.ReleasePending, Cursor: cursor, Limit: ledger.MaxLimit})
		if err != nil {
			return fmt.Errorf("watch: pending releases: %w", err)
		}
		for _, r := range page {
			if !r.UpdatedAt.Add(ledger.ReleaseStale).After(now) {
				stale = append(stale, r)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	var errs []error
	for _, r := range stale {
		if err := w.settle(ctx, cat, st, held, r, now, rep); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("watch: settling stale releases: %w", errors.Join(errs...))
	}
	return nil
}

func (w *Watcher) settle(ctx context.Context, cat *schemas.Catalog, st *state, held []reads.Held, r ledger.Release, now time.Time, rep *CycleReport) error {
	var h *reads.Held
	for i := range held {
		if held[i].InstanceID == r.InstanceID && held[i].Project == r.Project && held[i].User == r.User {
			h = &held[i]
		}
	}
	begun := r.UpdatedAt
	reporting := h != nil && h.LastSample.After(begun)
	if reporting && h.Idle && !h.IdleSince.After(r.StreakStart) {
		return nil // the same streak goes on: the idle policy tries again
	}
	res := ledger.ReleaseResult{}
	kind := ""
	switch {
	case r.DryRun:
		res = ledger.ReleaseResult{Status: ledger.ReleaseDryRun, Action: "the dry run's answer was lost (the watcher stopped during the call); nothing was released"}
		kind = KindIdleReleaseDryRun
	case !reporting:
		last := "no sample since"
		if h != nil {
			last = "latest sample at " + h.LastSample.UTC().Format(time.RFC3339)
		}
		res = ledger.ReleaseResult{Status: ledger.ReleaseDone, Action: fmt.Sprintf(
			"released: the releaser's answer was lost (the watcher stopped during the call begun at %s); the instance reports no sample since (%s)",
			begun.UTC().Format(time.RFC3339), last)}
		kind = KindIdleRelease
	default:
		res = ledger.ReleaseResult{Status: ledger.ReleaseFailed, Failure: fmt.Sprintf(
			"not released: the releaser's answer was lost (the watcher stopped during the call begun at %s) and the instance is in use again",
			begun.UTC().Format(time.RFC3339))}
		kind = KindIdleReleaseFailed
	}
	// The alert is recorded first: a stop between the two settles the
	// release again, and recording the alert again changes nothing.
	key := ledger.IdleAlertKey(kind, r.InstanceID, r.StreakStart)
	// The facts of the holding until the attempt began.
	hh := reads.Held{InstanceID: r.InstanceID, Node: r.Node, Project: r.Project, User: r.User, Since: r.StreakStart, SinceClipped: true}
	if h != nil {
		hh = *h
		hh.Since, hh.SinceClipped = minTime(h.Since, r.StreakStart), true
	} else if s, ok := w.latestSample(ctx, r, now); ok {
		hh.GPUUUID, hh.GPUModel, hh.Profile, hh.HolderRef = s.GPUUUID, s.GPUModel, s.Profile, s.HolderRef
		if sku, ok := cat.ResolveSKU(s.GPUModel, s.Profile); ok {
			hh.SKU = sku.ID
		}
	}
	at := begun
	if kind == KindIdleReleaseFailed {
		at = now
	}
	since, err := w.heldSince(ctx, cat, st, &hh, r.StreakStart, now)
	if err != nil {
		return err
	}
	f := w.facts(cat, &hh, since, r.StreakStart, at)
	f.Outcome = outcomeText(ledger.Release{Status: res.Status, Action: res.Action, LastError: res.Failure})
	if !st.alerts[key] {
		if err := w.record(ctx, st, ledger.NewAlert{Key: key, Kind: kind, Project: r.Project, User: r.User, InstanceID: r.InstanceID,
			StreakStart: r.StreakStart}, f, w.people(ctx, r.Project, r.User), time.Time{}); err != nil {
			return err
		}
		rep.Alerts++
	}
	out, err := w.cfg.Ledger.FinishRelease(context.WithoutCancel(ctx), Actor, r.ID, res)
	if err != nil {
		return fmt.Errorf("release %s: %w", r.Key, err)
	}
	w.m.releases.WithLabelValues(string(out.Status)).Inc()
	w.log.Warn("stale release settled", "key", r.Key, "instance", r.InstanceID, "status", out.Status, "begun", begun)
	return nil
}

// latestSample is the latest held sample of r's instance and holder from
// an hour before the attempt began until now.
func (w *Watcher) latestSample(ctx context.Context, r ledger.Release, now time.Time) (schemas.Sample, bool) {
	var last schemas.Sample
	found := false
	fn := func(s *schemas.Sample) error {
		if s.InstanceID == r.InstanceID && s.Project == r.Project && s.User == r.User && (!found || s.StartMS > last.StartMS) {
			last, found = *s, true
		}
		return nil
	}
	from, to := r.UpdatedAt.Add(-time.Hour).UnixMilli(), now.UnixMilli()+1
	var err error
	if ir, ok := w.cfg.Usage.(reads.InstanceRows); ok {
		err = ir.InstanceSamples(ctx, []string{r.InstanceID}, from, to, fn)
	} else {
		err = w.cfg.Usage.HeldSamples(ctx, from, to, fn)
	}
	if err != nil {
		w.log.Warn("cannot read the latest sample of a stale release", "key", r.Key, "err", err)
		return last, false
	}
	return last, found
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
