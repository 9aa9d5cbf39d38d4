package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// ---------------------------------------------------------------- alerts

const alertCols = `id, natural_key, kind, project, user_name, instance_id, streak_start_ms, budget_id, period, threshold,
	facts_json, created_ms, acked_by, acked_ms`

func scanAlert(sc rowScanner) (ledger.Alert, error) {
	var a ledger.Alert
	var streak, created, acked int64
	var facts string
	err := sc.Scan(&a.ID, &a.Key, &a.Kind, &a.Project, &a.User, &a.InstanceID, &streak, &a.BudgetID, &a.Period, &a.Threshold,
		&facts, &created, &a.AckedBy, &acked)
	a.StreakStart, a.CreatedAt, a.AckedAt = fromMS(streak), fromMS(created), fromMS(acked)
	a.Facts = json.RawMessage(facts)
	return a, err
}

func alertObject(id int64) string { return "alert/" + strconv.FormatInt(id, 10) }

func alertView(a ledger.Alert, deliveries int) json.RawMessage {
	type view struct {
		Key        string          `json:"key"`
		Kind       string          `json:"kind"`
		Project    string          `json:"project,omitempty"`
		User       string          `json:"user,omitempty"`
		InstanceID string          `json:"instance_id,omitempty"`
		Facts      json.RawMessage `json:"facts"`
		Deliveries int             `json:"deliveries"`
		AckedBy    string          `json:"acked_by,omitempty"`
	}
	return mustJSON(view{a.Key, string(a.Kind), a.Project, a.User, a.InstanceID, a.Facts, deliveries, a.AckedBy})
}

func (s *Store) alert(ctx context.Context, q querier, what, where string, args ...any) (ledger.Alert, error) {
	return readRow(ctx, s, q, what, scanAlert, `SELECT `+alertCols+` FROM ledger_alerts `+where, args...)
}

// RecordAlert implements ledger.Store.
func (s *Store) RecordAlert(ctx context.Context, actor string, na ledger.NewAlert, ds []ledger.NewDelivery) (ledger.Alert, bool, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Alert{}, false, err
	}
	if err := ledger.CheckNewAlert(&na); err != nil {
		return ledger.Alert{}, false, err
	}
	if err := ledger.CheckNewDeliveries(ds); err != nil {
		return ledger.Alert{}, false, err
	}
	what := "alert " + na.Key
	var out ledger.Alert
	var created bool
	err := s.tx(ctx, "record "+what, func(tx *sql.Tx) error {
		now := s.now()
		var id int64
		err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_alerts (natural_key, kind, project, user_name, instance_id,
			streak_start_ms, budget_id, period, threshold, facts_json, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (natural_key) DO NOTHING RETURNING id`), na.Key, na.Kind, na.Project, na.User, na.InstanceID,
			na.StreakStart.UnixMilli()*boolInt(!na.StreakStart.IsZero()), na.BudgetID, na.Period, na.Threshold, string(na.Facts),
			now.UnixMilli()).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			// Recorded before (by this replica or another): nothing to do.
			out, err = s.alert(ctx, tx, what, `WHERE natural_key = ?`, na.Key)
			return err
		}
		if err != nil {
			return fmt.Errorf("%s ledger: cannot record %s: %w", s.d.Name, what, err)
		}
		created = true
		out = ledger.Alert{ID: id, NewAlert: na, CreatedAt: fromMS(now.UnixMilli())}
		out.StreakStart = fromMS(na.StreakStart.UnixMilli() * boolInt(!na.StreakStart.IsZero()))
		for _, d := range ds {
			next := d.NextAttemptAt
			if next.IsZero() || next.Before(now) {
				next = now
			}
			if _, err := s.exec(ctx, tx, `INSERT INTO ledger_deliveries (alert_id, channel, recipient, payload_json, status,
				attempts, next_attempt_ms, created_ms, updated_ms, retry_from_ms) VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?)`,
				id, d.Channel, d.Recipient, string(d.Payload), next.UnixMilli(), now.UnixMilli(), now.UnixMilli(), next.UnixMilli()); err != nil {
				return fmt.Errorf("%s ledger: cannot record a delivery of %s: %w", s.d.Name, what, err)
			}
		}
		_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "alert.record", Object: alertObject(id),
			After: alertView(out, len(ds))})
		return err
	})
	if err != nil {
		return ledger.Alert{}, false, err
	}
	return out, created, nil
}

// Alert implements ledger.Store.
func (s *Store) Alert(ctx context.Context, id int64) (ledger.Alert, error) {
	return s.alert(ctx, s.db, "alert "+strconv.FormatInt(id, 10), `WHERE id = ?`, id)
}

// AlertByKey implements ledger.Store.
func (s *Store) AlertByKey(ctx context.Context, key string) (ledger.Alert, error) {
	return s.alert(ctx, s.db, "alert "+key, `WHERE natural_key = ?`, key)
}

// Alerts implements ledger.Store.
func (s *Store) Alerts(ctx context.Context, f ledger.AlertFilter) ([]ledger.Alert, string, error) {
	pq, err := listQuery(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	for _, c := range []struct{ cond, v string }{{"project = ?", f.Project}, {"user_name = ?", f.User},
		{"instance_id = ?", f.InstanceID}, {"kind = ?", string(f.Kind)}} {
		if c.v != "" {
			pq.add(c.cond, c.v)
		}
	}
	if !f.Since.IsZero() {
		pq.add("created_ms >= ?", f.Since.UnixMilli())
	}
	if f.Unacked {
		pq.add("acked_ms = ?", 0)
	}
	if f.Acked {
		pq.add("acked_ms > ?", 0)
	}
	return readPage(ctx, s, pq, `SELECT `+alertCols+` FROM ledger_alerts`, "alerts",
		func(r *sql.Rows) (ledger.Alert, error) { return scanAlert(r) }, func(v *ledger.Alert) int64 { return v.ID })
}

// AckAlert implements ledger.Store.
func (s *Store) AckAlert(ctx context.Context, actor string, id int64) (ledger.Alert, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Alert{}, err
	}
	what := "alert " + strconv.FormatInt(id, 10)
	var out ledger.Alert
	err := s.tx(ctx, "acknowledge "+what, func(tx *sql.Tx) error {
		now := s.now()
		n, err := s.exec(ctx, tx, `UPDATE ledger_alerts SET acked_by = ?, acked_ms = ? WHERE id = ? AND acked_ms = 0`, actor, now.UnixMilli(), id)
		if err != nil {
			return fmt.Errorf("%s ledger: cannot acknowledge %s: %w", s.d.Name, what, err)
		}
		if out, err = s.alert(ctx, tx, what, `WHERE id = ?`, id); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: %s was acknowledged by %s already", ledger.ErrInvalidTransition, what, out.AckedBy)
		}
		_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "alert.ack", Object: alertObject(id),
			Before: mustJSON(map[string]any{"acked": false}), After: mustJSON(map[string]any{"acked": true, "acked_by": actor})})
		return err
	})
	if err != nil {
		return ledger.Alert{}, err
	}
	return out, nil
}

// ---------------------------------------------------------------- deliveries

const deliveryCols = `id, alert_id, channel, recipient, payload_json, status, attempts, next_attempt_ms, last_error,
	created_ms, updated_ms, sent_ms, retry_from_ms`

func scanDelivery(sc rowScanner) (ledger.Delivery, error) {
	var d ledger.Delivery
	var payload, status string
	var next, created, updated, sent, retryFrom int64
	err := sc.Scan(&d.ID, &d.AlertID, &d.Channel, &d.Recipient, &payload, &status, &d.Attempts, &next, &d.LastError,
		&created, &updated, &sent, &retryFrom)
	d.Payload, d.Status = json.RawMessage(payload), ledger.DeliveryStatus(status)
	d.NextAttemptAt, d.CreatedAt, d.UpdatedAt, d.SentAt = fromMS(next), fromMS(created), fromMS(updated), fromMS(sent)
	d.RetryFrom = fromMS(retryFrom)
	if d.RetryFrom.IsZero() {
		d.RetryFrom = d.CreatedAt
	}
	return d, err
}

func deliveryView(d ledger.Delivery) json.RawMessage {
	type view struct {
		AlertID       int64                 `json:"alert_id"`
		Channel       string                `json:"channel"`
		Recipient     string                `json:"recipient"`
		Status        ledger.DeliveryStatus `json:"status"`
		Attempts      int                   `json:"attempts"`
		NextAttemptAt time.Time             `json:"next_attempt_at"`
		LastError     string                `json:"last_error,omitempty"`
	}
	return mustJSON(view{d.AlertID, d.Channel, d.Recipient, d.Status, d.Attempts, d.NextAttemptAt, d.LastError})
}

// DueDeliveries implements ledger.Store.
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]ledger.Delivery, error) {
	limit, err := ledger.PageLimit(limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.d.Rebind(`SELECT `+deliveryCols+` FROM ledger_deliveries
		WHERE status = 'pending' AND next_attempt_ms <= ? ORDER BY next_attempt_ms, id LIMIT `+strconv.Itoa(limit)), now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("%s ledger: cannot list due deliveries: %w", s.d.Name, err)
	}
	defer rows.Close() //nolint:errcheck // read-only; errors surface on Next/Err
	var out []ledger.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("%s ledger: cannot read a delivery: %w", s.d.Name, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s ledger: cannot list due deliveries: %w", s.d.Name, err)
	}
	return out, nil
}

// lockDelivery reads delivery id (what names it in errors) for update
// inside tx: ledger.ErrNotFound when there is none.
func (s *Store) lockDelivery(ctx context.Context, tx *sql.Tx, id int64, what string) (ledger.Delivery, error) {
	return readRow(ctx, s, tx, what, scanDelivery, `SELECT `+deliveryCols+` FROM ledger_deliveries WHERE id = ?`+s.d.ForUpdate, id)
}

// FinishDelivery implements ledger.Store.
func (s *Store) FinishDelivery(ctx context.Context, actor string, id int64, failure string, retryAt time.Time) (ledger.Delivery, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Delivery{}, err
	}
	what := "delivery " + strconv.FormatInt(id, 10)
	var out ledger.Delivery
	err := s.tx(ctx, "finish "+what, func(tx *sql.Tx) error {
		now := s.now()
		cur, err := s.lockDelivery(ctx, tx, id, what)
		if err != nil {
			return err
		}
		if cur.Status != ledger.DeliveryPending {
			return fmt.Errorf("%w: %s (%s to %s) is %s; it is never changed", ledger.ErrInvalidTransition, what, cur.Channel, cur.Recipient, cur.Status)
		}
		before := cur
		cur.Attempts++
		cur.UpdatedAt = fromMS(now.UnixMilli())
		action := "delivery.sent"
		switch {
		case failure == "":
			cur.Status, cur.SentAt, cur.LastError = ledger.DeliverySent, cur.UpdatedAt, ""
		case retryAt.IsZero():
			cur.Status, cur.LastError, action = ledger.DeliveryFailed, failure, "delivery.fail"
		default:
			cur.LastError, cur.NextAttemptAt, action = failure, fromMS(retryAt.UnixMilli()), "delivery.retry"
		}
		out = cur
		return s.update(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: action, Object: "delivery/" + strconv.FormatInt(id, 10),
			Before: deliveryView(before), After: deliveryView(cur)}, "update "+what,
			`UPDATE ledger_deliveries SET status = ?, attempts = ?, next_attempt_ms = ?, last_error = ?,
			updated_ms = ?, sent_ms = ? WHERE id = ?`, string(cur.Status), cur.Attempts, cur.NextAttemptAt.UnixMilli(), cur.LastError,
			now.UnixMilli(), cur.SentAt.UnixMilli()*boolInt(!cur.SentAt.IsZero()), id)
	})
	if err != nil {
		return ledger.Delivery{}, err
	}
	return out, nil
}

// Deliveries implements ledger.Store.
func (s *Store) Deliveries(ctx context.Context, f ledger.DeliveryFilter) ([]ledger.Delivery, string, error) {
	if err := ledger.CheckDeliveryStatus(f.Status); err != nil {
		return nil, "", err
	}
	pq, err := listQuery(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	if f.AlertID != 0 {
		pq.add("alert_id = ?", f.AlertID)
	}
	pq.eq("channel", f.Channel)
	pq.eq("status", string(f.Status))
	return readPage(ctx, s, pq, `SELECT `+deliveryCols+` FROM ledger_deliveries`, "deliveries",
		func(r *sql.Rows) (ledger.Delivery, error) { return scanDelivery(r) }, func(v *ledger.Delivery) int64 { return v.ID })
}

// Delivery implements ledger.Store.
func (s *Store) Delivery(ctx context.Context, id int64) (ledger.Delivery, error) {
	return readRow(ctx, s, s.db, "delivery "+strconv.FormatInt(id, 10), scanDelivery,
		`SELECT `+deliveryCols+` FROM ledger_deliveries WHERE id = ?`, id)
}

// ResendDelivery implements ledger.Store.
func (s *Store) ResendDelivery(ctx context.Context, actor string, id int64) (ledger.Delivery, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Delivery{}, err
	}
	what := "delivery " + strconv.FormatInt(id, 10)
	var out ledger.Delivery
	err := s.tx(ctx, "resend "+what, func(tx *sql.Tx) error {
		now := s.now()
		cur, err := s.lockDelivery(ctx, tx, id, what)
		if err != nil {
			return err
		}
		if cur.Status != ledger.DeliveryFailed {
			return fmt.Errorf("%w: %s (%s to %s) is %s; only a failed delivery can be re-sent", ledger.ErrInvalidTransition, what,
				cur.Channel, cur.Recipient, cur.Status)
		}
		before := cur
		t := fromMS(now.UnixMilli())
		cur.Status, cur.NextAttemptAt, cur.RetryFrom, cur.UpdatedAt = ledger.DeliveryPending, t, t, t
		out = cur
		return s.update(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "delivery.resend", Object: "delivery/" + strconv.FormatInt(id, 10),
			Before: deliveryView(before), After: deliveryView(cur)}, "update "+what,
			`UPDATE ledger_deliveries SET status = 'pending', next_attempt_ms = ?, retry_from_ms = ?,
			updated_ms = ? WHERE id = ?`, now.UnixMilli(), now.UnixMilli(), now.UnixMilli(), id)
	})
	if err != nil {
		return ledger.Delivery{}, err
	}
	return out, nil
}

// DeliveryBacklog implements ledger.Store.
func (s *Store) DeliveryBacklog(ctx context.Context) (ledger.DeliveryCounts, error) {
	var c ledger.DeliveryCounts
	err := s.db.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0)
		FROM ledger_deliveries WHERE status IN ('pending', 'failed')`).Scan(&c.Pending, &c.Failed)
	if err != nil {
		return c, fmt.Errorf("%s ledger: cannot count the delivery backlog: %w", s.d.Name, err)
	}
	return c, nil
}

// ---------------------------------------------------------------- releases

const releaseCols = `id, natural_key, instance_id, node, project, user_name, streak_start_ms, dry_run, status, action,
	evidence_json, attempts, last_error, retry_ms, created_ms, updated_ms`

func scanRelease(sc rowScanner) (ledger.Release, error) {
	var r ledger.Release
	var streak, dry, retry, created, updated int64
	var status, evidence string
	err := sc.Scan(&r.ID, &r.Key, &r.InstanceID, &r.Node, &r.Project, &r.User, &streak, &dry, &status, &r.Action,
		&evidence, &r.Attempts, &r.LastError, &retry, &created, &updated)
	r.StreakStart, r.DryRun, r.Status, r.Evidence = fromMS(streak), dry != 0, billing.ReleaseStatus(status), json.RawMessage(evidence)
	r.RetryAt, r.CreatedAt, r.UpdatedAt = fromMS(retry), fromMS(created), fromMS(updated)
	return r, err
}

func releaseObject(id int64) string { return "release/" + strconv.FormatInt(id, 10) }

// releaseView is a release as the audit log shows it, evidence included:
// the log is where a release's reasons are kept. Not ledger.Release as the
// API serves it (api.ReleaseBody): the entry carries the id and the time,
// and the entries already written keep these members in this order.
func releaseView(r ledger.Release) json.RawMessage {
	type view struct {
		Key         string                `json:"key"`
		InstanceID  string                `json:"instance_id"`
		Node        string                `json:"node,omitempty"`
		Project     string                `json:"project,omitempty"`
		User        string                `json:"user,omitempty"`
		StreakStart time.Time             `json:"streak_start"`
		DryRun      bool                  `json:"dry_run"`
		Status      billing.ReleaseStatus `json:"status"`
		Action      string                `json:"action,omitempty"`
		Attempts    int                   `json:"attempts"`
		LastError   string                `json:"last_error,omitempty"`
		Evidence    json.RawMessage       `json:"evidence"`
	}
	return mustJSON(view{r.Key, r.InstanceID, r.Node, r.Project, r.User, r.StreakStart, r.DryRun, r.Status, r.Action,
		r.Attempts, r.LastError, r.Evidence})
}

func (s *Store) release(ctx context.Context, q querier, what, where string, args ...any) (ledger.Release, error) {
	return readRow(ctx, s, q, what, scanRelease, `SELECT `+releaseCols+` FROM ledger_releases `+where, args...)
}

// BeginRelease implements ledger.Store.
func (s *Store) BeginRelease(ctx context.Context, actor string, nr ledger.NewRelease) (ledger.Release, bool, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Release{}, false, err
	}
	if err := ledger.CheckNewRelease(&nr); err != nil {
		return ledger.Release{}, false, err
	}
	what := "release " + nr.Key
	var out ledger.Release
	var started bool
	err := s.tx(ctx, "begin "+what, func(tx *sql.Tx) error {
		now := s.now()
		var id int64
		err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_releases (natural_key, instance_id, node, project, user_name,
			streak_start_ms, dry_run, status, evidence_json, attempts, created_ms, updated_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, 1, ?, ?) ON CONFLICT (natural_key) DO NOTHING RETURNING id`),
			nr.Key, nr.InstanceID, nr.Node, nr.Project, nr.User, nr.StreakStart.UnixMilli(), boolInt(nr.DryRun), string(nr.Evidence),
			now.UnixMilli(), now.UnixMilli()).Scan(&id)
		switch {
		case err == nil:
			out = ledger.Release{ID: id, NewRelease: nr, Status: billing.ReleasePending, Attempts: 1,
				CreatedAt: fromMS(now.UnixMilli()), UpdatedAt: fromMS(now.UnixMilli())}
			out.StreakStart = fromMS(nr.StreakStart.UnixMilli())
			started = true
			_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "release.begin", Object: releaseObject(id), After: releaseView(out)})
			return err
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%s ledger: cannot record %s: %w", s.d.Name, what, err)
		}
		cur, err := s.release(ctx, tx, what, `WHERE natural_key = ?`+s.d.ForUpdate, nr.Key)
		if err != nil {
			return err
		}
		out = cur
		retry := cur.Status == billing.ReleasePending && !cur.UpdatedAt.Add(ledger.ReleaseStale).After(now) ||
			cur.Status == billing.ReleaseFailed && !cur.RetryAt.IsZero() && !cur.RetryAt.After(now)
		if !retry {
			return nil
		}
		before := cur
		cur.Status, cur.Attempts, cur.UpdatedAt, cur.RetryAt = billing.ReleasePending, cur.Attempts+1, fromMS(now.UnixMilli()), time.Time{}
		out, started = cur, true
		return s.update(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "release.retry", Object: releaseObject(cur.ID),
			Before: releaseView(before), After: releaseView(cur)}, "record "+what,
			`UPDATE ledger_releases SET status = 'pending', attempts = ?, retry_ms = 0, updated_ms = ? WHERE id = ?`, cur.Attempts, now.UnixMilli(), cur.ID)
	})
	if err != nil {
		return ledger.Release{}, false, err
	}
	return out, started, nil
}

// FinishRelease implements ledger.Store.
func (s *Store) FinishRelease(ctx context.Context, actor string, id int64, res ledger.ReleaseResult) (ledger.Release, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Release{}, err
	}
	if err := ledger.CheckReleaseResult(&res); err != nil {
		return ledger.Release{}, err
	}
	what := "release " + strconv.FormatInt(id, 10)
	var out ledger.Release
	err := s.tx(ctx, "finish "+what, func(tx *sql.Tx) error {
		now := s.now()
		cur, err := s.release(ctx, tx, what, `WHERE id = ?`+s.d.ForUpdate, id)
		if err != nil {
			return err
		}
		if cur.Status != billing.ReleasePending {
			return fmt.Errorf("%w: %s (%s) is %s, not pending", ledger.ErrInvalidTransition, what, cur.Key, cur.Status)
		}
		if res.Status == billing.ReleaseDryRun && !cur.DryRun || res.Status == billing.ReleaseDone && cur.DryRun {
			return fmt.Errorf("%w: %s: outcome %s for a release recorded with dry run %t", ledger.ErrInvalidArgument, what, res.Status, cur.DryRun)
		}
		before := cur
		cur.Status, cur.Action, cur.LastError = res.Status, res.Action, res.Failure
		cur.RetryAt, cur.UpdatedAt = fromMS(res.RetryAt.UnixMilli()*boolInt(!res.RetryAt.IsZero())), fromMS(now.UnixMilli())
		out = cur
		return s.update(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "release." + string(res.Status), Object: releaseObject(id),
			Before: releaseView(before), After: releaseView(cur)}, "update "+what,
			`UPDATE ledger_releases SET status = ?, action = ?, last_error = ?, retry_ms = ?, updated_ms = ?
			WHERE id = ?`, string(cur.Status), cur.Action, cur.LastError, cur.RetryAt.UnixMilli()*boolInt(!cur.RetryAt.IsZero()),
			now.UnixMilli(), id)
	})
	if err != nil {
		return ledger.Release{}, err
	}
	return out, nil
}

// Release implements ledger.Store.
func (s *Store) Release(ctx context.Context, id int64) (ledger.Release, error) {
	return s.release(ctx, s.db, "release "+strconv.FormatInt(id, 10), `WHERE id = ?`, id)
}

// ReleaseByKey implements ledger.Store.
func (s *Store) ReleaseByKey(ctx context.Context, key string) (ledger.Release, error) {
	return s.release(ctx, s.db, "release "+key, `WHERE natural_key = ?`, key)
}

// Releases implements ledger.Store.
func (s *Store) Releases(ctx context.Context, f ledger.ReleaseFilter) ([]ledger.Release, string, error) {
	pq, err := releasesQuery(f)
	if err != nil {
		return nil, "", err
	}
	return readPage(ctx, s, pq, releasesFrom, "releases",
		func(r *sql.Rows) (ledger.Release, error) { return scanRelease(r) }, func(v *ledger.Release) int64 { return v.ID })
}

const releasesFrom = `SELECT ` + releaseCols + ` FROM ledger_releases`

// releasesQuery is the list of releases f asks for. The watcher asks every
// cycle for the pending ones, and a billing run for the done or failed ones
// changed since its period began: index ledger_releases_status (status,
// updated_ms, migration 0006) serves both.
func releasesQuery(f ledger.ReleaseFilter) (*pagedQuery, error) {
	pq, err := listQuery(f.Limit, f.Cursor)
	if err != nil {
		return nil, err
	}
	pq.eq("project", f.Project)
	pq.eq("user_name", f.User)
	pq.eq("instance_id", f.InstanceID)
	pq.eq("status", string(f.Status))
	if !f.UpdatedSince.IsZero() {
		pq.add("updated_ms >= ?", f.UpdatedSince.UnixMilli())
	}
	return pq, nil
}

// ReleasesSQL is the statement Releases runs for f, with ? placeholders, and
// its arguments: for the dialects' tests, which ask their database's plan.
func ReleasesSQL(f ledger.ReleaseFilter) (string, []any, error) {
	pq, err := releasesQuery(f)
	if err != nil {
		return "", nil, err
	}
	query, args := pq.statement(releasesFrom)
	return query, args, nil
}

// ---------------------------------------------------------------- exemptions

const exemptionCols = `id, project, user_name, instance_id, until_ms, reason, granted_by, created_ms, revoked_by, revoked_ms`

func scanExemption(sc rowScanner) (ledger.Exemption, error) {
	var e ledger.Exemption
	var until, created, revoked int64
	err := sc.Scan(&e.ID, &e.Project, &e.User, &e.InstanceID, &until, &e.Reason, &e.GrantedBy, &created, &e.RevokedBy, &revoked)
	e.Until, e.CreatedAt, e.RevokedAt = fromMS(until), fromMS(created), fromMS(revoked)
	return e, err
}

func exemptionObject(id int64) string { return "exemption/" + strconv.FormatInt(id, 10) }

func exemptionView(e ledger.Exemption) json.RawMessage {
	type view struct {
		Project    string    `json:"project"`
		User       string    `json:"user,omitempty"`
		InstanceID string    `json:"instance_id,omitempty"`
		Until      time.Time `json:"until"`
		Reason     string    `json:"reason"`
		GrantedBy  string    `json:"granted_by"`
		RevokedBy  string    `json:"revoked_by,omitempty"`
	}
	return mustJSON(view{e.Project, e.User, e.InstanceID, e.Until, e.Reason, e.GrantedBy, e.RevokedBy})
}

// GrantExemption implements ledger.Store.
func (s *Store) GrantExemption(ctx context.Context, actor string, ne ledger.NewExemption) (ledger.Exemption, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Exemption{}, err
	}
	var out ledger.Exemption
	err := s.tx(ctx, "exemption of "+ne.Project, func(tx *sql.Tx) error {
		var err error
		out, err = s.grantExemption(ctx, tx, s.now(), actor, ne)
		return err
	})
	if err != nil {
		return ledger.Exemption{}, err
	}
	return out, nil
}

// grantExemption records the exemption ne granted by actor at now, with its
// audit entry, in tx.
func (s *Store) grantExemption(ctx context.Context, tx *sql.Tx, now time.Time, actor string, ne ledger.NewExemption) (ledger.Exemption, error) {
	if err := ledger.CheckNewExemption(&ne, now); err != nil {
		return ledger.Exemption{}, err
	}
	out := ledger.Exemption{NewExemption: ne, GrantedBy: actor, CreatedAt: fromMS(now.UnixMilli())}
	out.Until = fromMS(ne.Until.UnixMilli())
	if err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_exemptions (project, user_name, instance_id, until_ms, reason,
		granted_by, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`), ne.Project, ne.User, ne.InstanceID, out.Until.UnixMilli(),
		ne.Reason, actor, now.UnixMilli()).Scan(&out.ID); err != nil {
		return ledger.Exemption{}, fmt.Errorf("%s ledger: cannot record the exemption of %s: %w", s.d.Name, ne.Project, err)
	}
	_, err := s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "exemption.grant", Object: exemptionObject(out.ID),
		After: exemptionView(out)})
	return out, err
}

// Exemption implements ledger.Store.
func (s *Store) Exemption(ctx context.Context, id int64) (ledger.Exemption, error) {
	return readRow(ctx, s, s.db, "exemption "+strconv.FormatInt(id, 10), scanExemption,
		`SELECT `+exemptionCols+` FROM ledger_exemptions WHERE id = ?`, id)
}

// RevokeExemption implements ledger.Store.
func (s *Store) RevokeExemption(ctx context.Context, actor string, id int64) (ledger.Exemption, error) {
	return revoke(ctx, s, revocable[ledger.Exemption]{noun: "exemption", table: "ledger_exemptions", cols: exemptionCols,
		scan: scanExemption, object: exemptionObject, view: exemptionView,
		unrevoked: func(e ledger.Exemption) ledger.Exemption {
			e.RevokedBy, e.RevokedAt = "", time.Time{}
			return e
		}}, actor, id)
}

// Exemptions implements ledger.Store.
func (s *Store) Exemptions(ctx context.Context, f ledger.ExemptionFilter) ([]ledger.Exemption, string, error) {
	pq, err := listQuery(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	pq.eq("project", f.Project)
	if f.User != "" {
		pq.add("(user_name = ? OR user_name = '')", f.User)
	}
	if f.InstanceID != "" {
		pq.add("(instance_id = ? OR instance_id = '')", f.InstanceID)
	}
	if !f.ActiveAt.IsZero() {
		t := f.ActiveAt.UnixMilli()
		pq.add("created_ms <= ?", t)
		pq.add("until_ms > ?", t)
		pq.add("(revoked_ms = 0 OR revoked_ms > ?)", t)
	}
	if !f.EndsAfter.IsZero() {
		t := f.EndsAfter.UnixMilli()
		pq.add("until_ms > ?", t)
		pq.add("(revoked_ms = 0 OR revoked_ms > ?)", t)
	}
	return readPage(ctx, s, pq, `SELECT `+exemptionCols+` FROM ledger_exemptions`, "exemptions",
		func(r *sql.Rows) (ledger.Exemption, error) { return scanExemption(r) }, func(v *ledger.Exemption) int64 { return v.ID })
}

// ---------------------------------------------------------------- budgets

const budgetCols = `id, scope, project, user_name, period_kind, unit, limit_value, thresholds_json, action, created_by, created_ms, updated_ms,
	usage_period, usage_start_ms, usage_end_ms, used_money, used_card_ms, usage_as_of_ms`

func scanBudget(sc rowScanner) (ledger.Budget, error) {
	var b ledger.Budget
	var scope, period, unit, thresholds, action, used string
	var created, updated, uStart, uEnd, uAsOf int64
	if err := sc.Scan(&b.ID, &scope, &b.Project, &b.User, &period, &unit, &b.Limit, &thresholds, &action, &b.CreatedBy, &created, &updated,
		&b.Usage.Period, &uStart, &uEnd, &used, &b.Usage.CardMS, &uAsOf); err != nil {
		return b, err
	}
	if b.Usage.Period != "" {
		m, err := decimal.NewFromString(used)
		if err != nil {
			return b, fmt.Errorf("used money of budget %d: %w", b.ID, err)
		}
		b.Usage.Money, b.Usage.Start, b.Usage.End, b.Usage.AsOf = m, fromMS(uStart), fromMS(uEnd), fromMS(uAsOf)
	}
	b.Scope, b.Period, b.Unit, b.Action = billing.BudgetScope(scope), billing.BudgetPeriodKind(period), billing.BudgetUnit(unit), billing.BudgetAction(action)
	b.CreatedAt, b.UpdatedAt = fromMS(created), fromMS(updated)
	if err := json.Unmarshal([]byte(thresholds), &b.Thresholds); err != nil {
		return b, fmt.Errorf("thresholds of budget %d: %w", b.ID, err)
	}
	return b, nil
}

func budgetObject(id int64) string { return "budget/" + strconv.FormatInt(id, 10) }

func budgetView(b ledger.Budget) json.RawMessage {
	type view struct {
		Scope      billing.BudgetScope      `json:"scope"`
		Project    string                   `json:"project"`
		User       string                   `json:"user,omitempty"`
		Period     billing.BudgetPeriodKind `json:"period"`
		Unit       billing.BudgetUnit       `json:"unit"`
		Limit      string                   `json:"limit"`
		Thresholds []int                    `json:"thresholds"`
		Action     billing.BudgetAction     `json:"action"`
	}
	return mustJSON(view{b.Scope, b.Project, b.User, b.Period, b.Unit, b.Limit, b.Thresholds, b.Action})
}

// PutBudget implements ledger.Store.
func (s *Store) PutBudget(ctx context.Context, actor string, b ledger.Budget) (ledger.Budget, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Budget{}, err
	}
	if err := ledger.CheckBudget(&b); err != nil {
		return ledger.Budget{}, err
	}
	what := fmt.Sprintf("budget %s %s/%s %s %s", b.Scope, b.Project, b.User, b.Period, b.Unit)
	var out ledger.Budget
	err := s.tx(ctx, what, func(tx *sql.Tx) error {
		if err := s.lock(ctx, tx, "budget/"+string(b.Scope)+"/"+b.Project+"/"+b.User+"/"+string(b.Period)+"/"+string(b.Unit)); err != nil {
			return err
		}
		now := s.now()
		cur, err := scanBudget(tx.QueryRowContext(ctx, s.d.Rebind(`SELECT `+budgetCols+` FROM ledger_budgets
			WHERE scope = ? AND project = ? AND user_name = ? AND period_kind = ? AND unit = ?`+s.d.ForUpdate),
			string(b.Scope), b.Project, b.User, string(b.Period), string(b.Unit)))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			out = b
			out.CreatedBy, out.CreatedAt, out.UpdatedAt = actor, fromMS(now.UnixMilli()), fromMS(now.UnixMilli())
			if err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_budgets (scope, project, user_name, period_kind, unit,
				limit_value, thresholds_json, action, created_by, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`),
				string(b.Scope), b.Project, b.User, string(b.Period), string(b.Unit), b.Limit, string(mustJSON(b.Thresholds)),
				string(b.Action), actor, now.UnixMilli(), now.UnixMilli()).Scan(&out.ID); err != nil {
				return fmt.Errorf("%s ledger: cannot store %s: %w", s.d.Name, what, err)
			}
			_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "budget.create", Object: budgetObject(out.ID), After: budgetView(out)})
			return err
		case err != nil:
			return fmt.Errorf("%s ledger: cannot read %s: %w", s.d.Name, what, err)
		}
		out = cur
		if string(budgetView(cur)) == string(budgetView(b)) {
			return nil
		}
		out.Limit, out.Thresholds, out.Action, out.UpdatedAt = b.Limit, b.Thresholds, b.Action, fromMS(now.UnixMilli())
		return s.update(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "budget.update", Object: budgetObject(cur.ID),
			Before: budgetView(cur), After: budgetView(out)}, "update "+what,
			`UPDATE ledger_budgets SET limit_value = ?, thresholds_json = ?, action = ?, updated_ms = ? WHERE id = ?`,
			b.Limit, string(mustJSON(b.Thresholds)), string(b.Action), now.UnixMilli(), cur.ID)
	})
	if err != nil {
		return ledger.Budget{}, err
	}
	return out, nil
}

// DeleteBudget implements ledger.Store.
func (s *Store) DeleteBudget(ctx context.Context, actor string, id int64) error {
	if err := ledger.CheckActor(actor); err != nil {
		return err
	}
	what := "budget " + strconv.FormatInt(id, 10)
	return s.tx(ctx, "delete "+what, func(tx *sql.Tx) error {
		now := s.now()
		cur, err := scanBudget(tx.QueryRowContext(ctx, s.d.Rebind(`SELECT `+budgetCols+` FROM ledger_budgets WHERE id = ?`+s.d.ForUpdate), id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ledger.ErrNotFound, what)
		}
		if err != nil {
			return fmt.Errorf("%s ledger: cannot read %s: %w", s.d.Name, what, err)
		}
		return s.update(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "budget.delete", Object: budgetObject(id), Before: budgetView(cur)},
			"delete "+what, `DELETE FROM ledger_budgets WHERE id = ?`, id)
	})
}

// RecordBudgetUsage implements ledger.Store.
func (s *Store) RecordBudgetUsage(ctx context.Context, usage map[int64]ledger.BudgetUsage) error {
	if len(usage) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(usage)) // one order of row locks for every writer
	return s.tx(ctx, "record budget usage", func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, s.d.Rebind(`UPDATE ledger_budgets SET usage_period = ?, usage_start_ms = ?, usage_end_ms = ?,
			used_money = ?, used_card_ms = ?, usage_as_of_ms = ? WHERE id = ?`))
		if err != nil {
			return fmt.Errorf("%s ledger: cannot record budget usage: %w", s.d.Name, err)
		}
		defer stmt.Close() //nolint:errcheck // closed with the transaction
		for _, id := range ids {
			u := usage[id]
			if u.Period == "" {
				return fmt.Errorf("%w: usage of budget %d has no period", ledger.ErrInvalidArgument, id)
			}
			if _, err := stmt.ExecContext(ctx, u.Period, u.Start.UnixMilli(), u.End.UnixMilli(), u.Money.String(), u.CardMS,
				u.AsOf.UnixMilli(), id); err != nil {
				return fmt.Errorf("%s ledger: cannot record the usage of budget %d: %w", s.d.Name, id, err)
			}
		}
		return nil
	})
}

// Budget implements ledger.Store.
func (s *Store) Budget(ctx context.Context, id int64) (ledger.Budget, error) {
	b, err := scanBudget(s.db.QueryRowContext(ctx, s.d.Rebind(`SELECT `+budgetCols+` FROM ledger_budgets WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("%w: budget %d", ledger.ErrNotFound, id)
	}
	if err != nil {
		return b, fmt.Errorf("%s ledger: cannot read budget %d: %w", s.d.Name, id, err)
	}
	return b, nil
}

// Budgets implements ledger.Store.
func (s *Store) Budgets(ctx context.Context, f ledger.BudgetFilter) ([]ledger.Budget, string, error) {
	pq, err := listQuery(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	for _, c := range []struct{ cond, v string }{{"scope = ?", string(f.Scope)}, {"project = ?", f.Project}, {"user_name = ?", f.User}} {
		if c.v != "" {
			pq.add(c.cond, c.v)
		}
	}
	return readPage(ctx, s, pq, `SELECT `+budgetCols+` FROM ledger_budgets`, "budgets",
		func(r *sql.Rows) (ledger.Budget, error) { return scanBudget(r) }, func(v *ledger.Budget) int64 { return v.ID })
}
