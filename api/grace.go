package api

import (
	"context"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// GraceReporter is implemented by an Invoicing that can tell when a draft
// may be finalized (the end of its period's grace period). The invoice
// resource then carries it as finalizable_from, so that a client offers
// finalizing only from then on.
type GraceReporter interface {
	FinalizableFrom(ctx context.Context, inv ledger.Invoice) (time.Time, error)
}

// withGrace sets b.FinalizableFrom (and Finalizable, by the server's clock)
// for a draft when the flow reports it; a failure to tell leaves them out
// (finalizing still checks the grace period).
func (s *Server) withGrace(ctx context.Context, inv ledger.Invoice, b InvoiceBody) InvoiceBody {
	if inv.Status != ledger.StatusDraft {
		return b
	}
	b = s.withApproval(ctx, inv, b)
	if g, ok := s.cfg.Invoicing.(GraceReporter); ok {
		if t, err := g.FinalizableFrom(ctx, inv); err == nil {
			b.FinalizableFrom = t
			b.Finalizable = !s.now().Before(t)
		}
	}
	return b
}
