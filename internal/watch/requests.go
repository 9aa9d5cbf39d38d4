package watch

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/schemas"
)

// Exemption requests are told to both sides: a request still pending to
// the project's leads and the admins (exemption_requested), a decision to
// the student (exemption_decided: the exemption's end for a grant, the
// reason for a refusal). The watcher reads them from the ledger every
// cycle, so a process that stops between a request and its message loses
// nothing: the next cycle, of this process or another replica, tells it;
// the alert's natural key (RequestAlertKey) makes each told once.

// RequestAlertKey is the natural key of the alert of kind k about request id.
func RequestAlertKey(k billing.AlertKind, id int64) string {
	return string(k) + "|" + strconv.FormatInt(id, 10)
}

// requestForm is the dashboard's exemption request form for an instance
// (the Exemptions page prefills it from request=); "" without the
// dashboard's URL.
func (w *Watcher) requestForm(instance string) string {
	if w.cfg.DashboardURL == "" {
		return ""
	}
	return w.cfg.DashboardURL + "/ui/#/exemptions?request=" + url.QueryEscape(instance)
}

// exemptionsPage is the dashboard's Exemptions page; "" without its URL.
func (w *Watcher) exemptionsPage() string {
	if w.cfg.DashboardURL == "" {
		return ""
	}
	return w.cfg.DashboardURL + "/ui/#/exemptions"
}

// tellRequests tells every exemption request made or decided since the
// previous complete pass began, less ledger.ReleaseStale (room for the
// ledger's clock), at most holdingLookback back; on a process's first pass
// (or one whose clock went back), since holdingLookback. A pass that fails
// leaves its window to the next one.
func (w *Watcher) tellRequests(ctx context.Context, cat *schemas.Catalog, now time.Time, rep *CycleReport) error {
	w.mu.Lock()
	from := w.askedFrom
	w.mu.Unlock()
	if from.IsZero() || from.After(now) {
		from = now.Add(-holdingLookback)
	} else {
		from = from.Add(-ledger.ReleaseStale)
		if oldest := now.Add(-holdingLookback); from.Before(oldest) {
			from = oldest // a pass that keeps failing reads no further back
		}
	}
	var errs []error
	f := ledger.ExemptionRequestFilter{UpdatedSince: from, Limit: ledger.MaxLimit}
	for {
		page, next, err := w.cfg.Ledger.ExemptionRequests(ctx, f)
		if err != nil {
			return fmt.Errorf("watch: exemption requests: %w", err)
		}
		for _, r := range page {
			if err := w.tellRequest(ctx, cat, r, rep); err != nil {
				errs = append(errs, err)
			}
		}
		if next == "" {
			break
		}
		f.Cursor = next
	}
	if len(errs) > 0 {
		return fmt.Errorf("watch: telling exemption requests: %w", errors.Join(errs...))
	}
	w.mu.Lock()
	w.askedFrom = now
	w.mu.Unlock()
	return nil
}

// tellRequest records the alert that tells r, unless it is recorded: a
// pending request to the leads and admins, a decided one to the student.
// A request decided before any pass saw it pending is told only as
// decided (whoever decided it has seen it).
func (w *Watcher) tellRequest(ctx context.Context, cat *schemas.Catalog, r ledger.ExemptionRequest, rep *CycleReport) error {
	kind, at := billing.AlertExemptionRequested, r.CreatedAt
	var people []alert.Person
	switch r.Status {
	case ledger.RequestPending:
		people = w.people(ctx, r.Project, "") // the project's leads, the admins
	case ledger.RequestGranted, ledger.RequestRefused:
		kind, at = billing.AlertExemptionDecided, r.DecidedAt
		people = []alert.Person{w.holder(ctx, r.Project, r.User)}
	default:
		return nil
	}
	key := RequestAlertKey(kind, r.ID)
	if _, err := w.cfg.Ledger.AlertByKey(ctx, key); err == nil {
		return nil
	} else if !errors.Is(err, ledger.ErrNotFound) {
		return fmt.Errorf("alert %s: %w", key, err)
	}
	f := alert.Facts{Project: r.Project, User: r.User, InstanceID: r.InstanceID, At: at, TZ: cat.Location, Link: w.exemptionsPage(),
		Request: &alert.RequestFacts{ID: r.ID, Status: string(r.Status), Until: r.Until, Reason: r.Reason,
			DecidedBy: r.DecidedBy, Answer: r.Answer, ExemptionID: r.ExemptionID}}
	st := &state{alerts: map[string]bool{}}
	if err := w.record(ctx, st, ledger.NewAlert{Key: key, Kind: kind, Project: r.Project, User: r.User, InstanceID: r.InstanceID},
		f, people, time.Time{}); err != nil {
		return err
	}
	rep.Alerts++
	return nil
}
