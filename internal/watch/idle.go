package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/schemas"
)

// idle applies the project's idle policy to one held instance.
//
// The streak is the one HeldNow reports (its idle samples, gaps up to the
// tolerance bridged, broken by any busy sample). An exemption in force
// suspends the policy; one that ended during the streak restarts the
// streak's clock at its end, so that the holder is warned (and a release
// waits release_after) from then on. Of warning and reminder only the
// latest due is sent: a warning held back by quiet hours is not sent
// after the reminder that superseded it.
func (w *Watcher) idle(ctx context.Context, cat *schemas.Catalog, st *state, h *reads.Held, now time.Time, rep *CycleReport) error {
	if !h.Idle {
		return nil
	}
	rep.Idle++
	p := cat.IdlePolicyFor(h.Project)
	start := h.IdleSince
	for _, e := range st.exemptions {
		if !e.Covers(h.Project, h.User, h.InstanceID) {
			continue
		}
		if e.ActiveAt(now) {
			rep.Exempt++
			return nil
		}
		if end := e.End(); end.After(start) && !end.After(now) {
			start = end
		}
	}
	streak := billing.IdleStreak{Key: schemas.Key{Project: h.Project, User: h.User, InstanceID: h.InstanceID, GPUModel: h.GPUModel,
		Profile: h.Profile}, Start: start.UnixMilli(), End: now.UnixMilli(), Policy: p}
	d := streak.Duration()
	quiet := p.QuietHours != nil && cat.Location != nil && p.QuietHours.Contains(now, cat.Location)
	if p.Release != schemas.ReleaseOff && p.ReleaseAfter > 0 && d > p.ReleaseAfter {
		return w.releaseIdle(ctx, cat, st, h, start, now, p, quiet, rep)
	}
	var kind billing.AlertKind
	switch {
	case p.RemindAfter > 0 && d > p.RemindAfter:
		kind = billing.AlertIdleReminder
	case streak.Warn():
		kind = billing.AlertIdleWarning
	default:
		return nil
	}
	if st.alerts[ledger.IdleAlertKey(billing.AlertIdleReminder, h.InstanceID, start)] ||
		kind == billing.AlertIdleWarning && st.alerts[ledger.IdleAlertKey(billing.AlertIdleWarning, h.InstanceID, start)] {
		return nil
	}
	if quiet {
		rep.Deferred++
		return nil
	}
	since, err := w.heldSince(ctx, cat, st, h, start, now)
	if err != nil {
		return err
	}
	f := w.facts(cat, h, since, start, now)
	// What happens next, only when it will: a dry run releases nothing.
	switch {
	case kind == billing.AlertIdleWarning && p.RemindAfter > 0:
		f.NextAction, f.NextAt = "reminder", start.Add(p.RemindAfter)
	case p.Release == schemas.ReleaseOn && p.ReleaseAfter > 0:
		f.NextAction, f.NextAt = "release", start.Add(p.ReleaseAfter)
	}
	key := ledger.IdleAlertKey(kind, h.InstanceID, start)
	if err := w.record(ctx, st, ledger.NewAlert{Key: key, Kind: kind, Project: h.Project, User: h.User, InstanceID: h.InstanceID,
		StreakStart: start}, f, w.people(ctx, h.Project, h.User), time.Time{}); err != nil {
		return err
	}
	rep.Alerts++
	return nil
}

// releaseKinds are the alerts that tell a release's outcome.
var releaseKinds = []billing.AlertKind{billing.AlertIdleRelease, billing.AlertIdleReleaseDryRun, billing.AlertIdleReleaseFailed}

// releaseIdle releases (or, dry run, records what it would release) an
// instance idle past release_after. The release is recorded pending before
// the releaser is called; its outcome is told once, by the alert of its
// kind, deferred to the end of quiet hours when it falls inside them.
func (w *Watcher) releaseIdle(ctx context.Context, cat *schemas.Catalog, st *state, h *reads.Held, start, now time.Time,
	p schemas.IdlePolicy, quiet bool, rep *CycleReport) error {
	for _, k := range releaseKinds {
		if st.alerts[ledger.IdleAlertKey(k, h.InstanceID, start)] {
			return nil // the outcome was decided and told
		}
	}
	ev, evJSON, err := w.evidence(ctx, cat, st, h, start, now, p)
	if err != nil {
		return err
	}
	nr := ledger.NewRelease{Key: ledger.ReleaseKey(h.InstanceID, start), InstanceID: h.InstanceID, Node: h.Node, Project: h.Project,
		User: h.User, StreakStart: start, DryRun: p.Release == schemas.ReleaseDryRun, Evidence: evJSON}
	rel, err := w.release(ctx, h, nr, ev, now, rep)
	if err != nil || rel.Status == billing.ReleasePending || rel.Status == billing.ReleaseFailed && !rel.RetryAt.IsZero() {
		return err // under way, or to be retried: nothing to tell yet
	}
	kind := billing.AlertIdleReleaseFailed
	switch rel.Status {
	case billing.ReleaseDone:
		kind = billing.AlertIdleRelease
	case billing.ReleaseDryRun:
		kind = billing.AlertIdleReleaseDryRun
	}
	since, err := w.heldSince(ctx, cat, st, h, start, now)
	if err != nil {
		return err
	}
	f := w.facts(cat, h, since, start, now)
	f.Outcome = outcomeText(rel)
	var deferTo time.Time
	if quiet {
		deferTo = p.QuietHours.NextEnd(now, cat.Location)
	}
	if err := w.record(ctx, st, ledger.NewAlert{Key: ledger.IdleAlertKey(kind, h.InstanceID, start), Kind: kind, Project: h.Project,
		User: h.User, InstanceID: h.InstanceID, StreakStart: start}, f, w.people(ctx, h.Project, h.User), deferTo); err != nil {
		return err
	}
	rep.Alerts++
	return nil
}

// outcomeText is what a release did, in the words of its record.
func outcomeText(r ledger.Release) string {
	switch r.Status {
	case billing.ReleaseFailed:
		if r.Action != "" {
			return r.Action + ": " + r.LastError
		}
		return r.LastError
	}
	return r.Action
}

// release begins the release nr, calls the releaser once when it started
// and records the outcome: done only when the releaser says it released
// something, dry_run for a dry run, failed otherwise (retried with backoff
// unless the error is permanent or the attempts are spent).
func (w *Watcher) release(ctx context.Context, h *reads.Held, nr ledger.NewRelease, ev alert.ReleaseEvidence, now time.Time, rep *CycleReport) (ledger.Release, error) {
	if rep.Releases >= w.cfg.MaxReleasesPerCycle {
		rep.Postponed++
		return ledger.Release{NewRelease: nr, Status: billing.ReleasePending}, nil // next cycle
	}
	rel, started, err := w.cfg.Ledger.BeginRelease(ctx, Actor, nr)
	if err != nil || !started {
		return rel, err
	}
	rep.Releases++
	req := alert.ReleaseRequest{Key: nr.Key, DryRun: nr.DryRun, Evidence: ev, Target: alert.ReleaseTarget{Node: h.Node, GPUUUID: h.GPUUUID,
		InstanceID: h.InstanceID, GPUModel: h.GPUModel, Profile: h.Profile, Project: h.Project, User: h.User, HolderRef: h.HolderRef}}
	var res ledger.ReleaseResult
	if w.cfg.Releaser == nil {
		if nr.DryRun {
			res = ledger.ReleaseResult{Status: billing.ReleaseDryRun, Action: "no releaser is configured: nothing would be done"}
		} else {
			res = ledger.ReleaseResult{Status: billing.ReleaseFailed, Failure: "no releaser is configured"}
		}
	} else {
		rctx, cancel := context.WithTimeout(ctx, w.cfg.ReleaseTimeout)
		out, err := w.cfg.Releaser.Release(rctx, req)
		cancel()
		switch {
		case err == nil && nr.DryRun:
			res = ledger.ReleaseResult{Status: billing.ReleaseDryRun, Action: out.Action}
		case err == nil && out.Released:
			res = ledger.ReleaseResult{Status: billing.ReleaseDone, Action: out.Action}
		case err == nil:
			res = ledger.ReleaseResult{Status: billing.ReleaseFailed, Action: out.Action, Failure: "the releaser released nothing"}
		default:
			res = ledger.ReleaseResult{Status: billing.ReleaseFailed, Action: out.Action, Failure: err.Error()}
			if !w.cfg.Releaser.Permanent(err) && rel.Attempts < w.cfg.MaxReleaseAttempts && ctx.Err() == nil {
				res.RetryAt = now.Add(releaseBackoff(rel.Attempts))
			}
		}
	}
	if res.Status == billing.ReleaseFailed && strings.TrimSpace(res.Failure) == "" {
		res.Failure = "failed"
	}
	out, err := w.cfg.Ledger.FinishRelease(context.WithoutCancel(ctx), Actor, rel.ID, res)
	if err != nil {
		return rel, fmt.Errorf("watch: release %s: %w", nr.Key, err)
	}
	w.m.releases.WithLabelValues(string(out.Status)).Inc()
	w.log.Info("release attempted", "key", nr.Key, "instance", h.InstanceID, "status", out.Status, "action", out.Action, "error", out.LastError)
	return out, nil
}

// releaseBackoff is the wait before a failed release is tried again:
// 1, 2, 4, … minutes, at most 30.
func releaseBackoff(attempts int) time.Duration {
	d := time.Minute << min(max(attempts-1, 0), 5)
	return min(d, 30*time.Minute)
}

// evidence is why an instance is released: its streak and the idle samples
// in it, read from the usage store.
func (w *Watcher) evidence(ctx context.Context, cat *schemas.Catalog, st *state, h *reads.Held, start, now time.Time, p schemas.IdlePolicy) (alert.ReleaseEvidence, json.RawMessage, error) {
	type point struct {
		TS        time.Time `json:"ts"`
		IntervalS float64   `json:"interval_s"`
		Util      *float64  `json:"util"`
		Processes int64     `json:"processes"`
	}
	const maxPoints = 200
	var pts []point
	n := 0
	idle, err := st.idleSamples(ctx, w.cfg.Usage, cat)
	if err != nil {
		return alert.ReleaseEvidence{}, nil, fmt.Errorf("watch: evidence of %s: %w", h.InstanceID, err)
	}
	for _, s := range idle[h.InstanceID] {
		if s.StartMS < start.UnixMilli() || s.StartMS > now.UnixMilli() || s.Project != h.Project || s.User != h.User {
			continue
		}
		n++
		if len(pts) < maxPoints {
			pt := point{TS: s.Time(), IntervalS: float64(s.IntervalMS) / 1000, Processes: s.Processes}
			if s.UtilKnown {
				u := s.Util
				pt.Util = &u
			}
			pts = append(pts, pt)
		}
	}
	ev := alert.ReleaseEvidence{StreakStart: start, StreakEnd: now, IdleSamples: n, Threshold: p.Threshold}
	b := mustJSON(struct {
		StreakStart  time.Time `json:"streak_start"`
		StreakEnd    time.Time `json:"streak_end"`
		IdleSince    time.Time `json:"idle_since"`
		IdleSamples  int       `json:"idle_samples"`
		Threshold    float64   `json:"threshold"`
		ReleaseAfter string    `json:"release_after"`
		Mode         string    `json:"mode"`
		Samples      []point   `json:"samples"`
		Truncated    bool      `json:"samples_truncated,omitempty"`
	}{start, now, h.IdleSince, n, p.Threshold, p.ReleaseAfter.String(), string(p.Release), pts, n > len(pts)})
	return ev, b, nil
}

// facts describes a held instance for a message. Its cost is the list
// price of its current occupancy (held time since heldSince, gaps within
// the tolerance billed as held) as the billing engine prices it
// (billing.UsageAmount with the SKU's hourly price); zero when unpriced.
func (w *Watcher) facts(cat *schemas.Catalog, h *reads.Held, heldSince, idleSince, now time.Time) alert.Facts {
	f := alert.Facts{Project: h.Project, User: h.User, Node: h.Node, GPUUUID: h.GPUUUID, GPUModel: h.GPUModel, Profile: h.Profile,
		InstanceID: h.InstanceID, HeldSince: heldSince, IdleSince: idleSince, At: now, Currency: cat.Currency, TZ: cat.Location,
		ExemptionHint: w.cfg.ExemptionHint, Link: w.requestForm(h.InstanceID)}
	if sku, ok := cat.SKUByID(h.SKU); ok && heldSince.Before(now) {
		f.Cost = billing.Money{Decimal: billing.UsageAmount(int64(now.Sub(heldSince)/time.Second), sku.HourlyPrice)}
	}
	return f
}

// people are those an alert about project and user may reach: the holder
// (with the roster's name and addresses), the project's leads, the admins.
func (w *Watcher) people(ctx context.Context, project, user string) []alert.Person {
	var out []alert.Person
	if user != "" {
		out = append(out, w.holder(ctx, project, user))
	}
	for _, l := range w.cfg.Leads[project] {
		l.Role, l.Project = alert.RoleLead, project
		out = append(out, l)
	}
	for _, a := range w.cfg.Admins {
		a.Role = alert.RoleAdmin
		out = append(out, a)
	}
	return out
}

// holder is the student user of project, with the roster's name and
// addresses (none when the roster cannot be read: the lead and admins are
// still told).
func (w *Watcher) holder(ctx context.Context, project, user string) alert.Person {
	holder := alert.Person{Role: alert.RoleHolder, Project: project, User: user}
	sts, _, err := w.cfg.Ledger.Students(ctx, ledger.StudentFilter{Project: project, User: user, Limit: 1})
	if err != nil {
		w.log.Warn("cannot read the roster", "project", project, "user", user, "err", err)
	} else if len(sts) == 1 {
		holder.Name, holder.Email, holder.IM = sts[0].Name, sts[0].Email, sts[0].IM
	}
	return holder
}

// record plans the alert's deliveries and records both; deferTo, when
// set, is the earliest time they are sent.
func (w *Watcher) record(ctx context.Context, st *state, a ledger.NewAlert, f alert.Facts, people []alert.Person, deferTo time.Time) error {
	msg := alert.Message{Kind: a.Kind, Key: a.Key, Facts: f}
	a.Facts = mustJSON(f)
	var ds []ledger.NewDelivery
	if w.cfg.Notifier != nil && len(people) > 0 {
		envs, err := w.cfg.Notifier.Plan(msg, people)
		if err != nil {
			return fmt.Errorf("watch: planning alert %s: %w", a.Key, err)
		}
		seen := map[[2]string]bool{}
		for _, e := range envs {
			// The notifier plans one envelope per person and channel; two
			// people with the same address (two admins with one mailbox,
			// each with their own IM id) are told apart by their identity.
			r := recipient(e.To)
			if seen[[2]string{e.Channel, r}] {
				r += " [" + e.To.Identity() + "]"
			}
			if seen[[2]string{e.Channel, r}] {
				continue
			}
			seen[[2]string{e.Channel, r}] = true
			ds = append(ds, ledger.NewDelivery{Channel: e.Channel, Recipient: r, Payload: mustJSON(e), NextAttemptAt: deferTo})
		}
	}
	_, created, err := w.cfg.Ledger.RecordAlert(ctx, Actor, a, ds)
	if err != nil {
		return fmt.Errorf("watch: recording alert %s: %w", a.Key, err)
	}
	st.alerts[a.Key] = true
	if created {
		w.m.alerts.WithLabelValues(string(a.Kind)).Inc()
		w.log.Info("alert recorded", "key", a.Key, "kind", a.Kind, "deliveries", len(ds))
	}
	return nil
}

// recipient names a delivery's recipient: role and the address it goes to.
func recipient(p alert.Person) string {
	for _, s := range []string{p.Email, p.IM, p.User, p.Name} {
		if s != "" {
			return p.Role + ":" + s
		}
	}
	if p.Role == "" {
		return "unnamed"
	}
	return p.Role
}
