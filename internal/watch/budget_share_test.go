package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/schemas"
)

// shareCatalog prices a T4's 1/20 share with a fixed SKU (¥0.50/h) and an
// A800's shares by the whole card's price times their memory share (1/20 of
// ¥20.00/h: ¥1.00/h, SKU a800-share[1/20]).
const shareCatalog = `
currency: CNY
timezone: Asia/Shanghai
skus:
  - {id: t4-1-20, gpu_model: Tesla T4, profile: "1/20", hourly_price: "0.50"}
  - {id: a800-full, gpu_model: NVIDIA A800-SXM4-80GB, profile: full, hourly_price: "20.00"}
  - {id: a800-share, gpu_model: NVIDIA A800-SXM4-80GB, share_of: a800-full, share: memory}
defaults:
  idle: {threshold: 0.05, warn_after: 30m, release_after: 60m, release: "off"}
projects:
  - id: nlp
terms:
  - {id: 2026-autumn, start: 2026-09-01, end: 2027-01-17}
`

// shareSamples are s1's T4 1/20 share and s2's A800 1/20 share, both busy
// from 09:00 to 12:00, a sample a minute.
func shareSamples() []schemas.Sample {
	var out []schemas.Sample
	for _, h := range []struct{ user, gpu, model string }{
		{"s1", "GPU-t4", "Tesla T4"}, {"s2", "GPU-a800", "NVIDIA A800-SXM4-80GB"},
	} {
		for t := at("09:00"); t.Before(at("12:00")); t = t.Add(time.Minute) {
			out = append(out, schemas.Sample{StartMS: t.UnixMilli(), IntervalMS: 60_000, Node: "node-1", GPUUUID: h.gpu,
				GPUModel: h.model, InstanceID: h.gpu + "/share/nlp/nb-" + h.user + "/main", Profile: "1/20",
				ShareKind: schemas.ShareHAMi, ShareMem: 0.05, ShareCores: 0.05,
				Project: "nlp", User: h.user, Util: 0.9, UtilKnown: true, Processes: 1})
		}
	}
	return out
}

// Budgets count shares of a card (rule 11) as they count any instance: in
// money, what the month's invoice lines charge for a fixed share SKU and for
// a SKU priced by share (and, per term, their list price); in card-hours, the
// share's held hours, as a MIG slice's.
func TestBudgetsCountShares(t *testing.T) {
	f := newFixture(t)
	cat, err := schemas.ParseCatalog([]byte(shareCatalog), "catalog")
	if err != nil {
		t.Fatal(err)
	}
	f.cat = cat
	ctx := context.Background()
	for _, b := range []ledger.Budget{
		// s1's share: ¥0.50 an hour, 100 % of ¥1.00 at 11:00.
		{Scope: billing.BudgetStudent, Project: "nlp", User: "s1", Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "1.00"},
		// s2's share: 2 held hours at 11:00.
		{Scope: billing.BudgetStudent, Project: "nlp", User: "s2", Period: billing.BudgetMonth, Unit: billing.BudgetCardHours, Limit: "2"},
		// s2's share per term, at list price: ¥1.00 an hour, ¥2.00 at 11:00.
		{Scope: billing.BudgetStudent, Project: "nlp", User: "s2", Period: billing.BudgetTerm, Unit: billing.BudgetMoney, Limit: "2.00"},
		// The project: ¥1.50 an hour, ¥3.00 at 11:00.
		{Scope: billing.BudgetProject, Project: "nlp", Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "3.00"},
	} {
		if _, err := f.ledger.PutBudget(ctx, "admin", b); err != nil {
			t.Fatal(err)
		}
	}
	all := shareSamples()
	cycle := func(now time.Time) {
		var batch []schemas.Sample // the samples a collector would have sent by now
		for _, x := range all {
			if st := time.UnixMilli(x.StartMS); !st.Before(f.fed) && st.Before(now.Add(time.Second)) {
				batch = append(batch, x)
			}
		}
		f.fed = now.Add(time.Second)
		if err := f.usage.Write(ctx, f.comp.Build(batch)); err != nil {
			t.Fatal(err)
		}
		f.clock.Set(now)
		if _, err := f.watcher(f.ledger).Cycle(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	thresholds := func() []string {
		as, _, err := f.ledger.Alerts(ctx, ledger.AlertFilter{Kind: billing.AlertBudgetThreshold})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range as {
			out = append(out, fmt.Sprintf("%s/%s %s %d", a.Project, a.User, a.Period, a.Threshold))
		}
		slices.Sort(out)
		return out
	}
	// At 10:01, 62 minutes held: each budget past 50 %.
	cycle(at("10:01"))
	want := []string{"nlp/ 2026-12 50", "nlp/s1 2026-12 50", "nlp/s2 2026-12 50", "nlp/s2 2026-autumn 50"}
	if got := thresholds(); !slices.Equal(got, want) {
		t.Fatalf("10:01: %v, want %v", got, want)
	}
	// At 11:01, 2 h 2 min: each past 100 %.
	cycle(at("11:01"))
	want = []string{
		"nlp/ 2026-12 100", "nlp/ 2026-12 50", "nlp/ 2026-12 80",
		"nlp/s1 2026-12 100", "nlp/s1 2026-12 50", "nlp/s1 2026-12 80",
		"nlp/s2 2026-12 100", "nlp/s2 2026-12 50", "nlp/s2 2026-12 80",
		"nlp/s2 2026-autumn 100", "nlp/s2 2026-autumn 50", "nlp/s2 2026-autumn 80",
	}
	if got := thresholds(); !slices.Equal(got, want) {
		t.Fatalf("11:01: %v, want %v", got, want)
	}
	used := func(scope billing.BudgetScope, user string, unit billing.BudgetUnit, period string) string {
		a, err := f.ledger.AlertByKey(ctx, ledger.BudgetAlertKey(scope, "nlp", user, unit, period, 100))
		if err != nil {
			t.Fatalf("%s %s %s: %v", user, unit, period, err)
		}
		var facts alert.Facts
		if err := json.Unmarshal(a.Facts, &facts); err != nil || facts.Budget == nil {
			t.Fatalf("facts %s: %v", a.Facts, err)
		}
		return facts.Budget.Used.String()
	}
	for _, c := range []struct {
		scope        billing.BudgetScope
		user         string
		unit         billing.BudgetUnit
		period, want string
	}{
		{billing.BudgetStudent, "s1", billing.BudgetMoney, "2026-12", "1.02"},         // 2 h 2 min × 0.50, the fixed share SKU's line
		{billing.BudgetStudent, "s2", billing.BudgetCardHours, "2026-12", "2.033333"}, // the share's held hours
		{billing.BudgetStudent, "s2", billing.BudgetMoney, "2026-autumn", "2.02"},     // 2 h 1 min to now × 1.00, a800-share[1/20]'s list price
		{billing.BudgetProject, "", billing.BudgetMoney, "2026-12", "3.05"},           // 1.02 + 2.03, the invoice total
	} {
		if got := used(c.scope, c.user, c.unit, c.period); got != c.want {
			t.Errorf("%s %s %s: used %s, want %s", c.user, c.unit, c.period, got, c.want)
		}
	}
}
