package billing

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/schemas"
)

// Line kinds.
const (
	KindUsage       = "usage"
	KindReservation = "reservation"
)

// Result is everything billed for one period.
type Result struct {
	Period   Period
	Currency string
	Timezone string
	Invoices []Invoice
	// Conflicts are the instances held by more than one holder, or as more than
	// one kind, at the same time inside the period, sorted by instance id.
	Conflicts []Conflict
	// Oversubscribed are the cards whose shares, held at once, added up to more
	// than the card (rule 11), sorted by card and basis.
	Oversubscribed []Oversubscription
	// SkippedLines is the number of invalid input lines that were skipped and not
	// billed (bill --skip-invalid), for the data-quality section of the outputs.
	SkippedLines int64
	// Warnings are the result's warnings as text, in the order every output format
	// prints them. Add one with AddWarning (about the whole input) or warn (about
	// a project or a user, so that a statement keeps only its user's); a warning
	// appended here directly counts as one about the whole input.
	Warnings []string
	scopes   map[string]Warning // text → what it is about, for warnings added with warn
}

// Warning codes.
const (
	WarnUnpriced     = "unpriced"
	WarnNotInCatalog = "project_not_in_catalog"
	WarnConflict     = "holder_conflict"
	// WarnOversubscribed: a card's shares added up to more than the card.
	WarnOversubscribed = "oversubscribed"
	WarnNoUsage        = "no_usage"
	WarnInput          = "input"
	// WarnReleaseFailed: an instance idle past its project's release_after
	// that could not be released; the time it stayed held is billed.
	WarnReleaseFailed = "release_failed"
)

// Warning is one warning and what it is about.
type Warning struct {
	Code    string
	Project string   // the project it is about; empty when about the whole input
	Users   []string // the users its text names; a statement for anyone else leaves it out
	Message string
}

// AddWarning adds a warning about the whole input (no project, no user): every
// statement keeps it.
func (r *Result) AddWarning(code, message string) {
	r.warn(Warning{Code: code, Message: message})
}

// AddScopedWarning adds a warning about w.Project and the users its text
// names (w.Users): a statement keeps it only as InStatement says.
func (r *Result) AddScopedWarning(w Warning) {
	r.warn(w)
}

// warn adds a warning with what it is about.
func (r *Result) warn(w Warning) {
	if r.scopes == nil {
		r.scopes = map[string]Warning{}
	}
	if _, dup := r.scopes[w.Message]; !dup {
		r.scopes[w.Message] = w
		r.Warnings = append(r.Warnings, w.Message)
	}
}

// InStatement reports whether user's statement keeps w as it is: a warning that
// names users only when it names user alone, one about a project only when the
// statement has an invoice of that project (hasInvoice), one about the whole
// input always. This is the one rule every statement (bill --user, the API, the
// exports) applies, so that a statement never names another user.
func (w Warning) InStatement(user string, hasInvoice func(project string) bool) bool {
	switch {
	case len(w.Users) > 0:
		return len(w.Users) == 1 && w.Users[0] == user
	case w.Project != "":
		return hasInvoice(w.Project)
	}
	return true
}

// WarningFor returns the warning whose text is msg, with what it is about; a
// warning appended to Warnings as text only is about the whole input.
func (r *Result) WarningFor(msg string) Warning {
	if w, ok := r.scopes[msg]; ok {
		return w
	}
	return Warning{Code: WarnInput, Message: msg}
}

// Invoice is one project's bill for the period.
type Invoice struct {
	Project   string
	Name      string // from the catalog, may be empty
	Funding   string // from the catalog, may be empty
	InCatalog bool
	Total     decimal.Decimal
	Lines     []Line
	Unpriced  []UnpricedLine
	Sessions  []Session // every billed session, for statements and audits
	// Releases are the idle releases the watcher recorded whose idle streak
	// overlaps the period (filled by the invoicing service from the state
	// store; the engine leaves it empty). They explain the bill and change
	// no amount: the bill follows the samples.
	Releases []Release
}

// Release is an idle release of one of the project's instances: done
// (something was released, said by Action) or failed (the instance stayed
// held and its idle time is billed; Failure says why).
type Release struct {
	InstanceID string
	Node       string
	User       string
	IdleSince  time.Time     // start of the idle streak that called for it
	At         time.Time     // when it was done, or when it failed
	Status     ReleaseStatus // ReleaseDone or ReleaseFailed
	Action     string
	Failure    string
}

// Line is one invoice line: usage of one (user, SKU), or one reservation.
type Line struct {
	Kind          string
	User          string
	SKU           string
	Sessions      int
	UsedMS        int64
	CoveredMS     int64
	IdleMS        int64
	BilledSeconds int64
	UnitPrice     decimal.Decimal
	Amount        decimal.Decimal

	// Reservation lines only.
	Term     schemas.Term
	Quantity int64
	Billing  string
	Start    string // YYYY-MM
	Index    int    // position of the reservation in the project's catalog entry
	// Months is the months of the term this invoice charges: 1 (monthly),
	// the term's months (upfront, its first month) or 0 (upfront, later).
	Months int
	// Discount is the fraction off the monthly price applied
	// (schemas.Catalog.Discount: the SKU's override or the term's).
	Discount decimal.Decimal
}

// UnpricedLine is usage whose (gpu_model, profile) matches no SKU. It is reported,
// never dropped and never priced at zero.
type UnpricedLine struct {
	User     string
	GPUModel string
	Profile  string
	Sessions int
	UsedMS   int64
	IdleMS   int64
}

// Session is one billed session after clipping to the period.
type Session struct {
	Key           schemas.Key
	SKU           string // empty when unpriced
	Start, End    int64  // ms
	CoveredMS     int64
	IdleMS        int64
	BilledSeconds int64
}

// UsedMS is the session's length inside the period.
func (s *Session) UsedMS() int64 { return s.End - s.Start }

// Invoices computes the period's invoices from everything accumulated so far.
// The result depends only on the union of the usage fed in, so it is the same
// whatever the order, duplication or splitting of the input.
func (a *Accumulator) Invoices() *Result {
	res := &Result{Period: a.period, Currency: a.cat.Currency, Timezone: a.cat.Timezone}
	projects := invoiceSet{cat: a.cat, byProject: map[string]*Invoice{}}

	// 1. Sessions clipped to the period, grouped by project; the instances'
	// occupancy for the holder conflict check.
	occ := newOccupancy()
	a.clipSessions(&projects, occ)
	// 2. Reservations: coverage of concurrent sessions, FIFO by session start.
	a.applyReservations(projects.byProject)
	// 3. Rounding per session, then usage lines per (user, SKU).
	for _, inv := range projects.byProject {
		priceUsage(a.cat, inv, res)
	}
	// 4. Reservation lines, for every reservation active in the period.
	a.addReservationLines(&projects)
	// 5. Totals: the sum of the rounded line amounts.
	res.Invoices = projects.totalled()
	// 6. Data quality: holder conflicts, and a period without usage.
	a.addDataQuality(res, occ)
	slices.Sort(res.Warnings)
	return res
}

// invoiceSet is the period's invoices being built, one per project.
type invoiceSet struct {
	cat       *schemas.Catalog
	byProject map[string]*Invoice
}

// invoice is project's invoice, started (with its catalog entry's name and
// funding) the first time the project bills anything.
func (s *invoiceSet) invoice(project string) *Invoice {
	inv, ok := s.byProject[project]
	if !ok {
		inv = &Invoice{Project: project}
		if p, ok := s.cat.Project(project); ok {
			inv.Name, inv.Funding, inv.InCatalog = p.Name, p.Funding, true
		}
		s.byProject[project] = inv
	}
	return inv
}

// clipSessions adds every key's sessions, clipped to the period, to its
// project's invoice, and every key's pieces to occ.
func (a *Accumulator) clipSessions(projects *invoiceSet, occ *occupancy) {
	keys := make([]schemas.Key, 0, len(a.keys))
	for k := range a.keys {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	// Instances with two or more keys are checked for holder conflicts.
	for _, k := range keys {
		occ.count(k.InstanceID, a.keys[k].occ.Len())
	}
	for _, k := range keys {
		st := a.keys[k]
		occ.add(k, st.occ.Pieces(), a.p0, a.p1)
		pieces := bridgeClip(st.occ.Pieces(), a.tol, a.p0, a.p1)
		if len(pieces) == 0 {
			continue
		}
		skuID := ""
		if sku, ok := a.cat.ResolveSKU(k.GPUModel, k.Profile); ok {
			skuID = sku.ID
		}
		inv := projects.invoice(k.Project)
		inv.Sessions = appendSessions(inv.Sessions, k, skuID, pieces, st.idle.Pieces())
	}
}

// appendSessions appends a session per piece of k, each with the idle time of
// idle (sorted, disjoint) inside it.
func appendSessions(sessions []Session, k schemas.Key, skuID string, pieces, idle []Interval) []Session {
	j := 0 // idle pieces before idle[j] end before the current session
	for _, p := range pieces {
		for j < len(idle) && idle[j].End <= p.Start {
			j++
		}
		end := j
		for end < len(idle) && idle[end].Start < p.End {
			end++
		}
		sessions = append(sessions, Session{
			Key: k, SKU: skuID, Start: p.Start, End: p.End, IdleMS: overlap([]Interval{p}, idle[j:end]),
		})
	}
	return sessions
}

// applyReservations sets the covered time of every priced session: each
// (project, SKU)'s reserved quantity covers its concurrent sessions.
func (a *Accumulator) applyReservations(byProject map[string]*Invoice) {
	// Coverage groups point into the final session slices: (project, sku) → sessions.
	coverage := map[[2]string][]*Session{}
	for _, inv := range byProject {
		for i := range inv.Sessions {
			s := &inv.Sessions[i]
			if s.SKU != "" {
				ck := [2]string{s.Key.Project, s.SKU}
				coverage[ck] = append(coverage[ck], s)
			}
		}
	}
	month := a.period.MonthIndex()
	for ck, sessions := range coverage {
		q := reservedQuantity(a.cat, ck[0], ck[1], month)
		applyCoverage(sessions, q)
	}
}

// usageLineKey groups an invoice's sessions into lines: (user, SKU) for priced
// usage, (user, GPU model, profile) for unpriced.
type usageLineKey struct{ user, sku, model, profile string }

// priceUsage rounds every session of inv, sums them into its usage and
// unpriced lines (sorted), and warns of unpriced usage and of a project the
// catalog does not name.
func priceUsage(cat *schemas.Catalog, inv *Invoice, res *Result) {
	rounding := cat.RoundingFor(inv.Project)
	lines := map[usageLineKey]*Line{}
	unpriced := map[usageLineKey]*UnpricedLine{}
	for i := range inv.Sessions {
		s := &inv.Sessions[i]
		if s.SKU == "" {
			addUnpriced(unpriced, s)
			continue
		}
		s.BilledSeconds = billedSeconds(s.UsedMS()-s.CoveredMS, rounding, cat.Defaults.MinBilledS)
		k := usageLineKey{user: s.Key.User, sku: s.SKU}
		l, ok := lines[k]
		if !ok {
			sku, _ := cat.SKUByID(s.SKU)
			l = &Line{Kind: KindUsage, User: s.Key.User, SKU: s.SKU, UnitPrice: sku.HourlyPrice}
			lines[k] = l
		}
		l.Sessions++
		l.UsedMS += s.UsedMS()
		l.CoveredMS += s.CoveredMS
		l.IdleMS += s.IdleMS
		l.BilledSeconds += s.BilledSeconds
	}
	for _, l := range lines {
		l.Amount = UsageAmount(l.BilledSeconds, l.UnitPrice)
		inv.Lines = append(inv.Lines, *l)
	}
	slices.SortFunc(inv.Lines, func(x, y Line) int {
		return cmp.Or(cmp.Compare(x.User, y.User), cmp.Compare(x.SKU, y.SKU))
	})
	for _, u := range unpriced {
		inv.Unpriced = append(inv.Unpriced, *u)
	}
	slices.SortFunc(inv.Unpriced, func(x, y UnpricedLine) int {
		return cmp.Or(cmp.Compare(x.User, y.User), cmp.Compare(x.GPUModel, y.GPUModel), cmp.Compare(x.Profile, y.Profile))
	})
	for _, u := range inv.Unpriced {
		res.warn(Warning{Code: WarnUnpriced, Project: inv.Project, Users: nonEmpty(u.User), Message: fmt.Sprintf(
			"project %q user %q: %s of %s / %s matches no SKU in the catalog and is not priced",
			inv.Project, u.User, FormatSeconds(u.UsedMS)+" s", u.GPUModel, u.Profile)})
	}
	if !inv.InCatalog {
		res.warn(Warning{Code: WarnNotInCatalog, Project: inv.Project, Message: fmt.Sprintf(
			"project %q is not in the catalog: billed with the catalog defaults", inv.Project)})
	}
}

// addUnpriced adds s, which matches no SKU, to its unpriced line.
func addUnpriced(unpriced map[usageLineKey]*UnpricedLine, s *Session) {
	k := usageLineKey{user: s.Key.User, model: s.Key.GPUModel, profile: s.Key.Profile}
	u, ok := unpriced[k]
	if !ok {
		u = &UnpricedLine{User: s.Key.User, GPUModel: s.Key.GPUModel, Profile: s.Key.Profile}
		unpriced[k] = u
	}
	u.Sessions++
	u.UsedMS += s.UsedMS()
	u.IdleMS += s.IdleMS
}

// addReservationLines adds a line for every reservation active in the period
// to its project's invoice, with or without usage.
func (a *Accumulator) addReservationLines(projects *invoiceSet) {
	cat, month := a.cat, a.period.MonthIndex()
	for i := range cat.Projects {
		p := &cat.Projects[i]
		for ri, r := range p.Reservations {
			if !r.ActiveIn(month) {
				continue
			}
			inv := projects.invoice(p.ID)
			inv.Lines = append(inv.Lines, reservationLine(cat, r, ri, month))
		}
	}
}

// reservationLine is the charge of reservation r (the ri-th of its project) in
// month: monthly billing charges every month, upfront billing the whole term
// in its first month and nothing after.
func reservationLine(cat *schemas.Catalog, r schemas.Reservation, ri, month int) Line {
	sku, _ := cat.SKUByID(r.SKU)
	disc := cat.Discount(sku, r.Term)
	months := 0
	switch {
	case r.Billing == schemas.BillingMonthly:
		months = 1
	case month == r.StartIndex():
		months = r.Term.Months()
	}
	amount := decimal.Zero
	if months > 0 {
		amount = ReservationAmount(sku.MonthlyPrice, months, disc, r.Quantity)
	}
	return Line{
		Kind: KindReservation, SKU: r.SKU, Term: r.Term, Quantity: r.Quantity,
		Billing: r.Billing, Start: fmt.Sprintf("%04d-%02d", r.StartYear, int(r.StartMonth)),
		UnitPrice: sku.MonthlyPrice, Amount: amount, Index: ri, Months: months, Discount: disc,
	}
}

// totalled is the invoices, sorted by project, each with its total: the sum
// of its rounded line amounts.
func (s *invoiceSet) totalled() []Invoice {
	var invoices []Invoice
	for _, inv := range s.byProject {
		inv.Total = decimal.Zero
		for _, l := range inv.Lines {
			inv.Total = inv.Total.Add(l.Amount)
		}
		invoices = append(invoices, *inv)
	}
	slices.SortFunc(invoices, func(x, y Invoice) int { return cmp.Compare(x.Project, y.Project) })
	return invoices
}

// addDataQuality records the holder conflicts, with a warning each, and warns
// of a period without usage.
func (a *Accumulator) addDataQuality(res *Result, occ *occupancy) {
	res.Conflicts = occ.conflicts()
	for i := range res.Conflicts {
		c := &res.Conflicts[i]
		res.warn(Warning{Code: WarnConflict, Users: usersOf(c.Holders), Message: c.Message(a.period.Start.Location())})
	}
	res.Oversubscribed = a.oversubscriptions()
	for i := range res.Oversubscribed {
		o := &res.Oversubscribed[i]
		res.warn(Warning{Code: WarnOversubscribed, Users: usersOf(o.Holders), Message: o.Message(a.period.Start.Location())})
	}
	if !hasUsage(res.Invoices) {
		res.AddWarning(WarnNoUsage, NoUsageMessage(a.period, ""))
	}
}

// usersOf is the non-empty users of holders, for a warning's scope.
func usersOf(holders []Holder) []string {
	users := make([]string, 0, len(holders))
	for _, h := range holders {
		users = append(users, h.User)
	}
	return nonEmpty(users...)
}

func hasUsage(invoices []Invoice) bool {
	for i := range invoices {
		if len(invoices[i].Sessions) > 0 {
			return true
		}
		for _, l := range invoices[i].Lines {
			if l.Kind == KindUsage {
				return true
			}
		}
		if len(invoices[i].Unpriced) > 0 {
			return true
		}
	}
	return false
}

// NoUsageMessage is the warning text of a period without usage, or, for a
// statement, without usage by user.
func NoUsageMessage(p Period, user string) string {
	if user != "" {
		return fmt.Sprintf("no usage by user %q in %s: this statement is empty (本期该用户无用量)", user, p)
	}
	return fmt.Sprintf("no usage in %s: no GPU instance was held in this period (本期无用量)", p)
}

// nonEmpty returns the non-empty strings of s, sorted and without duplicates.
func nonEmpty(s ...string) []string {
	out := make([]string, 0, len(s))
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func compareKeys(x, y schemas.Key) int {
	return cmp.Or(cmp.Compare(x.Project, y.Project), cmp.Compare(x.User, y.User),
		cmp.Compare(x.InstanceID, y.InstanceID), cmp.Compare(x.GPUModel, y.GPUModel), cmp.Compare(x.Profile, y.Profile))
}

// reservedQuantity is Q: the reserved instances of a SKU a project has in a month.
func reservedQuantity(cat *schemas.Catalog, project, sku string, month int) int64 {
	p, ok := cat.Project(project)
	if !ok {
		return 0
	}
	var q int64
	for _, r := range p.Reservations {
		if r.SKU == sku && r.ActiveIn(month) {
			q += r.Quantity
		}
	}
	return q
}

// billedSeconds applies the rounding rule to a session's uncovered milliseconds.
func billedSeconds(uncoveredMS int64, rounding schemas.Rounding, minBilledS int64) int64 {
	if uncoveredMS <= 0 {
		return 0
	}
	var billed int64
	if rounding == schemas.RoundHour {
		billed = ceilDiv(uncoveredMS, 3_600_000) * 3600
	} else {
		billed = ceilDiv(uncoveredMS, 1000)
	}
	return max(billed, minBilledS)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// FormatSeconds renders milliseconds as seconds with up to three decimals.
func FormatSeconds(ms int64) string { return string(schemas.AppendSecondsMS(nil, ms)) }

// FormatHours writes seconds as hours with two decimals, rounded half up
// exactly (in integers): 54 s is "0.02", 3,600 s "1.00". The dashboard
// formats hours the same way (api/web/static/format.js, hours).
func FormatHours(seconds int64) string {
	neg := seconds < 0
	if neg {
		seconds = -seconds
	}
	c := (2*seconds + 36) / 72 // hundredths of an hour: seconds / 36, half up
	s := fmt.Sprintf("%d.%02d", c/100, c%100)
	if neg && c != 0 {
		s = "-" + s
	}
	return s
}

// StatementFor returns the per-user statement: for every invoice with usage by
// user, that user's usage lines and their sum. Reservations belong to the project,
// not to a user, and are left out. A statement names no other user: it keeps the
// warnings about the whole input, about a project it has an invoice of (when they
// name no user) and about user alone, and shows user's holder conflicts with the
// other holders counted, not named.
func (r *Result) StatementFor(user string) *Result {
	out := &Result{Period: r.Period, Currency: r.Currency, Timezone: r.Timezone, SkippedLines: r.SkippedLines}
	projects := map[string]bool{}
	for _, inv := range r.Invoices {
		st := Invoice{Project: inv.Project, Name: inv.Name, Funding: inv.Funding, InCatalog: inv.InCatalog, Total: decimal.Zero}
		for _, l := range inv.Lines {
			if l.Kind == KindUsage && l.User == user {
				st.Lines = append(st.Lines, l)
				st.Total = st.Total.Add(l.Amount)
			}
		}
		for _, u := range inv.Unpriced {
			if u.User == user {
				st.Unpriced = append(st.Unpriced, u)
			}
		}
		for _, s := range inv.Sessions {
			if s.Key.User == user {
				st.Sessions = append(st.Sessions, s)
			}
		}
		if len(st.Lines) > 0 || len(st.Unpriced) > 0 {
			out.Invoices = append(out.Invoices, st)
			projects[inv.Project] = true
		}
	}
	for _, msg := range r.Warnings {
		w := r.WarningFor(msg)
		// Conflicts and over-subscriptions are rebuilt below for this user.
		if w.Code != WarnConflict && w.Code != WarnOversubscribed && w.InStatement(user, func(p string) bool { return projects[p] }) {
			out.warn(w)
		}
	}
	for i := range r.Conflicts {
		if c, ok := r.Conflicts[i].ForUser(user); ok {
			out.Conflicts = append(out.Conflicts, c)
			out.warn(Warning{Code: WarnConflict, Users: nonEmpty(user), Message: c.Message(r.Period.Start.Location())})
		}
	}
	for i := range r.Oversubscribed {
		if o, ok := r.Oversubscribed[i].ForUser(user); ok {
			out.Oversubscribed = append(out.Oversubscribed, o)
			out.warn(Warning{Code: WarnOversubscribed, Users: nonEmpty(user), Message: o.Message(r.Period.Start.Location())})
		}
	}
	if len(out.Invoices) == 0 {
		out.AddWarning(WarnNoUsage, NoUsageMessage(r.Period, user))
	}
	slices.Sort(out.Warnings)
	return out
}
