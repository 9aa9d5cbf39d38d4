package notify

import (
	"fmt"
	"strings"
	"time"

	"github.com/cardhour/cardhour/billing"
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
func Render(m Message, lang string) (subject, body string, err error) {
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
		switch m.Facts.Budget.Scope {
		case "project", "student":
		default:
			return "", "", fmt.Errorf("notify: budget scope %q (want project or student)", m.Facts.Budget.Scope)
		}
		if m.Facts.Budget.Percent <= 0 {
			return "", "", fmt.Errorf("notify: budget threshold %d %% (want the percentage crossed, e.g. 80)", m.Facts.Budget.Percent)
		}
		switch m.Facts.Budget.Unit {
		case "money", "card_hours":
		default:
			return "", "", fmt.Errorf("notify: budget unit %q (want money or card_hours)", m.Facts.Budget.Unit)
		}
	} else if m.Facts.InstanceID == "" {
		return "", "", fmt.Errorf("notify: %s message without an instance id", m.Kind)
	}
	r := renderer{f: m.Facts, loc: m.Facts.TZ}
	if r.loc == nil {
		r.loc = time.UTC
	}
	if l == LangZH {
		subject, body = r.zh(m.Kind)
	} else {
		subject, body = r.en(m.Kind)
	}
	return subject, body, nil
}

type renderer struct {
	f   Facts
	loc *time.Location
	b   strings.Builder
}

func (r *renderer) line(format string, args ...any) {
	fmt.Fprintf(&r.b, format, args...)
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

// ---------------------------------------------------------------- English

func (r *renderer) en(k billing.AlertKind) (string, string) {
	f := r.f
	if k == billing.AlertBudgetThreshold {
		return r.enBudget()
	}
	inst := f.InstanceID
	where := inst
	if f.Node != "" {
		where += " on " + f.Node
	}
	who := "the GPU instance held by " + enHolder(f)
	var subject string
	switch k {
	case billing.AlertIdleWarning:
		subject = "[cardhour] Idle GPU instance " + where
		r.line("%s has been idle since %s.", upperFirst(who), r.at(f.IdleSince))
	case billing.AlertIdleReminder:
		subject = "[cardhour] Reminder: GPU instance " + where + " is still idle"
		r.line("Reminder: %s is still idle, since %s.", who, r.at(f.IdleSince))
	case billing.AlertIdleRelease:
		subject = "[cardhour] GPU instance " + where + " was released"
		r.line("%s was released at %s after being idle since %s.", upperFirst(who), r.at(f.At), r.at(f.IdleSince))
	case billing.AlertIdleReleaseDryRun:
		subject = "[cardhour] GPU instance " + where + " would have been released (dry run)"
		r.line("%s has been idle since %s and would have been released at %s.", upperFirst(who), r.at(f.IdleSince), r.at(f.At))
		r.line("The release policy is a dry run: nothing was done; the instance is still held and billed.")
	case billing.AlertIdleReleaseFailed:
		subject = "[cardhour] GPU instance " + where + " could not be released"
		r.line("%s has been idle since %s and could not be released at %s.", upperFirst(who), r.at(f.IdleSince), r.at(f.At))
		r.line("It is still held, and billing continues until it is released.")
	}
	r.blank()
	r.enInstance()
	r.blank()
	switch k {
	case billing.AlertIdleRelease:
		if f.Outcome != "" {
			r.line("What was done: %s", f.Outcome)
		}
	case billing.AlertIdleReleaseDryRun:
		if f.Outcome != "" {
			r.line("What would have been done: %s", f.Outcome)
		}
	case billing.AlertIdleReleaseFailed:
		if f.Outcome != "" {
			r.line("Why: %s", f.Outcome)
		}
		r.line("Please release the instance yourself if you no longer need it.")
	}
	switch f.NextAction {
	case "release":
		if k == billing.AlertIdleReleaseFailed {
			r.line("Next: another release attempt at %s, if it is still idle.", r.at(f.NextAt))
		} else {
			r.line("Next: if it stays idle, it will be released automatically at %s.", r.at(f.NextAt))
		}
	case "reminder":
		r.line("Next: if it stays idle, another reminder at %s.", r.at(f.NextAt))
	default:
		switch k {
		case billing.AlertIdleWarning, billing.AlertIdleReminder, billing.AlertIdleReleaseDryRun:
			r.line("Next: nothing happens automatically. Idle time is billed like any held time; release the instance if you no longer need it.")
		}
	}
	if k == billing.AlertIdleRelease {
		r.line("If you still need such an instance idle for a while (a long experiment), ask for an exemption before the next time: %s", enHint(f.ExemptionHint))
	} else {
		r.line("To keep it although it is idle (a long experiment), ask for an exemption: %s", enHint(f.ExemptionHint))
	}
	r.blank()
	r.line("Times are in %s.", r.loc)
	return subject, r.b.String()
}

func (r *renderer) enInstance() {
	f := r.f
	kind := f.GPUModel
	if f.Profile != "" {
		kind = strings.TrimSpace(kind + ", MIG " + f.Profile)
	} else if kind != "" {
		kind += ", whole GPU"
	}
	if kind != "" {
		r.line("Instance:    %s (%s)", f.InstanceID, kind)
	} else {
		r.line("Instance:    %s", f.InstanceID)
	}
	r.line("Node:        %s", dash(f.Node))
	r.line("GPU:         %s", dash(f.GPUUUID))
	r.line("Held since:  %s%s", r.at(f.HeldSince), enFor(f.HeldSince, f.At))
	r.line("Idle since:  %s%s", r.at(f.IdleSince), enFor(f.IdleSince, f.At))
	r.line("Cost so far: %s", FormatMoney(f.Cost, f.Currency))
}

func (r *renderer) enBudget() (string, string) {
	f, b := r.f, r.f.Budget
	var scope, subject string
	if b.Scope == "student" {
		scope = fmt.Sprintf("The budget of %s in project %s", dash(f.User), dash(f.Project))
		subject = fmt.Sprintf("[cardhour] Budget of %s in project %s: %d %% reached", dash(f.User), dash(f.Project), b.Percent)
	} else {
		scope = "The budget of project " + dash(f.Project)
		subject = fmt.Sprintf("[cardhour] Budget of project %s: %d %% reached", dash(f.Project), b.Percent)
	}
	r.line("%s for %s has reached its %d %% threshold: %s %% is used.", scope, dash(b.Period), b.Percent, share(b))
	r.blank()
	r.line("Project: %s", dash(f.Project))
	if b.Scope == "student" {
		r.line("Student: %s", dash(f.User))
	}
	r.line("Period:  %s", dash(b.Period))
	r.line("Limit:   %s", r.budgetAmount(b.Limit, b.Unit, LangEN))
	r.line("Used:    %s (%s %%)", r.budgetAmount(b.Used, b.Unit, LangEN), share(b))
	if !f.At.IsZero() {
		r.line("As of:   %s", r.at(f.At))
	}
	r.blank()
	if f.NextAction == "release" {
		if b.Scope == "student" {
			r.line("Next: the instances %s holds will be released at %s.", dash(f.User), r.at(f.NextAt))
		} else {
			r.line("Next: the instances held in project %s will be released at %s.", dash(f.Project), r.at(f.NextAt))
		}
	} else {
		r.line("Next: nothing is released for this budget; further use is billed as usual.")
	}
	r.line("To ask for a larger budget or an exemption: %s", enHint(f.ExemptionHint))
	r.blank()
	r.line("Times are in %s.", r.loc)
	return subject, r.b.String()
}

func enHolder(f Facts) string {
	if f.User == "" {
		return "project " + dash(f.Project)
	}
	return f.User + " (project " + dash(f.Project) + ")"
}

func enHint(h string) string {
	if h == "" {
		return "contact your project lead or the administrators."
	}
	return h
}

func enFor(since, at time.Time) string {
	if since.IsZero() || at.IsZero() || at.Before(since) {
		return ""
	}
	return " (for " + durationEN(at.Sub(since)) + ")"
}

func durationEN(d time.Duration) string {
	days, hours, mins := splitDuration(d)
	var parts []string
	if days > 0 {
		parts = append(parts, fmt.Sprintf("%d d", days))
	}
	if hours > 0 {
		parts = append(parts, fmt.Sprintf("%d h", hours))
	}
	if mins > 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%d min", mins))
	}
	return strings.Join(parts, " ")
}

// ---------------------------------------------------------------- 中文

func (r *renderer) zh(k billing.AlertKind) (string, string) {
	f := r.f
	if k == billing.AlertBudgetThreshold {
		return r.zhBudget()
	}
	where := f.InstanceID + " "
	if f.Node != "" {
		where = f.InstanceID + "（" + f.Node + "）"
	}
	who := zhHolder(f) + "占用的 GPU 实例 " + f.InstanceID
	var subject string
	switch k {
	case billing.AlertIdleWarning:
		subject = "【cardhour】GPU 实例 " + where + "空闲提醒"
		r.line("%s 自 %s 起一直空闲。", who, r.at(f.IdleSince))
	case billing.AlertIdleReminder:
		subject = "【cardhour】再次提醒：GPU 实例 " + where + "仍在空闲"
		r.line("再次提醒：%s 自 %s 起仍在空闲。", who, r.at(f.IdleSince))
	case billing.AlertIdleRelease:
		subject = "【cardhour】GPU 实例 " + where + "已被释放"
		r.line("%s 自 %s 起空闲，已于 %s 被释放。", who, r.at(f.IdleSince), r.at(f.At))
	case billing.AlertIdleReleaseDryRun:
		subject = "【cardhour】GPU 实例 " + where + "本应被释放（演练模式）"
		r.line("%s 自 %s 起空闲，按策略本应于 %s 被释放。", who, r.at(f.IdleSince), r.at(f.At))
		r.line("当前释放策略为演练模式（dry-run）：未执行任何操作，该实例仍被占用并继续计费。")
	case billing.AlertIdleReleaseFailed:
		subject = "【cardhour】GPU 实例 " + where + "释放失败"
		r.line("%s 自 %s 起空闲，于 %s 尝试释放但未能释放。", who, r.at(f.IdleSince), r.at(f.At))
		r.line("该实例仍被占用，释放之前继续计费。")
	}
	r.blank()
	r.zhInstance()
	r.blank()
	switch k {
	case billing.AlertIdleRelease:
		if f.Outcome != "" {
			r.line("执行的操作：%s", f.Outcome)
		}
	case billing.AlertIdleReleaseDryRun:
		if f.Outcome != "" {
			r.line("本应执行的操作：%s", f.Outcome)
		}
	case billing.AlertIdleReleaseFailed:
		if f.Outcome != "" {
			r.line("失败原因：%s", f.Outcome)
		}
		r.line("如不再使用，请主动释放该实例。")
	}
	switch f.NextAction {
	case "release":
		if k == billing.AlertIdleReleaseFailed {
			r.line("下一步：若仍空闲，将于 %s 再次尝试释放。", r.at(f.NextAt))
		} else {
			r.line("下一步：若继续空闲，将于 %s 自动释放。", r.at(f.NextAt))
		}
	case "reminder":
		r.line("下一步：若继续空闲，将于 %s 再次提醒。", r.at(f.NextAt))
	default:
		switch k {
		case billing.AlertIdleWarning, billing.AlertIdleReminder, billing.AlertIdleReleaseDryRun:
			r.line("下一步：不会自动处理。空闲时间同样计费，如不再使用请主动释放。")
		}
	}
	if k == billing.AlertIdleRelease {
		r.line("如以后需要让实例空闲保留一段时间（例如长时间实验），请提前申请豁免：%s", zhHint(f.ExemptionHint))
	} else {
		r.line("如需在空闲时保留该实例（例如长时间实验），请申请豁免：%s", zhHint(f.ExemptionHint))
	}
	r.blank()
	r.line("以上时间均为 %s 时区时间。", r.loc)
	return subject, r.b.String()
}

func (r *renderer) zhInstance() {
	f := r.f
	kind := f.GPUModel
	if f.Profile != "" {
		kind = strings.TrimSpace(kind + "，MIG " + f.Profile)
	} else if kind != "" {
		kind += "，整卡"
	}
	if kind != "" {
		r.line("实例：%s（%s）", f.InstanceID, kind)
	} else {
		r.line("实例：%s", f.InstanceID)
	}
	r.line("节点：%s", dash(f.Node))
	r.line("GPU：%s", dash(f.GPUUUID))
	r.line("占用起始：%s%s", r.at(f.HeldSince), zhFor("已占用", f.HeldSince, f.At))
	r.line("空闲起始：%s%s", r.at(f.IdleSince), zhFor("已空闲", f.IdleSince, f.At))
	r.line("截至目前费用：%s", FormatMoney(f.Cost, f.Currency))
}

func (r *renderer) zhBudget() (string, string) {
	f, b := r.f, r.f.Budget
	var scope, subject string
	if b.Scope == "student" {
		scope = fmt.Sprintf("项目 %s 中 %s 的配额", dash(f.Project), dash(f.User))
		subject = fmt.Sprintf("【cardhour】项目 %s 中 %s 的配额已达 %d%%", dash(f.Project), dash(f.User), b.Percent)
	} else {
		scope = fmt.Sprintf("项目 %s 的配额", dash(f.Project))
		subject = fmt.Sprintf("【cardhour】项目 %s 的配额已达 %d%%", dash(f.Project), b.Percent)
	}
	r.line("%s（%s）已达到 %d%% 的提醒阈值：已使用 %s%%。", scope, dash(b.Period), b.Percent, share(b))
	r.blank()
	r.line("项目：%s", dash(f.Project))
	if b.Scope == "student" {
		r.line("学生：%s", dash(f.User))
	}
	r.line("周期：%s", dash(b.Period))
	r.line("上限：%s", r.budgetAmount(b.Limit, b.Unit, LangZH))
	r.line("已用：%s（%s%%）", r.budgetAmount(b.Used, b.Unit, LangZH), share(b))
	if !f.At.IsZero() {
		r.line("统计时间：%s", r.at(f.At))
	}
	r.blank()
	if f.NextAction == "release" {
		if b.Scope == "student" {
			r.line("下一步：%s 占用的实例将于 %s 被释放。", dash(f.User), r.at(f.NextAt))
		} else {
			r.line("下一步：项目 %s 占用的实例将于 %s 被释放。", dash(f.Project), r.at(f.NextAt))
		}
	} else {
		r.line("下一步：不会因该配额释放任何实例；超出部分照常计费。")
	}
	r.line("如需提高配额或申请豁免：%s", zhHint(f.ExemptionHint))
	r.blank()
	r.line("以上时间均为 %s 时区时间。", r.loc)
	return subject, r.b.String()
}

func zhHolder(f Facts) string {
	if f.User == "" {
		return "项目 " + dash(f.Project) + " "
	}
	return "项目 " + dash(f.Project) + " 的用户 " + f.User + " "
}

func zhHint(h string) string {
	if h == "" {
		return "请联系项目负责人或管理员。"
	}
	return h
}

func zhFor(prefix string, since, at time.Time) string {
	if since.IsZero() || at.IsZero() || at.Before(since) {
		return ""
	}
	return "（" + prefix + " " + durationZH(at.Sub(since)) + "）"
}

func durationZH(d time.Duration) string {
	days, hours, mins := splitDuration(d)
	var parts []string
	if days > 0 {
		parts = append(parts, fmt.Sprintf("%d 天", days))
	}
	if hours > 0 {
		parts = append(parts, fmt.Sprintf("%d 小时", hours))
	}
	if mins > 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%d 分钟", mins))
	}
	return strings.Join(parts, " ")
}

// ---------------------------------------------------------------- shared

func splitDuration(d time.Duration) (days, hours, mins int64) {
	m := int64(d / time.Minute)
	return m / (24 * 60), m / 60 % 24, m % 60
}

func (r *renderer) budgetAmount(d decimal.Decimal, unit, lang string) string {
	if unit == "money" {
		return FormatMoney(d, r.f.Currency)
	}
	if lang == LangZH {
		return groupDigits(d.String()) + " 卡时"
	}
	return groupDigits(d.String()) + " card-hours"
}

// share is Used / Limit as a percentage with one decimal, for display only
// (it is not money); "—" without a positive limit.
func share(b *BudgetFacts) string {
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

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
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
