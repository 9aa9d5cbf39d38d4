package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/shopspring/decimal"
)

// What the watcher (internal/watch) keeps: alerts with their deliveries,
// releases, exemptions and budgets. Part of Store; this file holds the
// types and the checks both implementations share.
//
// Alerts and releases are decisions: each has a natural key under a unique
// constraint and is written before it is acted on (an outbox), so that a
// restart, a retry or a second replica never sends an alert twice or
// releases an instance twice.

// WatchStore is the watcher's part of Store.
type WatchStore interface {
	// RecordAlert stores a new alert with its planned deliveries (pending,
	// due at their NextAttemptAt) in one transaction. When an alert with
	// the same natural key exists, nothing is written: it is returned with
	// created false.
	RecordAlert(ctx context.Context, actor string, a NewAlert, ds []NewDelivery) (alert Alert, created bool, err error)
	// Alert returns one alert.
	Alert(ctx context.Context, id int64) (Alert, error)
	// AlertByKey returns the alert with that natural key.
	AlertByKey(ctx context.Context, key string) (Alert, error)
	// Alerts lists alerts, newest first, filtered and paginated.
	Alerts(ctx context.Context, f AlertFilter) (page []Alert, next string, err error)
	// AckAlert acknowledges an alert; acknowledging twice is
	// ErrInvalidTransition.
	AckAlert(ctx context.Context, actor string, id int64) (Alert, error)

	// DueDeliveries returns up to limit pending deliveries due at now,
	// oldest due first.
	DueDeliveries(ctx context.Context, now time.Time, limit int) ([]Delivery, error)
	// FinishDelivery records one attempt: sent when failure is "", else
	// the failure with the next attempt at retryAt (pending), or failed
	// for good when retryAt is zero. A sent or failed delivery is never
	// changed (ErrInvalidTransition).
	FinishDelivery(ctx context.Context, actor string, id int64, failure string, retryAt time.Time) (Delivery, error)
	// Deliveries lists deliveries, newest first, filtered and paginated.
	Deliveries(ctx context.Context, f DeliveryFilter) (page []Delivery, next string, err error)
	// Delivery returns one delivery.
	Delivery(ctx context.Context, id int64) (Delivery, error)
	// ResendDelivery makes a failed delivery pending again, due now, with
	// a new retry horizon from now (RetryFrom); its attempts and last
	// error are kept. Re-sending one that is not failed is
	// ErrInvalidTransition.
	ResendDelivery(ctx context.Context, actor string, id int64) (Delivery, error)
	// DeliveryBacklog counts the deliveries pending (due or waiting for
	// a retry) and failed for good.
	DeliveryBacklog(ctx context.Context) (DeliveryCounts, error)

	// BeginRelease records a release attempt before it is made: the
	// release is created pending, or a pending one begun ReleaseStale ago
	// or more (an attempt that never finished) or a failed one whose retry
	// time has come counts one more attempt, and started is true.
	// Otherwise (in progress, done, dry run, failed for good or not yet
	// due) it is returned as it is with started false.
	BeginRelease(ctx context.Context, actor string, r NewRelease) (rel Release, started bool, err error)
	// FinishRelease records the attempt's outcome.
	FinishRelease(ctx context.Context, actor string, id int64, res ReleaseResult) (Release, error)
	// Release returns one release; ReleaseByKey by its natural key.
	Release(ctx context.Context, id int64) (Release, error)
	ReleaseByKey(ctx context.Context, key string) (Release, error)
	// Releases lists releases, newest first, filtered and paginated.
	Releases(ctx context.Context, f ReleaseFilter) (page []Release, next string, err error)

	// Exemption returns one exemption.
	Exemption(ctx context.Context, id int64) (Exemption, error)
	// GrantExemption stores an exemption granted by actor.
	GrantExemption(ctx context.Context, actor string, e NewExemption) (Exemption, error)
	// RevokeExemption ends an exemption now; revoking twice is
	// ErrInvalidTransition.
	RevokeExemption(ctx context.Context, actor string, id int64) (Exemption, error)
	// Exemptions lists exemptions, newest first, filtered and paginated.
	Exemptions(ctx context.Context, f ExemptionFilter) (page []Exemption, next string, err error)

	// PutBudget creates the budget of b's natural key (scope, project,
	// user, period kind, unit) or replaces its limit, thresholds and
	// action. Storing what is stored changes nothing.
	PutBudget(ctx context.Context, actor string, b Budget) (Budget, error)
	// DeleteBudget removes a budget (its alerts stay).
	DeleteBudget(ctx context.Context, actor string, id int64) error
	// Budget returns one budget.
	Budget(ctx context.Context, id int64) (Budget, error)
	// Budgets lists budgets, newest first, filtered and paginated.
	Budgets(ctx context.Context, f BudgetFilter) (page []Budget, next string, err error)
	// RecordBudgetUsage stores what the watcher measured of each budget
	// (by ID), in one transaction, not audited (it is measured every
	// cycle). A budget deleted meanwhile is skipped; its limit, thresholds
	// and action are never changed.
	RecordBudgetUsage(ctx context.Context, usage map[int64]BudgetUsage) error
}

// ---------------------------------------------------------------- alerts

// IdleAlertKey is the natural key of an idle alert: its kind, the instance
// and the start of the idle streak (Unix ms).
func IdleAlertKey(kind billing.AlertKind, instance string, streakStart time.Time) string {
	return string(kind) + "|" + instance + "|" + strconv.FormatInt(streakStart.UnixMilli(), 10)
}

// BudgetAlertKey is the natural key of a budget alert: scope, subject
// (project, or project/user), unit, period ("2026-12" or a term id) and
// threshold in percent.
func BudgetAlertKey(scope billing.BudgetScope, project, user string, unit billing.BudgetUnit, period string, threshold int) string {
	subject := project
	if scope == billing.BudgetStudent {
		subject += "/" + user
	}
	return string(billing.AlertBudgetThreshold) + "|" + string(scope) + "|" + subject + "|" + string(unit) + "|" + period + "|" + strconv.Itoa(threshold)
}

// NewAlert is an alert to record.
type NewAlert struct {
	Key         string // natural key: IdleAlertKey or BudgetAlertKey
	Kind        billing.AlertKind
	Project     string
	User        string
	InstanceID  string
	StreakStart time.Time // idle alerts
	BudgetID    int64     // budget alerts
	Period      string    // budget alerts
	Threshold   int       // budget alerts, percent
	Facts       json.RawMessage
}

// Alert is a recorded alert.
type Alert struct {
	ID int64
	NewAlert
	CreatedAt time.Time
	AckedBy   string
	AckedAt   time.Time // zero unless acknowledged
}

// AlertFilter selects alerts; zero fields match everything.
type AlertFilter struct {
	Project    string
	User       string
	InstanceID string
	Kind       billing.AlertKind
	Since      time.Time // created at or after
	Unacked    bool      // only alerts nobody acknowledged
	Acked      bool      // only acknowledged alerts
	Cursor     string
	Limit      int
}

// CheckNewAlert reports every problem with a at once.
func CheckNewAlert(a *NewAlert) error {
	var errs []error
	if strings.TrimSpace(a.Key) == "" {
		errs = append(errs, errors.New("natural key is required"))
	}
	if !a.Kind.Valid() {
		errs = append(errs, fmt.Errorf("kind %q: want one of %s", a.Kind, alertKindList()))
	}
	if a.Facts == nil {
		a.Facts = json.RawMessage(`{}`)
	}
	if !json.Valid(a.Facts) {
		errs = append(errs, errors.New("facts are not valid JSON"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: alert %s: %w", ErrInvalidArgument, a.Key, errors.Join(errs...))
	}
	return nil
}

// ---------------------------------------------------------------- deliveries

// DeliveryStatus is where a delivery is.
type DeliveryStatus string

// Delivery statuses: pending (to be sent at NextAttemptAt), sent, failed
// (for good: a permanent error, or the retry horizon spent; an admin can
// re-send it).
const (
	DeliveryPending DeliveryStatus = "pending"
	DeliverySent    DeliveryStatus = "sent"
	DeliveryFailed  DeliveryStatus = "failed"
)

// NewDelivery is one message of an alert to send: the rendered envelope as
// the notifier made it (Payload, JSON), to one recipient on one channel.
type NewDelivery struct {
	Channel       string
	Recipient     string
	Payload       json.RawMessage
	NextAttemptAt time.Time // the first attempt; zero: at once
}

// Delivery is a stored delivery.
type Delivery struct {
	ID      int64
	AlertID int64
	NewDelivery
	Status    DeliveryStatus
	Attempts  int
	LastError string
	CreatedAt time.Time
	UpdatedAt time.Time
	SentAt    time.Time // zero unless sent
	// RetryFrom is the start of the retry horizon: when the delivery was
	// first due, or when it was last re-sent (ResendDelivery).
	RetryFrom time.Time
}

// DeliveryCounts is the delivery backlog.
type DeliveryCounts struct {
	Pending int64 // due now or waiting for a retry
	Failed  int64 // failed for good (a permanent error or the horizon spent); ResendDelivery sends them again
}

// DeliveryFilter selects deliveries; zero fields match everything.
type DeliveryFilter struct {
	AlertID int64
	Channel string
	Status  DeliveryStatus
	Cursor  string
	Limit   int
}

// CheckNewDeliveries reports every problem with ds at once.
func CheckNewDeliveries(ds []NewDelivery) error {
	var errs []error
	seen := map[[2]string]int{}
	for i := range ds {
		d := &ds[i]
		n := i + 1
		if strings.TrimSpace(d.Channel) == "" {
			errs = append(errs, fmt.Errorf("delivery %d: channel is required", n))
		}
		if strings.TrimSpace(d.Recipient) == "" {
			errs = append(errs, fmt.Errorf("delivery %d: recipient is required", n))
		}
		if !json.Valid(d.Payload) {
			errs = append(errs, fmt.Errorf("delivery %d: payload is not valid JSON", n))
		}
		k := [2]string{d.Channel, d.Recipient}
		if first, dup := seen[k]; dup {
			errs = append(errs, fmt.Errorf("delivery %d repeats delivery %d (%s to %s)", n, first, d.Channel, d.Recipient))
		}
		seen[k] = n
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: deliveries: %w", ErrInvalidArgument, errors.Join(errs...))
	}
	return nil
}

// CheckDeliveryStatus rejects an unknown status ("" is allowed: any).
func CheckDeliveryStatus(s DeliveryStatus) error {
	switch s {
	case "", DeliveryPending, DeliverySent, DeliveryFailed:
		return nil
	}
	return fmt.Errorf("%w: delivery status %q: want pending, sent or failed", ErrInvalidArgument, s)
}

// ---------------------------------------------------------------- releases

// ReleaseStale is how long a pending release attempt is taken to be in
// progress; after it, the attempt is presumed lost (a crash) and the next
// BeginRelease starts it again.
const ReleaseStale = 10 * time.Minute

// ReleaseKey is the natural key of a release: the instance and the start of
// the idle streak (Unix ms) that called for it.
func ReleaseKey(instance string, streakStart time.Time) string {
	return instance + "|" + strconv.FormatInt(streakStart.UnixMilli(), 10)
}

// NewRelease is a release to record.
type NewRelease struct {
	Key         string // ReleaseKey
	InstanceID  string
	Node        string
	Project     string
	User        string
	StreakStart time.Time
	DryRun      bool
	Evidence    json.RawMessage // the streak and its samples
}

// ReleaseResult is what one attempt did.
type ReleaseResult struct {
	Status  billing.ReleaseStatus // done, dry_run or failed
	Action  string                // what was (or would have been) done
	Failure string                // failed only
	RetryAt time.Time             // failed only; zero: never retried
}

// Release is a stored release.
type Release struct {
	ID int64
	NewRelease
	Status    billing.ReleaseStatus
	Action    string
	Attempts  int
	LastError string
	RetryAt   time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ReleaseFilter selects releases; zero fields match everything.
type ReleaseFilter struct {
	Project    string
	User       string
	InstanceID string
	Status     billing.ReleaseStatus
	// UpdatedSince: only releases last changed (begun or finished) at or
	// after this time.
	UpdatedSince time.Time
	Cursor       string
	Limit        int
}

// CheckNewRelease reports every problem with r at once.
func CheckNewRelease(r *NewRelease) error {
	var errs []error
	if strings.TrimSpace(r.Key) == "" {
		errs = append(errs, errors.New("natural key is required"))
	}
	if strings.TrimSpace(r.InstanceID) == "" {
		errs = append(errs, errors.New("instance is required"))
	}
	if r.StreakStart.IsZero() {
		errs = append(errs, errors.New("streak start is required"))
	}
	if r.Evidence == nil {
		r.Evidence = json.RawMessage(`{}`)
	}
	if !json.Valid(r.Evidence) {
		errs = append(errs, errors.New("evidence is not valid JSON"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: release %s: %w", ErrInvalidArgument, r.Key, errors.Join(errs...))
	}
	return nil
}

// CheckReleaseResult rejects an outcome that is not one.
func CheckReleaseResult(r *ReleaseResult) error {
	switch r.Status {
	case billing.ReleaseDone, billing.ReleaseDryRun:
		if r.Failure != "" || !r.RetryAt.IsZero() {
			return fmt.Errorf("%w: release result %s with a failure or a retry time", ErrInvalidArgument, r.Status)
		}
	case billing.ReleaseFailed:
		if strings.TrimSpace(r.Failure) == "" {
			return fmt.Errorf("%w: a failed release needs its failure", ErrInvalidArgument)
		}
	default:
		return fmt.Errorf("%w: release result status %q: want done, dry_run or failed", ErrInvalidArgument, r.Status)
	}
	return nil
}

// ---------------------------------------------------------------- exemptions

// NewExemption exempts a project's held instances from idle warnings and
// releases until Until: all of them, one student's (User), or one instance
// (InstanceID; with User, that student's use of it).
type NewExemption struct {
	Project    string
	User       string
	InstanceID string
	Until      time.Time
	Reason     string
}

// Exemption is a stored exemption.
type Exemption struct {
	ID int64
	NewExemption
	GrantedBy string
	CreatedAt time.Time
	RevokedBy string
	RevokedAt time.Time // zero unless revoked
}

// End is when the exemption stops: Until, or its revocation when earlier.
func (e Exemption) End() time.Time {
	if !e.RevokedAt.IsZero() && e.RevokedAt.Before(e.Until) {
		return e.RevokedAt
	}
	return e.Until
}

// ActiveAt reports whether the exemption is in force at t.
func (e Exemption) ActiveAt(t time.Time) bool {
	return !t.Before(e.CreatedAt) && t.Before(e.End())
}

// Covers reports whether the exemption is about that held instance.
func (e Exemption) Covers(project, user, instance string) bool {
	return e.Project == project && (e.User == "" || e.User == user) && (e.InstanceID == "" || e.InstanceID == instance)
}

// ExemptionFilter selects exemptions; zero fields match everything.
type ExemptionFilter struct {
	Project    string
	User       string // exemptions of this user or of the whole project
	InstanceID string
	ActiveAt   time.Time // in force at this time
	EndsAfter  time.Time // until (or revocation) after this time
	Cursor     string
	Limit      int
}

// CheckNewExemption reports every problem with e at once; now is the
// store's time (an exemption must end in the future).
func CheckNewExemption(e *NewExemption, now time.Time) error {
	var errs []error
	if strings.TrimSpace(e.Project) == "" {
		errs = append(errs, errors.New("project is required"))
	}
	if !e.Until.After(now) {
		errs = append(errs, fmt.Errorf("until %s: want a time after now (%s)", e.Until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)))
	}
	if strings.TrimSpace(e.Reason) == "" {
		errs = append(errs, errors.New("reason is required"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: exemption: %w", ErrInvalidArgument, errors.Join(errs...))
	}
	return nil
}

// ---------------------------------------------------------------- budgets

// DefaultThresholds are a budget's alert thresholds when none are given.
var DefaultThresholds = []int{50, 80, 100}

// Budget is a ceiling (配额上限) of a project or of one student in a
// project.
type Budget struct {
	ID         int64
	Scope      billing.BudgetScope
	Project    string
	User       string // student scope only
	Period     billing.BudgetPeriodKind
	Unit       billing.BudgetUnit
	Limit      string // decimal, > 0
	Thresholds []int  // percent, ascending; default 50, 80, 100
	Action     billing.BudgetAction
	CreatedBy  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Usage is what the watcher last measured of it (zero Period: never).
	Usage BudgetUsage
}

// BudgetUsage is what a budget's subject used in one period of the budget,
// measured by the watcher at AsOf: money (the month-to-date bill, or the
// term's list price) and card-milliseconds held.
type BudgetUsage struct {
	Period     string // "2026-11", or the term's ID
	Start, End time.Time
	Money      decimal.Decimal
	CardMS     int64
	AsOf       time.Time
}

// LimitDecimal is the budget's limit.
func (b Budget) LimitDecimal() decimal.Decimal {
	d, _ := decimal.NewFromString(b.Limit)
	return d
}

// LimitText is the limit as the API and a budget release's evidence write
// it: a money limit with the currency's minor digits (billing.FormatMoney,
// "880.00"), card-hours as set.
func (b Budget) LimitText() string {
	if b.Unit == billing.BudgetMoney {
		return billing.FormatMoney(b.LimitDecimal())
	}
	return b.Limit
}

// BudgetFilter selects budgets; zero fields match everything.
type BudgetFilter struct {
	Scope   billing.BudgetScope
	Project string
	User    string
	Cursor  string
	Limit   int
}

// CheckBudget reports every problem with b at once and fills the defaults
// (thresholds, action warn), sorting the thresholds.
func CheckBudget(b *Budget) error {
	var errs []error
	switch b.Scope {
	case billing.BudgetProject:
		if b.User != "" {
			errs = append(errs, errors.New("scope project takes no user"))
		}
	case billing.BudgetStudent:
		if strings.TrimSpace(b.User) == "" {
			errs = append(errs, errors.New("scope student needs a user"))
		}
	default:
		errs = append(errs, fmt.Errorf("scope %q: want project or student", b.Scope))
	}
	if strings.TrimSpace(b.Project) == "" {
		errs = append(errs, errors.New("project is required"))
	}
	if !b.Period.Valid() {
		errs = append(errs, fmt.Errorf("period %q: want month or term", b.Period))
	}
	if !b.Unit.Valid() {
		errs = append(errs, fmt.Errorf("unit %q: want money or card_hours", b.Unit))
	}
	if d, err := decimal.NewFromString(strings.TrimSpace(b.Limit)); err != nil || strings.ContainsAny(b.Limit, "eE") {
		errs = append(errs, fmt.Errorf("limit %q: want a decimal amount such as \"500.00\"", b.Limit))
	} else if d.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("limit %q: want more than 0", b.Limit))
	} else {
		b.Limit = d.String()
	}
	if b.Action == "" {
		b.Action = billing.BudgetWarn
	}
	if !b.Action.Valid() {
		errs = append(errs, fmt.Errorf("action %q: want warn or release", b.Action))
	}
	if len(b.Thresholds) == 0 {
		b.Thresholds = slices.Clone(DefaultThresholds)
	}
	b.Thresholds = slices.Clone(b.Thresholds)
	slices.Sort(b.Thresholds)
	for i, t := range b.Thresholds {
		if t < 1 || t > 1000 {
			errs = append(errs, fmt.Errorf("threshold %d %%: want 1 to 1000", t))
		}
		if i > 0 && t == b.Thresholds[i-1] {
			errs = append(errs, fmt.Errorf("threshold %d %% is given twice", t))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: budget %s %s%s: %w", ErrInvalidArgument, b.Scope, b.Project, userSuffix(b.User), errors.Join(errs...))
	}
	return nil
}

func userSuffix(u string) string {
	if u == "" {
		return ""
	}
	return "/" + u
}

func alertKindList() string {
	names := make([]string, len(billing.AlertKinds))
	for i, k := range billing.AlertKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
