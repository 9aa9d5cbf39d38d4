// Package export is the invoice document and its renderings. A Document is one
// project's invoice for one period (or one student's statement derived from it),
// built from a billing result; it is what the ledger stores, as the exact bytes
// Marshal returns, and every export (CSV, XLSX, PDF, JSON) is rendered from
// Documents only, so that the exports of a finalized invoice never change.
package export

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
	"github.com/shopspring/decimal"
)

// Schema names the document format; Parse rejects any other.
const Schema = "cardhour.invoice.v1"

// Meta is what a document records besides the billing result: the catalog
// version it was priced with, the data cut-off (usage received up to this time
// is included) and when it was generated.
type Meta struct {
	CatalogVersion int64
	DataCutoff     time.Time
	GeneratedAt    time.Time
}

// Document is one project's invoice for one period, or, when User is set, one
// student's statement derived from it. Amounts are decimals, written as decimal
// strings with two decimals (prices keep the catalog's digits); times are RFC 3339
// in the catalog time zone.
type Document struct {
	Schema string `json:"schema"`
	// Number is the invoice number, empty in drafts; IssuedAt is nil in drafts.
	Number   string     `json:"number,omitempty"`
	IssuedAt *time.Time `json:"issued_at,omitempty"`
	// User is set in a statement: the student it is for.
	User           string          `json:"user,omitempty"`
	Project        string          `json:"project"`
	Name           string          `json:"name,omitempty"`
	Funding        string          `json:"funding,omitempty"`
	InCatalog      bool            `json:"in_catalog"`
	Period         string          `json:"period"` // YYYY-MM
	Timezone       string          `json:"timezone"`
	Currency       string          `json:"currency"`
	CatalogVersion int64           `json:"catalog_version"`
	DataCutoff     time.Time       `json:"data_cutoff"`
	GeneratedAt    time.Time       `json:"generated_at"`
	Lines          []Line          `json:"lines"`
	Unpriced       []Unpriced      `json:"unpriced"`
	Students       []StudentTotal  `json:"students"`
	Total          decimal.Decimal `json:"total"`
	Warnings       []Warning       `json:"warnings"`
	DataQuality    *DataQuality    `json:"data_quality,omitempty"`
	// Releases are the idle releases whose idle streak overlaps the period
	// (absent when there were none, and in documents made before they were
	// recorded). They change no amount: the lines bill what was held.
	Releases []Release `json:"releases,omitempty"`
	// CreditFor is set on a credit note: the number of the invoice it voids.
	// A credit note's lines and total are that invoice's, negated.
	CreditFor string `json:"credit_for,omitempty"`
	// Void marks a rendering of a voided invoice. It is never stored (the
	// frozen document keeps its bytes): the caller sets it before rendering a
	// voided invoice's exports, which then carry 已作废 / VOID and the credit
	// note's number.
	Void *VoidMark `json:"-"`
}

// VoidMark is what a voided invoice's later exports say of the voiding.
type VoidMark struct {
	CreditNote string    // the credit note's number
	VoidedAt   time.Time // when the invoice was voided
	Reason     string
}

// IsDraft reports whether the document is a draft: it has no number yet.
// Drafts' exports carry 草稿 / DRAFT on every page or sheet.
func (d *Document) IsDraft() bool { return d.Number == "" }

// Release is an idle release of one of the project's instances: "done"
// (Action says what was done; the usage stopped there) or "failed" (the
// instance stayed held and its idle time is billed; Failure says why).
type Release struct {
	InstanceID string                `json:"instance_id"`
	Node       string                `json:"node,omitempty"`
	User       string                `json:"user,omitempty"`
	IdleSince  time.Time             `json:"idle_since"`
	At         time.Time             `json:"at"`
	Status     billing.ReleaseStatus `json:"status"` // billing.ReleaseDone or billing.ReleaseFailed
	Action     string                `json:"action,omitempty"`
	Failure    string                `json:"failure,omitempty"`
}

// Line is one invoice line: the usage of one (user, SKU), or one reservation.
type Line struct {
	Kind string `json:"kind"` // billing.KindUsage or billing.KindReservation
	User string `json:"user"`
	SKU  string `json:"sku"`
	// Usage lines: sessions, time used (whole seconds, and exactly in ms), the
	// part covered by reservations, the idle part, and the seconds billed.
	Sessions      int   `json:"sessions"`
	UsedSeconds   int64 `json:"used_seconds"`
	BilledSeconds int64 `json:"billed_seconds"`
	UsedMS        int64 `json:"used_ms"`
	CoveredMS     int64 `json:"covered_ms"`
	IdleMS        int64 `json:"idle_ms"`
	// UnitPrice is the hourly price of a usage line, the monthly price of a
	// reservation line.
	UnitPrice decimal.Decimal `json:"unit_price"`
	Amount    decimal.Decimal `json:"amount"`
	// Reservation lines only.
	Term     string `json:"term,omitempty"`
	Quantity int64  `json:"quantity,omitempty"`
	Billing  string `json:"billing,omitempty"`
	Start    string `json:"start,omitempty"` // YYYY-MM
	// What a reservation line's amount is made of, so that it can be checked
	// from the document alone (absent from documents made before they were
	// recorded, which keep their bytes): MonthsCharged, the months of the
	// term this invoice charges (1 when paid monthly, the term's months on an
	// upfront reservation's first invoice, absent on its later ones);
	// DiscountRate, the fraction off the monthly price applied (the term's
	// discount or the SKU's override); ListAmount, unit price × months
	// charged × quantity; DiscountAmount, list amount − amount; PrepaidIn, on
	// an upfront reservation's invoices after its first month (whose amounts
	// are 0.00), the period (YYYY-MM) whose invoice charged the whole term.
	MonthsCharged  int              `json:"months_charged,omitempty"`
	DiscountRate   *decimal.Decimal `json:"discount_rate,omitempty"`
	ListAmount     *decimal.Decimal `json:"list_amount,omitempty"`
	DiscountAmount *decimal.Decimal `json:"discount_amount,omitempty"`
	PrepaidIn      string           `json:"prepaid_in,omitempty"`
}

// HasDiscount reports whether a reservation line records its discount (a
// document made since the discount was recorded).
func (l *Line) HasDiscount() bool {
	return l.Kind == billing.KindReservation && l.DiscountRate != nil && l.ListAmount != nil && l.DiscountAmount != nil
}

// reservationLine is the document's reservation line for a billed one: the
// list amount is billing.ReservationAmount without discount (the rounding
// billing does, where the amount was computed), the discount amount the
// difference of two rounded amounts (exact).
func reservationLine(l *billing.Line, period string) Line {
	rate := l.Discount
	list := billing.ReservationAmount(l.UnitPrice, l.Months, decimal.Zero, l.Quantity)
	off := list.Sub(l.Amount)
	dl := Line{Kind: l.Kind, User: l.User, SKU: l.SKU, UnitPrice: l.UnitPrice, Amount: l.Amount,
		Term: string(l.Term), Quantity: l.Quantity, Billing: l.Billing, Start: l.Start,
		MonthsCharged: l.Months, DiscountRate: &rate, ListAmount: &list, DiscountAmount: &off}
	if l.Months == 0 && l.Start != period {
		dl.PrepaidIn = l.Start
	}
	return dl
}

// formatRate writes a discount rate as a percentage ("20", "5", "12.5"),
// for the renderings; the document keeps the fraction.
func formatRate(rate decimal.Decimal) string {
	return rate.Shift(2).String()
}

// formatZhe writes a discount rate as the Chinese 折 that pays the rest:
// 0.20 off is 8 折, 0.05 off is 95 折, 0.125 off is 87.5 折 (a rate of 0 is
// written as such by the caller, not as 10 折).
func formatZhe(rate decimal.Decimal) string {
	rest := decimal.NewFromInt(1).Sub(rate).Shift(2) // percent paid: 80, 95
	if rest.Mod(decimal.NewFromInt(10)).IsZero() {
		return rest.Shift(-1).String()
	}
	return rest.String()
}

// Unpriced is usage whose (GPU model, profile) matches no SKU: reported, not priced.
type Unpriced struct {
	User     string `json:"user"`
	GPUModel string `json:"gpu_model"`
	Profile  string `json:"profile"`
	Sessions int    `json:"sessions"`
	UsedMS   int64  `json:"used_ms"`
	IdleMS   int64  `json:"idle_ms"`
}

// StudentTotal is one student's subtotal on an invoice: the sum of their usage
// lines. Name is empty until the roster fills it in (SetNames).
type StudentTotal struct {
	User     string          `json:"user"`
	Name     string          `json:"name,omitempty"`
	Sessions int             `json:"sessions"`
	Total    decimal.Decimal `json:"total"`
}

// Warning is one warning with what it is about (see billing.Warning).
type Warning struct {
	Code    string   `json:"code"`
	Project string   `json:"project,omitempty"`
	Users   []string `json:"users,omitempty"`
	Message string   `json:"message"`
}

// DataQuality is what the input looked like beyond what the invoice bills.
type DataQuality struct {
	// SkippedLines counts invalid input lines skipped and not billed (for the
	// whole period, not only this project).
	SkippedLines int64 `json:"skipped_lines"`
	// Conflicts are the holder conflicts of this project's students, each as that
	// student's statement shows it: their own holders named, others counted.
	Conflicts []Conflict `json:"conflicts"`
	// Oversubscribed are the over-subscribed cards (rule 11) on which this
	// project's holders held a share, each as the project sees it: its holders
	// and shares named, the other holders counted. Absent when there are none
	// (and in documents made before they were recorded, which keep their bytes).
	Oversubscribed []Oversubscription `json:"oversubscribed,omitempty"`
}

// Oversubscription is a card whose shares, held at the same time, added up to
// more than the whole card on a basis (see billing.Oversubscription). The
// amounts are not changed: each share is billed for its own time.
type Oversubscription struct {
	GPU   string `json:"gpu"`
	Basis string `json:"basis"` // memory or cores
	// Peak is the largest sum of the card's shares held at once, a fraction
	// of the card ("1.25" is 125 %), as a decimal string.
	Peak decimal.Decimal `json:"peak"`
	// OverMS is the time above the whole card inside the period; First and
	// Last bound it.
	OverMS int64     `json:"over_ms"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
	// Instances are the project's shares held while the sum was above the
	// card (a statement leaves them out); Holders the project's holders (in a
	// statement, the student alone), the others counted in OtherHolders.
	Instances    []string `json:"instances"`
	Holders      []Holder `json:"holders"`
	OtherHolders int      `json:"other_holders"`
}

// Conflict is an instance held by more than one holder, or as more than one kind,
// at the same time.
type Conflict struct {
	InstanceID   string    `json:"instance_id"`
	User         string    `json:"user"` // the student this view of the conflict is for
	Holders      []Holder  `json:"holders"`
	OtherHolders int       `json:"other_holders"`
	Kinds        []Kind    `json:"kinds"`
	OverlapMS    int64     `json:"overlap_ms"`
	First        time.Time `json:"first"`
	Last         time.Time `json:"last"`
}

// Holder is a (project, user) that held an instance.
type Holder struct {
	Project string `json:"project"`
	User    string `json:"user"`
}

// Kind is a (GPU model, profile) an instance was held as.
type Kind struct {
	GPUModel string `json:"gpu_model"`
	Profile  string `json:"profile"`
}

// Build returns one document per invoice of res, sorted by project. A project's
// document keeps the warnings about that project, about the whole input, and
// those naming only its students; holder conflicts appear once per student of the
// project involved, as that student's statement shows them, so that a project's
// document never names a student of another project.
func Build(res *billing.Result, m Meta) []Document {
	loc := res.Period.Start.Location()
	if loc == nil {
		loc = time.UTC
	}
	docs := make([]Document, 0, len(res.Invoices))
	for i := range res.Invoices {
		inv := &res.Invoices[i]
		d := Document{
			Schema: Schema, Project: inv.Project, Name: inv.Name, Funding: inv.Funding, InCatalog: inv.InCatalog,
			Period: res.Period.String(), Timezone: res.Timezone, Currency: res.Currency,
			CatalogVersion: m.CatalogVersion, DataCutoff: m.DataCutoff.In(loc), GeneratedAt: m.GeneratedAt.In(loc),
			Lines: []Line{}, Unpriced: []Unpriced{}, Students: []StudentTotal{}, Warnings: []Warning{},
			Total:       inv.Total,
			DataQuality: &DataQuality{SkippedLines: res.SkippedLines, Conflicts: []Conflict{}},
		}
		users := map[string]bool{}
		for _, l := range inv.Lines {
			dl := Line{Kind: l.Kind, User: l.User, SKU: l.SKU, UnitPrice: l.UnitPrice, Amount: l.Amount}
			if l.Kind == billing.KindUsage {
				dl.Sessions, dl.UsedSeconds, dl.BilledSeconds = l.Sessions, l.UsedMS/1000, l.BilledSeconds
				dl.UsedMS, dl.CoveredMS, dl.IdleMS = l.UsedMS, l.CoveredMS, l.IdleMS
				users[l.User] = true
			} else {
				dl = reservationLine(&l, res.Period.String())
			}
			d.Lines = append(d.Lines, dl)
		}
		for _, u := range inv.Unpriced {
			d.Unpriced = append(d.Unpriced, Unpriced(u))
			users[u.User] = true
		}
		for _, s := range inv.Sessions {
			users[s.Key.User] = true
		}
		d.Students = studentTotals(d.Lines, d.Unpriced)
		for _, r := range inv.Releases {
			d.Releases = append(d.Releases, Release{InstanceID: r.InstanceID, Node: r.Node, User: r.User,
				IdleSince: r.IdleSince.In(loc), At: r.At.In(loc), Status: r.Status, Action: r.Action, Failure: r.Failure})
		}
		for _, msg := range res.Warnings {
			w := res.WarningFor(msg)
			keep := false
			switch {
			case w.Code == billing.WarnConflict, w.Code == billing.WarnOversubscribed:
				// Added below, as this project sees them.
			case w.Project != "":
				keep = w.Project == inv.Project
			case len(w.Users) > 0:
				keep = !slices.ContainsFunc(w.Users, func(u string) bool { return !users[u] })
			default:
				keep = true
			}
			if keep {
				d.Warnings = append(d.Warnings, warningOf(w))
			}
		}
		d.addConflicts(res, inv.Project, loc)
		d.addOversubscriptions(res, inv, loc)
		d.normalize()
		docs = append(docs, d)
	}
	slices.SortFunc(docs, func(x, y Document) int { return cmp.Compare(x.Project, y.Project) })
	return docs
}

// addConflicts adds the holder conflicts of the project's students, once per
// student, as that student's statement shows it, with a warning each.
func (d *Document) addConflicts(res *billing.Result, project string, loc *time.Location) {
	for ci := range res.Conflicts {
		c := &res.Conflicts[ci]
		var students []string
		for _, h := range c.Holders {
			if h.Project == project {
				students = append(students, h.User)
			}
		}
		slices.Sort(students)
		for _, u := range slices.Compact(students) {
			uc, ok := c.ForUser(u)
			if !ok {
				continue
			}
			d.Warnings = append(d.Warnings, Warning{Code: billing.WarnConflict, Project: project,
				Users: []string{u}, Message: uc.Message(loc)})
			d.DataQuality.Conflicts = append(d.DataQuality.Conflicts, conflictOf(&uc, u, loc))
		}
	}
}

// addOversubscriptions adds the over-subscribed cards on which the
// project's holders held a share, each as the project sees it (forProject),
// with a warning each about the project and the students it names.
func (d *Document) addOversubscriptions(res *billing.Result, inv *billing.Invoice, loc *time.Location) {
	mine := map[string]bool{} // the project's instances
	for _, s := range inv.Sessions {
		mine[s.Key.InstanceID] = true
	}
	for oi := range res.Oversubscribed {
		o, ok := forProject(&res.Oversubscribed[oi], inv.Project, mine)
		if !ok {
			continue
		}
		var users []string
		for _, h := range o.Holders {
			if h.User != "" {
				users = append(users, h.User)
			}
		}
		slices.Sort(users)
		d.Warnings = append(d.Warnings, Warning{Code: billing.WarnOversubscribed, Project: inv.Project,
			Users: slices.Compact(users), Message: o.Message(loc)})
		d.DataQuality.Oversubscribed = append(d.DataQuality.Oversubscribed, oversubscriptionOf(&o, loc))
	}
}

// forProject is o as project's invoice shows it: only when one of its
// holders is the project's, the project's holders named and the others
// counted, the project's shares only (mine: the instances it held).
func forProject(o *billing.Oversubscription, project string, mine map[string]bool) (billing.Oversubscription, bool) {
	p := *o
	p.Holders, p.Instances = nil, nil
	for _, h := range o.Holders {
		if h.Project == project {
			p.Holders = append(p.Holders, h)
		}
	}
	if len(p.Holders) == 0 {
		return billing.Oversubscription{}, false
	}
	p.OtherHolders = o.OtherHolders + len(o.Holders) - len(p.Holders)
	for _, inst := range o.Instances {
		if mine[inst] {
			p.Instances = append(p.Instances, inst)
		}
	}
	return p, true
}

func oversubscriptionOf(o *billing.Oversubscription, loc *time.Location) Oversubscription {
	out := Oversubscription{GPU: o.GPU, Basis: string(o.Basis), Peak: o.Peak, OverMS: o.OverMS,
		First: time.UnixMilli(o.First).In(loc), Last: time.UnixMilli(o.Last).In(loc),
		Instances: slices.Clone(o.Instances), Holders: []Holder{}, OtherHolders: o.OtherHolders}
	if out.Instances == nil {
		out.Instances = []string{}
	}
	for _, h := range o.Holders {
		out.Holders = append(out.Holders, Holder(h))
	}
	return out
}

// engine is the over-subscription as billing states it, for its message.
func (o *Oversubscription) engine() billing.Oversubscription {
	e := billing.Oversubscription{GPU: o.GPU, Basis: schemas.ShareBasis(o.Basis), Peak: o.Peak, OverMS: o.OverMS,
		First: o.First.UnixMilli(), Last: o.Last.UnixMilli(), Instances: slices.Clone(o.Instances),
		OtherHolders: o.OtherHolders}
	for _, h := range o.Holders {
		e.Holders = append(e.Holders, billing.Holder(h))
	}
	return e
}

// forUser is the over-subscription as user's statement shows it: only when
// user is one of its holders, the others counted, no share named.
func (o *Oversubscription) forUser(user string) (Oversubscription, bool) {
	u := *o
	u.Holders, u.Instances = []Holder{}, []string{}
	for _, h := range o.Holders {
		if h.User == user {
			u.Holders = append(u.Holders, h)
		}
	}
	if len(u.Holders) == 0 {
		return Oversubscription{}, false
	}
	u.OtherHolders = o.OtherHolders + len(o.Holders) - len(u.Holders)
	return u, true
}

func warningOf(w billing.Warning) Warning {
	return Warning{Code: w.Code, Project: w.Project, Users: slices.Clone(w.Users), Message: w.Message}
}

func conflictOf(c *billing.Conflict, user string, loc *time.Location) Conflict {
	out := Conflict{InstanceID: c.InstanceID, User: user, Holders: []Holder{}, OtherHolders: c.OtherHolders,
		Kinds: []Kind{}, OverlapMS: c.OverlapMS,
		First: time.UnixMilli(c.First).In(loc), Last: time.UnixMilli(c.Last).In(loc)}
	for _, h := range c.Holders {
		out.Holders = append(out.Holders, Holder(h))
	}
	for _, k := range c.Kinds {
		out.Kinds = append(out.Kinds, Kind(k))
	}
	return out
}

// studentTotals sums the usage lines per user (decimal sums of amounts billing
// already rounded: nothing is rounded here). Users with unpriced usage only get a
// zero total.
func studentTotals(lines []Line, unpriced []Unpriced) []StudentTotal {
	byUser := map[string]*StudentTotal{}
	get := func(u string) *StudentTotal {
		st, ok := byUser[u]
		if !ok {
			st = &StudentTotal{User: u, Total: decimal.Zero}
			byUser[u] = st
		}
		return st
	}
	for _, l := range lines {
		if l.Kind != billing.KindUsage {
			continue
		}
		st := get(l.User)
		st.Sessions += l.Sessions
		st.Total = st.Total.Add(l.Amount)
	}
	for _, u := range unpriced {
		get(u.User)
	}
	out := make([]StudentTotal, 0, len(byUser))
	for _, st := range byUser {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(x, y StudentTotal) int { return cmp.Compare(x.User, y.User) })
	return out
}

// SetNames fills in the students' names (user → name, from the roster); users
// without an entry keep theirs.
func (d *Document) SetNames(names map[string]string) {
	for i := range d.Students {
		if n, ok := names[d.Students[i].User]; ok {
			d.Students[i].Name = n
		}
	}
}

// StudentName returns the name of user on the document, or "".
func (d *Document) StudentName(user string) string {
	for _, st := range d.Students {
		if st.User == user {
			return st.Name
		}
	}
	return ""
}

// studentNames maps user → name for the renderers (StudentName for every line
// would be quadratic in the students of a large project).
func (d *Document) studentNames() map[string]string {
	m := make(map[string]string, len(d.Students))
	for _, st := range d.Students {
		if st.Name != "" {
			m[st.User] = st.Name
		}
	}
	return m
}

// Statement returns user's statement derived from the invoice: only their usage
// lines and unpriced usage (reservations belong to the project), their subtotal as
// the total, and only the warnings billing.Warning.InStatement keeps for them, so
// that it never names another student. The number and issue date stay those of
// the invoice it is derived from.
func (d *Document) Statement(user string) *Document {
	s := *d
	s.User = user
	s.IssuedAt = cloneTime(d.IssuedAt)
	s.Lines, s.Unpriced, s.Students, s.Warnings = []Line{}, []Unpriced{}, []StudentTotal{}, []Warning{}
	s.Total = decimal.Zero
	for _, l := range d.Lines {
		if l.Kind == billing.KindUsage && l.User == user {
			s.Lines = append(s.Lines, l)
			s.Total = s.Total.Add(l.Amount)
		}
	}
	for _, u := range d.Unpriced {
		if u.User == user {
			s.Unpriced = append(s.Unpriced, u)
		}
	}
	for _, st := range d.Students {
		if st.User == user {
			s.Students = append(s.Students, st)
		}
	}
	s.Releases = nil
	for _, r := range d.Releases {
		if r.User == user {
			s.Releases = append(s.Releases, r)
		}
	}
	has := len(s.Lines) > 0 || len(s.Unpriced) > 0
	rebuilt := d.DataQuality != nil && len(d.DataQuality.Oversubscribed) > 0 // their warnings are rebuilt for user below
	for _, w := range d.Warnings {
		bw := billing.Warning{Code: w.Code, Project: w.Project, Users: w.Users, Message: w.Message}
		if rebuilt && w.Code == billing.WarnOversubscribed {
			continue
		}
		if bw.InStatement(user, func(p string) bool { return has && p == d.Project }) {
			s.Warnings = append(s.Warnings, cloneWarning(w))
		}
	}
	if !has {
		if p, err := billing.ParsePeriod(d.Period, time.UTC); err == nil {
			s.Warnings = append(s.Warnings, Warning{Code: billing.WarnNoUsage, Users: []string{user},
				Message: billing.NoUsageMessage(p, user)})
		}
	}
	if d.DataQuality != nil {
		dq := &DataQuality{SkippedLines: d.DataQuality.SkippedLines, Conflicts: []Conflict{}}
		for _, c := range d.DataQuality.Conflicts {
			if c.User == user && !slices.ContainsFunc(c.Holders, func(h Holder) bool { return h.User != user }) {
				dq.Conflicts = append(dq.Conflicts, c)
			}
		}
		s.DataQuality = dq
		s.statementOversubscriptions(d.DataQuality.Oversubscribed)
	}
	s.normalize()
	return &s
}

// statementOversubscriptions adds to statement s the over-subscriptions of
// its invoice (all) in which its student held a share, as the student sees
// them, with a warning each, as `cardhour bill --user` words it.
func (d *Document) statementOversubscriptions(all []Oversubscription) {
	loc, err := time.LoadLocation(d.Timezone)
	if err != nil {
		loc = time.UTC
	}
	for i := range all {
		u, ok := all[i].forUser(d.User)
		if !ok {
			continue
		}
		e := u.engine()
		d.DataQuality.Oversubscribed = append(d.DataQuality.Oversubscribed, u)
		d.Warnings = append(d.Warnings, Warning{Code: billing.WarnOversubscribed, Project: d.Project,
			Users: []string{d.User}, Message: e.Message(loc)})
	}
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

func cloneWarning(w Warning) Warning {
	w.Users = slices.Clone(w.Users)
	return w
}

// normalize sorts what has no meaningful order and replaces nil slices by empty
// ones, so that equal documents marshal to equal bytes.
func (d *Document) normalize() {
	if d.Lines == nil {
		d.Lines = []Line{}
	}
	if d.Unpriced == nil {
		d.Unpriced = []Unpriced{}
	}
	if d.Students == nil {
		d.Students = []StudentTotal{}
	}
	if d.Warnings == nil {
		d.Warnings = []Warning{}
	}
	slices.SortStableFunc(d.Lines, compareLines)
	slices.SortStableFunc(d.Unpriced, func(x, y Unpriced) int {
		return cmp.Or(cmp.Compare(x.User, y.User), cmp.Compare(x.GPUModel, y.GPUModel), cmp.Compare(x.Profile, y.Profile))
	})
	slices.SortStableFunc(d.Students, func(x, y StudentTotal) int { return cmp.Compare(x.User, y.User) })
	if len(d.Releases) == 0 {
		d.Releases = nil
	}
	slices.SortStableFunc(d.Releases, func(x, y Release) int {
		return cmp.Or(x.At.Compare(y.At), cmp.Compare(x.InstanceID, y.InstanceID), x.IdleSince.Compare(y.IdleSince))
	})
	for i := range d.Warnings {
		slices.Sort(d.Warnings[i].Users)
	}
	slices.SortStableFunc(d.Warnings, func(x, y Warning) int {
		return cmp.Or(cmp.Compare(x.Message, y.Message), cmp.Compare(x.Code, y.Code), cmp.Compare(x.Project, y.Project))
	})
	d.Warnings = slices.CompactFunc(d.Warnings, func(x, y Warning) bool {
		return x.Message == y.Message && x.Code == y.Code && x.Project == y.Project && slices.Equal(x.Users, y.Users)
	})
	if dq := d.DataQuality; dq != nil {
		if dq.Conflicts == nil {
			dq.Conflicts = []Conflict{}
		}
		slices.SortStableFunc(dq.Conflicts, func(x, y Conflict) int {
			return cmp.Or(cmp.Compare(x.InstanceID, y.InstanceID), cmp.Compare(x.User, y.User), x.First.Compare(y.First))
		})
		if len(dq.Oversubscribed) == 0 {
			dq.Oversubscribed = nil
		}
		for i := range dq.Oversubscribed {
			o := &dq.Oversubscribed[i]
			if o.Instances == nil {
				o.Instances = []string{}
			}
			if o.Holders == nil {
				o.Holders = []Holder{}
			}
		}
		slices.SortStableFunc(dq.Oversubscribed, func(x, y Oversubscription) int {
			return cmp.Or(cmp.Compare(x.GPU, y.GPU), cmp.Compare(x.Basis, y.Basis), x.First.Compare(y.First))
		})
	}
}

// compareLines orders usage lines by user and SKU, then reservations by SKU,
// start, term, billing and quantity.
func compareLines(x, y Line) int {
	rank := func(k string) int {
		if k == billing.KindUsage {
			return 0
		}
		return 1
	}
	return cmp.Or(cmp.Compare(rank(x.Kind), rank(y.Kind)), cmp.Compare(x.Kind, y.Kind),
		cmp.Compare(x.User, y.User), cmp.Compare(x.SKU, y.SKU), cmp.Compare(x.Start, y.Start),
		cmp.Compare(x.Term, y.Term), cmp.Compare(x.Billing, y.Billing), cmp.Compare(x.Quantity, y.Quantity),
		x.Amount.Cmp(y.Amount))
}

// MarshalJSON writes the line's money as decimal strings: the amount with two
// decimals, the price with the catalog's digits (at least two).
func (l Line) MarshalJSON() ([]byte, error) {
	type plain Line
	w := struct {
		plain
		UnitPrice      string `json:"unit_price"`
		Amount         string `json:"amount"`
		DiscountRate   string `json:"discount_rate,omitempty"`
		ListAmount     string `json:"list_amount,omitempty"`
		DiscountAmount string `json:"discount_amount,omitempty"`
	}{plain: plain(l), UnitPrice: billing.FormatPrice(l.UnitPrice), Amount: billing.FormatMoney(l.Amount)}
	if l.DiscountRate != nil {
		w.DiscountRate = billing.FormatPrice(*l.DiscountRate) // a catalog value: its digits, at least two
	}
	if l.ListAmount != nil {
		w.ListAmount = billing.FormatMoney(*l.ListAmount)
	}
	if l.DiscountAmount != nil {
		w.DiscountAmount = billing.FormatMoney(*l.DiscountAmount)
	}
	return json.Marshal(w)
}

// MarshalJSON writes the total as a decimal string with two decimals.
func (s StudentTotal) MarshalJSON() ([]byte, error) {
	type plain StudentTotal
	return json.Marshal(struct {
		plain
		Total string `json:"total"`
	}{plain(s), billing.FormatMoney(s.Total)})
}

// Marshal returns the document's canonical bytes: fields in a fixed order, lists
// sorted where their order carries no meaning, amounts as decimal strings, times
// as RFC 3339 with their offset, two-space indentation and a final newline. The
// same document always gives the same bytes; Parse then Marshal gives them back.
func (d *Document) Marshal() ([]byte, error) {
	c := d.clone()
	c.normalize()
	type plain Document
	wire := struct {
		plain
		Total string `json:"total"`
	}{plain(*c), billing.FormatMoney(c.Total)}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(wire); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (d *Document) clone() *Document {
	c := *d
	c.IssuedAt = cloneTime(d.IssuedAt)
	c.Lines = slices.Clone(d.Lines)
	c.Unpriced = slices.Clone(d.Unpriced)
	c.Students = slices.Clone(d.Students)
	c.Releases = slices.Clone(d.Releases)
	c.Warnings = make([]Warning, len(d.Warnings))
	for i, w := range d.Warnings {
		c.Warnings[i] = cloneWarning(w)
	}
	if d.DataQuality != nil {
		dq := *d.DataQuality
		dq.Conflicts = slices.Clone(dq.Conflicts)
		dq.Oversubscribed = slices.Clone(dq.Oversubscribed)
		for i := range dq.Oversubscribed {
			o := &dq.Oversubscribed[i]
			o.Instances, o.Holders = slices.Clone(o.Instances), slices.Clone(o.Holders)
		}
		c.DataQuality = &dq
	}
	return &c
}

var periodPattern = regexp.MustCompile(`^\d{4}-(0[1-9]|1[0-2])$`)

// Parse reads a document Marshal wrote. It rejects unknown fields, another schema,
// and missing or malformed required values, naming the field.
func Parse(b []byte) (*Document, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d Document
	if err := dec.Decode(&d); err != nil {
		if field := badMoney(b); field != "" {
			return nil, fmt.Errorf("invoice document: %s", field)
		}
		return nil, fmt.Errorf("invoice document: %w", err)
	}
	if dec.More() {
		return nil, errors.New("invoice document: data after the document")
	}
	if field := badMoney(b); field != "" {
		return nil, fmt.Errorf("invoice document: %s", field) // e.g. a number instead of a decimal string
	}
	switch {
	case d.Schema != Schema:
		return nil, fmt.Errorf("invoice document: schema: got %q, want %q", d.Schema, Schema)
	case d.Project == "":
		return nil, errors.New("invoice document: project: missing")
	case !periodPattern.MatchString(d.Period):
		return nil, fmt.Errorf("invoice document: period: %q is not YYYY-MM", d.Period)
	case d.Currency == "":
		return nil, errors.New("invoice document: currency: missing")
	case d.Timezone == "":
		return nil, errors.New("invoice document: timezone: missing")
	case (d.Number == "") != (d.IssuedAt == nil):
		return nil, errors.New("invoice document: number and issued_at: both or neither")
	case d.CreditFor != "" && d.Number == "":
		return nil, errors.New("invoice document: credit_for: a credit note has its own number")
	}
	for i, l := range d.Lines {
		if l.Kind != billing.KindUsage && l.Kind != billing.KindReservation {
			return nil, fmt.Errorf("invoice document: lines[%d].kind: %q is neither %q nor %q",
				i, l.Kind, billing.KindUsage, billing.KindReservation)
		}
		if err := checkDiscount(i, &l); err != nil {
			return nil, err
		}
	}
	for i, r := range d.Releases {
		if r.Status != billing.ReleaseDone && r.Status != billing.ReleaseFailed {
			return nil, fmt.Errorf("invoice document: releases[%d].status: %q is neither %q nor %q", i, r.Status, billing.ReleaseDone, billing.ReleaseFailed)
		}
		if r.InstanceID == "" {
			return nil, fmt.Errorf("invoice document: releases[%d].instance_id: missing", i)
		}
	}
	if err := checkOversubscribed(d.DataQuality); err != nil {
		return nil, err
	}
	d.normalize()
	return &d, nil
}

// checkOversubscribed refuses an over-subscription without its card, on
// another basis than memory or cores, or whose peak is not above the card.
func checkOversubscribed(dq *DataQuality) error {
	if dq == nil {
		return nil
	}
	one := decimal.NewFromInt(1)
	for i, o := range dq.Oversubscribed {
		switch {
		case o.GPU == "":
			return fmt.Errorf("invoice document: data_quality.oversubscribed[%d].gpu: missing", i)
		case o.Basis != string(schemas.ShareByMemory) && o.Basis != string(schemas.ShareByCores):
			return fmt.Errorf("invoice document: data_quality.oversubscribed[%d].basis: %q is neither %q nor %q",
				i, o.Basis, schemas.ShareByMemory, schemas.ShareByCores)
		case !o.Peak.GreaterThan(one):
			return fmt.Errorf("invoice document: data_quality.oversubscribed[%d].peak: %s is not above 1 (the whole card)", i, o.Peak)
		}
	}
	return nil
}

// checkDiscount refuses a line's discount fields that do not add up: on a
// usage line, or given in part, a rate outside [0, 1), a discount amount
// other than list − amount, a prepaid period that is not YYYY-MM.
func checkDiscount(i int, l *Line) error {
	some := l.DiscountRate != nil || l.ListAmount != nil || l.DiscountAmount != nil || l.PrepaidIn != "" || l.MonthsCharged != 0
	switch {
	case !some:
		return nil
	case l.Kind != billing.KindReservation:
		return fmt.Errorf("invoice document: lines[%d]: discount fields on a %s line", i, l.Kind)
	case !l.HasDiscount():
		return fmt.Errorf("invoice document: lines[%d]: discount_rate, list_amount and discount_amount: all or none", i)
	case l.DiscountRate.IsNegative() || l.DiscountRate.GreaterThanOrEqual(decimal.NewFromInt(1)):
		return fmt.Errorf("invoice document: lines[%d].discount_rate: %s is not in [0, 1)", i, l.DiscountRate)
	case !l.ListAmount.Sub(l.Amount).Equal(*l.DiscountAmount):
		return fmt.Errorf("invoice document: lines[%d].discount_amount: %s is not list_amount − amount (%s − %s)",
			i, billing.FormatMoney(*l.DiscountAmount), billing.FormatMoney(*l.ListAmount), billing.FormatMoney(l.Amount))
	case l.PrepaidIn != "" && !periodPattern.MatchString(l.PrepaidIn):
		return fmt.Errorf("invoice document: lines[%d].prepaid_in: %q is not YYYY-MM", i, l.PrepaidIn)
	case l.MonthsCharged < 0:
		return fmt.Errorf("invoice document: lines[%d].months_charged: %d is negative", i, l.MonthsCharged)
	}
	return nil
}

var moneyPattern = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// badMoney names the first money field of a document that is not a decimal
// string: the decimal decoder also takes JSON numbers, and its errors name no
// field. "" when there is none or b is not a JSON object.
func badMoney(b []byte) string {
	var raw struct {
		Total    any              `json:"total"`
		Lines    []map[string]any `json:"lines"`
		Students []map[string]any `json:"students"`
	}
	if json.Unmarshal(b, &raw) != nil {
		return ""
	}
	check := func(name string, v any) string {
		if s, ok := v.(string); ok && moneyPattern.MatchString(s) {
			return ""
		}
		return fmt.Sprintf("%s: %v is not a decimal string", name, v)
	}
	if msg := check("total", raw.Total); msg != "" {
		return msg
	}
	for i, l := range raw.Lines {
		for _, f := range []string{"unit_price", "amount", "discount_rate", "list_amount", "discount_amount"} {
			v, ok := l[f]
			if !ok && f != "unit_price" && f != "amount" {
				continue // the discount fields are optional
			}
			if msg := check(fmt.Sprintf("lines[%d].%s", i, f), v); msg != "" {
				return msg
			}
		}
	}
	for i, st := range raw.Students {
		if msg := check(fmt.Sprintf("students[%d].total", i), st["total"]); msg != "" {
			return msg
		}
	}
	return ""
}

// checkDocs refuses nil documents, naming their position.
func checkDocs(docs []*Document) error {
	for i, d := range docs {
		if d == nil {
			return fmt.Errorf("export: document %d is nil", i)
		}
	}
	return nil
}

// StampFunc returns a function for ledger.FinalizeOptions.Stamp that stamps the
// number the ledger gives and issuedAt into the draft's document.
func StampFunc(issuedAt time.Time) func(number string, document []byte) ([]byte, error) {
	return func(number string, document []byte) ([]byte, error) {
		return Stamp(document, number, issuedAt)
	}
}

// Stamp writes the invoice number and issue date into a draft document's bytes
// and returns the new canonical bytes. The issue date is kept in the document's
// time zone. A document that already has a number is refused.
func Stamp(doc []byte, number string, issuedAt time.Time) ([]byte, error) {
	if number == "" {
		return nil, errors.New("stamp: the invoice number is empty")
	}
	if issuedAt.IsZero() {
		return nil, errors.New("stamp: the issue date is zero")
	}
	d, err := Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("stamp: %w", err)
	}
	if d.Number != "" {
		return nil, fmt.Errorf("stamp: the document already has number %q", d.Number)
	}
	loc, err := time.LoadLocation(d.Timezone)
	if err != nil {
		return nil, fmt.Errorf("stamp: timezone: %w", err)
	}
	at := issuedAt.In(loc)
	d.Number, d.IssuedAt = number, &at
	return d.Marshal()
}

// Reissue returns the starting document of the revision that replaces a
// voided invoice: the voided document without its number and issue date (it
// gets new ones when it is finalized), so that the reissue is a draft and
// Stamp numbers it. Recomputing the draft (a billing run) replaces it.
func Reissue(voided []byte) ([]byte, error) {
	d, err := Parse(voided)
	if err != nil {
		return nil, fmt.Errorf("reissue: %w", err)
	}
	if d.CreditFor != "" {
		return nil, fmt.Errorf("reissue: %s is a credit note, not an invoice", d.Number)
	}
	d.Number, d.IssuedAt = "", nil
	return d.Marshal()
}

// CreditNote returns the canonical bytes of the credit note that cancels a
// voided invoice: its own number and issue date (at, in the invoice's time
// zone), CreditFor naming the invoice, the invoice's lines with their
// amounts negated (unit prices, times and quantities as they were), the
// students' subtotals and the total negated, in the invoice's currency. It
// carries no warnings, data quality or releases: those are the invoice's.
func CreditNote(voided []byte, number string, at time.Time) ([]byte, error) {
	if number == "" {
		return nil, errors.New("credit note: the number is empty")
	}
	if at.IsZero() {
		return nil, errors.New("credit note: the issue date is zero")
	}
	d, err := Parse(voided)
	if err != nil {
		return nil, fmt.Errorf("credit note: %w", err)
	}
	switch {
	case d.Number == "":
		return nil, errors.New("credit note: the voided document is a draft (it has no number)")
	case d.CreditFor != "":
		return nil, fmt.Errorf("credit note: %s is a credit note itself", d.Number)
	case d.User != "":
		return nil, fmt.Errorf("credit note: the voided document is %s's statement, not the invoice", d.User)
	}
	loc, err := time.LoadLocation(d.Timezone)
	if err != nil {
		return nil, fmt.Errorf("credit note: timezone: %w", err)
	}
	issued := at.In(loc)
	c := d.clone()
	c.CreditFor, c.Number, c.IssuedAt, c.GeneratedAt = d.Number, number, &issued, issued
	for i := range c.Lines {
		l := &c.Lines[i]
		l.Amount = l.Amount.Neg()
		if l.ListAmount != nil {
			list, off := l.ListAmount.Neg(), l.DiscountAmount.Neg()
			l.ListAmount, l.DiscountAmount = &list, &off
		}
	}
	for i := range c.Students {
		c.Students[i].Total = c.Students[i].Total.Neg()
	}
	c.Total = d.Total.Neg()
	c.Unpriced, c.Warnings, c.DataQuality, c.Releases = []Unpriced{}, []Warning{}, nil, nil
	return c.Marshal()
}

// SameContent reports whether two documents say the same thing: equal in
// every field but generated_at and data_cutoff (when a billing run was made
// and the newest usage it saw, which change with every run even when the
// usage did not). Lines, totals, unpriced usage, students and their names,
// warnings, data quality, releases, the project's name and funding, the
// catalog version, currency, time zone, number and issue date are content.
func SameContent(a, b []byte) (bool, error) {
	da, err := Parse(a)
	if err != nil {
		return false, err
	}
	db, err := Parse(b)
	if err != nil {
		return false, err
	}
	da.GeneratedAt, da.DataCutoff = time.Time{}, time.Time{}
	db.GeneratedAt, db.DataCutoff = time.Time{}, time.Time{}
	ba, err := da.Marshal()
	if err != nil {
		return false, err
	}
	bb, err := db.Marshal()
	if err != nil {
		return false, err
	}
	return bytes.Equal(ba, bb), nil
}
