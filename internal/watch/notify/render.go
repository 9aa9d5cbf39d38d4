package notify

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/shopspring/decimal"
)

// Languages with templates.
const (
	LangZH = "zh-CN"
	LangEN = "en"
)

// Langs lists the languages with templates; LangZH is the default.
var Langs = []string{LangZH, LangEN}

// NormalizeLang maps a language tag to one with templates: "zh", "zh-cn",
// "zh_CN", "zh-Hans" give zh-CN; "en", "en-US", "en_GB" give en. ok is false
// for anything else.
func NormalizeLang(tag string) (lang string, ok bool) {
	t := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(tag), "_", "-"))
	switch {
	case t == "zh" || t == "zh-cn" || t == "zh-hans" || t == "zh-hans-cn" || t == "zh-sg":
		return LangZH, true
	case t == "en" || strings.HasPrefix(t, "en-"):
		return LangEN, true
	}
	return "", false
}

// Render writes a message's subject and body in lang (zh-CN or en). The
// texts say only what happened: idle_release says "released" and is meant for
// a release that was carried out; idle_release_failed says the instance could
// not be released and is still billed; idle_release_dry_run says it would have
// been released and nothing was done.
func Render(m alert.Message, lang string) (subject, body string, err error) {
	l, ok := NormalizeLang(lang)
	if !ok {
		return "", "", fmt.Errorf("notify: no templates for language %q (have %s)", lang, strings.Join(Langs, ", "))
	}
	if !m.Kind.Valid() {
		return "", "", fmt.Errorf("notify: unknown message kind %q", m.Kind)
	}
	switch m.Facts.NextAction {
	case "", "reminder", "release":
	default:
		return "", "", fmt.Errorf("notify: unknown next action %q (want \"\", reminder or release)", m.Facts.NextAction)
	}
	if m.Facts.NextAction != "" && m.Facts.NextAt.IsZero() {
		return "", "", fmt.Errorf("notify: next action %q without a time", m.Facts.NextAction)
	}
	if m.Kind == billing.AlertBudgetThreshold {
		if m.Facts.Budget == nil {
			return "", "", fmt.Errorf("notify: %s message without budget facts", m.Kind)
		}
		if !m.Facts.Budget.Scope.Valid() {
			return "", "", fmt.Errorf("notify: budget scope %q (want project or student)", m.Facts.Budget.Scope)
		}
		if m.Facts.Budget.Percent <= 0 {
			return "", "", fmt.Errorf("notify: budget threshold %d %% (want the percentage crossed, e.g. 80)", m.Facts.Budget.Percent)
		}
		if !m.Facts.Budget.Unit.Valid() {
			return "", "", fmt.Errorf("notify: budget unit %q (want money or card_hours)", m.Facts.Budget.Unit)
		}
	} else if isRequestKind(m.Kind) {
		if err := checkRequest(m); err != nil {
			return "", "", err
		}
	} else if m.Facts.InstanceID == "" {
		return "", "", fmt.Errorf("notify: %s message without an instance id", m.Kind)
	}
	r := renderer{lang: l, f: m.Facts, loc: m.Facts.TZ}
	if r.loc == nil {
		r.loc = time.UTC
	}
	r.setVars()
	switch {
	case m.Kind == billing.AlertBudgetThreshold:
		subject = r.budget()
	case isRequestKind(m.Kind):
		subject = r.request(m.Kind)
	default:
		subject = r.idle(m.Kind)
	}
	return subject, r.b.String(), nil
}

// isRequestKind reports whether k tells about an exemption request.
func isRequestKind(k billing.AlertKind) bool {
	return k == billing.AlertExemptionRequested || k == billing.AlertExemptionDecided
}

// checkRequest rejects an exemption request message that cannot be said:
// no request, or a status that is not the kind's (pending when asked,
// granted or refused when decided).
func checkRequest(m alert.Message) error {
	q := m.Facts.Request
	if q == nil {
		return fmt.Errorf("notify: %s message without request facts", m.Kind)
	}
	if m.Facts.User == "" || m.Facts.Project == "" {
		return fmt.Errorf("notify: %s message without the student and project", m.Kind)
	}
	if q.Until.IsZero() {
		return fmt.Errorf("notify: %s message without the exemption's end", m.Kind)
	}
	switch {
	case m.Kind == billing.AlertExemptionRequested && q.Status != "pending":
		return fmt.Errorf("notify: %s message of a request %q (want pending)", m.Kind, q.Status)
	case m.Kind == billing.AlertExemptionDecided && q.Status != "granted" && q.Status != "refused":
		return fmt.Errorf("notify: %s message of a request %q (want granted or refused)", m.Kind, q.Status)
	}
	return nil
}

// renderer writes one message in one language: which sentences it has is
// decided here, the sentences themselves are the texts (words).
type renderer struct {
	lang string
	f    alert.Facts
	loc  *time.Location
	v    vars
	b    strings.Builder
}

// vars are the values of a message's {name} placeholders.
type vars map[string]string

// fill writes text with each {name} replaced by its value. The values are
// not read again: a fact that holds braces is written as it is.
func (v vars) fill(text string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(text, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(text[i:], '}')
		if j < 0 {
			break
		}
		val, ok := v[text[i+1:i+j]]
		if !ok { // not a placeholder: the brace is text
			b.WriteString(text[:i+1])
			text = text[i+1:]
			continue
		}
		b.WriteString(text[:i])
		b.WriteString(val)
		text = text[i+j+1:]
	}
	b.WriteString(text)
	return b.String()
}

// setVars fills the placeholders from the facts; the ones made of other
// texts (holder, who, where, kind, …) are filled in order.
func (r *renderer) setVars() {
	f, t := r.f, &words
	v := vars{
		"inst": f.InstanceID, "node": dash(f.Node), "gpu": dash(f.GPUUUID), "project": dash(f.Project), "user": dash(f.User),
		"model": f.GPUModel, "profile": f.Profile, "outcome": f.Outcome, "cost": FormatMoney(f.Cost.Decimal, f.Currency),
		"held": r.at(f.HeldSince), "idle": r.at(f.IdleSince), "at": r.at(f.At), "next": r.at(f.NextAt),
		"hint": f.ExemptionHint, "zone": r.loc.String(),
	}
	say := func(x text) string { return v.fill(x[r.lang]) }
	if f.ExemptionHint == "" {
		v["hint"] = say(t.DefaultHint)
	}
	v["where"] = say(t.Where)
	if f.Node != "" {
		v["where"] = say(t.WhereOnNode)
	}
	v["holder"] = say(t.HolderProject)
	if f.User != "" {
		v["holder"] = say(t.HolderUser)
	}
	v["who"] = say(t.Who)
	v["Who"] = upperFirst(v["who"])
	switch {
	case f.Profile != "":
		v["kind"] = strings.TrimSpace(say(t.KindMIG))
	case f.GPUModel != "":
		v["kind"] = say(t.KindWhole)
	}
	v["heldFor"] = r.spent(t.HeldFor, f.HeldSince)
	v["idleFor"] = r.spent(t.IdleFor, f.IdleSince)
	r.setRequestVars(v, say)
	if b := f.Budget; b != nil {
		v["period"], v["percent"], v["share"] = dash(b.Period), strconv.Itoa(b.Percent), share(b)
		v["limit"], v["used"] = r.budgetAmount(b.Limit, b.Unit), r.budgetAmount(b.Used, b.Unit)
		v["scope"] = say(t.BudgetScope)
		if b.Scope == billing.BudgetStudent {
			v["scope"] = say(t.BudgetScopeStudent)
		}
	}
	r.v = v
}

// say is x in the message's language, its placeholders filled.
func (r *renderer) say(x text) string { return r.v.fill(x[r.lang]) }

// line writes x as one line.
func (r *renderer) line(x text) {
	r.b.WriteString(r.say(x))
	r.b.WriteByte('\n')
}

func (r *renderer) blank() { r.b.WriteByte('\n') }

// at formats a time in the catalog's zone, to the minute.
func (r *renderer) at(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(r.loc).Format("2006-01-02 15:04")
}

// spent is text (heldFor, idleFor) with the time from since to the
// message's time, "" when there is none.
func (r *renderer) spent(x text, since time.Time) string {
	at := r.f.At
	if since.IsZero() || at.IsZero() || at.Before(since) {
		return ""
	}
	days, hours, mins := splitDuration(at.Sub(since))
	var parts []string
	unit := func(n int64, u text) {
		parts = append(parts, vars{"n": strconv.FormatInt(n, 10)}.fill(u[r.lang]))
	}
	if days > 0 {
		unit(days, words.Days)
	}
	if hours > 0 {
		unit(hours, words.Hours)
	}
	if mins > 0 || len(parts) == 0 {
		unit(mins, words.Minutes)
	}
	return vars{"dur": strings.Join(parts, " ")}.fill(x[r.lang])
}

// idle writes an idle message of kind k and returns its subject.
func (r *renderer) idle(k billing.AlertKind) string {
	f, t := r.f, &words
	for _, l := range t.Opening[k] {
		r.line(l)
	}
	r.blank()
	if r.v["kind"] != "" {
		r.line(t.InstanceKind)
	} else {
		r.line(t.Instance)
	}
	for _, l := range []text{t.Node, t.GPU, t.HeldSince, t.IdleSince, t.CostSoFar} {
		r.line(l)
	}
	r.blank()
	if o, ok := t.Outcome[k]; ok && f.Outcome != "" {
		r.line(o)
	}
	if k == billing.AlertIdleReleaseFailed {
		r.line(t.ReleaseYourself)
	}
	switch f.NextAction {
	case "release":
		if k == billing.AlertIdleReleaseFailed {
			r.line(t.NextRetry)
		} else {
			r.line(t.NextRelease)
		}
	case "reminder":
		r.line(t.NextReminder)
	default:
		switch k {
		case billing.AlertIdleWarning, billing.AlertIdleReminder, billing.AlertIdleReleaseDryRun:
			r.line(t.NextNone)
		}
	}
	if k == billing.AlertIdleRelease {
		r.line(t.ExemptAfterRelease)
	} else {
		r.line(t.Exempt)
	}
	if f.Link != "" {
		r.line(t.ExemptLink)
	}
	r.blank()
	r.line(t.Zone)
	return r.say(t.Subject[k])
}

// budget writes a budget message and returns its subject.
func (r *renderer) budget() string {
	f, t, student := r.f, &words, r.f.Budget.Scope == billing.BudgetStudent
	r.line(t.BudgetHeadline)
	r.blank()
	r.line(t.BudgetProject)
	if student {
		r.line(t.BudgetStudent)
	}
	r.line(t.BudgetPeriod)
	r.line(t.BudgetLimit)
	r.line(t.BudgetUsed)
	if !f.At.IsZero() {
		r.line(t.BudgetAsOf)
	}
	r.blank()
	switch {
	case f.NextAction != "release":
		r.line(t.BudgetNextNone)
	case student:
		r.line(t.BudgetNextStudent)
	default:
		r.line(t.BudgetNextProject)
	}
	r.line(t.BudgetAsk)
	r.blank()
	r.line(t.Zone)
	if student {
		return r.say(t.BudgetSubjectStudent)
	}
	return r.say(t.BudgetSubject)
}

// setRequestVars fills the placeholders of exemption request messages
// (and {link}); every one is set, to "—" without a request.
func (r *renderer) setRequestVars(v vars, say func(text) string) {
	f, t := r.f, &words
	v["link"] = f.Link
	q := f.Request
	if q == nil {
		q = &alert.RequestFacts{}
	}
	v["request"], v["until"] = strconv.FormatInt(q.ID, 10), r.at(q.Until)
	v["reason"], v["answer"], v["decidedBy"] = dash(q.Reason), dash(q.Answer), dash(q.DecidedBy)
	v["target"] = say(t.TargetAll)
	if f.InstanceID != "" {
		v["target"] = say(t.TargetInstance)
	}
	v["decision"] = say(t.DecisionGranted)
	if q.Status == "refused" {
		v["decision"] = say(t.DecisionRefused)
	}
}

// request writes an exemption request message (asked, or decided) and
// returns its subject.
func (r *renderer) request(k billing.AlertKind) string {
	f, t := r.f, &words
	for _, l := range t.Opening[k] {
		r.line(l)
	}
	r.blank()
	if k == billing.AlertExemptionRequested {
		for _, l := range []text{t.RequestProject, t.RequestStudent, t.RequestUntil, t.RequestReason} {
			r.line(l)
		}
		r.blank()
		if f.Link != "" {
			r.line(t.RequestDecideLink)
		} else {
			r.line(t.RequestDecide)
		}
	} else {
		r.line(t.YourReason)
		if f.Request.Status == "refused" {
			r.line(t.RefusedReason)
			r.blank()
			r.line(t.RefusedNext)
		} else {
			if f.Request.Answer != "" {
				r.line(t.GrantedNote)
			}
			r.blank()
			r.line(t.GrantedNext)
		}
		if f.Link != "" {
			r.line(t.DecidedLink)
		}
	}
	r.blank()
	r.line(t.Zone)
	return r.say(t.Subject[k])
}

// ---------------------------------------------------------------- shared

func splitDuration(d time.Duration) (days, hours, mins int64) {
	m := int64(d / time.Minute)
	return m / (24 * 60), m / 60 % 24, m % 60
}

// budgetAmount is a budget's limit or use: money, or card-hours.
func (r *renderer) budgetAmount(d decimal.Decimal, unit billing.BudgetUnit) string {
	if unit == billing.BudgetMoney {
		return FormatMoney(d, r.f.Currency)
	}
	return vars{"n": groupDigits(d.String())}.fill(words.CardHours[r.lang])
}

// share is Used / Limit as a percentage with one decimal, for display only
// (it is not money); "—" without a positive limit.
func share(b *alert.BudgetFacts) string {
	if !b.Limit.IsPositive() {
		return "—"
	}
	return b.Used.Mul(decimal.NewFromInt(100)).DivRound(b.Limit, 1).StringFixed(1)
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// upperFirst capitalises the first letter of s (a script without case
// stays as it is).
func upperFirst(s string) string {
	c, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(c)) + s[n:]
}

var currencySymbols = map[string]string{"CNY": "¥", "USD": "$", "EUR": "€", "GBP": "£"}

// FormatMoney shows an amount with thousands separators and two decimals: "¥ 1,234.50" for CNY (also $, €, £ for USD, EUR, GBP),
// "CHF 1,234.50" for other codes, "1,234.50" without a currency. The amount
// was rounded by the billing engine; this only pads it, never rounds: an
// amount with more digits than the currency's minor unit is shown as it is.
func FormatMoney(d decimal.Decimal, currency string) string {
	const minor = 2 // what the billing engine rounds to, whatever the currency
	var digits string
	if d.Exponent() < -minor {
		digits = d.String()
	} else {
		digits = d.StringFixed(minor) // pads with zeros: d has no more digits than minor
	}
	num := groupDigits(digits)
	if sym, ok := currencySymbols[currency]; ok {
		return sym + " " + num
	}
	if currency != "" {
		return currency + " " + num
	}
	return num
}

// groupDigits inserts a comma every three digits of the integer part of a
// plain decimal string ("-1234567.5" → "-1,234,567.5").
func groupDigits(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String() + frac
}
