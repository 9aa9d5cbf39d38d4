package advice

import (
	"cmp"
	"slices"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// underused reports the project's reservations of the SKU (all, at catalog
// positions idx) that covered less than the minimum share of their reserved
// time in the window.
//
// Coverage is pooled: the engine covers the first Q active sessions, whatever
// reservation Q comes from. To say which reservation covered what, the
// reserved instances are stacked, longer terms first (then earlier start,
// then catalog order): the k-th instance of the stack covers the time when at
// least k sessions were active. The stacks of a month add up to the engine's
// covered time of that month.
func (a *adviser) underused(g *group, all []schemas.Reservation, idx []int, basis decimal.Decimal) []Underused {
	if len(all) == 0 {
		return nil
	}
	covered := make([]int64, len(all))
	reserved := make([]int64, len(all))
	cost := zeros(len(all))
	for i := range a.periods {
		lt := sessionLevels(g.sessions[i])
		mi := a.periods[i].MonthIndex()
		var order []int
		for j, r := range all {
			if r.ActiveIn(mi) {
				order = append(order, j)
			}
		}
		slices.SortFunc(order, func(x, y int) int {
			rx, ry := all[x], all[y]
			return cmp.Or(cmp.Compare(ry.Term.Months(), rx.Term.Months()), cmp.Compare(rx.StartIndex(), ry.StartIndex()), cmp.Compare(idx[x], idx[y]))
		})
		off := int64(0)
		for _, j := range order {
			q := all[j].Quantity
			for k := off; k < off+q && k < int64(len(lt)); k++ {
				covered[j] += lt[k]
			}
			off += q
			reserved[j] += q * a.windowMS(i)
			cost[j] = cost[j].Add(a.resCost(g.sku, all[j].Term, q))
		}
	}
	var out []Underused
	for j, r := range all {
		if reserved[j] == 0 {
			continue
		}
		cov := share(decimal.NewFromInt(covered[j]), decimal.NewFromInt(reserved[j]))
		if !cov.LessThan(a.opt.MinCoverage) {
			continue
		}
		unused := billing.ShareAmount(cost[j], reserved[j]-covered[j], reserved[j])
		u := Underused{Project: g.project, SKU: g.sku.ID, Index: idx[j], Reserved: a.reserved(g.sku, r),
			ReservedSeconds: reserved[j] / 1000, CoveredSeconds: covered[j] / 1000, Coverage: cov.StringFixed(4),
			Cost: billing.FormatMoney(cost[j]), Unused: billing.FormatMoney(unused), WindowCost: billing.FormatMoney(basis)}
		var others []schemas.Reservation
		for k, o := range all {
			if k != j {
				others = append(others, o)
			}
		}
		others = monthlyEquivalent(others)
		u.Smaller = a.smaller(g, others, r, basis)
		if r.Term != schemas.TermMonth {
			u.Shorter = a.shorter(g, others, r, basis)
		}
		u.Text = a.underusedText(g, &u, cov)
		out = append(out, u)
	}
	return out
}

// smaller prices the window with r's quantity lowered (0: without it) and
// returns the cheapest when it is cheaper than basis.
func (a *adviser) smaller(g *group, others []schemas.Reservation, r schemas.Reservation, basis decimal.Decimal) *Alt {
	memo := map[int64]decimal.Decimal{}
	cost := func(q int64) decimal.Decimal {
		q = min(max(q, 0), r.Quantity-1)
		if v, ok := memo[q]; ok {
			return v
		}
		rs := slices.Clone(others)
		if q > 0 {
			rr := r
			rr.Quantity, rr.Billing = q, schemas.BillingMonthly
			rs = append(rs, rr)
		}
		v := a.priceWindow(g, g.sessions, rs).total()
		memo[q] = v
		return v
	}
	var best int64
	if r.Quantity-1 <= int64(a.opt.ExhaustiveUpTo) {
		bv := cost(0)
		for q := int64(1); q < r.Quantity; q++ {
			if v := cost(q); v.LessThan(bv) {
				bv, best = v, q
			}
		}
	} else {
		best = min(argmin(0, r.Quantity-1, cost), r.Quantity-1)
	}
	if v := cost(best); v.LessThan(basis) {
		return &Alt{Quantity: best, Cost: billing.FormatMoney(v)}
	}
	return nil
}

// shorter prices the window with r replaced by month-term reservations of at
// most its quantity in the months it was active, each month's quantity the
// cheapest, and returns them when cheaper than basis.
func (a *adviser) shorter(g *group, others []schemas.Reservation, r schemas.Reservation, basis decimal.Decimal) *Alt {
	alt := &Alt{Months: make([]int64, len(a.periods))}
	total := decimal.Zero
	for i, p := range a.periods {
		memo := map[int64]decimal.Decimal{}
		cost := func(m int64) decimal.Decimal {
			m = min(max(m, 0), r.Quantity)
			if v, ok := memo[m]; ok {
				return v
			}
			rs := slices.Clone(others)
			if m > 0 {
				rs = append(rs, monthReservation(g.sku.ID, p, m))
			}
			v := a.price(g, i, g.sessions[i], rs).total()
			memo[m] = v
			return v
		}
		var best int64
		switch {
		case !r.ActiveIn(p.MonthIndex()):
		case r.Quantity <= int64(a.opt.ExhaustiveUpTo):
			bv := cost(0)
			for m := int64(1); m <= r.Quantity; m++ {
				if v := cost(m); v.LessThan(bv) {
					bv, best = v, m
				}
			}
		default:
			best = min(argmin(0, r.Quantity, cost), r.Quantity)
		}
		alt.Months[i] = best
		total = total.Add(cost(best))
	}
	if !total.LessThan(basis) || slices.Max(alt.Months) == 0 {
		return nil // nothing cheaper, or nothing reserved at all (smaller says that)
	}
	alt.Cost = billing.FormatMoney(total)
	return alt
}
