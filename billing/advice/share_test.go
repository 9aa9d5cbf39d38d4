package advice

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// Shares of a card (rule 11) are advised on like any SKU (issue 23: "reserve
// 1/20 shares by the month"): a fixed share SKU (profile "1/20") and a SKU
// priced by share (share_of, share: memory; its SKU id a100-share[1/20]),
// both at ¥1.80 an hour and ¥900 a month, 8 折 for a year.

// derivedCatalog prices the A800's shares by the whole card's price times
// their memory share: 1/20 of ¥36.00/h and ¥18 000/month is ¥1.80/h and
// ¥900/month, the example catalog's fixed 1/20 SKU's prices. reservations
// are lab's.
func derivedCatalog(t *testing.T, reservations string) *schemas.Catalog {
	t.Helper()
	src := `
currency: CNY
timezone: Asia/Shanghai
discounts: {month: "0", quarter: "0.05", year: "0.20"}
skus:
  - {id: a800-full, gpu_model: NVIDIA A800-SXM4-80GB, profile: full, hourly_price: "36.00", monthly_price: "18000"}
  - {id: a800-share, gpu_model: NVIDIA A800-SXM4-80GB, share_of: a800-full, share: memory}
projects:
  - id: lab
    reservations: [` + reservations + `]
`
	cat, err := schemas.ParseCatalog([]byte(src), "derived")
	require.NoError(t, err)
	return cat
}

// shares are n shares of one card (instances GPU-s/share/ns/nb-i/main, each
// its own user), held from from to to.
func shares(project, model, profile string, n int, from, to int64) []occ {
	var out []occ
	for i := range n {
		k := schemas.Key{Project: project, User: fmt.Sprintf("2026%04d", i), InstanceID: fmt.Sprintf("GPU-s/share/ns/nb-%d/main", i),
			GPUModel: model, Profile: profile}
		out = append(out, occ{k, from, to})
	}
	return out
}

type shareCase struct {
	name, project, model, sku string
	cat                       func(t *testing.T) *schemas.Catalog
}

func shareCases() []shareCase {
	return []shareCase{
		{"fixed", "ai101", "NVIDIA A100-SXM4-80GB", "a100-80g-1-20", func(t *testing.T) *schemas.Catalog { return exampleCatalog(t) }},
		{"derived", "lab", "NVIDIA A800-SXM4-80GB", "a800-share[1/20]", func(t *testing.T) *schemas.Catalog { return derivedCatalog(t, "") }},
	}
}

// Two 1/20 shares held all of October only: 2 × 744 h × 1.80 = ¥2 678.40
// hourly; two month reservations in October, 2 × ¥900 = ¥1 800.00, save
// ¥878.40 (a quarter or a year would cost ¥2 565.00 or ¥2 160.00 a share in
// the window, more than its ¥1 339.20 hourly).
func TestShareSKUMonthReservations(t *testing.T) {
	for _, c := range shareCases() {
		t.Run(c.name, func(t *testing.T) {
			cat := c.cat(t)
			rep := advise(t, cat, shares(c.project, c.model, "1/20", 2, at(2026, 10, 1), at(2026, 11, 1)), Options{})
			a := find(t, rep, c.project, c.sku)
			require.True(t, a.Reservable)
			require.Equal(t, int64(2), a.Peak)
			require.Equal(t, "2678.40", a.Billed)
			require.Equal(t, Mix{Month: []int64{0, 2, 0}}, a.Mix)
			require.Equal(t, []Reserved{{Term: "month", Quantity: 2, Start: "2026-10", Billing: "monthly", Monthly: "1800.00", Upfront: "1800.00"}}, a.Advice)
			require.Equal(t, "1800.00", a.Advised)
			require.Equal(t, "878.40", a.Saving)
			require.Contains(t, a.Text.En, c.sku)
			require.Contains(t, a.Text.En, "saving ¥878.40")
			require.Contains(t, a.Text.Zh, "可节省 ¥878.40")
			for _, w := range rep.Warnings {
				require.NotContains(t, w, "unpriced", "a share SKU prices the usage")
			}
		})
	}
}

// Worked advice example 1 with 1/20 shares instead of T4 cards (the same
// prices): two held all quarter, a third from 5 to 15 October. Two year
// reservations, ¥4 752.00 instead of ¥8 294.40.
func TestShareSKUYearReservations(t *testing.T) {
	for _, c := range shareCases() {
		t.Run(c.name, func(t *testing.T) {
			cat := c.cat(t)
			usage := shares(c.project, c.model, "1/20", 2, at(2026, 9, 1), at(2026, 12, 1))
			third := shares(c.project, c.model, "1/20", 3, at(2026, 10, 5), at(2026, 10, 15))[2]
			rep := advise(t, cat, append(usage, third), Options{})
			a := find(t, rep, c.project, c.sku)
			require.Equal(t, int64(3), a.Peak)
			require.Equal(t, "8294.40", a.Billed)
			require.Equal(t, Mix{Year: 2, Month: []int64{0, 0, 0}}, a.Mix)
			require.Equal(t, []Reserved{{Term: "year", Quantity: 2, Start: "2026-09", Billing: "monthly", Monthly: "1440.00", Upfront: "17280.00"}}, a.Advice)
			require.Equal(t, "4752.00", a.Advised)
			require.Equal(t, "3542.40", a.Saving)
		})
	}
}

// The advised reservation of a SKU priced by share, named by its id in the
// catalog, is what the engine bills: October's two shares are covered, the
// reservation line is 2 × ¥900.00.
func TestDerivedShareReservationBills(t *testing.T) {
	cat := derivedCatalog(t, `{sku: "a800-share[1/20]", quantity: 2, term: month, start: "2026-10", billing: monthly}`)
	usage := shares("lab", "NVIDIA A800-SXM4-80GB", "1/20", 2, at(2026, 10, 1), at(2026, 11, 1))
	res := billAll(cat, []billing.Period{billing.NewPeriod(2026, time.October, shanghai)}, usage)[0]
	require.Len(t, res.Invoices, 1)
	got := map[string]string{}
	for _, l := range res.Invoices[0].Lines {
		got[l.Kind+" "+l.User+" "+l.SKU] = billing.FormatMoney(l.Amount) + " covered " + billing.FormatSeconds(l.CoveredMS)
	}
	require.Equal(t, map[string]string{
		"usage 20260000 a800-share[1/20]": "0.00 covered 2678400",
		"usage 20260001 a800-share[1/20]": "0.00 covered 2678400",
		"reservation  a800-share[1/20]":   "1800.00 covered 0",
	}, got)
	require.Equal(t, "1800.00", billing.FormatMoney(res.Invoices[0].Total))
}

// A reservation of 1/20 shares that covered little is reported like any.
func TestShareReservationUnderused(t *testing.T) {
	cat := derivedCatalog(t, `{sku: "a800-share[1/20]", quantity: 2, term: quarter, start: "2026-09", billing: monthly}`)
	rep := advise(t, cat, shares("lab", "NVIDIA A800-SXM4-80GB", "1/20", 1, at(2026, 9, 1), at(2026, 9, 11)), Options{})
	u := underusedOf(rep, "lab")
	require.Len(t, u, 1)
	require.Equal(t, "a800-share[1/20]", u[0].SKU)
	require.Equal(t, "quarter", u[0].Term)
	require.True(t, strings.HasPrefix(u[0].Coverage, "0.0"), "10 of 182 reserved days: %s", u[0].Coverage)
}
