package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/watch/alert"
)

// A release asked for by a person (the holder from the dashboard, or the
// project's lead, an admin): carried out by the same releasers as the
// idle policy's, recorded the same way (BeginRelease before the releaser
// is called, FinishRelease after), with the person as the actor, under a
// key of its own per holding, so a second click or a retry never releases
// twice. Its evidence names who asked (requested_by); the watcher's passes
// that tell releases leave such a release alone: the person saw its
// outcome in the answer.

// ErrNoReleaser: no releaser is configured, so nothing can be released.
var ErrNoReleaser = errors.New("no releaser is configured on this server: nothing can be released from here; ask an administrator")

// AskedLedger is what an asked release records in the state store.
type AskedLedger interface {
	BeginRelease(ctx context.Context, actor string, r ledger.NewRelease) (rel ledger.Release, started bool, err error)
	FinishRelease(ctx context.Context, actor string, id int64, res ledger.ReleaseResult) (ledger.Release, error)
	Releases(ctx context.Context, f ledger.ReleaseFilter) (page []ledger.Release, next string, err error)
}

// AskedReleaseKey is the natural key of an asked release: the holding
// (instance and the start of its occupancy, Unix ms).
func AskedReleaseKey(instance string, heldSince time.Time) string {
	return "asked|" + instance + "|" + strconv.FormatInt(heldSince.UnixMilli(), 10)
}

// IsAskedRelease reports whether r was asked for by a person.
func IsAskedRelease(r ledger.Release) bool {
	return strings.HasPrefix(r.Key, "asked|") || bytes.Contains(r.Evidence, []byte(`"requested_by"`))
}

// ReleaseAsked releases the held instance h now, at actor's request, with
// rel (the releasers the watch file configures; nil: ErrNoReleaser, nothing
// recorded). repeated: this holding's release was asked for before (done,
// in progress, or failed for good), and nothing was done this time. A
// failed attempt that retrying may cure is tried again at the next request.
func ReleaseAsked(ctx context.Context, led AskedLedger, rel Releaser, timeout time.Duration, actor string, h reads.Held, now time.Time) (out ledger.Release, repeated bool, err error) {
	if rel == nil {
		return ledger.Release{}, false, ErrNoReleaser
	}
	if done, ok, err := askedBefore(ctx, led, h); err != nil || ok {
		return done, ok, err
	}
	ev := mustJSON(struct {
		RequestedBy string    `json:"requested_by"`
		HeldSince   time.Time `json:"held_since"`
		LastSample  time.Time `json:"last_sample"`
		Idle        bool      `json:"idle"`
		IdleSince   time.Time `json:"idle_since,omitzero"`
	}{actor, h.Since, h.LastSample, h.Idle, h.IdleSince})
	nr := ledger.NewRelease{Key: AskedReleaseKey(h.InstanceID, h.Since), InstanceID: h.InstanceID, Node: h.Node, Project: h.Project,
		User: h.User, StreakStart: h.Since, Evidence: ev}
	r, started, err := led.BeginRelease(ctx, actor, nr)
	if err != nil || !started {
		return r, err == nil, err
	}
	req := alert.ReleaseRequest{Key: nr.Key, Evidence: alert.ReleaseEvidence{StreakStart: h.Since, StreakEnd: now},
		Target: alert.ReleaseTarget{Node: h.Node, GPUUUID: h.GPUUUID, InstanceID: h.InstanceID, GPUModel: h.GPUModel, Profile: h.Profile,
			Project: h.Project, User: h.User, HolderRef: h.HolderRef}}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	o, err := rel.Release(rctx, req)
	cancel()
	var res ledger.ReleaseResult
	switch {
	case err == nil && o.Released:
		res = ledger.ReleaseResult{Status: billing.ReleaseDone, Action: o.Action}
	case err == nil:
		res = ledger.ReleaseResult{Status: billing.ReleaseFailed, Action: o.Action, Failure: "the releaser released nothing"}
	default:
		res = ledger.ReleaseResult{Status: billing.ReleaseFailed, Action: o.Action, Failure: err.Error()}
		if !rel.Permanent(err) {
			res.RetryAt = now // the next request tries again
		}
	}
	out, err = led.FinishRelease(context.WithoutCancel(ctx), actor, r.ID, res)
	if err != nil {
		return r, false, fmt.Errorf("watch: release %s: %w", nr.Key, err)
	}
	return out, false, nil
}

// askedBefore finds a release of h's instance and holder done since the
// holding began (asked for or by the idle policy): the holding is released
// already.
func askedBefore(ctx context.Context, led AskedLedger, h reads.Held) (ledger.Release, bool, error) {
	page, _, err := led.Releases(ctx, ledger.ReleaseFilter{InstanceID: h.InstanceID, User: h.User, Project: h.Project,
		Status: billing.ReleaseDone, UpdatedSince: h.Since, Limit: 1})
	if err != nil || len(page) == 0 {
		return ledger.Release{}, false, err
	}
	return page[0], true, nil
}
