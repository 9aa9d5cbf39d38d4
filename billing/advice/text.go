package advice

import (
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// money renders an amount the engine computed with the currency's sign.
func (a *adviser) money(d decimal.Decimal) string { return a.symbol() + billing.FormatMoney(d) }

func (a *adviser) moneyS(s string) string { return a.symbol() + s }

func (a *adviser) symbol() string {
	switch a.cat.Currency {
	case "CNY":
		return "¥"
	case "USD":
		return "$"
	case "EUR":
		return "€"
	}
	return a.cat.Currency + " "
}

var termEn = map[schemas.Term]string{schemas.TermMonth: "month", schemas.TermQuarter: "quarter", schemas.TermYear: "year"}
var termZh = map[schemas.Term]string{schemas.TermMonth: "月付", schemas.TermQuarter: "季付", schemas.TermYear: "年付"}

func (a *adviser) windowDays() string {
	return days(a.periods[len(a.periods)-1].EndMS() - a.periods[0].StartMS())
}

// adviceText is the recommendation in a sentence or three a lab lead can act on.
func (a *adviser) adviceText(g *group, s *SKUAdvice, prof []int64) Text {
	var en, zh strings.Builder
	w := a.window()
	a.heldText(&en, &zh, w, g, s, prof)
	switch {
	case !s.Reservable:
		fmt.Fprintf(&en, " %s has no monthly price, so it cannot be reserved: hourly use cost %s.", g.sku.ID, a.moneyS(s.Advised))
		fmt.Fprintf(&zh, "%s 没有包月价格，不能预留：按小时计费共 %s。", g.sku.ID, a.moneyS(s.Advised))
	case s.Mix.Empty():
		a.hourlyOnlyText(&en, &zh, s)
	default:
		a.mixText(&en, &zh, w, g, s, prof)
	}
	return Text{En: en.String(), Zh: zh.String()}
}

// windowText is the window as the texts name it: its first and last month
// and its length in days.
type windowText struct{ from, to, days string }

func (a *adviser) window() windowText {
	return windowText{a.periods[0].String(), a.periods[len(a.periods)-1].String(), a.windowDays()}
}

// heldText is the advice's first sentence: how much of the window the
// project held the SKU, and its peak.
func (a *adviser) heldText(en, zh *strings.Builder, w windowText, g *group, s *SKUAdvice, prof []int64) {
	from, to, D := w.from, w.to, w.days
	if s.Peak == 0 {
		fmt.Fprintf(en, "From %s to %s (%s days) %s did not hold %s.", from, to, D, g.project, g.sku.ID)
		fmt.Fprintf(zh, "%s 至 %s（%s 天）%s 未使用 %s。", from, to, D, g.project, g.sku.ID)
		return
	}
	d1 := days(prof[0])
	fmt.Fprintf(en, "From %s to %s (%s days) %s held at least 1 %s for %s days and at most %d at once.", from, to, D, g.project, g.sku.ID, d1, s.Peak)
	fmt.Fprintf(zh, "%s 至 %s（%s 天）%s 至少占用 1 个 %s 的时间共 %s 天，同时最多 %d 个。", from, to, D, g.project, g.sku.ID, d1, s.Peak)
}

// basisText names what the window was billed, the basis of the saving: when
// the invoices charged otherwise (upfront reservations), it says so.
func (a *adviser) basisText(s *SKUAdvice) (en, zh string) {
	if !s.billed.Equal(s.basis) {
		return fmt.Sprintf("%s billed (reservations counted by their monthly shares; the invoices of these months charged %s)", a.moneyS(s.BilledBase), a.moneyS(s.Billed)),
			fmt.Sprintf("实际计费 %s（预留按月分摊计；这几个月的账单共收 %s）", a.moneyS(s.BilledBase), a.moneyS(s.Billed))
	}
	return a.moneyS(s.BilledBase) + " billed", "实际计费 " + a.moneyS(s.BilledBase)
}

// hourlyOnlyText advises no reservation: what hourly use cost, what the
// current reservations cost more, and when a reservation would pay off.
func (a *adviser) hourlyOnlyText(en, zh *strings.Builder, s *SKUAdvice) {
	fmt.Fprintf(en, " Hourly use only is cheapest: %s", a.moneyS(s.Advised))
	fmt.Fprintf(zh, "全部按小时计费最省：%s", a.moneyS(s.Advised))
	if saving := s.basis.Sub(s.advised); len(s.Current) > 0 && saving.Sign() > 0 {
		basisEn, basisZh := a.basisText(s)
		fmt.Fprintf(en, " instead of the %s with its reservations (saving %s)", basisEn, a.money(saving))
		fmt.Fprintf(zh, "，而%s（含预留），可节省 %s", basisZh, a.money(saving))
	}
	if len(s.Terms) == 3 {
		fmt.Fprintf(en, "; a reservation pays off when one instance is held more than %s of the time on a year term (%s on a month term).",
			pctS(s.Terms[2].BreakEven), pctS(s.Terms[0].BreakEven))
		fmt.Fprintf(zh, "；单个实例占用时间超过 %s 时年付预留才划算（月付需超过 %s）。", pctS(s.Terms[2].BreakEven), pctS(s.Terms[0].BreakEven))
	} else {
		en.WriteString(".")
		zh.WriteString("。")
	}
}

// mixText advises the mix: its reservations, what it would have cost against
// what was billed, and what it would cost if use halved.
func (a *adviser) mixText(en, zh *strings.Builder, w windowText, g *group, s *SKUAdvice, prof []int64) {
	from, to := w.from, w.to
	partsEn, partsZh := a.mixParts(g, s.Mix)
	if l := s.Mix.Year + s.Mix.Quarter; l > 1 && l <= int64(len(prof)) {
		fmt.Fprintf(en, " It held at least %d for %s of the %s days.", l, days(prof[l-1]), w.days)
		fmt.Fprintf(zh, "其中至少同时占用 %d 个的时间共 %s 天。", l, days(prof[l-1]))
	}
	fmt.Fprintf(en, " %s, with hourly use for the rest, would have cost %s", capitalize(partsEn), a.moneyS(s.Advised))
	fmt.Fprintf(zh, "%s，其余按小时计费，将花费 %s", partsZh, a.moneyS(s.Advised))
	basisEn, basisZh := a.basisText(s)
	if saving := s.basis.Sub(s.advised); saving.Sign() > 0 {
		fmt.Fprintf(en, " instead of the %s (saving %s).", basisEn, a.money(saving))
		fmt.Fprintf(zh, "，而%s，可节省 %s。", basisZh, a.money(saving))
	} else {
		fmt.Fprintf(en, "; the %s is no more than that: keep the current reservations.", basisEn)
		fmt.Fprintf(zh, "；%s，并不更贵：保持现有预留即可。", basisZh)
	}
	fmt.Fprintf(en, " This assumes %s to %s repeat; if use halved, these reservations and hourly use would cost %s (hourly only: %s).",
		from, to, a.moneyS(s.IfHalved.Advised), a.moneyS(s.IfHalved.HourlyOnly))
	fmt.Fprintf(zh, "此建议假设 %s 至 %s 的用量重复；若用量减半，该方案将花费 %s（全部按小时：%s）。",
		from, to, a.moneyS(s.IfHalved.Advised), a.moneyS(s.IfHalved.HourlyOnly))
}

// mixParts are the reservations of mix, in English and Chinese: the year and
// quarter terms with their monthly and upfront prices, then the month terms.
func (a *adviser) mixParts(g *group, mix Mix) (en, zh string) {
	var partsEn, partsZh []string
	for _, t := range []struct {
		q    int64
		term schemas.Term
	}{{mix.Year, schemas.TermYear}, {mix.Quarter, schemas.TermQuarter}} {
		if t.q == 0 {
			continue
		}
		d := a.cat.Discount(g.sku, t.term)
		m := billing.ReservationAmount(g.sku.MonthlyPrice, 1, d, t.q)
		up := billing.ReservationAmount(g.sku.MonthlyPrice, t.term.Months(), d, t.q)
		partsEn = append(partsEn, fmt.Sprintf("%d %s reservation%s (%s a month billed monthly, or %s upfront for the %s)",
			t.q, termEn[t.term], plural(t.q), a.money(m), a.money(up), termEn[t.term]))
		partsZh = append(partsZh, fmt.Sprintf("%d 个%s预留（按月付每月 %s，或一次预付 %s）", t.q, termZh[t.term], a.money(m), a.money(up)))
	}
	var monthsEn, monthsZh []string
	for i, q := range mix.Month {
		if q > 0 {
			monthsEn = append(monthsEn, fmt.Sprintf("%d in %s", q, a.periods[i]))
			monthsZh = append(monthsZh, fmt.Sprintf("%s %d 个", a.periods[i], q))
		}
	}
	if len(monthsEn) > 0 {
		partsEn = append(partsEn, "month reservations ("+strings.Join(monthsEn, ", ")+")")
		partsZh = append(partsZh, "月付预留（"+strings.Join(monthsZh, "，")+"）")
	}
	return strings.Join(partsEn, " and "), strings.Join(partsZh, "加")
}

// underusedText says what an under-used reservation cost unused and what
// would have done.
func (a *adviser) underusedText(g *group, u *Underused, cov decimal.Decimal) Text {
	from, to := a.periods[0].String(), a.periods[len(a.periods)-1].String()
	t := schemas.Term(u.Term)
	rh := decimal.NewFromInt(u.ReservedSeconds).Div(decimal.NewFromInt(3600)).StringFixed(1)
	ch := decimal.NewFromInt(u.CoveredSeconds).Div(decimal.NewFromInt(3600)).StringFixed(1)
	var en, zh strings.Builder
	fmt.Fprintf(&en, "%s's %d %s reserved for a %s from %s covered %s of %s reserved hours (%s) from %s to %s: %s of its %s in these months paid for nothing.",
		g.project, u.Quantity, g.sku.ID, termEn[t], u.Start, ch, rh, pct(cov), from, to, a.moneyS(u.Unused), a.moneyS(u.Cost))
	fmt.Fprintf(&zh, "%s 自 %s 起的 %d 个 %s %s预留在 %s 至 %s 期间只覆盖了 %s / %s 预留小时（%s）：这几个月的 %s 中有 %s 白白支付。",
		g.project, u.Start, u.Quantity, g.sku.ID, termZh[t], from, to, ch, rh, pct(cov), a.moneyS(u.Cost), a.moneyS(u.Unused))
	if u.Smaller != nil {
		if u.Smaller.Quantity == 0 {
			fmt.Fprintf(&en, " Without it, %s would have cost %s in all instead of %s.", g.sku.ID, a.moneyS(u.Smaller.Cost), a.moneyS(u.WindowCost))
			fmt.Fprintf(&zh, "若不预留，%s 共需 %s，而不是 %s。", g.sku.ID, a.moneyS(u.Smaller.Cost), a.moneyS(u.WindowCost))
		} else {
			fmt.Fprintf(&en, " A quantity of %d would have cost %s in all for %s instead of %s.", u.Smaller.Quantity, a.moneyS(u.Smaller.Cost), g.sku.ID, a.moneyS(u.WindowCost))
			fmt.Fprintf(&zh, "若只预留 %d 个，%s 共需 %s，而不是 %s。", u.Smaller.Quantity, g.sku.ID, a.moneyS(u.Smaller.Cost), a.moneyS(u.WindowCost))
		}
	}
	if u.Shorter != nil {
		var ms []string
		for i, m := range u.Shorter.Months {
			ms = append(ms, fmt.Sprintf("%s: %d", a.periods[i], m))
		}
		fmt.Fprintf(&en, " Month reservations month by month (%s) would have cost %s.", strings.Join(ms, ", "), a.moneyS(u.Shorter.Cost))
		fmt.Fprintf(&zh, "改为逐月的月付预留（%s）将花费 %s。", strings.Join(ms, "，"), a.moneyS(u.Shorter.Cost))
	}
	if u.Smaller == nil && u.Shorter == nil {
		en.WriteString(" Neither a smaller quantity nor a shorter term would have cost less.")
		zh.WriteString("减少数量或缩短期限都不会更省。")
	}
	return Text{En: en.String(), Zh: zh.String()}
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// pctS renders a share given as a decimal string as a percentage.
func pctS(s string) string {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return s
	}
	return pct(d)
}
