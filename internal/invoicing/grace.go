package invoicing

import (
	"context"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// FinalizableFrom is when inv may be finalized: the end of its period's
// grace period, the period taken in the zone of the catalog its draft was
// priced with (as Finalize checks it).
func (s *Service) FinalizableFrom(ctx context.Context, inv ledger.Invoice) (time.Time, error) {
	cat, err := s.catalog(ctx, inv.CatalogVersion)
	if err != nil {
		return time.Time{}, err
	}
	p, err := period(inv.Period, cat)
	if err != nil {
		return time.Time{}, err
	}
	return s.GraceEnds(p), nil
}
