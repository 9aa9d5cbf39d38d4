package reads

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// Usage dimensions a UsageQuery can group by.
const (
	ByProject  = "project"
	ByUser     = "user"
	BySKU      = "sku"
	ByInstance = "instance"
	ByNode     = "node"
	ByMonth    = "month"
	ByDay      = "day"
	ByHour     = "hour"
)

// UsageDimensions lists every dimension Usage can group by.
var UsageDimensions = []string{ByProject, ByUser, BySKU, ByInstance, ByNode, ByMonth, ByDay, ByHour}

// UsageQuery selects and groups stored usage for Usage.
type UsageQuery struct {
	From, To time.Time // [From, To); both required
	GroupBy  []string  // any subset of UsageDimensions, in any order
	// Filters: empty means all; several values of one filter are alternatives.
	Projects, Users, SKUs, Nodes []string
}

// UsageReport is the answer of Usage; the API serves it as it is.
//
// Cost is the list price of the usage (held hours × the SKU's hourly price),
// before per-session rounding, minimum billed seconds and reservations: it
// says what usage is worth, not what an invoice charges. Invoices (BillFrom)
// are exact. IdleCost is the part of it that was idle (idle hours × the same
// price), computed the same way.
type UsageReport struct {
	From     time.Time    `json:"from"`
	To       time.Time    `json:"to"`
	Timezone string       `json:"timezone"`
	Currency string       `json:"currency"`
	GroupBy  []string     `json:"group_by"`
	Rows     []UsageGroup `json:"rows"`  // sorted by project, user, sku, instance, node, month, day, hour
	Total    UsageGroup   `json:"total"` // the sum of every row (group fields empty)
	// UnpricedSeconds is held time of instances no catalog SKU prices (they
	// count in HeldSeconds with SKU empty and no cost).
	UnpricedSeconds int64 `json:"unpriced_seconds"`
	// SavingsHorizonSeconds and SavingsAssumption say how the releases'
	// savings were estimated (AddSavings); empty in a report without them.
	SavingsHorizonSeconds int64  `json:"savings_horizon_seconds,omitempty" doc:"the longest time one release is taken to have saved"`
	SavingsAssumption     string `json:"savings_assumption,omitempty" doc:"how saved_seconds and saved_cost are estimated, in words"`
}

// UsageGroup is one group of a UsageReport. Fields not grouped by are empty.
type UsageGroup struct {
	Project    string `json:"project,omitempty"`
	User       string `json:"user,omitempty"`
	SKU        string `json:"sku,omitempty"`
	InstanceID string `json:"instance,omitempty"`
	Node       string `json:"node,omitempty"`
	// Month is the group's local calendar month (YYYY-MM), Day its local
	// calendar day (YYYY-MM-DD) and Hour its local start hour (RFC 3339 with
	// offset), in the catalog time zone.
	Month string `json:"month,omitempty" doc:"local calendar month YYYY-MM in the catalog time zone"`
	Day   string `json:"day,omitempty" doc:"local calendar day YYYY-MM-DD in the catalog time zone"`
	Hour  string `json:"hour,omitempty" doc:"local start hour, RFC 3339 with offset"`
	// HeldSeconds are card-seconds held (the union of held sample intervals);
	// IdleSeconds the part of them idle under the project's idle threshold.
	HeldSeconds int64 `json:"held_seconds" doc:"card-seconds held (card-hours × 3600)"`
	IdleSeconds int64 `json:"idle_seconds"`
	// BusySeconds are HeldSeconds less IdleSeconds; Efficiency is
	// BusySeconds ÷ HeldSeconds as a percent with one decimal ("81.3",
	// rounded half up, exactly), empty when nothing was held. Both are set
	// by the report, in one place (SetEfficiency).
	BusySeconds int64  `json:"busy_seconds" doc:"held_seconds less idle_seconds"`
	Efficiency  string `json:"efficiency,omitempty" doc:"busy_seconds ÷ held_seconds as a percent with one decimal, rounded half up (\"81.3\"); absent when nothing was held"`
	// Cost is list price, rounded once to the cent (see UsageReport); JSON
	// writes it with the currency's minor digits (billing.Money). IdleCost
	// is the list price of IdleSeconds, priced and rounded the same way.
	Cost     billing.Money `json:"cost" doc:"list price of the usage, decimal string"`
	IdleCost billing.Money `json:"idle_cost" doc:"list price of the idle part of the usage (idle_seconds at the same hourly prices), decimal string"`
	// SavedSeconds is the held time the group's releases ended, as
	// AddSavings estimates it (Released states the assumption), and
	// SavedCost its list price, priced and rounded like Cost.
	SavedSeconds int64         `json:"saved_seconds" doc:"held time the releases ended, estimated: from each release until its holder's next holding, at most savings_horizon_seconds (see savings_assumption)"`
	SavedCost    billing.Money `json:"saved_cost" doc:"list price of saved_seconds at the released instances' SKU prices, decimal string"`
}

// UsageRows is a store that sums held samples in the database (a GROUP BY).
// Implemented by ingest.MemStore, ingest/sqlite and ingest/clickhouse. A
// replayed sample (same instance, start and holder) counts once.
type UsageRows interface {
	UsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) error
}

// CompactUsage is a store that answers a UsageRowQuery from its compact rows
// (occupancy and idle runs) in the database, with the result Usage computes
// from UsageSource rows (ingest/clickhouse). It returns false, having called
// fn never, for a query it leaves to Usage.
type CompactUsage interface {
	CompactUsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) (bool, error)
}

// bucketFor returns the UTC bucket width in which every local month, day or hour
// boundary of loc over [from, to) falls on a bucket boundary: an hour when
// every UTC offset in the range is a whole number of hours, else 15 minutes
// (every zone offset in use is a multiple of it).
func bucketFor(loc *time.Location, from, to time.Time) int64 {
	whole := func(t time.Time) bool { _, off := t.In(loc).Zone(); return off%3600 == 0 }
	if !whole(from) || !whole(to) {
		return 15 * 60_000
	}
	for t := from; t.Before(to); t = t.Add(24 * time.Hour) {
		if !whole(t) {
			return 15 * 60_000
		}
	}
	return 3_600_000
}

// dayBucket returns one-day buckets starting at local midnight when the UTC
// offset of loc is the same over [from, to) (checked every hour), else the
// bucket width b with offset 0: fewer rows when grouping by day.
func dayBucket(loc *time.Location, from, to time.Time, b int64) (width, offset int64) {
	_, off := from.In(loc).Zone()
	for t := from; t.Before(to); t = t.Add(time.Hour) {
		if _, o := t.In(loc).Zone(); o != off {
			return b, 0
		}
	}
	if _, o := to.Add(-time.Millisecond).In(loc).Zone(); o != off {
		return b, 0
	}
	const day = 86_400_000
	return day, mod(-int64(off)*1000, day)
}

// IdleThresholds returns the default idle threshold of cat and those of the
// projects that override it.
func IdleThresholds(cat *schemas.Catalog) (def float64, byProject map[string]float64) {
	byProject = map[string]float64{}
	for i := range cat.Projects {
		if p := cat.Projects[i].Idle; p != nil {
			byProject[cat.Projects[i].ID] = p.Threshold
		}
	}
	return cat.Defaults.Idle.Threshold, byProject
}

// Usage sums held time, idle time and list cost of stored usage over
// [q.From, q.To) grouped as q asks. A store that keeps compact rows
// (UsageSource) is read through them: held time is the union of its occupancy
// runs per key, idle time the union of its idle runs under each project's
// threshold (raw samples only for runs a threshold cuts through), both clipped
// to [q.From, q.To) and split at bucket boundaries. A query grouped or filtered
// by node, or a store without compact rows, is answered by the store's GROUP BY
// over raw samples (UsageRows), where a sample counts in the bucket its start
// falls in. Usage then maps buckets to local months, days or hours, prices
// each SKU (held and idle time alike) and merges groups. A local month is made
// of whole local days, so grouping by month reads day buckets.
func Usage(ctx context.Context, src UsageRows, cat *schemas.Catalog, q UsageQuery) (*UsageReport, error) {
	by, err := checkUsageQuery(q)
	if err != nil {
		return nil, err
	}
	loc := cat.Location
	if loc == nil {
		loc = time.UTC
	}
	rq, err := usageRowQuery(cat, loc, q, by)
	if err != nil {
		return nil, err
	}
	sums := &usageSums{cat: cat, loc: loc, by: by, buckets: rq.BucketMS > 0, groups: map[UsageGroup]*groupSum{},
		months: map[int64]string{}, days: map[int64]string{}, hours: map[int64]string{},
		rep: &UsageReport{From: q.From, To: q.To, Timezone: cat.Timezone, Currency: cat.Currency, GroupBy: slices.Clone(q.GroupBy)}}
	handled := false
	if cu, ok := src.(CompactUsage); ok {
		handled, err = cu.CompactUsageRows(ctx, rq, sums.add)
	}
	if !handled && err == nil {
		err = usageSourceFor(src, cat, rq).UsageRows(ctx, rq, sums.add)
	}
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	return sums.report(), nil
}

// checkUsageQuery checks q's range and dimensions and returns the set of
// dimensions it groups by.
func checkUsageQuery(q UsageQuery) (map[string]bool, error) {
	if q.From.IsZero() || q.To.IsZero() {
		return nil, fmt.Errorf("usage: from and to are required")
	}
	if !q.From.Before(q.To) {
		return nil, fmt.Errorf("usage: from %s is not before to %s", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	}
	by := map[string]bool{}
	for _, d := range q.GroupBy {
		if !slices.Contains(UsageDimensions, d) {
			return nil, fmt.Errorf("usage: group_by: unknown dimension %q (want one of %v)", d, UsageDimensions)
		}
		if by[d] {
			return nil, fmt.Errorf("usage: group_by: dimension %q given twice", d)
		}
		by[d] = true
	}
	return by, nil
}

// usageRowQuery is what Usage asks the store for q: its filters (SKUs as the
// models and profiles they price), the dimensions the store groups by, the
// idle thresholds and, grouped by month, day or hour, the UTC buckets that
// local days or hours in loc are made of (a month is a run of local days).
func usageRowQuery(cat *schemas.Catalog, loc *time.Location, q UsageQuery, by map[string]bool) (schemas.UsageRowQuery, error) {
	rq := schemas.UsageRowQuery{FromMS: q.From.UnixMilli(), ToMS: q.To.UnixMilli(),
		Projects: q.Projects, Users: q.Users, Nodes: q.Nodes,
		ByProject: by[ByProject], ByUser: by[ByUser], ByInstance: by[ByInstance], ByNode: by[ByNode]}
	rq.IdleDefault, rq.IdleByProject = IdleThresholds(cat)
	if len(q.SKUs) > 0 {
		rq.Models = [][2]string{}
		for _, id := range q.SKUs {
			sku, ok := cat.SKUByID(id)
			if !ok {
				return rq, fmt.Errorf("usage: sku: %q is not in the catalog", id)
			}
			rq.Models = append(rq.Models, [2]string{sku.GPUModel, sku.Profile})
		}
	}
	if by[ByMonth] || by[ByDay] || by[ByHour] {
		rq.BucketMS = bucketFor(loc, q.From, q.To)
		if !by[ByHour] {
			rq.BucketMS, rq.BucketOffsetMS = dayBucket(loc, q.From, q.To, rq.BucketMS)
		}
	}
	return rq, nil
}

// usageSums merges the store's rows into the groups of a UsageReport, in
// milliseconds until report; cost and idle cost are computed there, exactly,
// once per group and SKU from the milliseconds held and idle.
type usageSums struct {
	cat     *schemas.Catalog
	loc     *time.Location
	by      map[string]bool
	buckets bool // rows carry a bucket (grouped by month, day or hour)
	groups  map[UsageGroup]*groupSum
	rep     *UsageReport
	total   [2]decimal.Decimal // exact: cost and idle cost
	// months, days and hours name the local month, day or hour of a bucket
	// start, once per bucket rather than once per row.
	months, days, hours map[int64]string
}

type groupSum struct {
	g    UsageGroup
	held []skuHeld // the milliseconds held and idle per SKU that prices them
}

// skuHeld is the time held, and the part of it idle, of one SKU in a group.
type skuHeld struct {
	sku      *schemas.SKU
	ms, idle int64
}

// add adds r to its group under the SKU that prices it (unpriced when no
// SKU of the catalog prices its model and profile).
func (u *usageSums) add(r schemas.UsageRow) error {
	sku, priced := u.cat.ResolveSKU(r.GPUModel, r.Profile)
	k := u.groupOf(r, sku, priced)
	a := u.groups[k]
	if a == nil {
		a = &groupSum{g: k}
		u.groups[k] = a
	}
	a.g.HeldSeconds += r.HeldMS
	a.g.IdleSeconds += r.IdleMS
	if priced {
		a.addHeld(sku, r.HeldMS, r.IdleMS)
	} else {
		u.rep.UnpricedSeconds += r.HeldMS
	}
	u.rep.Total.HeldSeconds += r.HeldMS
	u.rep.Total.IdleSeconds += r.IdleMS
	return nil
}

// addHeld adds ms held, idle of them, to the time of sku (a group has one
// SKU or a few).
func (a *groupSum) addHeld(sku *schemas.SKU, ms, idle int64) {
	for i := range a.held {
		if a.held[i].sku == sku {
			a.held[i].ms += ms
			a.held[i].idle += idle
			return
		}
	}
	a.held = append(a.held, skuHeld{sku: sku, ms: ms, idle: idle})
}

// cost is the group's exact cost and idle cost: per SKU, its hourly price
// times the hours held, and times the hours idle (sums of products, exact in
// any order; one division per SKU). The one place usage is priced.
func (a *groupSum) cost() (cost, idle decimal.Decimal) {
	hour := decimal.NewFromInt(3_600_000)
	for _, h := range a.held {
		cost = cost.Add(h.sku.HourlyPrice.Mul(decimal.NewFromInt(h.ms)).Div(hour))
		idle = idle.Add(h.sku.HourlyPrice.Mul(decimal.NewFromInt(h.idle)).Div(hour))
	}
	return cost, idle
}

// groupOf is the group of r: the fields grouped by, its bucket as a local
// month, day or hour.
func (u *usageSums) groupOf(r schemas.UsageRow, sku *schemas.SKU, priced bool) UsageGroup {
	var k UsageGroup
	if u.by[ByProject] {
		k.Project = r.Project
	}
	if u.by[ByUser] {
		k.User = r.User
	}
	if u.by[ByInstance] {
		k.InstanceID = r.InstanceID
	}
	if u.by[ByNode] {
		k.Node = r.Node
	}
	if u.by[BySKU] && priced {
		k.SKU = sku.ID
	}
	if u.buckets {
		if u.by[ByMonth] {
			k.Month = u.bucketName(u.months, r.BucketMS, func(t time.Time) string { return t.Format("2006-01") })
		}
		if u.by[ByDay] {
			k.Day = u.bucketName(u.days, r.BucketMS, func(t time.Time) string { return t.Format(time.DateOnly) })
		}
		if u.by[ByHour] {
			k.Hour = u.bucketName(u.hours, r.BucketMS, func(t time.Time) string {
				return t.Truncate(0).Add(-time.Duration(t.Minute())*time.Minute - time.Duration(t.Second())*time.Second).Format(time.RFC3339)
			})
		}
	}
	return k
}

// bucketName names the bucket starting at ms by name, in the report's zone,
// remembering it in names.
func (u *usageSums) bucketName(names map[int64]string, ms int64, name func(time.Time) string) string {
	if n, ok := names[ms]; ok {
		return n
	}
	n := name(time.UnixMilli(ms).In(u.loc))
	names[ms] = n
	return n
}

// report turns the sums into seconds, rounds each cost once and sorts the
// rows.
func (u *usageSums) report() *UsageReport {
	rep := u.rep
	for _, a := range u.groups {
		cost, idle := a.cost()
		u.total[0], u.total[1] = u.total[0].Add(cost), u.total[1].Add(idle)
		a.g.HeldSeconds /= 1000
		a.g.IdleSeconds /= 1000
		a.g.Cost, a.g.IdleCost = money(cost), money(idle)
		SetEfficiency(&a.g)
		rep.Rows = append(rep.Rows, a.g)
	}
	rep.Total.HeldSeconds /= 1000
	rep.Total.IdleSeconds /= 1000
	rep.UnpricedSeconds /= 1000
	rep.Total.Cost, rep.Total.IdleCost = money(u.total[0]), money(u.total[1])
	SetEfficiency(&rep.Total)
	slices.SortFunc(rep.Rows, compareGroups)
	return rep
}

// SetEfficiency sets g's busy seconds and efficiency from its held and idle
// seconds: the one place they are computed.
func SetEfficiency(g *UsageGroup) {
	g.BusySeconds = g.HeldSeconds - g.IdleSeconds
	g.Efficiency = Percent(g.BusySeconds, g.HeldSeconds)
}

// Percent is part ÷ whole as a percent with one decimal, rounded half up
// exactly in integers ("81.3", "100.0"); empty when whole is not positive.
func Percent(part, whole int64) string {
	if whole <= 0 {
		return ""
	}
	neg := part < 0
	if neg {
		part = -part
	}
	tenths := (part*2000 + whole) / (2 * whole)
	s := fmt.Sprintf("%d.%d", tenths/10, tenths%10)
	if neg && tenths > 0 {
		s = "-" + s
	}
	return s
}

// money is an exact amount rounded once to the cent.
func money(d decimal.Decimal) billing.Money { return billing.Money{Decimal: billing.RoundMoney(d)} }

// compareGroups orders the rows of a report: by project, user, sku,
// instance, node, month, day, hour.
func compareGroups(a, b UsageGroup) int {
	return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(a.User, b.User), cmp.Compare(a.SKU, b.SKU),
		cmp.Compare(a.InstanceID, b.InstanceID), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Month, b.Month),
		cmp.Compare(a.Day, b.Day), cmp.Compare(a.Hour, b.Hour))
}
