package advice

import (
	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// Mix is a set of reservations of one SKU over the window: Year and Quarter
// instances held the whole window (renewed at the end of each term inside
// it), and Month[i] month-term instances in month i.
type Mix struct {
	Year    int64   `json:"year"`
	Quarter int64   `json:"quarter"`
	Month   []int64 `json:"month"`
}

// Empty reports whether the mix reserves nothing (hourly only).
func (m Mix) Empty() bool {
	if m.Year > 0 || m.Quarter > 0 {
		return false
	}
	for _, q := range m.Month {
		if q > 0 {
			return false
		}
	}
	return true
}

// Reservations are the mix as catalog reservations, all billed monthly (the
// window bears each month's share; paying a term upfront costs the same).
func (m Mix) Reservations(sku string, periods []billing.Period) []schemas.Reservation {
	var rs []schemas.Reservation
	add := func(q int64, term schemas.Term, i int) {
		p := periods[i]
		rs = append(rs, schemas.Reservation{SKU: sku, Quantity: q, Term: term, StartYear: p.Year, StartMonth: p.Month, Billing: schemas.BillingMonthly})
	}
	if m.Year > 0 {
		for i := 0; i < len(periods); i += 12 {
			add(m.Year, schemas.TermYear, i)
		}
	}
	if m.Quarter > 0 {
		for i := 0; i < len(periods); i += 3 {
			add(m.Quarter, schemas.TermQuarter, i)
		}
	}
	for i, q := range m.Month {
		if q > 0 {
			add(q, schemas.TermMonth, i)
		}
	}
	return rs
}

// search finds the mix of least cost: the long-term quantity L (split between
// year and quarter) and, for each month, the month-term quantity on top of
// it. For a given L the months are independent (each month is billed on its
// own), so the cost is long(L) + Σ_i min_m [U_i(L+m) + month(m)], with U_i the
// engine's usage amount of month i (usageCurve). Ties go to the smaller
// commitment.
func (a *adviser) search(g *group, curves []*usageCurve) (Mix, decimal.Decimal) {
	mix := Mix{Month: make([]int64, len(curves))}
	var peak int64
	for _, c := range curves {
		peak = max(peak, c.peak)
	}
	if !g.sku.HasMonthly || peak == 0 {
		t := decimal.Zero
		for _, c := range curves {
			t = t.Add(c.at(0))
		}
		return mix, t
	}
	// Built here, not by a constructor, so that it stays on the stack.
	s := mixSearch{
		a: a, sku: g.sku, curves: curves, peak: peak, x: int64(a.opt.ExhaustiveUpTo),
		nd: decimal.NewFromInt(int64(len(curves))), rstar: make([]int64, len(curves)),
	}
	s.exact = peak <= s.x
	if !s.exact {
		s.lts = make([][]int64, len(curves))
		s.monthLevels()
	}
	bestL := s.bestLong()
	t, y, q := s.long(bestL)
	mix.Year, mix.Quarter = y, q
	for i := range curves {
		v, m := s.monthBest(i, bestL)
		mix.Month[i] = m
		t = t.Add(v)
	}
	return mix, t
}

// mixSearch prices the mixes of one SKU over the window's usage curves.
// Up to opt.ExhaustiveUpTo instances every quantity is priced (exact);
// above it, each month's best total quantity (rstar) and the best L are
// found by descend from the sessions' levels.
type mixSearch struct {
	a      *adviser
	sku    *schemas.SKU
	curves []*usageCurve
	peak   int64
	x      int64           // opt.ExhaustiveUpTo
	nd     decimal.Decimal // the window's months
	exact  bool
	rstar  []int64   // per month, the best L+m when not exact
	lts    [][]int64 // per month, the sessions' levels when not exact
}

// monthLevels sets, per month, the sessions' levels and the best total
// quantity from them (not exact: too many instances to price every one).
func (s *mixSearch) monthLevels() {
	for i, c := range s.curves {
		s.lts[i] = sessionLevels(c.sessions)
		f := func(r int64) decimal.Decimal { return c.at(r).Add(s.a.resCost(s.sku, schemas.TermMonth, r)) }
		s.rstar[i] = descend(0, c.peak, s.a.guessMonth(s.sku, s.lts[i]), f)
	}
}

// long is long(L): the cheapest split of L between year (y) and quarter (q),
// per window; every split is priced up to x, else only all-year and
// all-quarter.
func (s *mixSearch) long(l int64) (cost decimal.Decimal, y, q int64) {
	if l == 0 {
		return decimal.Zero, 0, 0
	}
	costOf := func(y int64) decimal.Decimal {
		return s.a.resCost(s.sku, schemas.TermYear, y).Add(s.a.resCost(s.sku, schemas.TermQuarter, l-y)).Mul(s.nd)
	}
	ys := []int64{0, l}
	if l <= s.x {
		ys = ys[:0]
		for y := int64(0); y <= l; y++ {
			ys = append(ys, y)
		}
	}
	best, by := costOf(ys[0]), ys[0]
	for _, y := range ys[1:] {
		if c := costOf(y); c.LessThan(best) {
			best, by = c, y
		}
	}
	return best, by, l - by
}

// monthBest is monthBest(i, L): the month-term quantity of month i on top of
// L, and the month's cost with it.
func (s *mixSearch) monthBest(i int, l int64) (decimal.Decimal, int64) {
	c := s.curves[i]
	if !s.exact {
		m := max(0, s.rstar[i]-l)
		return c.at(l + m).Add(s.a.resCost(s.sku, schemas.TermMonth, m)), m
	}
	best, bm := c.at(l), int64(0)
	for m := int64(1); l+m <= c.peak; m++ {
		if v := c.at(l + m).Add(s.a.resCost(s.sku, schemas.TermMonth, m)); v.LessThan(best) {
			best, bm = v, m
		}
	}
	return best, bm
}

// total is the window's cost with long-term quantity l and each month's
// best month-term quantity on top.
func (s *mixSearch) total(l int64) decimal.Decimal {
	t, _, _ := s.long(l)
	for i := range s.curves {
		v, _ := s.monthBest(i, l)
		t = t.Add(v)
	}
	return t
}

// bestLong is the long-term quantity L of least total cost: every L up to
// the peak when exact, else found by descend from guessLong.
func (s *mixSearch) bestLong() int64 {
	if !s.exact {
		return descend(0, s.peak, s.a.guessLong(s.sku, s.lts, s.rstar), s.total)
	}
	var bestL int64
	best := s.total(0)
	for l := int64(1); l <= s.peak; l++ {
		if v := s.total(l); v.LessThan(best) {
			best, bestL = v, l
		}
	}
	return bestL
}

// argmin is the smallest minimiser of f over [lo, hi] when f falls and then
// rises (ternary search), with the neighbours of the result checked.
func argmin(lo, hi int64, f func(int64) decimal.Decimal) int64 {
	for hi-lo > 4 {
		m1, m2 := lo+(hi-lo)/3, hi-(hi-lo)/3
		if f(m1).LessThanOrEqual(f(m2)) {
			hi = m2
		} else {
			lo = m1
		}
	}
	from, to := max(0, lo-2), hi+2
	best, bx := f(from), from
	for r := from + 1; r <= to; r++ {
		if v := f(r); v.LessThan(best) {
			best, bx = v, r
		}
	}
	return bx
}

// descend is the smallest minimiser of f over [lo, hi] near x when f falls
// and then rises: from x it gallops downhill (steps 1, 2, 4, …), then narrows
// the last bracket down with argmin. With a good first guess it prices a
// handful of points.
func descend(lo, hi, x int64, f func(int64) decimal.Decimal) int64 {
	x = min(max(x, lo), hi)
	fx := f(x)
	var dir int64
	switch {
	case x < hi && f(x+1).LessThan(fx):
		dir = 1
	case x > lo && f(x-1).LessThan(fx):
		dir = -1
	default:
		// x is a local minimum; an equal value to the left is preferred.
		for x > lo && !fx.LessThan(f(x-1)) {
			x--
		}
		return x
	}
	prev, step := x, int64(1)
	var stop int64
	for {
		nx := min(max(x+dir*step, lo), hi)
		if nx == x {
			stop = x
			break
		}
		if fn := f(nx); fn.LessThan(fx) {
			prev, x, fx = x, nx, fn
			step *= 2
			continue
		}
		stop = nx
		break
	}
	return argminIn(min(prev, stop), max(prev, stop), f)
}

// argminIn is argmin kept inside [lo, hi].
func argminIn(lo, hi int64, f func(int64) decimal.Decimal) int64 {
	for hi-lo > 4 {
		m1, m2 := lo+(hi-lo)/3, hi-(hi-lo)/3
		if f(m1).LessThanOrEqual(f(m2)) {
			hi = m2
		} else {
			lo = m1
		}
	}
	best, bx := f(lo), lo
	for r := lo + 1; r <= hi; r++ {
		if v := f(r); v.LessThan(best) {
			best, bx = v, r
		}
	}
	return bx
}

// guessMonth is where the search for a month's quantity starts: the number of
// reserved instances whose covered time (the k-th covers the time with at
// least k sessions open, lt[k-1] ms) is worth more at the hourly price than a
// month reservation. Only a starting point: the engine's prices decide.
func (a *adviser) guessMonth(sku *schemas.SKU, lt []int64) int64 {
	c := a.resCost(sku, schemas.TermMonth, 1).Mul(decimal.NewFromInt(3_600_000))
	var k int64
	for k < int64(len(lt)) && sku.HourlyPrice.Mul(decimal.NewFromInt(lt[k])).GreaterThan(c) {
		k++
	}
	return k
}

// guessLong is where the search for the long-term quantity starts: the k-th
// instance is worth a year (or quarter) term when what it saves over the
// window, each month the lesser of its hourly worth and a month reservation,
// exceeds the term's monthly shares.
func (a *adviser) guessLong(sku *schemas.SKU, lts [][]int64, rstar []int64) int64 {
	n := decimal.NewFromInt(int64(len(lts)))
	long := decimal.Min(a.resCost(sku, schemas.TermYear, 1), a.resCost(sku, schemas.TermQuarter, 1)).Mul(n)
	month := a.resCost(sku, schemas.TermMonth, 1)
	h := sku.HourlyPrice.Div(decimal.NewFromInt(3_600_000))
	var peak int64
	for _, r := range rstar {
		peak = max(peak, r)
	}
	for _, lt := range lts {
		peak = max(peak, int64(len(lt)))
	}
	var k int64
	for ; k < peak; k++ {
		worth := decimal.Zero
		for _, lt := range lts {
			if k < int64(len(lt)) {
				worth = worth.Add(decimal.Min(h.Mul(decimal.NewFromInt(lt[k])), month))
			}
		}
		if !worth.GreaterThan(long) {
			break
		}
	}
	return k
}
