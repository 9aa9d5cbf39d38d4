package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// Exemption requests (ledger.RequestStore): made by a student, decided by
// the project's lead, admin or finance; a grant creates the exemption in
// the same transaction.

const requestCols = `id, project, user_name, instance_id, until_ms, reason, status, requested_by, created_ms, decided_by, decided_ms,
	answer, exemption_id, updated_ms`

func scanRequest(sc rowScanner) (ledger.ExemptionRequest, error) {
	var r ledger.ExemptionRequest
	var until, created, decided, updated int64
	var status string
	err := sc.Scan(&r.ID, &r.Project, &r.User, &r.InstanceID, &until, &r.Reason, &status, &r.RequestedBy, &created, &r.DecidedBy,
		&decided, &r.Answer, &r.ExemptionID, &updated)
	r.Status = ledger.ExemptionRequestStatus(status)
	r.Until, r.CreatedAt, r.DecidedAt, r.UpdatedAt = fromMS(until), fromMS(created), fromMS(decided), fromMS(updated)
	return r, err
}

func requestObject(id int64) string { return "exemption_request/" + strconv.FormatInt(id, 10) }

func requestView(r ledger.ExemptionRequest) json.RawMessage {
	type view struct {
		Project     string    `json:"project"`
		User        string    `json:"user"`
		InstanceID  string    `json:"instance_id,omitempty"`
		Until       time.Time `json:"until"`
		Reason      string    `json:"reason"`
		Status      string    `json:"status"`
		DecidedBy   string    `json:"decided_by,omitempty"`
		Answer      string    `json:"answer,omitempty"`
		ExemptionID int64     `json:"exemption_id,omitempty"`
	}
	return mustJSON(view{r.Project, r.User, r.InstanceID, r.Until, r.Reason, string(r.Status), r.DecidedBy, r.Answer, r.ExemptionID})
}

// RequestExemption implements ledger.Store.
func (s *Store) RequestExemption(ctx context.Context, actor string, nr ledger.NewExemptionRequest) (ledger.ExemptionRequest, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.ExemptionRequest{}, err
	}
	var out ledger.ExemptionRequest
	err := s.tx(ctx, "exemption request of "+nr.Project+"/"+nr.User, func(tx *sql.Tx) error {
		now := s.now()
		if err := ledger.CheckNewExemptionRequest(&nr, now); err != nil {
			return err
		}
		ms := now.UnixMilli()
		out = ledger.ExemptionRequest{NewExemptionRequest: nr, Status: ledger.RequestPending, RequestedBy: actor,
			CreatedAt: fromMS(ms), UpdatedAt: fromMS(ms)}
		out.Until = fromMS(nr.Until.UnixMilli())
		if err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_exemption_requests (project, user_name, instance_id, until_ms,
			reason, status, requested_by, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`), nr.Project, nr.User,
			nr.InstanceID, out.Until.UnixMilli(), nr.Reason, string(ledger.RequestPending), actor, ms, ms).Scan(&out.ID); err != nil {
			return fmt.Errorf("%s ledger: cannot record the exemption request of %s/%s: %w", s.d.Name, nr.Project, nr.User, err)
		}
		_, err := s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "exemption_request.create", Object: requestObject(out.ID),
			After: requestView(out)})
		return err
	})
	if err != nil {
		return ledger.ExemptionRequest{}, err
	}
	return out, nil
}

// ExemptionRequest implements ledger.Store.
func (s *Store) ExemptionRequest(ctx context.Context, id int64) (ledger.ExemptionRequest, error) {
	return readRow(ctx, s, s.db, "exemption request "+strconv.FormatInt(id, 10), scanRequest,
		`SELECT `+requestCols+` FROM ledger_exemption_requests WHERE id = ?`, id)
}

// ExemptionRequests implements ledger.Store.
func (s *Store) ExemptionRequests(ctx context.Context, f ledger.ExemptionRequestFilter) ([]ledger.ExemptionRequest, string, error) {
	if err := ledger.CheckRequestStatus(f.Status); err != nil {
		return nil, "", err
	}
	pq, err := listQuery(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	pq.eq("project", f.Project)
	pq.eq("user_name", f.User)
	pq.eq("status", string(f.Status))
	if !f.UpdatedSince.IsZero() {
		pq.add("updated_ms >= ?", f.UpdatedSince.UnixMilli())
	}
	return readPage(ctx, s, pq, `SELECT `+requestCols+` FROM ledger_exemption_requests`, "exemption requests",
		func(r *sql.Rows) (ledger.ExemptionRequest, error) { return scanRequest(r) }, func(v *ledger.ExemptionRequest) int64 { return v.ID })
}

// GrantExemptionRequest implements ledger.Store.
func (s *Store) GrantExemptionRequest(ctx context.Context, actor string, id int64, answer string) (ledger.ExemptionRequest, ledger.Exemption, error) {
	var ex ledger.Exemption
	r, err := s.decide(ctx, actor, id, ledger.RequestGranted, answer, func(tx *sql.Tx, now time.Time, r ledger.ExemptionRequest) (int64, error) {
		reason := r.Reason
		if strings.TrimSpace(answer) != "" {
			reason += " — " + answer
		}
		var err error
		ex, err = s.grantExemption(ctx, tx, now, actor, ledger.NewExemption{Project: r.Project, User: r.User, InstanceID: r.InstanceID,
			Until: r.Until, Reason: reason})
		return ex.ID, err
	})
	return r, ex, err
}

// RefuseExemptionRequest implements ledger.Store.
func (s *Store) RefuseExemptionRequest(ctx context.Context, actor string, id int64, answer string) (ledger.ExemptionRequest, error) {
	if strings.TrimSpace(answer) == "" {
		return ledger.ExemptionRequest{}, fmt.Errorf("%w: a refusal needs its reason", ledger.ErrInvalidArgument)
	}
	return s.decide(ctx, actor, id, ledger.RequestRefused, answer, nil)
}

// decide moves a pending request to status, with grant (when set) making
// the exemption in the same transaction.
func (s *Store) decide(ctx context.Context, actor string, id int64, status ledger.ExemptionRequestStatus, answer string,
	grant func(tx *sql.Tx, now time.Time, r ledger.ExemptionRequest) (int64, error)) (ledger.ExemptionRequest, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.ExemptionRequest{}, err
	}
	what := "exemption request " + strconv.FormatInt(id, 10)
	var out ledger.ExemptionRequest
	err := s.tx(ctx, "decide "+what, func(tx *sql.Tx) error {
		now := s.now()
		before, err := readRow(ctx, s, tx, what, scanRequest, `SELECT `+requestCols+` FROM ledger_exemption_requests WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if before.Status != ledger.RequestPending {
			return fmt.Errorf("%w: %s is already %s", ledger.ErrInvalidTransition, what, before.Status)
		}
		var exID int64
		if grant != nil {
			if exID, err = grant(tx, now, before); err != nil {
				return err
			}
		}
		ms := now.UnixMilli()
		n, err := s.exec(ctx, tx, `UPDATE ledger_exemption_requests SET status = ?, decided_by = ?, decided_ms = ?, answer = ?,
			exemption_id = ?, updated_ms = ? WHERE id = ? AND status = ?`, string(status), actor, ms, answer, exID, ms, id, string(ledger.RequestPending))
		if err != nil {
			return fmt.Errorf("%s ledger: cannot decide %s: %w", s.d.Name, what, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: %s is already decided", ledger.ErrInvalidTransition, what)
		}
		out = before
		out.Status, out.DecidedBy, out.DecidedAt, out.Answer, out.ExemptionID, out.UpdatedAt = status, actor, fromMS(ms), answer, exID, fromMS(ms)
		_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "exemption_request." + string(status),
			Object: requestObject(id), Before: requestView(before), After: requestView(out)})
		return err
	})
	if err != nil {
		return ledger.ExemptionRequest{}, err
	}
	return out, nil
}
