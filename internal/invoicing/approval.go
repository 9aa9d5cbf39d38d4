package invoicing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// The lead's sign-off (Config.LeadApproval): the project's lead approves a
// draft, naming the document it reviewed by its SHA-256, and finance
// finalizes it. An approval is an audit entry (action ActionApprove on the
// invoice, the document's SHA-256 in After): it is recorded once and never
// changes, and a draft recomputed since (another SHA-256) waits for a new
// one.

// ActionApprove is the audit action of an approval.
const ActionApprove = "invoice.approve"

// ErrAwaitingApproval refuses finalizing a draft its project's lead has not
// approved. It also wraps ledger.ErrConflict.
var ErrAwaitingApproval = fmt.Errorf("%w: awaiting the lead's approval", ledger.ErrConflict)

// Approval is the lead's sign-off of one draft document.
type Approval struct {
	By  string
	At  time.Time
	SHA string
}

type approvalView struct {
	SHA256 string `json:"sha256"`
}

func invoiceObject(id int64) string { return "invoice/" + strconv.FormatInt(id, 10) }

// LeadApproval reports whether finalizing waits for the lead's approval.
func (s *Service) LeadApproval() bool { return s.cfg.LeadApproval }

// Approve records actor's approval of draft id as the document ifSHA256
// (required): refused when the draft is no longer that document
// (ledger.ErrConflict) or is not a draft. Approving what is approved
// records nothing new.
func (s *Service) Approve(ctx context.Context, actor string, id int64, ifSHA256 string) (Approval, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return Approval{}, err
	}
	inv, err := s.cfg.Ledger.Invoice(ctx, id)
	if err != nil {
		return Approval{}, err
	}
	if inv.Status != ledger.StatusDraft {
		return Approval{}, fmt.Errorf("%w: cannot approve invoice %d: it is %s, want draft", ledger.ErrInvalidTransition, id, inv.Status)
	}
	if ifSHA256 != inv.SHA256 {
		return Approval{}, fmt.Errorf("%w: invoice %d is no longer the document %s that was reviewed (now %s): review it again", ledger.ErrConflict, id, ifSHA256, inv.SHA256)
	}
	if a, ok, err := s.ApprovalOf(ctx, inv); err != nil || ok {
		return a, err
	}
	after, _ := json.Marshal(approvalView{SHA256: inv.SHA256})
	e, err := s.cfg.Ledger.RecordAudit(ctx, ledger.AuditRecord{Actor: actor, Action: ActionApprove, Object: invoiceObject(id), After: after})
	if err != nil {
		return Approval{}, err
	}
	return Approval{By: e.Actor, At: e.At, SHA: inv.SHA256}, nil
}

// ApprovalOf is the approval of inv's document as it is now, if any.
func (s *Service) ApprovalOf(ctx context.Context, inv ledger.Invoice) (Approval, bool, error) {
	f := ledger.AuditFilter{Action: ActionApprove, Object: invoiceObject(inv.ID), Limit: ledger.MaxLimit}
	for {
		page, next, err := s.cfg.Ledger.Audit(ctx, f)
		if err != nil {
			return Approval{}, false, fmt.Errorf("invoicing: approvals of invoice %d: %w", inv.ID, err)
		}
		for _, e := range page {
			var v approvalView
			if json.Unmarshal(e.After, &v) == nil && v.SHA256 == inv.SHA256 {
				return Approval{By: e.Actor, At: e.At, SHA: v.SHA256}, true, nil
			}
		}
		if next == "" {
			return Approval{}, false, nil
		}
		f.Cursor = next
	}
}

// checkApproval refuses finalizing inv as document sha without the lead's
// approval of it, when approvals are required.
func (s *Service) checkApproval(ctx context.Context, inv ledger.Invoice, sha string) error {
	if !s.cfg.LeadApproval {
		return nil
	}
	if sha != inv.SHA256 {
		return nil // the ledger refuses it: not the document that was reviewed
	}
	_, ok, err := s.ApprovalOf(ctx, inv)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: invoice %d (%s %s) awaits the approval of its project's lead", ErrAwaitingApproval, inv.ID, inv.Project, inv.Period)
	}
	return nil
}

// isAwaitingApproval reports whether err is ErrAwaitingApproval.
func isAwaitingApproval(err error) bool { return errors.Is(err, ErrAwaitingApproval) }
