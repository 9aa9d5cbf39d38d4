package advice

import (
	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// priced is what the engine billed for one SKU of one project in one month.
type priced struct {
	Usage, Reserved decimal.Decimal
	CoveredMS       int64
}

func (p priced) total() decimal.Decimal { return p.Usage.Add(p.Reserved) }

// price bills sessions (one month's, of one project and SKU) under the catalog
// in which the project holds exactly rs, and returns the amounts of the SKU's
// lines. The sessions are the engine's own (bridged and clipped), so billing
// them again under the unchanged catalog gives the same lines; only the
// reservations differ.
func (a *adviser) price(g *group, i int, sessions []billing.Session, rs []schemas.Reservation) priced {
	res, err := a.accumulate(g, sessions, i).InvoicesUnder(a.cat.WithReservations(g.project, rs))
	if err != nil {
		panic("BUG: advice: " + err.Error()) // the candidate catalog has the catalog's gap tolerance
	}
	g.bills++
	out := priced{Usage: decimal.Zero, Reserved: decimal.Zero}
	for _, inv := range res.Invoices {
		if inv.Project != g.project {
			continue
		}
		for _, l := range inv.Lines {
			if l.SKU != g.sku.ID {
				continue
			}
			if l.Kind == billing.KindReservation {
				out.Reserved = out.Reserved.Add(l.Amount)
			} else {
				out.Usage = out.Usage.Add(l.Amount)
			}
		}
		for _, s := range inv.Sessions {
			if s.SKU == g.sku.ID {
				out.CoveredMS += s.CoveredMS
			}
		}
	}
	return out
}

// priceWindow bills every month of the window under rs and adds the amounts.
func (a *adviser) priceWindow(g *group, sessions [][]billing.Session, rs []schemas.Reservation) priced {
	t := priced{Usage: decimal.Zero, Reserved: decimal.Zero}
	for i := range a.periods {
		p := a.price(g, i, sessions[i], rs)
		t.Usage = t.Usage.Add(p.Usage)
		t.Reserved = t.Reserved.Add(p.Reserved)
		t.CoveredMS += p.CoveredMS
	}
	return t
}

// usageCurve is U(R) of one month: the usage amount with R instances reserved,
// priced by the engine on demand and remembered.
type usageCurve struct {
	a        *adviser
	g        *group
	i        int
	sessions []billing.Session
	peak     int64 // most sessions at once: more reserved covers nothing more
	memo     map[int64]decimal.Decimal
	calls    int
}

func (u *usageCurve) at(r int64) decimal.Decimal {
	r = min(r, u.peak)
	if v, ok := u.memo[r]; ok {
		return v
	}
	var rs []schemas.Reservation
	if r > 0 {
		rs = []schemas.Reservation{monthReservation(u.g.sku.ID, u.a.periods[u.i], r)}
	}
	v := u.a.price(u.g, u.i, u.sessions, rs).Usage
	u.memo[r] = v
	u.calls++
	return v
}

// monthReservation is a month-term reservation of q instances for month p.
func monthReservation(sku string, p billing.Period, q int64) schemas.Reservation {
	return schemas.Reservation{SKU: sku, Quantity: q, Term: schemas.TermMonth, StartYear: p.Year, StartMonth: p.Month, Billing: schemas.BillingMonthly}
}

// monthlyEquivalent returns rs with every reservation billed monthly: the
// same total over its term, spread over its months, so that a window of
// months bears the share of each month it covers whenever the reservation
// was paid.
func monthlyEquivalent(rs []schemas.Reservation) []schemas.Reservation {
	out := make([]schemas.Reservation, len(rs))
	for i, r := range rs {
		r.Billing = schemas.BillingMonthly
		out[i] = r
	}
	return out
}

// reservationsOf returns the project's reservations of the SKU in the catalog
// and their positions in its entry.
func (a *adviser) reservationsOf(project, sku string) ([]schemas.Reservation, []int) {
	p, ok := a.cat.Project(project)
	if !ok {
		return nil, nil
	}
	var rs []schemas.Reservation
	var idx []int
	for i, r := range p.Reservations {
		if r.SKU == sku {
			rs = append(rs, r)
			idx = append(idx, i)
		}
	}
	return rs, idx
}

// resCost is what the engine charges a month for q instances reserved on a
// term, billed monthly (billing.ReservationAmount, the engine's own).
func (a *adviser) resCost(sku *schemas.SKU, term schemas.Term, q int64) decimal.Decimal {
	if q <= 0 {
		return decimal.Zero
	}
	return billing.ReservationAmount(sku.MonthlyPrice, 1, a.cat.Discount(sku, term), q)
}

// accumulate feeds sessions (one month's, of the group) to an accumulator of
// month i under the catalog, once per slice of sessions: the search bills the
// same sessions many times under different reservations. A group is priced
// by one goroutine, so its cache needs no lock.
func (a *adviser) accumulate(g *group, sessions []billing.Session, i int) *billing.Accumulator {
	k := accKey{i: i, n: len(sessions)}
	if len(sessions) > 0 {
		k.first = &sessions[0]
	}
	if acc, ok := g.accs[k]; ok {
		return acc
	}
	acc := billing.NewAccumulator(a.cat, a.periods[i])
	for j := range sessions {
		s := &sessions[j]
		acc.AddOccupancy(s.Key, s.Start, s.End, false)
	}
	if g.accs == nil {
		g.accs = map[accKey]*billing.Accumulator{}
	}
	g.accs[k] = acc
	return acc
}

// accKey names a slice of sessions by its month, first element and length.
type accKey struct {
	i     int
	n     int
	first *billing.Session
}
