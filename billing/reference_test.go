package billing

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// This file holds a second, deliberately naive implementation of
// billing-semantics v1 (sorting and rescanning, big.Rat for money, coverage decided
// separately for every elementary time segment) and checks the engine against it
// on thousands of random traces. The engine is clever where it must be fast; this
// one is simple so that it can be read against the spec line by line.

type refLine struct {
	sessions                int
	usedMS, coveredMS, idle int64
	billed                  int64
	amount                  string
}

type refResult struct {
	usage        map[string]refLine // "project|user|sku"
	reservations map[string]string  // "project|index" → amount
	totals       map[string]string
	unpricedMS   map[string]int64 // "project|user|model|profile" → used ms
}

func refBill(cat *schemas.Catalog, samples []schemas.Sample, p Period) refResult {
	p0, p1 := p.StartMS(), p.EndMS()
	tol := cat.Defaults.GapToleranceMS
	type key struct{ project, user, inst, model, profile string }
	occ := map[key][]Interval{}
	idle := map[key][]Interval{}
	for _, s := range samples {
		if s.Project == "" {
			continue
		}
		k := key{s.Project, s.User, s.InstanceID, s.GPUModel, s.Profile}
		iv := Interval{s.StartMS, s.StartMS + s.IntervalMS}
		occ[k] = append(occ[k], iv)
		th := cat.IdlePolicyFor(s.Project).Threshold
		if (s.UtilKnown && s.Util < th) || (!s.UtilKnown && s.Processes == 0) {
			idle[k] = append(idle[k], iv)
		}
	}
	union := func(ivs []Interval, gap int64) []Interval {
		ivs = append([]Interval(nil), ivs...)
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].Start < ivs[j].Start })
		var out []Interval
		for _, iv := range ivs {
			if n := len(out); n > 0 && iv.Start-out[n-1].End <= gap {
				if iv.End > out[n-1].End {
					out[n-1].End = iv.End
				}
				continue
			}
			out = append(out, iv)
		}
		return out
	}
	type sess struct {
		k                key
		sku              string
		start, end       int64
		covered, idle    int64
		billed           int64
		priced           bool
		coverageGroupKey string
	}
	var all []*sess
	for k, ivs := range occ {
		idleU := union(idle[k], 0)
		for _, s := range union(ivs, tol) {
			st, en := max(s.Start, p0), min(s.End, p1)
			if en <= st {
				continue
			}
			x := &sess{k: k, start: st, end: en}
			for _, iv := range idleU {
				lo, hi := max(iv.Start, st), min(iv.End, en)
				if hi > lo {
					x.idle += hi - lo
				}
			}
			if id, _, ok := refResolve(cat, k.model, k.profile); ok {
				x.sku, x.priced = id, true
				x.coverageGroupKey = k.project + "|" + id
			}
			all = append(all, x)
		}
	}
	month := p.MonthIndex()
	// Coverage, one elementary segment at a time.
	groups := map[string][]*sess{}
	for _, s := range all {
		if s.priced {
			groups[s.coverageGroupKey] = append(groups[s.coverageGroupKey], s)
		}
	}
	for gk, ss := range groups {
		parts := strings.SplitN(gk, "|", 2)
		var q int64
		if pr, ok := cat.Project(parts[0]); ok {
			for _, r := range pr.Reservations {
				if r.SKU == parts[1] && r.ActiveIn(month) {
					q += r.Quantity
				}
			}
		}
		var pts []int64
		for _, s := range ss {
			pts = append(pts, s.start, s.end)
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i] < pts[j] })
		for i := 0; i+1 < len(pts); i++ {
			t0, t1 := pts[i], pts[i+1]
			if t1 == t0 {
				continue
			}
			var active []*sess
			for _, s := range ss {
				if s.start <= t0 && t0 < s.end {
					active = append(active, s)
				}
			}
			sort.Slice(active, func(a, b int) bool {
				x, y := active[a], active[b]
				if x.start != y.start {
					return x.start < y.start
				}
				if x.k.inst != y.k.inst {
					return x.k.inst < y.k.inst
				}
				return x.k.user < y.k.user
			})
			for j := 0; j < len(active) && int64(j) < q; j++ {
				active[j].covered += t1 - t0
			}
		}
	}
	res := refResult{usage: map[string]refLine{}, reservations: map[string]string{}, totals: map[string]string{}, unpricedMS: map[string]int64{}}
	totals := map[string]*big.Rat{}
	addTotal := func(project string, amount *big.Rat) {
		if totals[project] == nil {
			totals[project] = new(big.Rat)
		}
		totals[project].Add(totals[project], amount)
	}
	billedSecs := map[string]int64{}
	for _, s := range all {
		if !s.priced {
			res.unpricedMS[s.k.project+"|"+s.k.user+"|"+s.k.model+"|"+s.k.profile] += s.end - s.start
			if totals[s.k.project] == nil {
				totals[s.k.project] = new(big.Rat)
			}
			continue
		}
		u := s.end - s.start - s.covered
		rounding := cat.Defaults.Rounding
		if pr, ok := cat.Project(s.k.project); ok && pr.Rounding != "" {
			rounding = pr.Rounding
		}
		if u > 0 {
			if rounding == schemas.RoundHour {
				s.billed = (u + 3_599_999) / 3_600_000 * 3600
			} else {
				s.billed = (u + 999) / 1000
			}
			if s.billed < cat.Defaults.MinBilledS {
				s.billed = cat.Defaults.MinBilledS
			}
		}
		lk := s.k.project + "|" + s.k.user + "|" + s.sku
		l := res.usage[lk]
		l.sessions++
		l.usedMS += s.end - s.start
		l.coveredMS += s.covered
		l.idle += s.idle
		l.billed += s.billed
		res.usage[lk] = l
		billedSecs[lk] = l.billed
	}
	for lk, l := range res.usage {
		hourly, _ := refPrices(cat, strings.Split(lk, "|")[2])
		amt := new(big.Rat).Mul(big.NewRat(l.billed, 3600), hourly)
		rounded := roundHalfUpCents(amt)
		l.amount = rounded.FloatString(2)
		res.usage[lk] = l
		addTotal(strings.Split(lk, "|")[0], rounded)
	}
	for _, pr := range cat.Projects {
		for i, r := range pr.Reservations {
			if !r.ActiveIn(month) {
				continue
			}
			_, monthly := refPrices(cat, r.SKU)
			disc := cat.Discounts[r.Term].Rat()
			if d, ok := refDiscounts(cat, r.SKU)[r.Term]; ok {
				disc = d.Rat()
			}
			months := int64(1)
			if r.Billing == schemas.BillingUpfront {
				months = 0
				if month == r.StartIndex() {
					months = int64(r.Term.Months())
				}
			}
			amt := new(big.Rat).Mul(monthly, big.NewRat(months*r.Quantity, 1))
			amt.Mul(amt, new(big.Rat).Sub(big.NewRat(1, 1), disc))
			rounded := roundHalfUpCents(amt)
			res.reservations[fmt.Sprintf("%s|%d", pr.ID, i)] = rounded.FloatString(2)
			addTotal(pr.ID, rounded)
		}
	}
	for p, t := range totals {
		res.totals[p] = t.FloatString(2)
	}
	return res
}

// roundHalfUpCents rounds a non-negative rational to cents, half up.
func roundHalfUpCents(r *big.Rat) *big.Rat {
	scaled := new(big.Rat).Mul(r, big.NewRat(100, 1))
	// floor(scaled + 1/2)
	scaled.Add(scaled, big.NewRat(1, 2))
	q := new(big.Int).Quo(scaled.Num(), scaled.Denom())
	return new(big.Rat).SetFrac(q, big.NewInt(100))
}

// ---- SKUs, shares (rule 11) ----

// refShare reads a share profile as rule 11 states it: "1/N" (N >= 2 with no
// prime factor but 2 and 5) is 1/N of the card on both bases; "mem=P%" and/or
// "cores=Q%" (in that order, at most two decimals, 0 < P <= 100) one or both.
func refShare(profile string) (mem, cores *big.Rat, ok bool) {
	if rest, found := strings.CutPrefix(profile, "1/"); found {
		var n int64
		if _, err := fmt.Sscanf(rest, "%d", &n); err != nil || fmt.Sprint(n) != rest || n < 2 || n > 10_000 {
			return nil, nil, false
		}
		m := n
		for m%2 == 0 {
			m /= 2
		}
		for m%5 == 0 {
			m /= 5
		}
		if m != 1 {
			return nil, nil, false
		}
		return big.NewRat(1, n), big.NewRat(1, n), true
	}
	for i, part := range strings.Split(profile, ",") {
		name, pct, found := strings.Cut(part, "=")
		r, isNum := new(big.Rat).SetString(strings.TrimSuffix(pct, "%"))
		digits := strings.TrimSuffix(pct, "%")
		frac := ""
		if j := strings.IndexByte(digits, '.'); j >= 0 {
			frac = digits[j+1:]
		}
		if !found || !strings.HasSuffix(pct, "%") || !isNum || r.Sign() <= 0 || r.Cmp(big.NewRat(100, 1)) > 0 ||
			len(frac) > 2 || strings.HasSuffix(frac, "0") || strings.ContainsAny(digits[:1], "+-.0") || strings.HasSuffix(digits, ".") || i > 1 {
			return nil, nil, false
		}
		r.Quo(r, big.NewRat(100, 1))
		switch {
		case name == "mem" && i == 0:
			mem = r
		case name == "cores" && cores == nil:
			cores = r
		default:
			return nil, nil, false
		}
	}
	return mem, cores, true
}

// refSKU is the catalog's SKU with that id, by a scan.
func refSKU(cat *schemas.Catalog, id string) *schemas.SKU {
	for i := range cat.SKUs {
		if cat.SKUs[i].ID == id {
			return &cat.SKUs[i]
		}
	}
	return nil
}

// refResolve prices (model, profile): the SKU listed for it, else the model's
// SKU priced by share with the share on its basis; the id and the fraction.
func refResolve(cat *schemas.Catalog, model, profile string) (string, *big.Rat, bool) {
	for _, s := range cat.SKUs {
		if s.ShareOf == "" && s.GPUModel == model && s.Profile == profile {
			return s.ID, big.NewRat(1, 1), true
		}
	}
	mem, cores, ok := refShare(profile)
	if !ok {
		return "", nil, false
	}
	for _, s := range cat.SKUs {
		if s.ShareOf == "" || s.GPUModel != model {
			continue
		}
		f := map[schemas.ShareBasis]*big.Rat{schemas.ShareByMemory: mem, schemas.ShareByCores: cores}[s.ShareBy]
		if s.ShareBy == schemas.ShareByMax {
			f = mem
			if f == nil || (cores != nil && cores.Cmp(f) > 0) {
				f = cores
			}
		}
		if f == nil {
			return "", nil, false
		}
		return s.ID + "[" + profile + "]", f, true
	}
	return "", nil, false
}

// refPrices are the hourly and monthly prices of a SKU id, a derived one's
// being the whole card's times its share.
func refPrices(cat *schemas.Catalog, id string) (hourly, monthly *big.Rat) {
	if s := refSKU(cat, id); s != nil {
		return s.HourlyPrice.Rat(), s.MonthlyPrice.Rat()
	}
	base, profile, _ := strings.Cut(strings.TrimSuffix(id, "]"), "[")
	share := refSKU(cat, base)
	_, f, _ := refResolve(cat, share.GPUModel, profile)
	card := refSKU(cat, share.ShareOf)
	return new(big.Rat).Mul(card.HourlyPrice.Rat(), f), new(big.Rat).Mul(card.MonthlyPrice.Rat(), f)
}

// refDiscounts are a SKU id's own discounts: a derived one's are its share
// SKU's, else the card's.
func refDiscounts(cat *schemas.Catalog, id string) map[schemas.Term]decimal.Decimal {
	if s := refSKU(cat, id); s != nil {
		return s.Discounts
	}
	base, _, _ := strings.Cut(id, "[")
	if share := refSKU(cat, base); share.Discounts != nil {
		return share.Discounts
	}
	return refSKU(cat, refSKU(cat, base).ShareOf).Discounts
}

// refOversubscribed is rule 11's data-quality check, one elementary segment at
// a time: for each card, the time inside the period during which the shares
// held (an instance once, whatever its keys) add up to more than 1 on a basis,
// and the largest sum. "card|basis" → {over ms, peak}.
func refOversubscribed(samples []schemas.Sample, p Period) map[string][2]string {
	p0, p1 := p.StartMS(), p.EndMS()
	type piece struct {
		inst       string
		mem, cores *big.Rat
		start, end int64
	}
	byCard := map[string][]piece{}
	for _, s := range samples {
		card, _, ok := strings.Cut(s.InstanceID, "/share/")
		mem, cores, isShare := refShare(s.Profile)
		if s.Project == "" || !ok || !isShare {
			continue
		}
		st, en := max(s.StartMS, p0), min(s.StartMS+s.IntervalMS, p1)
		if en > st {
			byCard[card] = append(byCard[card], piece{s.InstanceID, mem, cores, st, en})
		}
	}
	out := map[string][2]string{}
	for card, ps := range byCard {
		var pts []int64
		for _, x := range ps {
			pts = append(pts, x.start, x.end)
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i] < pts[j] })
		for _, basis := range []string{"memory", "cores"} {
			var over int64
			peak := new(big.Rat)
			for i := 0; i+1 < len(pts); i++ {
				t0, t1 := pts[i], pts[i+1]
				share := map[string]*big.Rat{}
				for _, x := range ps {
					f := x.mem
					if basis == "cores" {
						f = x.cores
					}
					if x.start <= t0 && t0 < x.end && f != nil && (share[x.inst] == nil || f.Cmp(share[x.inst]) > 0) {
						share[x.inst] = f
					}
				}
				sum := new(big.Rat)
				for _, f := range share {
					sum.Add(sum, f)
				}
				if sum.Cmp(big.NewRat(1, 1)) > 0 && t1 > t0 {
					over += t1 - t0
					if sum.Cmp(peak) > 0 {
						peak = sum
					}
				}
			}
			if over > 0 {
				out[card+"|"+basis] = [2]string{fmt.Sprint(over), peak.FloatString(6)}
			}
		}
	}
	return out
}

// ---- random traces ----

const refCatalogTmpl = `
currency: CNY
timezone: Asia/Shanghai
defaults: {rounding: %s, gap_tolerance_s: %s, min_billed_s: %d}
skus:
  - {id: s1, gpu_model: M1, profile: 1g.10gb, hourly_price: "1.80", monthly_price: "900"}
  - {id: s2, gpu_model: M1, profile: 3g.40gb, hourly_price: "%s", monthly_price: "2700.5", discounts: {year: "0.15"}}
  - {id: s3, gpu_model: M2, profile: full, hourly_price: "0.07", monthly_price: "33.33"}
  - {id: s4, gpu_model: M2, share_of: s3, share: %s%s}
  - {id: s5, gpu_model: M1, profile: "1/4", hourly_price: "0.50", monthly_price: "200"}
projects:
  - id: pa
    rounding: %s
    reservations: %s
  - id: pb
    reservations: %s
  - id: pc
    idle: {threshold: 0.3}
`

func randomCatalog(t testing.TB, rng *rand.Rand) *schemas.Catalog {
	rounding := []string{"second", "hour"}
	tols := []string{"0", "30", "30.5", "1", "300"}
	prices := []string{"5.55", "12.345", "0.01", "9"}
	res := func() string {
		n := rng.IntN(3)
		if n == 0 {
			return "[]"
		}
		var parts []string
		for i := 0; i < n; i++ {
			sku := []string{"s1", "s2", "s3", "s5", "s4[1/4]", "s4[mem=30%,cores=50%]"}[rng.IntN(6)]
			term := []string{"month", "quarter", "year"}[rng.IntN(3)]
			start := []string{"2026-11", "2026-10", "2026-09", "2025-12", "2026-12"}[rng.IntN(5)]
			billing := []string{"upfront", "monthly"}[rng.IntN(2)]
			parts = append(parts, fmt.Sprintf("{sku: '%s', quantity: %d, term: %s, start: %s, billing: %s}", sku, 1+rng.IntN(3), term, start, billing))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	minBilled := []int64{0, 0, 60, 1}[rng.IntN(4)]
	basis := []string{"memory", "cores", "max"}[rng.IntN(3)]
	shareDiscounts := []string{"", `, discounts: {quarter: "0.5"}`}[rng.IntN(2)]
	doc := fmt.Sprintf(refCatalogTmpl, rounding[rng.IntN(2)], tols[rng.IntN(len(tols))], minBilled,
		prices[rng.IntN(len(prices))], basis, shareDiscounts, rounding[rng.IntN(2)], res(), res())
	cat, err := schemas.ParseCatalog([]byte(doc), "random")
	require.NoError(t, err, doc)
	return cat
}

// randomTrace makes samples that stress the edges: month boundaries, gaps just
// under, at and over the tolerance, overlaps, duplicates, several users on one
// instance, unheld samples and unpriced models.
func randomTrace(rng *rand.Rand, p Period, tol int64) []schemas.Sample {
	p0, p1 := p.StartMS(), p.EndMS()
	anchors := []int64{p0, p1, p0 + 86_400_000*int64(rng.IntN(29)), p0 - 3_600_000, p1 - 1}
	projects := []string{"pa", "pb", "pc", "pd", ""}
	users := []string{"u1", "u2", ""}
	insts := []string{"MIG-a", "MIG-b", "MIG-c", "GPU-d", "GPU-1/share/ns/p1/c", "GPU-1/share/ns/p2/c", "GPU-1/share/ns/p3/c", "GPU-2/share/ns/p4/c"}
	kinds := [][2]string{{"M1", "1g.10gb"}, {"M1", "3g.40gb"}, {"M2", "full"}, {"M3", "full"},
		// shares (rule 11): priced by s4's basis, by s5, or unpriced
		{"M2", "1/4"}, {"M2", "1/2"}, {"M2", "mem=30%,cores=50%"}, {"M2", "cores=70%"}, {"M2", "mem=60%"}, {"M2", "1/3"}, {"M1", "1/4"}, {"M1", "1/2"}}
	var out []schemas.Sample
	streams := 1 + rng.IntN(8)
	for st := 0; st < streams; st++ {
		kind := kinds[rng.IntN(len(kinds))]
		base := schemas.Sample{Node: "n1", GPUUUID: "GPU-1", GPUModel: kind[0], Profile: kind[1],
			InstanceID: insts[rng.IntN(len(insts))], Project: projects[rng.IntN(len(projects))], User: users[rng.IntN(len(users))]}
		anchor := anchors[rng.IntN(len(anchors))]
		if strings.Contains(base.InstanceID, "/share/") && rng.IntN(2) == 0 {
			// most shares of a card run at the same time, so that some cards are over-subscribed
			k := kinds[4+rng.IntN(len(kinds)-4)]
			base.GPUModel, base.Profile, anchor = k[0], k[1], anchors[2]
		}
		t := anchor - int64(rng.IntN(4*3_600_000))
		n := 1 + rng.IntN(40)
		for i := 0; i < n; i++ {
			s := base
			s.StartMS = t
			s.IntervalMS = []int64{10_000, 1, 999, 60_000, 3_600_000, 7_777}[rng.IntN(6)]
			switch rng.IntN(4) {
			case 0:
				s.UtilKnown, s.Util = true, float64(rng.IntN(100))/100
			case 1:
				s.UtilKnown, s.Util = true, 0.05
			default:
				s.Processes = int64(rng.IntN(2))
			}
			out = append(out, s)
			if rng.IntN(5) == 0 {
				out = append(out, s) // replayed duplicate
			}
			gap := []int64{0, tol - 1, tol, tol + 1, -s.IntervalMS / 2, 5_000, 7_200_000}[rng.IntN(7)]
			t = t + s.IntervalMS + max(gap, -s.IntervalMS)
		}
	}
	return out
}

func TestEngineAgreesWithReference(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	p := NewPeriod(2026, time.November, loc)
	seeds := 3000
	if testing.Short() {
		seeds = 300
	}
	shareLines, overSeeds := 0, 0
	for seed := 0; seed < seeds; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 42))
		cat := randomCatalog(t, rng)
		samples := randomTrace(rng, p, cat.Defaults.GapToleranceMS)
		want := refBill(cat, samples, p)

		acc := NewAccumulator(cat, p)
		for i := range samples {
			acc.Add(&samples[i])
		}
		got := acc.Invoices()
		compareWithReference(t, fmt.Sprintf("seed %d", seed), got, want)
		gotOver := map[string][2]string{}
		for _, o := range got.Oversubscribed {
			gotOver[o.GPU+"|"+string(o.Basis)] = [2]string{fmt.Sprint(o.OverMS), o.Peak.StringFixed(6)}
		}
		require.Equal(t, refOversubscribed(samples, p), gotOver, "seed %d: over-subscribed cards", seed)
		overSeeds += min(len(gotOver), 1)
		for _, inv := range got.Invoices {
			for _, l := range inv.Lines {
				if strings.Contains(l.SKU, "[") && l.Kind == KindUsage {
					shareLines++
				}
			}
		}
	}
	// The traces reach rule 11: shares priced by share and cards over-subscribed.
	require.Greater(t, shareLines, seeds/10, "usage lines of derived share SKUs")
	require.Greater(t, overSeeds, seeds/60, "seeds with an over-subscribed card")
}

func compareWithReference(t *testing.T, label string, got *Result, want refResult) {
	t.Helper()
	gotUsage := map[string]refLine{}
	gotRes := map[string]string{}
	gotTotals := map[string]string{}
	gotUnpriced := map[string]int64{}
	for _, inv := range got.Invoices {
		gotTotals[inv.Project] = FormatMoney(inv.Total)
		var sum = inv.Total.Sub(inv.Total)
		for _, l := range inv.Lines {
			sum = sum.Add(l.Amount)
			if l.Kind == KindUsage {
				gotUsage[inv.Project+"|"+l.User+"|"+l.SKU] = refLine{sessions: l.Sessions, usedMS: l.UsedMS, coveredMS: l.CoveredMS,
					idle: l.IdleMS, billed: l.BilledSeconds, amount: FormatMoney(l.Amount)}
				continue
			}
			gotRes[fmt.Sprintf("%s|%d", inv.Project, l.Index)] = FormatMoney(l.Amount)
		}
		require.True(t, sum.Equal(inv.Total), "%s: lines do not add up to the total of %s", label, inv.Project)
		for _, u := range inv.Unpriced {
			gotUnpriced[inv.Project+"|"+u.User+"|"+u.GPUModel+"|"+u.Profile] += u.UsedMS
		}
	}
	require.Equal(t, want.usage, gotUsage, "%s: usage lines", label)
	require.Equal(t, want.reservations, gotRes, "%s: reservation lines", label)
	require.Equal(t, want.totals, gotTotals, "%s: totals", label)
	require.Equal(t, want.unpricedMS, gotUnpriced, "%s: unpriced usage", label)
}
