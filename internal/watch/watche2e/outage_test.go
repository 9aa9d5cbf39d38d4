package watche2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/schemas"
)

// A 6-hour receiver outage in simulated time loses nothing: the alerts
// recorded during it (warnings and reminders of four students, idle from
// different hours) are retried with capped backoff and every one reaches
// the receiver, once per recipient, after it comes back. The backlog gauge
// shows them pending during the outage and nothing failed after.
func TestReceiverOutageLosesNothing(t *testing.T) {
	clock := ledgertest.NewClock(t0)
	l := openSQLite(t, filepath.Join(t.TempDir(), "ledger.db"), clock.Now)
	importRoster(t, l)
	var samples []schemas.Sample
	for i, u := range []string{"s1", "s2", "s3", "s4"} {
		from := t0.Add(time.Duration(i) * 80 * time.Minute)
		samples = append(samples, idleSamples("calm", u, fmt.Sprintf("MIG-%s", u), from, from.Add(2*time.Hour))...)
	}
	rec := newReceiver(t)
	rec.setDown(true)
	reg := prometheus.NewRegistry()
	cat := smallCat(t)
	w := newWatcher(t, cat, harnessOpts{ledger: l, usage: memUsage(t, samples), notifier: notifierTo(t, rec.srv.URL),
		admins: []alert.Person{{Name: "ops", Email: "ops@example.edu"}}, reg: reg})
	ctx := context.Background()
	up := t0.Add(6 * time.Hour)
	maxPending := 0.0
	for at := t0; !at.After(up.Add(time.Hour)); at = at.Add(time.Minute) {
		if !at.Before(up) {
			rec.setDown(false)
		}
		clock.Set(at)
		_, err := w.Cycle(ctx, at)
		require.NoError(t, err)
		w.Deliver(ctx, at)
		if at.Before(up) {
			require.Empty(t, rec.payloads())
			maxPending = max(maxPending, testutil.ToFloat64(backlogGauge(t, reg, "pending")))
		}
	}
	as, _, err := l.Alerts(ctx, ledger.AlertFilter{Limit: ledger.MaxLimit})
	require.NoError(t, err)
	require.Len(t, as, 8, "a warning and a reminder for each of the four")
	got := map[string]int{}
	for _, p := range rec.payloads() {
		got[p.Key+" "+p.To.Role]++
	}
	for _, a := range as {
		for _, role := range []string{"holder", "admin"} {
			require.Equal(t, 1, got[a.Key+" "+role], "%s to the %s (recorded %s)", a.Key, role, a.CreatedAt.Sub(t0))
		}
	}
	require.Len(t, rec.payloads(), 16)
	c, err := l.DeliveryBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, ledger.DeliveryCounts{}, c)
	require.Equal(t, 16.0, maxPending, "the gauge showed the backlog during the outage")
	require.Equal(t, 0.0, testutil.ToFloat64(backlogGauge(t, reg, "failed")))
}

// After its horizon a delivery fails for good; an admin re-sends it and it
// arrives.
func TestDeliveryHorizonAndResend(t *testing.T) {
	clock := ledgertest.NewClock(t0)
	l := openSQLite(t, filepath.Join(t.TempDir(), "ledger.db"), clock.Now)
	importRoster(t, l)
	rec := newReceiver(t)
	rec.setDown(true)
	reg := prometheus.NewRegistry()
	w := newWatcher(t, smallCat(t), harnessOpts{ledger: l, usage: memUsage(t, idleSamples("calm", "s1", "MIG-s1", t0, t0.Add(40*time.Minute))),
		notifier: notifierTo(t, rec.srv.URL), retryFor: 2 * time.Hour, reg: reg})
	ctx := context.Background()
	for at := t0; !at.After(t0.Add(3 * time.Hour)); at = at.Add(time.Minute) {
		clock.Set(at)
		_, err := w.Cycle(ctx, at)
		require.NoError(t, err)
		w.Deliver(ctx, at)
	}
	failed, _, err := l.Deliveries(ctx, ledger.DeliveryFilter{Status: ledger.DeliveryFailed})
	require.NoError(t, err)
	require.Len(t, failed, 1, "the warning to the holder failed after 2 h")
	require.Equal(t, 1.0, testutil.ToFloat64(backlogGauge(t, reg, "failed")))
	require.True(t, failed[0].UpdatedAt.Sub(failed[0].RetryFrom) >= 2*time.Hour, "retried for the whole horizon: %s", failed[0].UpdatedAt.Sub(failed[0].RetryFrom))
	require.Less(t, failed[0].UpdatedAt.Sub(failed[0].RetryFrom), 2*time.Hour+2*time.Minute)

	rec.setDown(false)
	d, err := l.ResendDelivery(ctx, "admin:root", failed[0].ID)
	require.NoError(t, err)
	require.Equal(t, ledger.DeliveryPending, d.Status)
	_, err = l.ResendDelivery(ctx, "admin:root", failed[0].ID)
	require.ErrorIs(t, err, ledger.ErrInvalidTransition)
	w.Deliver(ctx, clock.Now())
	require.Len(t, rec.payloads(), 1)
	require.Equal(t, string(billing.AlertIdleWarning), string(rec.payloads()[0].Kind))
	c, err := l.DeliveryBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, ledger.DeliveryCounts{}, c)
}

func backlogGauge(t *testing.T, reg *prometheus.Registry, status string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "cardhour_watch_delivery_backlog" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "status" && lp.GetValue() == status {
					return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return m.GetGauge().GetValue() })
				}
			}
		}
	}
	t.Fatalf("no cardhour_watch_delivery_backlog{status=%q}", status)
	return nil
}
