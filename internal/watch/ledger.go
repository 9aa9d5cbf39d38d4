package watch

import (
	"context"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// Ledger is what the watcher reads from and records in the state store: its
// lease, the alerts with their deliveries, the releases, the exemptions,
// budgets and roster it applies, and the exemption requests it tells. Any ledger.Store is one; a test may give a
// fake of just these.
type Ledger interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error

	RecordAlert(ctx context.Context, actor string, a ledger.NewAlert, ds []ledger.NewDelivery) (alert ledger.Alert, created bool, err error)
	AlertByKey(ctx context.Context, key string) (ledger.Alert, error)
	Alerts(ctx context.Context, f ledger.AlertFilter) (page []ledger.Alert, next string, err error)
	DueDeliveries(ctx context.Context, now time.Time, limit int) ([]ledger.Delivery, error)
	FinishDelivery(ctx context.Context, actor string, id int64, failure string, retryAt time.Time) (ledger.Delivery, error)
	DeliveryBacklog(ctx context.Context) (ledger.DeliveryCounts, error)

	BeginRelease(ctx context.Context, actor string, r ledger.NewRelease) (rel ledger.Release, started bool, err error)
	FinishRelease(ctx context.Context, actor string, id int64, res ledger.ReleaseResult) (ledger.Release, error)
	Releases(ctx context.Context, f ledger.ReleaseFilter) (page []ledger.Release, next string, err error)

	Exemptions(ctx context.Context, f ledger.ExemptionFilter) (page []ledger.Exemption, next string, err error)
	ExemptionRequests(ctx context.Context, f ledger.ExemptionRequestFilter) (page []ledger.ExemptionRequest, next string, err error)
	Budgets(ctx context.Context, f ledger.BudgetFilter) (page []ledger.Budget, next string, err error)
	RecordBudgetUsage(ctx context.Context, usage map[int64]ledger.BudgetUsage) error
	Students(ctx context.Context, f ledger.StudentFilter) (page []ledger.Student, next string, err error)
}

var _ Ledger = ledger.Store(nil)
