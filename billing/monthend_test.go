package billing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// The worked example of docs/billing.md, "A session across a month end, rounded by
// the hour": 30 November 23:30 to 1 December 00:30 is cut at midnight into two
// 30-minute parts, and each month rounds its part up to a whole hour. Per second,
// the same session bills 30 minutes in each month.
func TestMonthEndRoundsUpInEachMonth(t *testing.T) {
	const catalog = `
currency: CNY
timezone: Asia/Shanghai
defaults: {rounding: second}
skus:
  - {id: a1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "1.80", monthly_price: "900"}
projects:
  - {id: hourly, rounding: hour}
  - {id: persecond}
`
	cat, err := schemas.ParseCatalog([]byte(catalog), "monthend")
	require.NoError(t, err)
	dec := NewPeriod(2026, time.December, shanghai)
	start := time.Date(2026, time.November, 30, 23, 30, 0, 0, shanghai).UnixMilli()
	end := time.Date(2026, time.December, 1, 0, 30, 0, 0, shanghai).UnixMilli()
	var samples []schemas.Sample
	for _, project := range []string{"hourly", "persecond"} {
		for ts := start; ts < end; ts += 10_000 { // the collector's 10 s samples
			samples = append(samples, heldSamples(t, held{project: project, user: "s", inst: "MIG-" + project, start: ts, end: ts + 10_000})...)
		}
	}

	for _, p := range []Period{nov, dec} {
		r := billSamples(cat, p, samples)
		h := usageLine(t, r, "hourly", "s", "a1g")
		require.Equal(t, 1, h.Sessions, p.String())
		require.EqualValues(t, 1_800_000, h.UsedMS, "%s: 30 minutes fall in each month", p)
		require.EqualValues(t, 3600, h.BilledSeconds, "%s: each month rounds its part up to an hour", p)
		require.Equal(t, "1.80", FormatMoney(h.Amount), p.String())

		s := usageLine(t, r, "persecond", "s", "a1g")
		require.EqualValues(t, 1800, s.BilledSeconds, p.String())
		require.Equal(t, "0.90", FormatMoney(s.Amount), p.String())
	}
}
