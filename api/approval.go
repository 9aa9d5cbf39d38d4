package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// Approver is implemented by an Invoicing with the lead's sign-off
// (`serve --lead-approval`): a draft is finalized only once its project's
// lead has approved that very document.
type Approver interface {
	LeadApproval() bool
	Approve(ctx context.Context, actor string, id int64, ifSHA256 string) (invoicing.Approval, error)
	ApprovalOf(ctx context.Context, inv ledger.Invoice) (invoicing.Approval, bool, error)
}

var rolesApprove = []ledger.Role{ledger.RoleAdmin, ledger.RoleLead}

func (s *Server) routesApproval() {
	register(s, huma.Operation{OperationID: "approve-invoice", Method: http.MethodPost, Path: "/api/v1/invoices/{id}/approve", Summary: "approve a draft (the lead's sign-off)",
		Description: "The project's lead signs the draft off as the document it reviewed (if_sha256; another is conflict); finance may then finalize it. Only on a server that requires the sign-off (`serve --lead-approval`; otherwise invalid-transition). A draft recomputed since needs a new approval. Audited (invoice.approve); approving twice records one approval.",
		Tags:        []string{"invoices"}},
		rolesApprove, s.approveInvoice)
}

// approver is the flow's sign-off when the server requires one.
func (s *Server) approver() (Approver, bool) {
	a, ok := s.cfg.Invoicing.(Approver)
	return a, ok && a.LeadApproval()
}

func (s *Server) approveInvoice(ctx context.Context, in *finalizeInput) (*body[InvoiceBody], error) {
	a, ok := s.approver()
	if !ok {
		return nil, fmt.Errorf("%w: this server does not require the lead's sign-off (serve --lead-approval): finance finalizes drafts directly", ledger.ErrInvalidTransition)
	}
	inv, err := s.scopedInvoice(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if _, err := a.Approve(ctx, actor(ctx), inv.ID, in.Body.IfSHA256); err != nil {
		return nil, err
	}
	return &body[InvoiceBody]{s.withGrace(ctx, inv, invoiceBody(inv))}, nil
}

// withApproval sets a draft's sign-off fields when the server requires one;
// a failure to read the approval leaves them out (finalizing still checks).
func (s *Server) withApproval(ctx context.Context, inv ledger.Invoice, b InvoiceBody) InvoiceBody {
	a, ok := s.approver()
	if !ok || inv.Status != ledger.StatusDraft {
		return b
	}
	b.ApprovalRequired = true
	if ap, ok, err := a.ApprovalOf(ctx, inv); err == nil && ok {
		b.ApprovedBy, b.ApprovedAt = ap.By, ap.At
	}
	return b
}
