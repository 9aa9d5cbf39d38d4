package ledgertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/internal/sqlstore"
)

// Explainer returns the database's plan for query (? placeholders) with args,
// as text that names the indexes it uses.
type Explainer func(t *testing.T, query string, args ...any) string

// ReleaseListsUseIndexes checks that the release list the watcher makes every
// cycle (the pending releases) and the one a billing run makes (a status
// changed since the period began) are served by index ledger_releases_status,
// on a store open makes with a few hundred releases in it: a scan of every
// release ever made would grow with the ledger's age.
func ReleaseListsUseIndexes(t *testing.T, open Opener, explain Explainer) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	for i := range 300 {
		r := get3(s.BeginRelease(ctx, "watch", newRelease(fmt.Sprintf("gpu-%d", i), t0, false)))(t)
		if i%10 != 0 {
			get(s.FinishRelease(ctx, "watch", r.ID, ledger.ReleaseResult{Status: billing.ReleaseDone, Action: "deleted pod"}))(t)
		}
		clock.Advance(time.Minute)
	}
	since := t0.Add(4 * time.Hour)
	for _, tc := range []struct {
		name  string
		f     ledger.ReleaseFilter
		index string
	}{
		{"pending (watcher)", ledger.ReleaseFilter{Status: billing.ReleasePending, Limit: ledger.MaxLimit}, "ledger_releases_status"},
		{"failed since (billing run)", ledger.ReleaseFilter{Status: billing.ReleaseFailed, UpdatedSince: since, Limit: ledger.MaxLimit}, "ledger_releases_status"},
	} {
		query, args, err := sqlstore.ReleasesSQL(tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if plan := explain(t, query, args...); !strings.Contains(plan, tc.index) {
			t.Errorf("%s: the plan of %s uses no index %s:\n%s", tc.name, query, tc.index, plan)
		}
	}
}
