package advice

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// occ is one occupancy interval of a key.
type occ struct {
	key        schemas.Key
	start, end int64
}

// billAll bills each period from the raw occupancy under cat: the engine as
// `cardhour bill` runs it.
func billAll(cat *schemas.Catalog, periods []billing.Period, usage []occ) []*billing.Result {
	out := make([]*billing.Result, len(periods))
	for i, p := range periods {
		acc := billing.NewAccumulator(cat, p)
		for _, o := range usage {
			acc.AddOccupancy(o.key, o.start, o.end, false)
		}
		out[i] = acc.Invoices()
	}
	return out
}

func exampleCatalog(t *testing.T) *schemas.Catalog {
	t.Helper()
	cat, err := schemas.LoadCatalog("../../schemas/examples/catalog.yaml")
	require.NoError(t, err)
	return cat
}

var shanghai, _ = time.LoadLocation("Asia/Shanghai")

func at(y int, m time.Month, d int) int64 {
	return time.Date(y, m, d, 0, 0, 0, 0, shanghai).UnixMilli()
}

func key(project, inst, model, profile string) schemas.Key {
	return schemas.Key{Project: project, User: "u1", InstanceID: inst, GPUModel: model, Profile: profile}
}

// now is 2026-12-01 in Shanghai: the window is September to November 2026.
var now = time.Date(2026, 12, 1, 9, 0, 0, 0, shanghai)

func advise(t *testing.T, cat *schemas.Catalog, usage []occ, opt Options) *Report {
	t.Helper()
	if opt.Now.IsZero() {
		opt.Now = now
	}
	if opt.MinCoverage.IsZero() {
		opt.MinCoverage = DefaultMinCoverage
	}
	periods := Window(cat, opt.Now, max(opt.Months, DefaultMonths))
	if opt.Months != 0 {
		periods = Window(cat, opt.Now, opt.Months)
	}
	rep, err := Advise(cat, opt, billAll(cat, periods, usage))
	require.NoError(t, err)
	return rep
}

func find(t *testing.T, r *Report, project, sku string) SKUAdvice {
	t.Helper()
	for _, a := range r.Advice {
		if a.Project == project && a.SKU == sku {
			return a
		}
	}
	t.Fatalf("no advice for %s/%s in %+v", project, sku, r.Advice)
	return SKUAdvice{}
}

// Worked example 1 of docs/billing.md: two T4 cards held the whole quarter and
// a third for ten days of October.
func TestGoldenT4Year(t *testing.T) {
	cat := exampleCatalog(t)
	usage := []occ{
		{key("ai101", "GPU-t4-1", "Tesla T4", "full"), at(2026, 9, 1), at(2026, 12, 1)},
		{key("ai101", "GPU-t4-2", "Tesla T4", "full"), at(2026, 9, 1), at(2026, 12, 1)},
		{key("ai101", "GPU-t4-3", "Tesla T4", "full"), at(2026, 10, 5), at(2026, 10, 15)},
	}
	rep := advise(t, cat, usage, Options{})
	require.Equal(t, "2026-09", rep.From)
	require.Equal(t, "2026-11", rep.To)
	require.Equal(t, "91.0", rep.Days)
	a := find(t, rep, "ai101", "t4-16g")
	require.Equal(t, int64(3), a.Peak)
	require.Equal(t, []Level{{1, 91 * 86400, "91.0"}, {2, 91 * 86400, "91.0"}, {3, 10 * 86400, "10.0"}}, a.Profile)
	require.Equal(t, Mix{Year: 2, Month: []int64{0, 0, 0}}, a.Mix)
	require.Len(t, a.DailyPeak, 91)
	require.Equal(t, DayPeak{"2026-09-01", 2}, a.DailyPeak[0])
	require.Equal(t, DayPeak{"2026-10-04", 2}, a.DailyPeak[33])
	require.Equal(t, DayPeak{"2026-10-05", 3}, a.DailyPeak[34])
	require.Equal(t, DayPeak{"2026-10-14", 3}, a.DailyPeak[43])
	require.Equal(t, DayPeak{"2026-10-15", 2}, a.DailyPeak[44])
	require.Equal(t, DayPeak{"2026-11-30", 2}, a.DailyPeak[90])
	// Hourly: 2 × (720 + 744 + 720) h × 1.80 + 240 h × 1.80.
	require.Equal(t, "8294.40", a.Billed)
	require.Equal(t, "8294.40", a.BilledBase)
	// 2 × 720 a month for three months, the third card hourly (432 < 900).
	require.Equal(t, "4752.00", a.Advised)
	require.Equal(t, "3542.40", a.Saving)
	require.Equal(t, []Reserved{{Term: "year", Quantity: 2, Start: "2026-09", Billing: "monthly", Monthly: "1440.00", Upfront: "17280.00"}}, a.Advice)
	require.Equal(t, []TermPrice{
		{Term: "month", Months: 1, Discount: "0", Monthly: "900.00", Upfront: "900.00", BreakEven: "0.6868"},
		{Term: "quarter", Months: 3, Discount: "0.05", Monthly: "855.00", Upfront: "2565.00", BreakEven: "0.6525"},
		{Term: "year", Months: 12, Discount: "0.2", Monthly: "720.00", Upfront: "8640.00", BreakEven: "0.5495"},
	}, a.Terms)
	// Half of each session: 2 cards for 45.5 days of hours… priced by the engine.
	require.Equal(t, "4536.00", a.IfHalved.Advised)
	require.Equal(t, "4147.20", a.IfHalved.HourlyOnly)
	require.Equal(t, "From 2026-09 to 2026-11 (91.0 days) ai101 held at least 1 t4-16g for 91.0 days and at most 3 at once. "+
		"It held at least 2 for 91.0 of the 91.0 days. "+
		"2 year reservations (¥1440.00 a month billed monthly, or ¥17280.00 upfront for the year), with hourly use for the rest, "+
		"would have cost ¥4752.00 instead of the ¥8294.40 billed (saving ¥3542.40). "+
		"This assumes 2026-09 to 2026-11 repeat; if use halved, these reservations and hourly use would cost ¥4536.00 (hourly only: ¥4147.20).", a.Text.En)
	require.Equal(t, "2026-09 至 2026-11（91.0 天）ai101 至少占用 1 个 t4-16g 的时间共 91.0 天，同时最多 3 个。"+
		"其中至少同时占用 2 个的时间共 91.0 天。"+
		"2 个年付预留（按月付每月 ¥1440.00，或一次预付 ¥17280.00），其余按小时计费，将花费 ¥4752.00，而实际计费 ¥8294.40，可节省 ¥3542.40。"+
		"此建议假设 2026-09 至 2026-11 的用量重复；若用量减半，该方案将花费 ¥4536.00（全部按小时：¥4147.20）。", a.Text.Zh)
	require.Empty(t, underusedOf(rep, "ai101"))
}

func underusedOf(r *Report, project string) []Underused {
	var out []Underused
	for _, u := range r.Underused {
		if u.Project == project {
			out = append(out, u)
		}
	}
	return out
}

// Worked example 2 of docs/billing.md: nlp-lab's two annual A100 1g slices
// (paid upfront in September) while it used one slice for 40 days.
func TestGoldenUnderusedA100(t *testing.T) {
	cat := exampleCatalog(t)
	const model, prof = "NVIDIA A100-SXM4-80GB", "1g.10gb"
	usage := []occ{{key("nlp-lab", "MIG-a", model, prof), at(2026, 9, 1), at(2026, 10, 11)}}
	rep := advise(t, cat, usage, Options{})
	a := find(t, rep, "nlp-lab", "a100-80g-1g.10gb")
	require.Equal(t, []Reserved{{Term: "year", Quantity: 2, Start: "2026-09", Billing: "upfront", Monthly: "1440.00", Upfront: "17280.00"}}, a.Current)
	require.Equal(t, "17280.00", a.Billed) // the whole year, upfront in September
	require.Equal(t, "4320.00", a.BilledBase)
	// September on a month reservation (900 < 1296 hourly), October's 10 days hourly.
	require.Equal(t, Mix{Month: []int64{1, 0, 0}}, a.Mix)
	require.Equal(t, "1332.00", a.Advised)
	require.Equal(t, "2988.00", a.Saving)
	require.Len(t, underusedOf(rep, "nlp-lab"), 1)
	u := underusedOf(rep, "nlp-lab")[0]
	require.Equal(t, int64(2*91*86400), u.ReservedSeconds)
	require.Equal(t, int64(40*86400), u.CoveredSeconds)
	require.Equal(t, "0.2198", u.Coverage)
	require.Equal(t, "4320.00", u.Cost)
	require.Equal(t, "3370.55", u.Unused) // 4320 × 3408 / 4368
	require.Equal(t, &Alt{Quantity: 0, Cost: "1728.00"}, u.Smaller)
	require.Equal(t, &Alt{Months: []int64{1, 0, 0}, Cost: "1332.00"}, u.Shorter)
	require.Equal(t, "nlp-lab's 2 a100-80g-1g.10gb reserved for a year from 2026-09 covered 960.0 of 4368.0 reserved hours (22.0 %) from 2026-09 to 2026-11: "+
		"¥3370.55 of its ¥4320.00 in these months paid for nothing. Without it, a100-80g-1g.10gb would have cost ¥1728.00 in all instead of ¥4320.00. "+
		"Month reservations month by month (2026-09: 1, 2026-10: 0, 2026-11: 0) would have cost ¥1332.00.", u.Text.En)
	require.Contains(t, u.Text.Zh, "白白支付")
	require.Contains(t, a.Text.En, "(reservations counted by their monthly shares; the invoices of these months charged ¥17280.00)")
}

// A project that held nothing of a reserved SKU still gets its reservation
// reported, and --project limits the report.
func TestProjectFilterAndIdleReservation(t *testing.T) {
	cat := exampleCatalog(t)
	usage := []occ{{key("ai101", "GPU-t4-1", "Tesla T4", "full"), at(2026, 9, 1), at(2026, 9, 2)}}
	rep := advise(t, cat, usage, Options{Project: "cv-lab"})
	require.Len(t, rep.Advice, 1)
	a := rep.Advice[0]
	require.Equal(t, "cv-lab", a.Project)
	require.Equal(t, int64(0), a.Peak)
	require.Equal(t, "0.00", a.Advised)
	// cv-lab's quarter reservation from 2026-10, billed monthly: 855 in October and November.
	require.Equal(t, "1710.00", a.Billed)
	require.Len(t, rep.Underused, 1)
	require.Equal(t, "0.0000", rep.Underused[0].Coverage)
	require.Equal(t, "1710.00", rep.Underused[0].Unused)
}

// randomCatalog is the example's rules with random prices, discounts,
// rounding and minimum billed time.
func randomCatalog(t *testing.T, r *rand.Rand) *schemas.Catalog {
	rounding := []string{"second", "hour"}[r.IntN(2)]
	minBilled := []int{0, 600}[r.IntN(2)]
	y := fmt.Sprintf(`currency: CNY
timezone: Asia/Shanghai
defaults: {rounding: %s, gap_tolerance_s: 30, min_billed_s: %d}
discounts: {month: "0.0%d", quarter: "0.%02d", year: "0.%02d"}
skus:
  - {id: t4, gpu_model: T4, profile: full, hourly_price: "%d.%02d", monthly_price: "%d"}
`, rounding, minBilled, r.IntN(5), 3+r.IntN(15), 10+r.IntN(25), 1+r.IntN(3), r.IntN(100), 400+r.IntN(1200))
	cat, err := schemas.ParseCatalog([]byte(y), "random")
	require.NoError(t, err)
	return cat
}

// randomUsage is up to three instances with random sessions over two months
// (and a little before and after), some crossing the month end, some with
// gaps a tolerance bridges.
func randomUsage(r *rand.Rand, start, end int64) []occ {
	var out []occ
	n := 1 + r.IntN(3)
	for i := range n {
		k := schemas.Key{Project: "lab", User: fmt.Sprint("u", r.IntN(2)), InstanceID: fmt.Sprint("GPU-", i), GPUModel: "T4", Profile: "full"}
		t := start - 86_400_000 + r.Int64N(10*86_400_000)
		for t < end+86_400_000 {
			l := []int64{20_000, 3_600_000, 86_400_000, 20 * 86_400_000}[r.IntN(4)] + r.Int64N(3_600_000)
			out = append(out, occ{k, t, t + l})
			gap := []int64{10_000, 600_000, 5 * 86_400_000}[r.IntN(3)]
			t += l + gap + r.Int64N(2*86_400_000)
		}
	}
	return out
}

// totalUnder bills the raw usage under cat with the project holding rs, every
// month of the window, and adds the project's invoice totals.
func totalUnder(cat *schemas.Catalog, periods []billing.Period, usage []occ, rs []schemas.Reservation) decimal.Decimal {
	c := cat.WithReservations("lab", rs)
	t := decimal.Zero
	for _, res := range billAll(c, periods, usage) {
		for _, inv := range res.Invoices {
			t = t.Add(inv.Total)
		}
	}
	return t
}

// On random traces a brute-force search over every mix up to the observed
// peak (year, quarter, and month quantities per month), each priced by
// billing the raw usage through the engine, finds nothing cheaper than the
// advice, and the advice's own figure is what the engine bills for its mix.
func TestBruteForceFindsNothingCheaper(t *testing.T) {
	seeds := 25
	if testing.Short() {
		seeds = 6
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 12))
			cat := randomCatalog(t, r)
			months := 2 + seed%2
			periods := Window(cat, now, months)
			usage := randomUsage(r, periods[0].StartMS(), periods[months-1].EndMS())
			if seed%3 == 0 { // the project already holds a reservation, paid upfront
				cat = cat.WithReservations("lab", []schemas.Reservation{{SKU: "t4", Quantity: 1, Term: schemas.TermYear,
					StartYear: periods[0].Year, StartMonth: periods[0].Month, Billing: schemas.BillingUpfront}})
			}
			rep := advise(t, cat, usage, Options{Months: months})
			require.Len(t, rep.Advice, 1)
			a := rep.Advice[0]
			advised := decimal.RequireFromString(a.Advised)
			require.True(t, advised.Equal(totalUnder(cat, periods, usage, a.Mix.Reservations("t4", periods))), "the advised figure is the engine's bill of the mix")
			if seed%3 != 0 {
				require.True(t, decimal.RequireFromString(a.BilledBase).Equal(totalUnder(cat, periods, usage, nil)), "no reservations: the basis is the bill")
			}
			// The peak of coverable sessions bounds every useful quantity.
			var peak int64
			for i := range periods {
				peak = max(peak, int64(len(sessionLevels(sessionsOf(billAll(cat, periods[i:i+1], usage)[0])))))
			}
			tried := 0
			var enumerate func(l int64, ms []int64)
			enumerate = func(l int64, ms []int64) {
				if len(ms) < len(periods) {
					for m := int64(0); l+m <= peak; m++ {
						enumerate(l, append(ms, m))
					}
					return
				}
				for y := int64(0); y <= l; y++ {
					mix := Mix{Year: y, Quarter: l - y, Month: slices.Clone(ms)}
					c := totalUnder(cat, periods, usage, mix.Reservations("t4", periods))
					tried++
					require.False(t, c.LessThan(advised), "mix %+v costs %s, less than the advice %+v at %s", mix, c, a.Mix, advised)
				}
			}
			for l := int64(0); l <= peak; l++ {
				enumerate(l, nil)
			}
			require.Positive(t, tried)
			t.Logf("peak %d mix %+v advised %s basis %s tried %d", peak, a.Mix, advised, a.BilledBase, tried)
		})
	}
}

func sessionsOf(res *billing.Result) []billing.Session {
	var out []billing.Session
	for _, inv := range res.Invoices {
		out = append(out, inv.Sessions...)
	}
	return out
}

// The stacks of reserved instances add up to the engine's covered time.
func TestCoverageStacksMatchEngine(t *testing.T) {
	for seed := range 10 {
		r := rand.New(rand.NewPCG(uint64(seed), 99))
		cat := randomCatalog(t, r)
		periods := Window(cat, now, 2)
		rs := []schemas.Reservation{
			{SKU: "t4", Quantity: 1, Term: schemas.TermYear, StartYear: 2026, StartMonth: time.October, Billing: schemas.BillingUpfront},
			{SKU: "t4", Quantity: 1 + r.Int64N(2), Term: schemas.TermMonth, StartYear: 2026, StartMonth: time.November, Billing: schemas.BillingMonthly},
		}
		cat = cat.WithReservations("lab", rs)
		usage := randomUsage(r, periods[0].StartMS(), periods[1].EndMS())
		results := billAll(cat, periods, usage)
		var engine int64
		for _, res := range results {
			for _, s := range sessionsOf(res) {
				engine += s.CoveredMS
			}
		}
		// Every reservation is reported: its covered share is below 1.000000001.
		a := &adviser{cat: cat, periods: periods, opt: Options{MinCoverage: decimal.RequireFromString("1.000000001"), ExhaustiveUpTo: 64}}
		gs := a.groups(results)
		require.Len(t, gs, 1)
		all, idx := a.reservationsOf("lab", "t4")
		us := a.underused(gs[0], all, idx, decimal.Zero)
		var stacked int64
		for _, u := range us {
			stacked += u.CoveredSeconds * 1000
		}
		// Seconds are floored per reservation: at most 1 s each.
		require.InDelta(t, engine, stacked, float64(1000*len(us)), "seed %d", seed)
	}
}

func TestOptionsErrors(t *testing.T) {
	cat := exampleCatalog(t)
	_, err := Advise(cat, Options{Months: 25}, nil)
	require.ErrorContains(t, err, "months: 25 is out of range")
	_, err = Advise(cat, Options{Months: 1, Now: now, MinCoverage: decimal.NewFromInt(2)}, nil)
	require.ErrorContains(t, err, "min coverage")
	_, err = Advise(cat, Options{Months: 1}, nil)
	require.ErrorContains(t, err, "now: the moment of the advice is required", "no clock here: the caller says when")
	// The bills are those of the window's months, in order.
	periods := Window(cat, now, 2)
	_, err = Advise(cat, Options{Months: 2, Now: now}, billAll(cat, periods[:1], nil))
	require.ErrorContains(t, err, "advice: 1 bills for a window of 2 months")
	_, err = Advise(cat, Options{Months: 2, Now: now}, billAll(cat, []billing.Period{periods[1], periods[0]}, nil))
	require.ErrorContains(t, err, "advice: no bill of "+periods[0].String())
}

func TestOutputs(t *testing.T) {
	cat := exampleCatalog(t)
	usage := []occ{
		{key("ai101", "GPU-t4-1", "Tesla T4", "full"), at(2026, 9, 1), at(2026, 12, 1)},
		{key("nlp-lab", "MIG-a", "NVIDIA A100-SXM4-80GB", "1g.10gb"), at(2026, 9, 1), at(2026, 10, 11)},
	}
	rep := advise(t, cat, usage, Options{})
	var b strings.Builder
	require.NoError(t, WriteTable(&b, rep))
	require.Contains(t, b.String(), "ai101")
	require.Contains(t, b.String(), "1×year")
	require.Contains(t, b.String(), "Reservations that covered less than 50.0 % of their hours")
	b.Reset()
	require.NoError(t, WriteCSV(&b, rep))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Equal(t, strings.Join(CSVHeader, ","), lines[0])
	require.Len(t, lines, 1+len(rep.Advice)+len(rep.Underused))
	b.Reset()
	require.NoError(t, WriteJSON(&b, rep))
	require.Contains(t, b.String(), `"schema": "cardhour.advice.v1"`)
	require.Contains(t, b.String(), `"zh-CN": "`)
	if os.Getenv("ADVICE_PRINT") != "" {
		fmt.Println(b.String())
	}
}

// Where a project holds many instances of a SKU, the search starts from a
// guess and follows the engine's prices downhill instead of pricing every
// quantity. On per-second traces with up to 12 instances it finds the same
// cost as the exhaustive search.
func TestNarrowedSearchMatchesExhaustive(t *testing.T) {
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		cat := randomCatalog(t, r)
		periods := Window(cat, now, 2)
		var usage []occ
		for range 4 {
			for _, o := range randomUsage(r, periods[0].StartMS(), periods[1].EndMS()) {
				o.key.InstanceID += fmt.Sprint("-", len(usage))
				usage = append(usage, o)
			}
		}
		full := advise(t, cat, usage, Options{Months: 2})
		narrow := advise(t, cat, usage, Options{Months: 2, ExhaustiveUpTo: 1})
		t.Logf("seed %d: peak %d, mix %+v", seed, full.Advice[0].Peak, full.Advice[0].Mix)
		require.Equal(t, full.Advice[0].Advised, narrow.Advice[0].Advised, "seed %d: exhaustive %+v, narrowed %+v (peak %d)", seed, full.Advice[0].Mix, narrow.Advice[0].Mix, full.Advice[0].Peak)
	}
}

// A SKU's own term discount (H100: year 85 折) is the one priced.
func TestPerSKUDiscount(t *testing.T) {
	cat := exampleCatalog(t)
	usage := []occ{{key("thesis-h100", "MIG-h", "NVIDIA H100 80GB HBM3", "1g.10gb"), at(2026, 9, 1), at(2026, 12, 1)}}
	a := find(t, advise(t, cat, usage, Options{Project: "thesis-h100"}), "thesis-h100", "h100-1g.10gb")
	require.Equal(t, "0.15", a.Terms[2].Discount)
	require.Equal(t, "1785.00", a.Terms[2].Monthly) // 2100 × 0.85
	require.Equal(t, Mix{Year: 1, Month: []int64{0, 0, 0}}, a.Mix)
	require.Equal(t, "6552.00", a.Billed) // 2184 h × 3.00
	require.Equal(t, "5355.00", a.Advised)
	require.Equal(t, "1197.00", a.Saving)
}

// The bills' warnings are passed on; with a project chosen, only its own and
// those about the whole input that name nobody.
func TestWarnings(t *testing.T) {
	cat := exampleCatalog(t)
	usage := []occ{
		{key("ai101", "GPU-l40s", "NVIDIA L40S", "full"), at(2026, 10, 1), at(2026, 10, 2)},
		{key("guest-lab", "GPU-t4-1", "Tesla T4", "full"), at(2026, 10, 1), at(2026, 10, 2)},
	}
	rep := advise(t, cat, usage, Options{})
	joined := strings.Join(rep.Warnings, "\n")
	require.Contains(t, joined, `project "guest-lab" is not in the catalog`)
	require.Contains(t, joined, "NVIDIA L40S / full matches no SKU")
	require.Contains(t, joined, "no usage in 2026-09")
	rep = advise(t, cat, usage, Options{Project: "ai101"})
	joined = strings.Join(rep.Warnings, "\n")
	require.NotContains(t, joined, "guest-lab")
	require.Contains(t, joined, "NVIDIA L40S / full matches no SKU")
	var b strings.Builder
	require.NoError(t, WriteCSV(&b, rep))
	require.Contains(t, b.String(), "\nwarning,")
	b.Reset()
	require.NoError(t, WriteTable(&b, rep))
	require.Contains(t, b.String(), "Warnings of the bills:")
}

// dailyPeaks against counting at every instant where the count can change.
func TestDailyPeaks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		var ivs []billing.Interval
		for range r.IntN(8) {
			s := r.Int64N(100)
			ivs = append(ivs, billing.Interval{Start: s, End: s + r.Int64N(40)})
		}
		bounds := []int64{0}
		for bounds[len(bounds)-1] < 120 {
			bounds = append(bounds, bounds[len(bounds)-1]+1+r.Int64N(20))
		}
		got := dailyPeaks(ivs, bounds)
		for d := range got {
			var want int64
			for x := bounds[d]; x < bounds[d+1]; x++ {
				var c int64
				for _, iv := range ivs {
					if iv.Start <= x && x < iv.End {
						c++
					}
				}
				want = max(want, c)
			}
			require.Equal(t, want, got[d], "day %d of %v in %v", d, ivs, bounds)
		}
	}
}
