package billing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// Billing in a time zone with daylight saving time. In Europe/Berlin, 2026:
// clocks go from 02:00 CET to 03:00 CEST on Sunday 29 March (a 23-hour day,
// March has 743 hours) and from 03:00 CEST back to 02:00 CET on Sunday
// 25 October (a 25-hour day, October has 745 hours). Usage is measured in
// elapsed time, never in wall-clock differences; periods are calendar months
// of the zone.

const dstCatalog = `
currency: EUR
timezone: Europe/Berlin
defaults: {rounding: second, gap_tolerance_s: 30, idle: {threshold: 0.05, warn_after: 30m, release_after: 60m}}
skus:
  - {id: a1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "1.00", monthly_price: "500"}
projects:
  - id: p
  - id: hourly
    rounding: hour
  - id: reserved
    reservations: [{sku: a1g, quantity: 1, term: month, start: 2026-03, billing: monthly}]
`

var berlin = func() *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	return loc
}()

// wall returns Unix ms for a wall-clock time in Berlin; the offset picks the
// earlier (CEST) or later (CET) instance of a repeated time in October.
func wall(month time.Month, day, hour, minute int) int64 {
	return time.Date(2026, month, day, hour, minute, 0, 0, berlin).UnixMilli()
}

// utc returns Unix ms for a UTC time in 2026.
func utc(month time.Month, day, hour, minute int) int64 {
	return time.Date(2026, month, day, hour, minute, 0, 0, time.UTC).UnixMilli()
}

func dstCat(t *testing.T) *schemas.Catalog {
	t.Helper()
	cat, err := schemas.ParseCatalog([]byte(dstCatalog), "dst")
	require.NoError(t, err)
	require.Equal(t, "Europe/Berlin", cat.Location.String())
	return cat
}

// held returns samples of one minute each over [from, to) for project/user on
// instance i, util u (<0: null) and one process: what a collector writes.
func heldDST(project string, from, to int64, util float64) []smp {
	var out []smp
	for ts := from; ts < to; ts += 60_000 {
		out = append(out, smp{project: project, user: "u", inst: "i", start: ts, end: min(ts+60_000, to), util: util, procs: 1})
	}
	return out
}

func TestDSTPeriodBounds(t *testing.T) {
	const h = int64(3_600_000)
	mar := NewPeriod(2026, time.March, berlin)
	require.Equal(t, utc(time.February, 28, 23, 0), mar.StartMS(), "1 March 00:00 CET")
	require.Equal(t, utc(time.March, 31, 22, 0), mar.EndMS(), "1 April 00:00 CEST")
	require.Equal(t, 743*h, mar.EndMS()-mar.StartMS())
	oct, err := ParsePeriod("2026-10", berlin)
	require.NoError(t, err)
	require.Equal(t, utc(time.September, 30, 22, 0), oct.StartMS(), "1 October 00:00 CEST")
	require.Equal(t, utc(time.October, 31, 23, 0), oct.EndMS(), "1 November 00:00 CET")
	require.Equal(t, 745*h, oct.EndMS()-oct.StartMS())
	nov := NewPeriod(2026, time.November, berlin)
	require.Equal(t, oct.EndMS(), nov.StartMS(), "months tile the time line")
	require.Equal(t, 720*h, nov.EndMS()-nov.StartMS())
}

// An instance held without a break from before the month to after it bills
// every elapsed hour of the month: 743 in March, 745 in October.
func TestDSTWholeMonth(t *testing.T) {
	cat := dstCat(t)
	for _, tc := range []struct {
		month time.Month
		hours int64
	}{{time.March, 743}, {time.October, 745}, {time.November, 720}} {
		p := NewPeriod(2026, tc.month, berlin)
		ss := heldDST("p", p.StartMS()-3_600_000, p.EndMS()+3_600_000, 0.5)
		for _, project := range []string{"p", "hourly"} {
			for i := range ss {
				ss[i].project = project
			}
			l := usageLine(t, bill(t, cat, p, ss...), project, "u", "a1g")
			require.Equal(t, 1, l.Sessions, "%s %s", tc.month, project)
			require.Equal(t, tc.hours*3_600_000, l.UsedMS, "%s %s", tc.month, project)
			require.Equal(t, tc.hours*3600, l.BilledSeconds, "%s %s", tc.month, project)
			require.Equal(t, FormatMoney(UsageAmount(tc.hours*3600, cat.SKUs[0].HourlyPrice)), FormatMoney(l.Amount))
		}
	}
	// The monthly reservation is one month's price whatever the month's length,
	// and covers all 743 hours of March.
	mar := NewPeriod(2026, time.March, berlin)
	ss := heldDST("reserved", mar.StartMS(), mar.EndMS(), 0.5)
	r := bill(t, cat, mar, ss...)
	l := usageLine(t, r, "reserved", "u", "a1g")
	require.Equal(t, int64(743*3_600_000), l.CoveredMS)
	require.Zero(t, l.BilledSeconds)
	require.Equal(t, "500.00", FormatMoney(r.Invoices[0].Total))
}

// The days of the change: 23 and 25 hours from midnight to midnight.
func TestDSTDays(t *testing.T) {
	cat := dstCat(t)
	mar, oct := NewPeriod(2026, time.March, berlin), NewPeriod(2026, time.October, berlin)
	l := usageLine(t, bill(t, cat, mar, heldDST("p", wall(time.March, 29, 0, 0), wall(time.March, 30, 0, 0), 0.5)...), "p", "u", "a1g")
	require.Equal(t, int64(23*3_600_000), l.UsedMS)
	require.Equal(t, "23.00", FormatMoney(l.Amount))
	l = usageLine(t, bill(t, cat, oct, heldDST("p", wall(time.October, 25, 0, 0), wall(time.October, 26, 0, 0), 0.5)...), "p", "u", "a1g")
	require.Equal(t, int64(25*3_600_000), l.UsedMS)
	require.Equal(t, "25.00", FormatMoney(l.Amount))
}

// Hourly rounding rounds the elapsed time of a session, not the difference of
// its wall-clock ends.
func TestDSTHourlyRounding(t *testing.T) {
	cat := dstCat(t)
	mar, oct := NewPeriod(2026, time.March, berlin), NewPeriod(2026, time.October, berlin)
	f := func(p Period, from, to int64, wantUsedMS, wantBilled int64, what string) {
		t.Helper()
		l := usageLine(t, bill(t, cat, p, heldDST("hourly", from, to, 0.5)...), "hourly", "u", "a1g")
		require.Equal(t, wantUsedMS, l.UsedMS, what)
		require.Equal(t, wantBilled, l.BilledSeconds, what)
	}
	// 01:30 CET → 03:30 CEST: two hours on the wall, one hour elapsed.
	f(mar, wall(time.March, 29, 1, 30), wall(time.March, 29, 3, 30), 3_600_000, 3600, "spring forward, 1 h")
	// 01:45 CET → 03:15 CEST: 1.5 h on the wall, 30 min elapsed → one started hour.
	f(mar, wall(time.March, 29, 1, 45), wall(time.March, 29, 3, 15), 1_800_000, 3600, "spring forward, 30 min")
	// 01:30 CEST → 02:30 CET (the second 02:30): one hour on the wall, two elapsed.
	cest0130, cet0230 := utc(time.October, 24, 23, 30), utc(time.October, 25, 1, 30)
	require.Equal(t, "2026-10-25 01:30 CEST", time.UnixMilli(cest0130).In(berlin).Format("2006-01-02 15:04 MST"))
	require.Equal(t, "2026-10-25 02:30 CET", time.UnixMilli(cet0230).In(berlin).Format("2006-01-02 15:04 MST"))
	f(oct, cest0130, cet0230, 7_200_000, 7200, "fall back, 2 h")
	// 02:30 CEST → 02:30 CET: zero on the wall, one hour elapsed.
	f(oct, utc(time.October, 25, 0, 30), cet0230, 3_600_000, 3600, "fall back, the repeated hour")
	// 02:30 CEST → 02:10 CET: the wall clock went back, 40 minutes elapsed →
	// one started hour, not zero.
	f(oct, utc(time.October, 25, 0, 30), utc(time.October, 25, 1, 10), 2_400_000, 3600, "fall back, 40 min")
}

// Sessions and idle time are clipped at the zone's midnight, not UTC's; a
// session across the month end is rounded in each month.
func TestDSTMonthBoundaryClipping(t *testing.T) {
	cat := dstCat(t)
	mar, apr := NewPeriod(2026, time.March, berlin), NewPeriod(2026, time.April, berlin)
	oct, nov := NewPeriod(2026, time.October, berlin), NewPeriod(2026, time.November, berlin)

	// 31 March 23:30 CEST → 1 April 00:30 CEST: half an hour in each month.
	x := heldDST("p", wall(time.March, 31, 23, 30), wall(time.April, 1, 0, 30), 0.5)
	require.Equal(t, int64(1_800_000), usageLine(t, bill(t, cat, mar, x...), "p", "u", "a1g").UsedMS)
	require.Equal(t, int64(1_800_000), usageLine(t, bill(t, cat, apr, x...), "p", "u", "a1g").UsedMS)
	// 31 March 22:30–23:30 UTC is 1 April 00:30–01:30 CEST: April's, not March's.
	y := heldDST("p", utc(time.March, 31, 22, 30), utc(time.March, 31, 23, 30), 0.5)
	for _, inv := range bill(t, cat, mar, y...).Invoices {
		if inv.Project == "p" {
			require.Empty(t, inv.Lines, "nothing of it in March")
		}
	}
	require.Equal(t, int64(3_600_000), usageLine(t, bill(t, cat, apr, y...), "p", "u", "a1g").UsedMS)

	// 31 October 23:30 CET → 1 November 00:30 CET, hourly: one started hour
	// in each month (each month rounds its own part).
	z := heldDST("hourly", wall(time.October, 31, 23, 30), wall(time.November, 1, 0, 30), 0.5)
	for _, p := range []Period{oct, nov} {
		l := usageLine(t, bill(t, cat, p, z...), "hourly", "u", "a1g")
		require.Equal(t, int64(1_800_000), l.UsedMS, p.String())
		require.Equal(t, int64(3600), l.BilledSeconds, p.String())
	}

	// Idle from 31 October 23:00 CET to 1 November 01:00 CET (util 0) after a
	// busy hour: October sees 2 h of use of which 1 h idle, November 1 h idle.
	busy := heldDST("p", wall(time.October, 31, 22, 0), wall(time.October, 31, 23, 0), 0.5)
	idle := heldDST("p", wall(time.October, 31, 23, 0), wall(time.November, 1, 1, 0), 0)
	all := append(busy, idle...)
	l := usageLine(t, bill(t, cat, oct, all...), "p", "u", "a1g")
	require.Equal(t, int64(2*3_600_000), l.UsedMS)
	require.Equal(t, int64(3_600_000), l.IdleMS)
	l = usageLine(t, bill(t, cat, nov, all...), "p", "u", "a1g")
	require.Equal(t, int64(3_600_000), l.UsedMS)
	require.Equal(t, int64(3_600_000), l.IdleMS)

	// Idle through the repeated hour: 02:00 CEST → 03:00 CET is two elapsed
	// hours, all inside October.
	idle2 := heldDST("p", utc(time.October, 25, 0, 0), utc(time.October, 25, 2, 0), 0)
	l = usageLine(t, bill(t, cat, oct, idle2...), "p", "u", "a1g")
	require.Equal(t, int64(2*3_600_000), l.IdleMS)
}

// Idle warnings are due after elapsed time; the message names the zone.
func TestDSTIdleAlerts(t *testing.T) {
	cat := dstCat(t)
	d := NewIdleDetector(cat)
	// 02:40 CEST → 02:20 CET: 40 minutes idle, though the wall clock went back.
	from, to := utc(time.October, 25, 0, 40), utc(time.October, 25, 1, 20)
	for ts := from; ts < to; ts += 60_000 {
		s := schemas.Sample{StartMS: ts, IntervalMS: 60_000, Node: "n", GPUUUID: "g", GPUModel: "A100", Profile: "1g.10gb",
			InstanceID: "i", Project: "p", User: "u", Util: 0, UtilKnown: true}
		d.Add(&s)
	}
	streaks := d.Streaks(0)
	require.Len(t, streaks, 1)
	require.Equal(t, 40*time.Minute, streaks[0].Duration())
	alerts := Alerts(streaks, cat.Location)
	require.Len(t, alerts, 1, "warned after 30 min, not released (60 min)")
	require.Equal(t, AlertIdleWarning, alerts[0].Kind)
	require.Equal(t, from+30*60_000, alerts[0].At, "due 30 elapsed minutes in: 02:10 CET")
	require.Equal(t, "2026-10-25 02:10 CET", time.UnixMilli(alerts[0].At).In(berlin).Format("2006-01-02 15:04 MST"))
	require.Contains(t, alerts[0].English, "since 2026-10-25 02:40 (Europe/Berlin)")
}
