package billing

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/schemas"
)

// ShareSeparator separates the card from the rest of a share's instance id:
// the collector names the share of container C of pod P in namespace N on
// card G "G/share/N/P/C" (docs/collector.md), so the shares of one card are
// found by their ids.
const ShareSeparator = "/share/"

// CardOfShare is the card a share's instance id names, when it names one.
func CardOfShare(instanceID string) (string, bool) {
	card, _, ok := strings.Cut(instanceID, ShareSeparator)
	return card, ok && card != ""
}

// Oversubscription is a card whose shares, held at the same time, added up to
// more than the whole card on a basis (memory or compute): a scheduler that
// over-commits (HAMi can), or an attribution fault. Each share is still
// billed for its own occupancy, as every instance is (rule 11); the report
// says that the card was sold more than once over.
type Oversubscription struct {
	GPU   string             // the card, from the shares' instance ids
	Basis schemas.ShareBasis // memory or cores
	// Peak is the largest sum of the card's shares held at once, as a fraction
	// of the card (1.25 is 125 %).
	Peak decimal.Decimal
	// OverMS is the time inside the period during which the sum was above 1,
	// on the occupancy as sampled; First and Last bound it, Unix ms.
	OverMS      int64
	First, Last int64
	// Instances are the shares held while the sum was above 1, sorted; Holders
	// their distinct holders, sorted (in a statement, only the user's, the
	// others counted in OtherHolders).
	Instances    []string
	Holders      []Holder
	OtherHolders int
}

// sharePiece is one piece of a share's occupancy inside the period, with
// the share its key's profile states.
type sharePiece struct {
	inst       int // index in the card's instances
	share      schemas.Share
	start, end int64
}

// cardShares are the shares seen on one card: their instances and holders,
// and the pieces of their occupancy.
type cardShares struct {
	insts   []string
	holders map[string][]Holder
	pieces  []sharePiece
}

// oversubscriptions finds, for every card with two or more shares, the time
// their shares added up to more than the card, on each basis.
func (a *Accumulator) oversubscriptions() []Oversubscription {
	cards := map[string]*cardShares{}
	for k, st := range a.keys {
		card, ok := CardOfShare(k.InstanceID)
		if !ok {
			continue
		}
		share, ok := schemas.ParseShareProfile(k.Profile)
		if !ok {
			continue
		}
		c := cards[card]
		if c == nil {
			c = &cardShares{holders: map[string][]Holder{}}
			cards[card] = c
		}
		c.add(k, share, st.occ.Clip(a.p0, a.p1))
	}
	var out []Oversubscription
	for card, c := range cards {
		if len(c.insts) < 2 {
			continue
		}
		for _, b := range []schemas.ShareBasis{schemas.ShareByMemory, schemas.ShareByCores} {
			if o, ok := c.sweep(b); ok {
				o.GPU = card
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(x, y Oversubscription) int {
		return cmp.Or(cmp.Compare(x.GPU, y.GPU), cmp.Compare(x.Basis, y.Basis))
	})
	return out
}

// add records key k's share and occupancy pieces on the card.
func (c *cardShares) add(k schemas.Key, share schemas.Share, pieces []Interval) {
	idx := slices.Index(c.insts, k.InstanceID)
	if idx < 0 {
		idx = len(c.insts)
		c.insts = append(c.insts, k.InstanceID)
	}
	if h := (Holder{k.Project, k.User}); !slices.Contains(c.holders[k.InstanceID], h) {
		c.holders[k.InstanceID] = append(c.holders[k.InstanceID], h)
	}
	for _, p := range pieces {
		c.pieces = append(c.pieces, sharePiece{idx, share, p.Start, p.End})
	}
}

// sweep adds up the card's shares on basis b over time, one pass over the
// pieces' ends in time order. An instance counts once however many of its keys
// hold it at that time (a holder conflict, rule 10), with the largest share
// they state.
func (c *cardShares) sweep(b schemas.ShareBasis) (Oversubscription, bool) {
	type edge struct {
		t    int64
		inst int
		f    decimal.Decimal
		d    int
	}
	edges := make([]edge, 0, 2*len(c.pieces))
	for _, p := range c.pieces {
		f, _ := p.share.By(b)
		edges = append(edges, edge{p.start, p.inst, f, +1}, edge{p.end, p.inst, f, -1})
	}
	slices.SortFunc(edges, func(x, y edge) int { return cmp.Compare(x.t, y.t) })
	o := Oversubscription{Basis: b, Peak: decimal.Zero}
	one, sum := decimal.NewFromInt(1), decimal.Zero
	active := make([][]decimal.Decimal, len(c.insts)) // the shares each instance is held with now
	took := make([]bool, len(c.insts))
	for i := 0; i < len(edges); {
		t := edges[i].t
		for ; i < len(edges) && edges[i].t == t; i++ {
			e := edges[i]
			sum = sum.Sub(largest(active[e.inst]))
			if e.d > 0 {
				active[e.inst] = append(active[e.inst], e.f)
			} else if j := slices.IndexFunc(active[e.inst], e.f.Equal); j >= 0 {
				active[e.inst] = slices.Delete(active[e.inst], j, j+1)
			}
			sum = sum.Add(largest(active[e.inst]))
		}
		if i == len(edges) || sum.LessThanOrEqual(one) {
			continue
		}
		o.Peak = decimal.Max(o.Peak, sum)
		if o.OverMS == 0 {
			o.First = t
		}
		o.OverMS += edges[i].t - t
		o.Last = edges[i].t
		for inst, fs := range active {
			took[inst] = took[inst] || len(fs) > 0
		}
	}
	if o.OverMS == 0 {
		return Oversubscription{}, false
	}
	for inst, ok := range took {
		if !ok {
			continue
		}
		o.Instances = append(o.Instances, c.insts[inst])
		for _, h := range c.holders[c.insts[inst]] {
			if !slices.Contains(o.Holders, h) {
				o.Holders = append(o.Holders, h)
			}
		}
	}
	slices.Sort(o.Instances)
	slices.SortFunc(o.Holders, func(x, y Holder) int { return cmp.Compare(x.String(), y.String()) })
	return o, true
}

// largest is the largest of fs, zero for none.
func largest(fs []decimal.Decimal) decimal.Decimal {
	m := decimal.Zero
	for _, f := range fs {
		m = decimal.Max(m, f)
	}
	return m
}

// ForUser is the over-subscription as user's statement shows it: only when
// user held one of the shares, the other holders counted, not named, and the
// other shares' ids left out.
func (o *Oversubscription) ForUser(user string) (Oversubscription, bool) {
	u := *o
	u.Holders = nil
	for _, h := range o.Holders {
		if h.User == user {
			u.Holders = append(u.Holders, h)
		}
	}
	if len(u.Holders) == 0 {
		return Oversubscription{}, false
	}
	u.OtherHolders = o.OtherHolders + len(o.Holders) - len(u.Holders)
	u.Instances = nil
	return u, true
}

// Message is the over-subscription's warning text. Times are shown in loc.
func (o *Oversubscription) Message(loc *time.Location) string {
	basis := map[schemas.ShareBasis]string{schemas.ShareByMemory: "memory (显存)", schemas.ShareByCores: "compute (算力)"}[o.Basis]
	holders := make([]string, 0, len(o.Holders))
	for _, h := range o.Holders {
		holders = append(holders, h.String())
	}
	who := strings.Join(holders, ", ")
	if o.OtherHolders > 0 {
		who += fmt.Sprintf(" and %d other %s", o.OtherHolders, plural(o.OtherHolders, "holder", "holders"))
	}
	return fmt.Sprintf("card %q: its shares' %s added up to %s %% of the card (held by %s) for %s s, first at %s, last until %s (%s): "+
		"each share is billed for its own time, check the scheduler's over-commit (同一张卡上的切片合计超过整卡，各切片各自计费，请核查调度超配)",
		o.GPU, basis, o.Peak.Shift(2).String(), who, FormatSeconds(o.OverMS), formatLocal(o.First, loc), formatLocal(o.Last, loc), loc)
}
