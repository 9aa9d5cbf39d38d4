package billing

import (
	"fmt"

	"github.com/cardhour/cardhour/schemas"
)

// InvoicesUnder computes the period's invoices from everything accumulated so
// far as Invoices does, but under cat instead of the accumulator's catalog:
// what-if pricing of the same usage (other reservations, prices or rounding).
// cat must have the accumulator catalog's gap tolerance (it decided which
// intervals were kept); idle time was decided with the accumulator's catalog.
// The accumulator is not changed, so it can be billed under many catalogs.
func (a *Accumulator) InvoicesUnder(cat *schemas.Catalog) (*Result, error) {
	if cat.Defaults.GapToleranceMS != a.tol {
		return nil, fmt.Errorf("billing: a catalog with gap tolerance %d ms cannot bill usage accumulated with %d ms", cat.Defaults.GapToleranceMS, a.tol)
	}
	b := *a
	b.cat = cat
	return b.Invoices(), nil
}
