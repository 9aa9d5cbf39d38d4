package billing

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// A budget's amounts are written in its unit's way: money with the minor
// digits, card-hours as they are; an unknown unit or scope is not valid.
func TestBudgetUnitFormatsAndLists(t *testing.T) {
	d := decimal.RequireFromString("880")
	if got := BudgetMoney.Format(d); got != "880.00" {
		t.Errorf("money %q, want 880.00", got)
	}
	if got := BudgetCardHours.Format(decimal.RequireFromString("12.5")); got != "12.5" {
		t.Errorf("card-hours %q, want 12.5", got)
	}
	if !BudgetCardHours.Valid() || BudgetUnit("hours").Valid() || !BudgetStudent.Valid() || BudgetScope("site").Valid() {
		t.Error("Valid does not follow the lists")
	}
}

// Money's JSON is FormatMoney's, in the field's place, and reads back.
func TestMoneyJSON(t *testing.T) {
	v := struct {
		A Money `json:"a"`
		B int   `json:"b"`
	}{Money{decimal.RequireFromString("957.6")}, 1}
	b, err := json.Marshal(v)
	if err != nil || string(b) != `{"a":"957.60","b":1}` {
		t.Fatalf("%s %v", b, err)
	}
	v.A = Money{}
	if err := json.Unmarshal(b, &v); err != nil || !v.A.Equal(decimal.RequireFromString("957.6")) {
		t.Fatalf("read back %v %v", v.A, err)
	}
}

// A budget's projection: the percent rounds down (a threshold is reached
// exactly when the percent is at it), the forecast goes on at the period's
// average rate so far, and the date the limit is reached is given only
// when it falls in the period and has not come.
func TestProjectBudget(t *testing.T) {
	nov := NewPeriod(2026, time.November, time.UTC) // 30 days
	day := func(d float64) time.Time { return nov.Start.Add(time.Duration(d * 24 * float64(time.Hour))) }
	ms := func(h float64) int64 { return int64(h * 3_600_000) }
	dec := decimal.RequireFromString
	for _, c := range []struct {
		name                 string
		unit                 BudgetUnit
		limit, money         string
		cardMS               int64
		asOf                 time.Time
		used, left, forecast string
		percent              int64
		reached              bool
		reachesAt            time.Time
	}{
		{name: "over, as a student sees it", unit: BudgetMoney, limit: "1500", money: "2417.00", asOf: day(19),
			used: "2417", left: "-917", forecast: "3816.32", percent: 161, reached: true}, // 2417 × 30 / 19 = 3816.315…
		{name: "reached within the period", unit: BudgetMoney, limit: "1000", money: "400.00", asOf: day(10),
			used: "400", left: "600", forecast: "1200", percent: 40, reachesAt: day(25)},
		{name: "not reached this period", unit: BudgetMoney, limit: "1000", money: "100.00", asOf: day(10),
			used: "100", left: "900", forecast: "300", percent: 10},
		{name: "exactly at the limit", unit: BudgetMoney, limit: "1500", money: "1500.00", asOf: day(15),
			used: "1500", left: "0", forecast: "3000", percent: 100, reached: true},
		{name: "just under: rounds down", unit: BudgetMoney, limit: "3", money: "2.99", asOf: day(30),
			used: "2.99", left: "0.01", forecast: "2.99", percent: 99},
		{name: "card-hours", unit: BudgetCardHours, limit: "10", cardMS: ms(5.5), asOf: day(15),
			used: "5.5", left: "4.5", forecast: "11", percent: 55,
			reachesAt: nov.Start.Add(2_356_363_636 * time.Millisecond)}, // 15 d × 10 h / 5.5 h
		{name: "measured at the start", unit: BudgetMoney, limit: "100", money: "0", asOf: nov.Start,
			used: "0", left: "100", forecast: "0"},
		{name: "measured after the end", unit: BudgetCardHours, limit: "1", cardMS: ms(0.25), asOf: day(31),
			used: "0.25", left: "0.75", forecast: "0.25", percent: 25},
	} {
		t.Run(c.name, func(t *testing.T) {
			money := decimal.Zero
			if c.money != "" {
				money = dec(c.money)
			}
			p := ProjectBudget(c.unit, dec(c.limit), money, c.cardMS, nov.Start, nov.End, c.asOf)
			for what, pair := range map[string][2]decimal.Decimal{"used": {p.Used, dec(c.used)}, "left": {p.Left, dec(c.left)},
				"forecast": {p.Forecast, dec(c.forecast)}} {
				if !pair[0].Equal(pair[1]) {
					t.Errorf("%s %s, want %s", what, pair[0], pair[1])
				}
			}
			if p.Percent != c.percent || p.Reached != c.reached || !p.ReachesAt.Equal(c.reachesAt) {
				t.Errorf("percent %d reached %v at %v, want %d %v %v", p.Percent, p.Reached, p.ReachesAt, c.percent, c.reached, c.reachesAt)
			}
		})
	}
}
