package billing

import (
	"fmt"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// One table test per rule of billing-semantics v1, each with numbers worked out
// by hand in the comments.

const rulesCatalog = `
currency: CNY
timezone: Asia/Shanghai
defaults: {rounding: second, gap_tolerance_s: 30, min_billed_s: %d}
skus:
  - {id: a1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "1.80", monthly_price: "900"}
  - {id: h1g, gpu_model: H100, profile: 1g.10gb, hourly_price: "0.01", monthly_price: "2100", discounts: {year: "0.15"}}
projects:
  - id: p
    reservations: %s
  - id: hourly
    rounding: hour
  - id: strict
    idle: {threshold: 0.5}
`

var shanghai = func() *time.Location {
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return loc
}()

var nov = NewPeriod(2026, time.November, shanghai)

// at returns Unix ms for a wall-clock time in Shanghai in November 2026 (day may
// be 0 or 31 to reach October or December).
func at(day, hour, minute, sec int) int64 {
	return time.Date(2026, time.November, day, hour, minute, sec, 0, shanghai).UnixMilli()
}

type smp struct {
	project, user, inst, model string
	start, end                 int64
	util                       float64 // <0: null
	procs                      int64
}

func catalogWith(t *testing.T, minBilled int, reservations string) *schemas.Catalog {
	t.Helper()
	if reservations == "" {
		reservations = "[]"
	}
	cat, err := schemas.ParseCatalog([]byte(fmt.Sprintf(rulesCatalog, minBilled, reservations)), "rules")
	require.NoError(t, err)
	return cat
}

func bill(t *testing.T, cat *schemas.Catalog, p Period, ss ...smp) *Result {
	t.Helper()
	acc := NewAccumulator(cat, p)
	for _, x := range ss {
		model := x.model
		if model == "" {
			model = "A100"
		}
		s := schemas.Sample{StartMS: x.start, IntervalMS: x.end - x.start, Node: "n", GPUUUID: "g", GPUModel: model,
			InstanceID: x.inst, Profile: "1g.10gb", Project: x.project, User: x.user, Processes: x.procs}
		if x.util >= 0 {
			s.Util, s.UtilKnown = x.util, true
		}
		require.NoError(t, s.Validate())
		acc.Add(&s)
	}
	return acc.Invoices()
}

func usageLine(t *testing.T, r *Result, project, user, sku string) Line {
	t.Helper()
	for _, inv := range r.Invoices {
		for _, l := range inv.Lines {
			if inv.Project == project && l.Kind == KindUsage && l.User == user && l.SKU == sku {
				return l
			}
		}
	}
	t.Fatalf("no usage line %s/%s/%s in %+v", project, user, sku, r.Invoices)
	return Line{}
}

func TestRuleUnionAndGapTolerance(t *testing.T) {
	cat := catalogWith(t, 0, "")
	f := func(name string, want Line, ss ...smp) {
		t.Helper()
		l := usageLine(t, bill(t, cat, nov, ss...), "p", "u", "a1g")
		require.Equal(t, want.Sessions, l.Sessions, name)
		require.Equal(t, want.UsedMS, l.UsedMS, name)
		require.Equal(t, want.BilledSeconds, l.BilledSeconds, name)
	}
	s := func(from, to int64) smp {
		return smp{project: "p", user: "u", inst: "i", start: from, end: to, util: -1, procs: 1}
	}
	t0 := at(3, 10, 0, 0)
	f("duplicates count once", Line{Sessions: 1, UsedMS: 60_000, BilledSeconds: 60}, s(t0, t0+60_000), s(t0, t0+60_000))
	f("overlaps count once", Line{Sessions: 1, UsedMS: 90_000, BilledSeconds: 90}, s(t0, t0+60_000), s(t0+30_000, t0+90_000))
	f("gap of exactly the tolerance is bridged and billed", Line{Sessions: 1, UsedMS: 150_000, BilledSeconds: 150},
		s(t0, t0+60_000), s(t0+90_000, t0+150_000))
	f("gap one millisecond over the tolerance splits", Line{Sessions: 2, UsedMS: 120_000, BilledSeconds: 120},
		s(t0, t0+60_000), s(t0+90_001, t0+150_001))
	f("a piece in the middle joins two sessions", Line{Sessions: 1, UsedMS: 200_000, BilledSeconds: 200},
		s(t0, t0+60_000), s(t0+140_000, t0+200_000), s(t0+80_000, t0+120_000))
	f("per-second rounding is per session", Line{Sessions: 2, UsedMS: 1_002, BilledSeconds: 2},
		s(t0, t0+501), s(t0+100_000, t0+100_501))
}

func TestRuleUnheldAndUnpriced(t *testing.T) {
	cat := catalogWith(t, 0, "")
	t0 := at(3, 10, 0, 0)
	r := bill(t, cat, nov,
		smp{project: "", user: "", inst: "i", start: t0, end: t0 + 3_600_000, util: -1},
		smp{project: "p", user: "u", inst: "j", model: "L40S", start: t0, end: t0 + 600_000, util: 0.5})
	require.Len(t, r.Invoices, 1, "the unheld instance bills nobody")
	inv := r.Invoices[0]
	require.Equal(t, "p", inv.Project)
	require.Empty(t, inv.Lines)
	require.Equal(t, []UnpricedLine{{User: "u", GPUModel: "L40S", Profile: "1g.10gb", Sessions: 1, UsedMS: 600_000}}, inv.Unpriced)
	require.True(t, inv.Total.IsZero())
	require.Len(t, r.Warnings, 1)
	require.Contains(t, r.Warnings[0], "matches no SKU")

	r = bill(t, cat, nov, smp{project: "elsewhere", user: "u", inst: "i", start: t0, end: t0 + 1000, util: -1})
	require.False(t, r.Invoices[0].InCatalog)
	require.Contains(t, r.Warnings[0], `project "elsewhere" is not in the catalog`)
}

func TestRuleMonthBoundaryInCatalogTimeZone(t *testing.T) {
	cat := catalogWith(t, 0, "")
	// 30 Nov 23:00 → 1 Dec 01:00 Shanghai.
	from, to := at(30, 23, 0, 0), at(31, 1, 0, 0)
	x := smp{project: "p", user: "u", inst: "i", start: from, end: to, util: -1, procs: 1}
	l := usageLine(t, bill(t, cat, nov, x), "p", "u", "a1g")
	require.EqualValues(t, 3_600_000, l.UsedMS)
	dec := NewPeriod(2026, time.December, shanghai)
	l = usageLine(t, bill(t, cat, dec, x), "p", "u", "a1g")
	require.EqualValues(t, 3_600_000, l.UsedMS)
	require.Equal(t, "1.80", FormatMoney(l.Amount))

	// A gap bridged across the boundary is billed on both sides of it.
	a := smp{project: "p", user: "u", inst: "i", start: at(30, 23, 59, 0), end: at(30, 23, 59, 50), util: -1, procs: 1}
	b := smp{project: "p", user: "u", inst: "i", start: at(31, 0, 0, 10), end: at(31, 0, 1, 0), util: -1, procs: 1}
	require.EqualValues(t, 60_000, usageLine(t, bill(t, cat, nov, a, b), "p", "u", "a1g").UsedMS)
	require.EqualValues(t, 60_000, usageLine(t, bill(t, cat, dec, a, b), "p", "u", "a1g").UsedMS)
	// Samples far outside the month do not produce an invoice line.
	oct := NewPeriod(2026, time.October, shanghai)
	for _, inv := range bill(t, cat, oct, x).Invoices {
		require.Empty(t, inv.Lines)
	}
}

func TestRuleCoverageFIFO(t *testing.T) {
	cat := catalogWith(t, 0, "[{sku: a1g, quantity: 1, term: month, start: 2026-11, billing: monthly}, {sku: a1g, quantity: 1, term: year, start: 2025-12}]")
	h := func(hh, mm int) int64 { return at(3, hh, mm, 0) }
	r := bill(t, cat, nov,
		// Q = 2. a and b start together: tie broken by instance id (i1 < i2), c is third.
		smp{project: "p", user: "a", inst: "i2", start: h(9, 0), end: h(11, 0), util: -1, procs: 1},
		smp{project: "p", user: "b", inst: "i1", start: h(9, 0), end: h(10, 0), util: -1, procs: 1},
		smp{project: "p", user: "c", inst: "i3", start: h(9, 0), end: h(12, 0), util: -1, procs: 1},
		// d starts at 10:30 while a and c are active: c took b's place at 10:00, so d is uncovered.
		smp{project: "p", user: "d", inst: "i0", start: h(10, 30), end: h(11, 30), util: -1, procs: 1},
	)
	cov := func(user string) int64 { return usageLine(t, r, "p", user, "a1g").CoveredMS }
	require.EqualValues(t, 2*3_600_000, cov("a"))
	require.EqualValues(t, 3_600_000, cov("b"))
	// c: uncovered 9–10, covered 10–12 (b left; d starts later than c).
	require.EqualValues(t, 2*3_600_000, cov("c"))
	// d: uncovered 10:30–11:00, covered 11:00–11:30 (a left at 11).
	require.EqualValues(t, 1_800_000, cov("d"))
	require.EqualValues(t, 1800, usageLine(t, r, "p", "d", "a1g").BilledSeconds)

	// Ties on start and instance are broken by user.
	r = bill(t, cat, nov,
		smp{project: "p", user: "z", inst: "i", start: h(9, 0), end: h(10, 0), util: -1, procs: 1},
		smp{project: "p", user: "y", inst: "i", start: h(9, 0), end: h(10, 0), util: -1, procs: 1},
		smp{project: "p", user: "x", inst: "i", start: h(9, 0), end: h(10, 0), util: -1, procs: 1})
	require.EqualValues(t, 3_600_000, usageLine(t, r, "p", "x", "a1g").CoveredMS)
	require.EqualValues(t, 3_600_000, usageLine(t, r, "p", "y", "a1g").CoveredMS)
	require.EqualValues(t, 0, usageLine(t, r, "p", "z", "a1g").CoveredMS)

	// Sessions that started last month are ordered by their start inside this month.
	r = bill(t, cat, nov,
		smp{project: "p", user: "old", inst: "i9", start: at(0, 20, 0, 0), end: at(1, 2, 0, 0), util: -1, procs: 1},
		smp{project: "p", user: "old2", inst: "i8", start: at(0, 21, 0, 0), end: at(1, 2, 0, 0), util: -1, procs: 1},
		smp{project: "p", user: "new", inst: "i0", start: at(1, 0, 0, 0), end: at(1, 1, 0, 0), util: -1, procs: 1})
	// All three start at P0 after clipping, so the instance decides: i0, i8, then i9.
	require.EqualValues(t, 3_600_000, usageLine(t, r, "p", "new", "a1g").CoveredMS)
	require.EqualValues(t, 2*3_600_000, usageLine(t, r, "p", "old2", "a1g").CoveredMS)
	require.EqualValues(t, 3_600_000, usageLine(t, r, "p", "old", "a1g").CoveredMS, "uncovered 00:00-01:00, covered after i0 ends")
}

func TestRuleReservationCharges(t *testing.T) {
	f := func(res string, p Period, want ...string) {
		t.Helper()
		r := bill(t, catalogWith(t, 0, res), p)
		var got []string
		for _, inv := range r.Invoices {
			for _, l := range inv.Lines {
				got = append(got, FormatMoney(l.Amount))
			}
		}
		require.Equal(t, want, got, res)
	}
	sep := NewPeriod(2026, time.September, shanghai)
	f("[{sku: a1g, quantity: 2, term: year, start: 2026-09, billing: upfront}]", sep, "17280.00") // 900×12×0.8×2
	f("[{sku: a1g, quantity: 2, term: year, start: 2026-09, billing: upfront}]", nov, "0.00")
	f("[{sku: a1g, quantity: 2, term: year, start: 2026-09, billing: monthly}]", nov, "1440.00") // 900×0.8×2
	f("[{sku: a1g, quantity: 1, term: quarter, start: 2026-09, billing: upfront}]", sep, "2565.00")
	f("[{sku: a1g, quantity: 1, term: quarter, start: 2026-09}]", nov, "0.00")
	f("[{sku: a1g, quantity: 1, term: quarter, start: 2026-08}]", nov)                               // term over
	f("[{sku: a1g, quantity: 1, term: month, start: 2026-12}]", nov)                                 // not yet
	f("[{sku: h1g, quantity: 1, term: year, start: 2026-11, billing: monthly}]", nov, "1785.00")     // per-SKU 0.15: 2100×0.85
	f("[{sku: h1g, quantity: 3, term: quarter, start: 2026-11, billing: upfront}]", nov, "17955.00") // 2100×3×0.95×3
}

func TestRuleRoundingAndMinimum(t *testing.T) {
	t0 := at(3, 10, 0, 0)
	ten := func(project string, from int64) smp {
		return smp{project: project, user: "u", inst: "i", start: from, end: from + 600_000, util: -1, procs: 1}
	}
	// Hourly: each 10-minute session is rounded up to a whole hour on its own.
	l := usageLine(t, bill(t, catalogWith(t, 0, ""), nov, ten("hourly", t0), ten("hourly", t0+7_200_000)), "hourly", "u", "a1g")
	require.EqualValues(t, 7200, l.BilledSeconds)
	require.Equal(t, "3.60", FormatMoney(l.Amount))
	// Exactly one hour is one hour.
	one := smp{project: "hourly", user: "u", inst: "i", start: t0, end: t0 + 3_600_000, util: -1, procs: 1}
	require.EqualValues(t, 3600, usageLine(t, bill(t, catalogWith(t, 0, ""), nov, one), "hourly", "u", "a1g").BilledSeconds)
	// min_billed_s applies per session with billable time, after rounding.
	short := smp{project: "p", user: "u", inst: "i", start: t0, end: t0 + 1_500, util: -1, procs: 1}
	require.EqualValues(t, 60, usageLine(t, bill(t, catalogWith(t, 60, ""), nov, short), "p", "u", "a1g").BilledSeconds)
	// ... but not to a fully covered session.
	l = usageLine(t, bill(t, catalogWith(t, 60, "[{sku: a1g, quantity: 1, term: month, start: 2026-11}]"), nov, short), "p", "u", "a1g")
	require.EqualValues(t, 0, l.BilledSeconds)
	require.Equal(t, "0.00", FormatMoney(l.Amount))
}

func TestRuleMoneyRoundsOnceHalfUp(t *testing.T) {
	f := func(billed int64, price, want string) {
		t.Helper()
		require.Equal(t, want, FormatMoney(UsageAmount(billed, decimal.RequireFromString(price))), "%d s at %s", billed, price)
	}
	f(1800, "0.01", "0.01") // 0.005 → half up
	f(1799, "0.01", "0.00") // 0.004997…
	f(1, "0.07", "0.00")    // 0.0000194…
	f(5021, "4.50", "6.28") // 6.27625
	f(3600, "1.80", "1.80")
	f(1, "1.80", "0.00")       // 0.0005 → 0.00 (not 0.01: 0.0005 < 0.005)
	f(10, "1.80", "0.01")      // 0.005 exactly → 0.01
	f(7, "12.345", "0.02")     // 0.02400416…
	f(3599, "3600", "3599.00") // exact
	// The sum of two rounded lines, not the rounding of the sum.
	a, b := UsageAmount(10, decimal.RequireFromString("1.80")), UsageAmount(10, decimal.RequireFromString("1.80"))
	require.Equal(t, "0.02", FormatMoney(a.Add(b)))
	require.Equal(t, "0.01", FormatMoney(UsageAmount(20, decimal.RequireFromString("1.80"))))
	// Half away from zero for credits.
	require.Equal(t, "-0.01", FormatMoney(RoundMoney(decimal.RequireFromString("-0.005"))))
	require.Equal(t, "12.35", FormatPrice(decimal.RequireFromString("12.35")))
	require.Equal(t, "12.345", FormatPrice(decimal.RequireFromString("12.345")))
	require.Equal(t, "900.00", FormatPrice(decimal.RequireFromString("900")))
}

func TestRuleIdle(t *testing.T) {
	cat := catalogWith(t, 0, "")
	t0 := at(3, 10, 0, 0)
	m := int64(60_000)
	s := func(project string, k int64, util float64, procs int64) smp {
		return smp{project: project, user: "u", inst: "i", start: t0 + k*m, end: t0 + (k+1)*m, util: util, procs: procs}
	}
	r := bill(t, cat, nov,
		s("p", 0, 0.049, 1), // idle: below 0.05
		s("p", 1, 0.05, 0),  // not idle: util known and not below the threshold
		s("p", 2, -1, 0),    // idle: util unknown and no process
		s("p", 3, -1, 1),    // not idle: a process runs
		s("p", 4, 0, 3),     // idle: util known wins over processes
		s("p", 4, 0.9, 1),   // same minute replayed with another reading: the union is still idle
		s("strict", 0, 0.3, 1), s("strict", 1, 0.6, 1),
	)
	require.EqualValues(t, 3*m, usageLine(t, r, "p", "u", "a1g").IdleMS)
	require.EqualValues(t, m, usageLine(t, r, "strict", "u", "a1g").IdleMS, "project threshold 0.5")
}

func TestIntervalSet(t *testing.T) {
	f := func(tol int64, adds [][2]int64, want []Interval) {
		t.Helper()
		s := IntervalSet{Tol: tol}
		for _, a := range adds {
			s.Add(a[0], a[1])
		}
		require.Equal(t, want, s.Pieces(), "%v", adds)
	}
	f(0, [][2]int64{{0, 10}, {10, 20}}, []Interval{{0, 20}})
	f(0, [][2]int64{{0, 10}, {11, 20}}, []Interval{{0, 10}, {11, 20}})
	f(1, [][2]int64{{11, 20}, {0, 10}}, []Interval{{0, 20}})
	f(0, [][2]int64{{50, 60}, {0, 10}, {20, 30}, {5, 55}}, []Interval{{0, 60}})
	f(0, [][2]int64{{50, 60}, {0, 10}, {20, 30}, {12, 15}}, []Interval{{0, 10}, {12, 15}, {20, 30}, {50, 60}})
	f(0, [][2]int64{{5, 5}, {7, 3}}, nil)
	f(5, [][2]int64{{0, 10}, {30, 40}, {15, 25}}, []Interval{{0, 40}})
	f(0, [][2]int64{{0, 100}, {10, 20}}, []Interval{{0, 100}})
}
