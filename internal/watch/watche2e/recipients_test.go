package watche2e

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/watch/alert"
)

// Two admins and two leads of the watch file without a user: each is a
// recipient of its own on the webhook channel, and each receives the alert.
func TestEveryPersonIsARecipient(t *testing.T) {
	clock := ledgertest.NewClock(t0)
	l := openSQLite(t, filepath.Join(t.TempDir(), "ledger.db"), clock.Now)
	importRoster(t, l)
	rec := newReceiver(t)
	w := newWatcher(t, smallCat(t), harnessOpts{ledger: l, usage: memUsage(t, idleSamples("calm", "s1", "MIG-s1", t0, t0.Add(40*time.Minute))),
		notifier: notifierTo(t, rec.srv.URL),
		admins:   []alert.Person{{Name: "Ops A", Email: "ops-a@example.edu"}, {Name: "Ops B", IM: "dingtalk:0412"}},
		leads:    map[string][]alert.Person{"calm": {{Name: "Prof. Li", Email: "li@example.edu"}, {Name: "Prof. Wang", Email: "wang@example.edu"}}}})
	ctx := context.Background()
	at := t0.Add(35 * time.Minute)
	clock.Set(at)
	_, err := w.Cycle(ctx, at)
	require.NoError(t, err)
	w.Deliver(ctx, at)
	var got []string
	for _, p := range rec.payloads() {
		require.Equal(t, string(billing.AlertIdleWarning), string(p.Kind))
		got = append(got, p.To.Role+" "+p.To.Name)
	}
	slices.Sort(got)
	require.Equal(t, []string{"admin Ops A", "admin Ops B", "holder s1", "lead Prof. Li", "lead Prof. Wang"}, got)
	ds, _, err := l.Deliveries(ctx, ledger.DeliveryFilter{Status: ledger.DeliverySent})
	require.NoError(t, err)
	require.Len(t, ds, 5, "one delivery each")
}
