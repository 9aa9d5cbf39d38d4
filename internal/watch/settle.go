package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/watch/alert"
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
		page, next, err := w.cfg.Ledger.Releases(ctx, ledger.ReleaseFilter{Status: billing.ReleasePending, Cursor: cursor, Limit: ledger.MaxLimit})
		if err != nil {
			return fmt.Errorf("watch: pending releases: %w", err)
		}
		for _, r := range page {
			// A release a person asked for is theirs to ask again (an
			// attempt whose process stopped begins again at the next
			// request once it is stale).
			if !r.UpdatedAt.Add(ledger.ReleaseStale).After(now) && !IsAskedRelease(r) {
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
	var kind billing.AlertKind
	switch {
	case r.DryRun:
		res = ledger.ReleaseResult{Status: billing.ReleaseDryRun, Action: "the dry run's answer was lost (the watcher stopped during the call); nothing was released"}
		kind = billing.AlertIdleReleaseDryRun
	case !reporting:
		last := "no sample since"
		if h != nil {
			last = "latest sample at " + h.LastSample.UTC().Format(time.RFC3339)
		}
		res = ledger.ReleaseResult{Status: billing.ReleaseDone, Action: fmt.Sprintf(
			"released: the releaser's answer was lost (the watcher stopped during the call begun at %s); the instance reports no sample since (%s)",
			begun.UTC().Format(time.RFC3339), last)}
		kind = billing.AlertIdleRelease
	default:
		res = ledger.ReleaseResult{Status: billing.ReleaseFailed, Failure: fmt.Sprintf(
			"not released: the releaser's answer was lost (the watcher stopped during the call begun at %s) and the instance is in use again",
			begun.UTC().Format(time.RFC3339))}
		kind = billing.AlertIdleReleaseFailed
	}
	// The alert is recorded first: a stop between the two settles the
	// release again, and recording the alert again changes nothing.
	key := ledger.IdleAlertKey(kind, r.InstanceID, r.StreakStart)
	at := begun
	if kind == billing.AlertIdleReleaseFailed {
		at = now
	}
	f, err := w.releaseFacts(ctx, cat, st, h, r, at, now)
	if err != nil {
		return err
	}
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

// releaseFacts describes r's instance for the message that tells r's
// outcome, as of at: from h, the instance as held now when it still is
// (its holding counted from the streak's start at the latest), else from
// the release's record and the latest sample of its instance.
func (w *Watcher) releaseFacts(ctx context.Context, cat *schemas.Catalog, st *state, h *reads.Held, r ledger.Release, at, now time.Time) (alert.Facts, error) {
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
	since, err := w.heldSince(ctx, cat, st, &hh, r.StreakStart, now)
	if err != nil {
		return alert.Facts{}, err
	}
	return w.facts(cat, &hh, since, r.StreakStart, at), nil
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

// tellFinished tells the outcome of every idle release finished (done,
// dry_run, or failed for good: no retry time) whose outcome alert is not
// recorded: the process stopped (kill -9, a crash) after FinishRelease and
// before the alert, or the alert could not be recorded (the ledger was
// unavailable). Once an instance is released it is no longer held, so
// releaseIdle never comes back to it; this does, whether or not the
// instance is still held. The alert is the one releaseIdle would have
// recorded (its kind from the release's status, its outcome the release's
// action and error, deferred to the end of quiet hours when now falls in
// them), and its natural key makes it told once however many times this
// runs.
//
// It reads the releases changed since the previous complete pass began,
// less ledger.ReleaseStale (room for the ledger's clock and a pass under
// way), at most holdingLookback back, or, on a process's first pass (or
// one whose clock went back), since holdingLookback: a release
// finished by a process that stopped is read by the first pass of the next
// leader, and one finished while this process leads by its next pass.
// Releases made by a budget are told by the budget's alert and are left
// alone.
func (w *Watcher) tellFinished(ctx context.Context, cat *schemas.Catalog, st *state, held []reads.Held, now time.Time, rep *CycleReport) error {
	w.mu.Lock()
	from := w.toldFrom
	w.mu.Unlock()
	first := from.IsZero() || from.After(now)
	if first {
		from = now.Add(-holdingLookback)
	} else {
		from = from.Add(-ledger.ReleaseStale)
		if oldest := now.Add(-holdingLookback); from.Before(oldest) {
			from = oldest // a pass that keeps failing reads no further back
		}
	}
	// On the first pass, the outcome alerts recorded since then are read
	// at once; any other is looked up by its key (one recorded earlier, by
	// a settled release; on later passes, those of the few releases of the
	// last minutes whose instance is no longer held).
	if first {
		for _, k := range releaseKinds {
			cursor := ""
			for {
				page, next, err := w.cfg.Ledger.Alerts(ctx, ledger.AlertFilter{Kind: k, Since: from, Cursor: cursor, Limit: ledger.MaxLimit})
				if err != nil {
					return fmt.Errorf("watch: release alerts: %w", err)
				}
				for _, a := range page {
					st.alerts[a.Key] = true
				}
				if next == "" {
					break
				}
				cursor = next
			}
		}
	}
	var errs []error
	cursor := ""
	for {
		page, next, err := w.cfg.Ledger.Releases(ctx, ledger.ReleaseFilter{UpdatedSince: from, Cursor: cursor, Limit: ledger.MaxLimit})
		if err != nil {
			return fmt.Errorf("watch: finished releases: %w", err)
		}
		for _, r := range page {
			if err := w.tellRelease(ctx, cat, st, held, r, now, rep); err != nil {
				errs = append(errs, err)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(errs) > 0 {
		return fmt.Errorf("watch: telling finished releases: %w", errors.Join(errs...))
	}
	w.mu.Lock()
	w.toldFrom = now
	w.mu.Unlock()
	return nil
}

// outcomeKind is the alert that tells r's outcome; "" while it has none
// (pending, or failed and to be retried).
func outcomeKind(r ledger.Release) billing.AlertKind {
	switch {
	case r.Status == billing.ReleaseDone:
		return billing.AlertIdleRelease
	case r.Status == billing.ReleaseDryRun:
		return billing.AlertIdleReleaseDryRun
	case r.Status == billing.ReleaseFailed && r.RetryAt.IsZero():
		return billing.AlertIdleReleaseFailed
	}
	return ""
}

// isBudgetRelease reports whether r was made by a budget (its evidence
// names the budget).
func isBudgetRelease(r ledger.Release) bool {
	return bytes.Contains(r.Evidence, []byte(`"budget_id"`))
}

func (w *Watcher) tellRelease(ctx context.Context, cat *schemas.Catalog, st *state, held []reads.Held, r ledger.Release, now time.Time, rep *CycleReport) error {
	kind := outcomeKind(r)
	if kind == "" || isBudgetRelease(r) || IsAskedRelease(r) {
		return nil
	}
	key := ledger.IdleAlertKey(kind, r.InstanceID, r.StreakStart)
	if st.alerts[key] {
		return nil
	}
	if _, err := w.cfg.Ledger.AlertByKey(ctx, key); err == nil {
		st.alerts[key] = true
		return nil
	} else if !errors.Is(err, ledger.ErrNotFound) {
		return fmt.Errorf("alert %s: %w", key, err)
	}
	var h *reads.Held
	for i := range held {
		if held[i].InstanceID == r.InstanceID && held[i].Project == r.Project && held[i].User == r.User {
			h = &held[i]
		}
	}
	f, err := w.releaseFacts(ctx, cat, st, h, r, r.UpdatedAt, now)
	if err != nil {
		return err
	}
	f.Outcome = outcomeText(r)
	var deferTo time.Time
	if p := cat.IdlePolicyFor(r.Project); p.QuietHours != nil && cat.Location != nil && p.QuietHours.Contains(now, cat.Location) {
		deferTo = p.QuietHours.NextEnd(now, cat.Location)
	}
	if err := w.record(ctx, st, ledger.NewAlert{Key: key, Kind: kind, Project: r.Project, User: r.User, InstanceID: r.InstanceID,
		StreakStart: r.StreakStart}, f, w.people(ctx, r.Project, r.User), deferTo); err != nil {
		return err
	}
	rep.Alerts++
	w.log.Warn("finished release told late", "key", r.Key, "instance", r.InstanceID, "status", r.Status, "finished", r.UpdatedAt)
	return nil
}
