package watch

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/schemas"
)

// Budgets (配额). What a budget counts comes from the billing engine, never
// from a formula of its own:
//   - per month: the month-to-date bill (reads.BillFrom over the current
//     period): a project's invoice total (reservations included), a
//     student's usage lines; card-hours are the lines' used time;
//   - per term: reads.Usage over [term start, now): held hours, and their
//     list price (terms need not start on a month's first day, which
//     invoices do).
//
// Each threshold of a budget alerts once per period (its natural key names
// scope, subject, unit, period and threshold). When several thresholds are
// crossed at once only the highest is sent; the lower ones are recorded
// without deliveries, so that they are never sent later. At 100 % and
// over, a budget with action release releases the held instances of its
// student (or, for a project budget, of its project), each holding once;
// the alert at 100 % tells what the budget's releases of the period did, as
// the ledger records them (budgetOutcome).

// spent is what one subject used in one period.
type spent struct {
	money decimal.Decimal
	ms    int64 // card-milliseconds held
}

type subject struct{ project, user string } // user "" for the project

func (w *Watcher) budgets(ctx context.Context, cat *schemas.Catalog, held []reads.Held, now time.Time, rep *CycleReport) error {
	var all []ledger.Budget
	cursor := ""
	for {
		page, next, err := w.cfg.Ledger.Budgets(ctx, ledger.BudgetFilter{Cursor: cursor, Limit: ledger.MaxLimit})
		if err != nil {
			return fmt.Errorf("watch: budgets: %w", err)
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(all) == 0 || cat.Location == nil {
		return nil
	}
	lt := now.In(cat.Location)
	month := billing.NewPeriod(lt.Year(), lt.Month(), cat.Location)
	term, inTerm := cat.TermAt(now)
	var needMonth, needTerm bool
	for _, b := range all {
		needMonth = needMonth || b.Period == billing.BudgetMonth
		needTerm = needTerm || b.Period == billing.BudgetTerm && inTerm
	}
	since := month.Start
	if needTerm && term.Start.Before(since) {
		since = term.Start
	}
	recorded, err := w.budgetAlertKeys(ctx, since)
	if err != nil {
		return err
	}
	var monthly, termly map[subject]spent
	if needMonth {
		if monthly, err = w.monthSpent(ctx, cat, month); err != nil {
			return err
		}
	}
	if needTerm {
		if termly, err = w.termSpent(ctx, cat, term.Start, now); err != nil {
			return err
		}
	}
	st := &state{alerts: recorded}
	var errs []error
	usage := make(map[int64]ledger.BudgetUsage, len(all))
	for _, b := range all {
		rep.Budgets++
		var used spent
		var period string
		var start, end time.Time
		switch b.Period {
		case billing.BudgetMonth:
			used, period, start, end = monthly[subject{b.Project, b.User}], month.String(), month.Start, month.End
		case billing.BudgetTerm:
			if !inTerm {
				continue // between terms nothing is counted
			}
			used, period, start, end = termly[subject{b.Project, b.User}], term.ID, term.Start, term.End
		}
		usage[b.ID] = ledger.BudgetUsage{Period: period, Start: start, End: end, Money: used.money, CardMS: used.ms, AsOf: now}
		if err := w.budget(ctx, cat, st, b, used, period, held, now, rep); err != nil {
			errs = append(errs, err)
		}
	}
	// What the budgets page shows (limit left, forecast): recorded even
	// when an alert failed, since the measure itself holds.
	if err := w.cfg.Ledger.RecordBudgetUsage(ctx, usage); err != nil {
		errs = append(errs, fmt.Errorf("watch: record budget usage: %w", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("watch: budgets: %w", errors.Join(errs...))
	}
	return nil
}

// budgetAlertKeys are the natural keys of the budget alerts recorded since.
func (w *Watcher) budgetAlertKeys(ctx context.Context, since time.Time) (map[string]bool, error) {
	recorded := map[string]bool{}
	cursor := ""
	for {
		page, next, err := w.cfg.Ledger.Alerts(ctx, ledger.AlertFilter{Kind: billing.AlertBudgetThreshold, Since: since, Cursor: cursor, Limit: ledger.MaxLimit})
		if err != nil {
			return nil, fmt.Errorf("watch: budget alerts: %w", err)
		}
		for _, a := range page {
			recorded[a.Key] = true
		}
		if next == "" {
			return recorded, nil
		}
		cursor = next
	}
}

func (w *Watcher) monthSpent(ctx context.Context, cat *schemas.Catalog, p billing.Period) (map[subject]spent, error) {
	res, err := reads.BillFrom(ctx, w.cfg.Usage, cat, p)
	if err != nil {
		return nil, fmt.Errorf("watch: month-to-date bill of %s: %w", p, err)
	}
	out := map[subject]spent{}
	add := func(k subject, money decimal.Decimal, ms int64) {
		s := out[k]
		s.money = s.money.Add(money)
		s.ms += ms
		out[k] = s
	}
	for _, inv := range res.Invoices {
		add(subject{inv.Project, ""}, inv.Total, 0)
		for _, l := range inv.Lines {
			if l.Kind != billing.KindUsage {
				continue
			}
			add(subject{inv.Project, l.User}, l.Amount, l.UsedMS)
			add(subject{inv.Project, ""}, decimal.Zero, l.UsedMS)
		}
		for _, u := range inv.Unpriced {
			add(subject{inv.Project, u.User}, decimal.Zero, u.UsedMS)
			add(subject{inv.Project, ""}, decimal.Zero, u.UsedMS)
		}
	}
	return out, nil
}

func (w *Watcher) termSpent(ctx context.Context, cat *schemas.Catalog, from, now time.Time) (map[subject]spent, error) {
	if !from.Before(now) {
		return map[subject]spent{}, nil
	}
	rep, err := reads.Usage(ctx, w.cfg.Usage, cat, reads.UsageQuery{From: from, To: now, GroupBy: []string{reads.ByProject, reads.ByUser}})
	if err != nil {
		return nil, fmt.Errorf("watch: term-to-date usage: %w", err)
	}
	out := map[subject]spent{}
	for _, r := range rep.Rows {
		for _, k := range []subject{{r.Project, r.User}, {r.Project, ""}} {
			s := out[k]
			s.money = s.money.Add(r.Cost.Decimal)
			s.ms += r.HeldSeconds * 1000
			out[k] = s
		}
	}
	return out, nil
}

var msPerHour = decimal.NewFromInt(3_600_000)

// crossed reports whether used reaches pct % of the budget's limit, exactly.
func crossed(b ledger.Budget, used spent, pct int) bool {
	lim := b.LimitDecimal().Mul(decimal.NewFromInt(int64(pct)))
	if b.Unit == billing.BudgetCardHours {
		return decimal.NewFromInt(used.ms).Mul(decimal.NewFromInt(100)).GreaterThanOrEqual(lim.Mul(msPerHour))
	}
	return used.money.Mul(decimal.NewFromInt(100)).GreaterThanOrEqual(lim)
}

func (w *Watcher) budget(ctx context.Context, cat *schemas.Catalog, st *state, b ledger.Budget, used spent, period string,
	held []reads.Held, now time.Time, rep *CycleReport) error {
	var due []int
	for _, t := range b.Thresholds {
		if crossed(b, used, t) && !st.alerts[ledger.BudgetAlertKey(b.Scope, b.Project, b.User, b.Unit, period, t)] {
			due = append(due, t)
		}
	}
	over := len(b.Thresholds) > 0 && crossed(b, used, 100)
	var made []ledger.Release // this cycle's releases
	if over && b.Action == billing.BudgetRelease {
		for i := range held {
			h := &held[i]
			if h.Project != b.Project || b.Scope == billing.BudgetStudent && h.User != b.User {
				continue
			}
			since, err := w.holdingStart(ctx, h)
			if err != nil {
				return err
			}
			nr := ledger.NewRelease{Key: ledger.ReleaseKey(h.InstanceID, since), InstanceID: h.InstanceID, Node: h.Node,
				Project: h.Project, User: h.User, StreakStart: since,
				Evidence: mustJSON(map[string]any{"budget_id": b.ID, "scope": b.Scope, "period": period, "unit": b.Unit,
					"limit": b.LimitText(), "used_money": billing.FormatMoney(used.money), "used_card_ms": used.ms, "held_since": since})}
			rel, err := w.release(ctx, h, nr, alert.ReleaseEvidence{StreakStart: since, StreakEnd: now}, now, rep)
			if err != nil {
				return err
			}
			made = append(made, rel)
		}
	}
	if len(due) == 0 {
		return nil
	}
	var outcome []string
	if due[len(due)-1] >= 100 && b.Action == billing.BudgetRelease {
		var err error
		if outcome, err = w.budgetOutcome(ctx, b, period, made, now); err != nil {
			return err
		}
	}
	usedOut := used.money
	if b.Unit == billing.BudgetCardHours {
		usedOut = decimal.NewFromInt(used.ms).DivRound(msPerHour, 6) // hours, for the message; thresholds compare exactly
	}
	people := w.people(ctx, b.Project, b.User)
	if b.Scope == billing.BudgetProject {
		people = w.people(ctx, b.Project, "")
	}
	for i, t := range due {
		top := i == len(due)-1
		f := alert.Facts{Project: b.Project, User: b.User, At: now, Currency: cat.Currency, TZ: cat.Location, Cost: billing.Money{Decimal: used.money},
			ExemptionHint: w.cfg.ExemptionHint,
			Budget:        &alert.BudgetFacts{Scope: b.Scope, Period: period, Unit: b.Unit, Limit: b.LimitDecimal(), Used: usedOut, Percent: t}}
		if top && t >= 100 && len(outcome) > 0 {
			f.Outcome = strings.Join(outcome, "; ")
		}
		var to []alert.Person
		if top {
			to = people // lower thresholds crossed at the same time are recorded, not sent
		}
		key := ledger.BudgetAlertKey(b.Scope, b.Project, b.User, b.Unit, period, t)
		if err := w.record(ctx, st, ledger.NewAlert{Key: key, Kind: billing.AlertBudgetThreshold, Project: b.Project, User: b.User,
			BudgetID: b.ID, Period: period, Threshold: t}, f, to, time.Time{}); err != nil {
			return err
		}
		rep.Alerts++
	}
	return nil
}

// budgetOutcome is what the releases of budget b in period did, told by
// its alert at 100 %: those made this cycle and those the ledger records
// with the budget and period in their evidence, finished since
// holdingLookback. Read from the ledger, a release finished by a process
// that stopped before it recorded the alert is told by the alert the next
// leader records.
func (w *Watcher) budgetOutcome(ctx context.Context, b ledger.Budget, period string, made []ledger.Release, now time.Time) ([]string, error) {
	byID := map[int64]ledger.Release{}
	for _, r := range made {
		if r.ID != 0 {
			byID[r.ID] = r
		}
	}
	f := ledger.ReleaseFilter{Project: b.Project, UpdatedSince: now.Add(-holdingLookback), Limit: ledger.MaxLimit}
	if b.Scope == billing.BudgetStudent {
		f.User = b.User
	}
	for {
		page, next, err := w.cfg.Ledger.Releases(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("watch: releases of budget %d: %w", b.ID, err)
		}
		for _, r := range page {
			var ev struct {
				BudgetID int64  `json:"budget_id"`
				Period   string `json:"period"`
			}
			if isBudgetRelease(r) && json.Unmarshal(r.Evidence, &ev) == nil && ev.BudgetID == b.ID && ev.Period == period {
				byID[r.ID] = r
			}
		}
		if next == "" {
			break
		}
		f.Cursor = next
	}
	rels := slices.Collect(maps.Values(byID))
	slices.SortFunc(rels, func(a, b ledger.Release) int { return cmp.Compare(a.ID, b.ID) })
	var out []string
	for _, r := range rels {
		switch r.Status {
		case billing.ReleaseDone:
			out = append(out, r.Action)
		case billing.ReleaseFailed:
			out = append(out, fmt.Sprintf("release of %s failed: %s", r.InstanceID, r.LastError))
		}
	}
	return out, nil
}

// holdingStart is when h's holding began, which names its budget release.
// A holding older than reads.HeldLookback is reported as beginning at
// the lookback's start, which moves with every cycle: its start is then
// the one the latest budget release of the instance and holder recorded at
// or before that point (a holding released once is not released again).
func (w *Watcher) holdingStart(ctx context.Context, h *reads.Held) (time.Time, error) {
	if !h.SinceClipped {
		return h.Since, nil
	}
	rels, _, err := w.cfg.Ledger.Releases(ctx, ledger.ReleaseFilter{InstanceID: h.InstanceID, Project: h.Project, User: h.User, Limit: 50})
	if err != nil {
		return time.Time{}, fmt.Errorf("watch: releases of %s: %w", h.InstanceID, err)
	}
	for _, r := range rels { // newest first
		if !r.StreakStart.After(h.Since) && bytes.Contains(r.Evidence, []byte(`"budget_id"`)) {
			return r.StreakStart, nil
		}
	}
	return h.Since, nil
}
