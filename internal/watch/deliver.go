package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/watch/alert"
)

// Deliver sends the deliveries due at now and waits for the attempts it
// started. Deliveries of one channel go one after another; channels go
// side by side, and a channel whose earlier attempt is still under way is
// skipped this round, so a slow channel delays only itself.
func (w *Watcher) Deliver(ctx context.Context, now time.Time) int {
	n := w.startDeliveries(ctx, now)
	w.wg.Wait()
	return n
}

// startDeliveries starts sending what is due at now without waiting; it
// returns how many deliveries it started.
func (w *Watcher) startDeliveries(ctx context.Context, now time.Time) int {
	if w.cfg.Notifier == nil {
		return 0
	}
	if _, err := w.Backlog(ctx); err != nil {
		w.log.Warn("cannot count the delivery backlog", "err", err)
	}
	// A channel whose earlier round ends after this read is skipped too:
	// what this read found due, that round may have sent meanwhile.
	w.mu.Lock()
	readAt := w.roundSeq
	w.mu.Unlock()
	due, err := w.cfg.Ledger.DueDeliveries(ctx, now, ledger.MaxLimit)
	if err != nil {
		w.log.Error("cannot read due deliveries", "err", err)
		return 0
	}
	by := map[string][]ledger.Delivery{}
	var order []string
	for _, d := range due {
		if _, ok := by[d.Channel]; !ok {
			order = append(order, d.Channel)
		}
		by[d.Channel] = append(by[d.Channel], d)
	}
	n := 0
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range order {
		if w.inFlight[ch] || w.roundEnd[ch] > readAt {
			continue
		}
		w.inFlight[ch] = true
		ds := by[ch]
		n += len(ds)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer func() {
				w.mu.Lock()
				delete(w.inFlight, ch)
				w.roundSeq++
				w.roundEnd[ch] = w.roundSeq
				w.mu.Unlock()
			}()
			for _, d := range ds {
				if ctx.Err() != nil {
					return
				}
				w.deliver(ctx, d, now)
			}
		}()
	}
	return n
}

// deliver makes one attempt at d and records it: sent, retried after the
// notifier's backoff, or failed for good (a permanent error, or the retry
// horizon spent).
func (w *Watcher) deliver(ctx context.Context, d ledger.Delivery, now time.Time) {
	var e alert.Envelope
	var sendErr error
	if err := json.Unmarshal(d.Payload, &e); err != nil {
		sendErr = fmt.Errorf("stored envelope cannot be read: %w", err)
	} else {
		sctx, cancel := context.WithTimeout(ctx, w.cfg.SendTimeout)
		sendErr = w.cfg.Notifier.Send(sctx, e)
		cancel()
	}
	if sendErr != nil && ctx.Err() != nil {
		return // shutting down: the attempt is not the channel's fault; it stays due
	}
	failure, retryAt := "", time.Time{}
	if sendErr != nil {
		failure = sendErr.Error()
		if !w.cfg.Notifier.Permanent(sendErr) {
			retryAt = w.retryAt(d, now)
		}
	}
	out, err := w.cfg.Ledger.FinishDelivery(context.WithoutCancel(ctx), Actor, d.ID, failure, retryAt)
	if err != nil {
		w.log.Error("cannot record a delivery attempt", "delivery", d.ID, "err", err)
		return
	}
	switch out.Status {
	case ledger.DeliverySent:
		w.m.sent.WithLabelValues(d.Channel).Inc()
	case ledger.DeliveryFailed:
		w.m.failed.WithLabelValues(d.Channel).Inc()
		w.log.Warn("delivery failed for good", "delivery", d.ID, "alert", d.AlertID, "channel", d.Channel, "to", d.Recipient,
			"attempts", out.Attempts, "err", failure)
	default:
		w.m.retried.WithLabelValues(d.Channel).Inc()
	}
}

// retryAt is when d, whose attempt at now failed, is tried again: after
// the notifier's backoff (capped), and at the latest when its retry
// horizon (DeliveryRetryFor from RetryFrom) ends, so that the last
// attempt is made then; zero once the horizon is spent (failed for good).
func (w *Watcher) retryAt(d ledger.Delivery, now time.Time) time.Time {
	from := d.RetryFrom
	if from.IsZero() {
		from = d.CreatedAt
	}
	end := from.Add(w.cfg.DeliveryRetryFor)
	if !now.Before(end) {
		return time.Time{}
	}
	next := now.Add(max(w.cfg.Notifier.Backoff(d.Attempts+1), time.Second))
	if next.After(end) {
		next = end
	}
	return next
}

// Backlog counts the deliveries pending and failed for good and sets the
// backlog gauges.
func (w *Watcher) Backlog(ctx context.Context) (ledger.DeliveryCounts, error) {
	c, err := w.cfg.Ledger.DeliveryBacklog(ctx)
	if err != nil {
		return c, err
	}
	w.m.backlog.WithLabelValues(string(ledger.DeliveryPending)).Set(float64(c.Pending))
	w.m.backlog.WithLabelValues(string(ledger.DeliveryFailed)).Set(float64(c.Failed))
	return c, nil
}
