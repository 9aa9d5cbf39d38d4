package ledgertest

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/internal/sqlstore"
)

// Explainer runs the database's EXPLAIN of query (? placeholders) with args:
// its rows, and the column (from 0) of the text that names the indexes used.
type Explainer func(t *testing.T, query string, args ...any) (rows *sql.Rows, detail int)

// planText reads an EXPLAIN's rows: their detail column, one line each.
func planText(t *testing.T, rows *sql.Rows, detail int) string {
	t.Helper()
	defer rows.Close() //nolint:errcheck // read-only
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, fmt.Sprintf("%s", vals[detail]))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

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
		rows, detail := explain(t, query, args...)
		if plan := planText(t, rows, detail); !strings.Contains(plan, tc.index) {
			t.Errorf("%s: the plan of %s uses no index %s:\n%s", tc.name, query, tc.index, plan)
		}
	}
}
