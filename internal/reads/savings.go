package reads

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/schemas"
)

// SavingsHorizon bounds what one release is taken to have saved: at most
// this long after it (see Released).
const SavingsHorizon = 30 * 24 * time.Hour

// SavingsAssumption states, in the API's words, what a release is taken to
// have saved; the pages and exports show it beside the figures.
const SavingsAssumption = "a released instance would otherwise have stayed held, and idle, until its holder's next holding " +
	"(the first holding of theirs, on any instance, that began after the release), at most 30 days and never past now; " +
	"priced at the released instance's SKU list price"

// SavingsAssumptionZh is SavingsAssumption in Chinese, for the documents
// written in Chinese (the review PDF).
const SavingsAssumptionZh = "若未释放，该实例会一直被占用且空闲，直到持有人的下一次占用（释放之后在任何实例上开始的第一次占用），" +
	"最多 30 天，且不超过当前时间；按被释放实例的 SKU 目录价计"

// Released is a release that was carried out (a done release, not a dry
// run), as AddSavings reads it: what was released, on which node, whose
// holding it ended and when.
//
// What a release saved is the time from At until the holder's next holding
// (the first occupancy interval of the same user — of the same project when
// the holding had no user — on any instance, that began after At), at most
// SavingsHorizon and never past now, priced at the released instance's SKU
// list price: had nobody released it, the idle holding would have gone on
// until its holder came back. Holdings of the holder already running at At
// (other instances held at the same time, or the released instance's own
// last samples) are not a return: only a holding that starts after At is.
type Released struct {
	InstanceID, Node, Project, User string
	At                              time.Time
}

// savedPiece is part of one release's saved time inside the report's range
// (and one bucket of it), with the key of the instance it released.
type savedPiece struct {
	row      schemas.UsageRow // key fields, node and bucket; HeldMS is the saved ms
	priced   bool
	released Released
}

// AddSavings returns a copy of rep (a report of Usage for q; reports may be
// shared, UsageCache) with the time and money the releases saved
// (SavedSeconds, SavedCost) added to its groups and total: each release's
// saved time (Released) clipped to q's range and to now, split into q's
// groups like held time (a group with savings and no held time is added),
// priced per group and SKU, rounded once. Releases outside q's filters are
// left out. src reads the holders' occupancy to find their next holdings.
func AddSavings(ctx context.Context, src KeyedRuns, cat *schemas.Catalog, q UsageQuery, rep *UsageReport, rels []Released, now time.Time) (*UsageReport, error) {
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
	end := min(q.To.UnixMilli(), now.UnixMilli())
	rels = releasesInScope(rels, rq, end)
	pieces, err := savedPieces(ctx, src, cat, rq, rels, end)
	if err != nil {
		return nil, fmt.Errorf("usage: savings: %w", err)
	}
	sums := &usageSums{cat: cat, loc: loc, by: by, buckets: rq.BucketMS > 0, groups: map[UsageGroup]*groupSum{},
		months: map[int64]string{}, days: map[int64]string{}, hours: map[int64]string{}, rep: rep}
	return sums.withSavings(rep, pieces), nil
}

// releasesInScope keeps the releases that q's project, user and node
// filters select and whose saved time can reach into [FromMS, end).
func releasesInScope(rels []Released, rq schemas.UsageRowQuery, end int64) []Released {
	var out []Released
	for _, r := range rels {
		at := r.At.UnixMilli()
		if at >= end || at+SavingsHorizon.Milliseconds() <= rq.FromMS {
			continue
		}
		if !inList(rq.Projects, r.Project) || !inList(rq.Users, r.User) || !inList(rq.Nodes, r.Node) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// holder is whose return ends a release's savings: the user, or the
// project for a holding without a user.
type holder struct{ project, user string }

func holderOf(r Released) holder {
	if r.User != "" {
		return holder{user: r.User}
	}
	return holder{project: r.Project}
}

func holderOfKey(k schemas.Key) holder {
	if k.User != "" {
		return holder{user: k.User}
	}
	return holder{project: k.Project}
}

// keyIval is one holding: a key's union of touching runs.
type keyIval struct {
	key  schemas.Key
	s, e int64
}

// savedPieces finds each release's saved time: the holders' holdings around
// and after the releases, read in one query per kind of holder.
func savedPieces(ctx context.Context, src KeyedRuns, cat *schemas.Catalog, rq schemas.UsageRowQuery, rels []Released, end int64) ([]savedPiece, error) {
	if len(rels) == 0 {
		return nil, nil
	}
	holdings, err := holdingsOf(ctx, src, rels, end)
	if err != nil {
		return nil, err
	}
	var out []savedPiece
	for _, r := range rels {
		hs := holdings[holderOf(r)]
		key, found := releasedKey(hs, r)
		at := r.At.UnixMilli()
		stop := min(end, at+SavingsHorizon.Milliseconds(), nextHolding(hs, at))
		from := max(at, rq.FromMS)
		if stop <= from {
			continue
		}
		sku, priced := cat.ResolveSKU(key.GPUModel, key.Profile)
		if !found {
			priced = false
		}
		if rq.Models != nil && (!priced || !slices.Contains(rq.Models, [2]string{sku.GPUModel, sku.Profile})) {
			continue
		}
		row := schemas.UsageRow{Project: r.Project, User: r.User, InstanceID: r.InstanceID, Node: r.Node,
			GPUModel: key.GPUModel, Profile: key.Profile}
		out = appendBuckets(out, savedPiece{row: row, priced: priced, released: r}, from, stop, rq)
	}
	return out, nil
}

// holdingsOf reads the occupancy of the releases' holders from an hour
// before the first release to end, as holdings per holder.
func holdingsOf(ctx context.Context, src KeyedRuns, rels []Released, end int64) (map[holder][]keyIval, error) {
	var users, projects []string
	lo := end
	for _, r := range rels {
		lo = min(lo, r.At.Add(-time.Hour).UnixMilli())
		if h := holderOf(r); h.user != "" {
			users = append(users, h.user)
		} else {
			projects = append(projects, h.project)
		}
	}
	byKey := map[schemas.Key][]schemas.Run{}
	collect := func(rs []schemas.Run) error {
		for _, r := range rs {
			byKey[r.Key] = append(byKey[r.Key], r)
		}
		return nil
	}
	const chunk = 500 // values per query
	read := func(list []string, query func([]string) schemas.UsageRowQuery) error {
		for i := 0; i < len(list); i += chunk {
			if err := src.OccupancyOf(ctx, query(list[i:min(i+chunk, len(list))]), lo, end, collect); err != nil {
				return err
			}
		}
		return nil
	}
	if err := read(uniq(users), func(us []string) schemas.UsageRowQuery { return schemas.UsageRowQuery{Users: us} }); err != nil {
		return nil, err
	}
	err := read(uniq(projects), func(ps []string) schemas.UsageRowQuery {
		return schemas.UsageRowQuery{Projects: ps, Users: []string{""}}
	})
	if err != nil {
		return nil, err
	}
	out := map[holder][]keyIval{}
	for k, rs := range byKey {
		for _, iv := range union(rs) {
			h := holderOfKey(k)
			out[h] = append(out[h], keyIval{key: k, s: iv.StartMS, e: iv.EndMS})
		}
	}
	return out, nil
}

func uniq(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// releasedKey is the key of the holding r released: the holding of r's
// instance and holder that began last at or before r.At.
func releasedKey(hs []keyIval, r Released) (schemas.Key, bool) {
	var best *keyIval
	at := r.At.UnixMilli()
	for i := range hs {
		h := &hs[i]
		if h.key.InstanceID != r.InstanceID || h.key.Project != r.Project || h.key.User != r.User || h.s > at {
			continue
		}
		if best == nil || h.s > best.s {
			best = h
		}
	}
	if best == nil {
		return schemas.Key{Project: r.Project, User: r.User, InstanceID: r.InstanceID}, false
	}
	return best.key, true
}

// nextHolding is the start of the first holding in hs that began after at
// (math.MaxInt64 when none did).
func nextHolding(hs []keyIval, at int64) int64 {
	next := int64(1<<63 - 1)
	for _, h := range hs {
		if h.s > at {
			next = min(next, h.s)
		}
	}
	return next
}

// appendBuckets appends p's time [from, to), split at rq's bucket
// boundaries when it groups by time.
func appendBuckets(out []savedPiece, p savedPiece, from, to int64, rq schemas.UsageRowQuery) []savedPiece {
	if rq.BucketMS <= 0 {
		p.row.HeldMS = to - from
		return append(out, p)
	}
	for s := from; s < to; {
		b := s - mod(s-rq.BucketOffsetMS, rq.BucketMS)
		e := min(to, b+rq.BucketMS)
		q := p
		q.row.BucketMS, q.row.HeldMS = b, e-s
		out = append(out, q)
		s = e
	}
	return out
}

// withSavings is a copy of rep with the pieces' time and money in its
// groups (u.groups is empty: it sums the savings alone).
func (u *usageSums) withSavings(rep *UsageReport, pieces []savedPiece) *UsageReport {
	for _, p := range pieces {
		sku, _ := u.cat.ResolveSKU(p.row.GPUModel, p.row.Profile)
		k := u.groupOf(p.row, sku, p.priced)
		a := u.groups[k]
		if a == nil {
			a = &groupSum{g: k}
			u.groups[k] = a
		}
		a.g.SavedSeconds += p.row.HeldMS
		if p.priced {
			a.addHeld(sku, p.row.HeldMS, 0)
		}
	}
	out := *rep
	out.Rows = slices.Clone(rep.Rows)
	out.SavingsHorizonSeconds, out.SavingsAssumption = int64(SavingsHorizon/time.Second), SavingsAssumption
	index := map[UsageGroup]int{}
	for i, g := range out.Rows {
		index[groupKey(g)] = i
	}
	var total decimal.Decimal
	var totalMS int64
	for k, a := range u.groups {
		saved, _ := a.cost()
		total = total.Add(saved)
		totalMS += a.g.SavedSeconds
		i, ok := index[k]
		if !ok {
			g := k
			SetEfficiency(&g)
			out.Rows = append(out.Rows, g)
			i = len(out.Rows) - 1
		}
		out.Rows[i].SavedSeconds = a.g.SavedSeconds / 1000
		out.Rows[i].SavedCost = money(saved)
	}
	out.Total.SavedSeconds, out.Total.SavedCost = totalMS/1000, money(total)
	slices.SortFunc(out.Rows, compareGroups)
	return &out
}

// groupKey is g's group fields alone (the key groupOf gives its rows).
func groupKey(g UsageGroup) UsageGroup {
	return UsageGroup{Project: g.Project, User: g.User, SKU: g.SKU, InstanceID: g.InstanceID, Node: g.Node,
		Month: g.Month, Day: g.Day, Hour: g.Hour}
}
