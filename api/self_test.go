package api_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/watch"
	"github.com/cardhour/cardhour/internal/watch/alert"
)

// fakeReleaser releases what it is asked (or fails with err), counting.
type fakeReleaser struct {
	mu   sync.Mutex
	reqs []alert.ReleaseRequest
	err  error
}

var errNoHandle = errors.New("no pod to delete")

func (f *fakeReleaser) Release(_ context.Context, r alert.ReleaseRequest) (alert.ReleaseOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r)
	if f.err != nil {
		return alert.ReleaseOutcome{}, f.err
	}
	return alert.ReleaseOutcome{Released: true, Action: "deleted pod ai101/" + r.Target.InstanceID}, nil
}

func (f *fakeReleaser) Permanent(err error) bool { return errors.Is(err, errNoHandle) }

func (f *fakeReleaser) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

// askedReleases is what cmd/cardhour wires: watch.ReleaseAsked over the
// ledger with a releaser (nil: none configured).
type askedReleases struct {
	led ledger.Store
	rel watch.Releaser
}

func (a askedReleases) ReleaseHeld(ctx context.Context, actor string, h reads.Held) (ledger.Release, bool, error) {
	r, rep, err := watch.ReleaseAsked(ctx, a.led, a.rel, time.Second, actor, h, now)
	if errors.Is(err, watch.ErrNoReleaser) {
		err = fmt.Errorf("%w: %w", api.ErrNotReleased, err)
	}
	return r, rep, err
}

// A student releases their own slice once: the releaser is called once,
// the release is recorded done with the student as the actor (audited),
// a second click is repeated and calls nothing; another's slice is 403;
// a releaser that fails is 409 not-released, recorded failed; with no
// releaser configured, 409 saying so, nothing recorded.
func TestStudentReleasesTheirOwnSlice(t *testing.T) {
	f := newFixture(t)
	r := f.do("student", "POST", "/api/v1/held/release", `{"instance":"MIG-1"}`, "application/json")
	require.Equal(t, 200, r.Status, string(r.Body))
	body := r.json(t)
	rel := body["release"].(map[string]any)
	require.Equal(t, "done", rel["status"])
	require.Equal(t, false, body["repeated"])
	require.Equal(t, "deleted pod ai101/MIG-1", rel["action"])
	require.Equal(t, 1, f.releaser.count())
	require.Equal(t, "s-alice", f.releaser.reqs[0].Target.User)

	r = f.do("student", "POST", "/api/v1/held/release", `{"instance":"MIG-1"}`, "application/json")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, true, r.json(t)["repeated"])
	require.Equal(t, 1, f.releaser.count(), "a second click releases nothing")

	rs, _, err := f.led.Releases(context.Background(), ledger.ReleaseFilter{InstanceID: "MIG-1"})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Contains(t, string(rs[0].Evidence), `"requested_by"`)
	audit, _, err := f.led.Audit(context.Background(), ledger.AuditFilter{Object: fmt.Sprintf("release/%d", rs[0].ID)})
	require.NoError(t, err)
	require.NotEmpty(t, audit)
	for _, a := range audit {
		require.Regexp(t, `^token:\d+$`, a.Actor, "the student is the actor")
	}

	r = f.do("student", "POST", "/api/v1/held/release", `{"instance":"MIG-2"}`, "application/json")
	require.Equal(t, 403, r.Status, "s-bob's slice: %s", r.Body)
	// s-bob's slice was released by the watcher during this holding: a
	// release asked for now finds it done and does nothing.
	r = f.do("lead", "POST", "/api/v1/held/release", `{"instance":"MIG-2"}`, "application/json")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, true, r.json(t)["repeated"])
	require.Equal(t, 1, f.releaser.count())
	r = f.do("student", "POST", "/api/v1/held/release", `{"instance":"NOPE"}`, "application/json")
	require.Equal(t, 403, r.Status, "nothing held by that name: %s", r.Body)
	r = f.do("admin", "POST", "/api/v1/held/release", `{"instance":"NOPE"}`, "application/json")
	require.Equal(t, 404, r.Status, string(r.Body))

	f.releaser.err = errNoHandle
	r = f.do("admin", "POST", "/api/v1/held/release", `{"instance":"GPU-3"}`, "application/json")
	require.Equal(t, 409, r.Status, string(r.Body))
	require.Equal(t, api.ProblemNotReleased, r.json(t)["type"])
	require.Contains(t, r.json(t)["detail"], "nothing was released")
	rs, _, err = f.led.Releases(context.Background(), ledger.ReleaseFilter{InstanceID: "GPU-3", Status: "failed"})
	require.NoError(t, err)
	require.Len(t, rs, 1)

	f.srv, err = api.New(api.Config{Ledger: f.led, Usage: f.usage, Clock: func() time.Time { return now }, MaxBodyBytes: 1 << 20})
	require.NoError(t, err)
	f.srv.MarkServing(true)
	f.h = f.srv.Handler()
	r = f.do("finance", "POST", "/api/v1/held/release", `{"instance":"GPU-3"}`, "application/json")
	require.Equal(t, 409, r.Status, string(r.Body))
	require.Contains(t, r.json(t)["detail"], "no releaser is configured")
}

// A student asks; the lead sees it pending, grants it (the exemption is in
// force), cannot decide it again, nor decide another project's.
func TestExemptionRequestFlow(t *testing.T) {
	f := newFixture(t)
	r := f.do("student", "POST", "/api/v1/exemption-requests", `{"until":"2026-12-12T00:00:00Z","reason":"deadline"}`, "application/json")
	require.Equal(t, 201, r.Status, string(r.Body))
	id := int64(r.json(t)["id"].(float64))
	require.Equal(t, "pending", r.json(t)["status"])
	require.Equal(t, "s-alice", r.json(t)["user"])

	r = f.do("lead", "GET", "/api/v1/exemption-requests?status=pending", "", "")
	require.Equal(t, 200, r.Status)
	require.Len(t, r.json(t)["items"], 2, string(r.Body)) // the fixture's and this one; not nlp-lab's

	r = f.do("lead", "POST", fmt.Sprintf("/api/v1/exemption-requests/%d/grant", id), `{"answer":"fine"}`, "application/json")
	require.Equal(t, 200, r.Status, string(r.Body))
	ex := r.json(t)["exemption"].(map[string]any)
	require.Equal(t, "s-alice", ex["user"])
	require.Equal(t, true, ex["active"])
	r = f.do("lead", "POST", fmt.Sprintf("/api/v1/exemption-requests/%d/refuse", id), `{"reason":"no"}`, "application/json")
	require.Equal(t, 409, r.Status, string(r.Body))
	r = f.do("lead", "POST", fmt.Sprintf("/api/v1/exemption-requests/%d/grant", f.ids["request-carol"]), `{}`, "application/json")
	require.Equal(t, 403, r.Status, "another project's request: %s", r.Body)
	r = f.do("student", "GET", "/api/v1/exemption-requests?user=s-bob", "", "")
	require.Equal(t, 403, r.Status)
}
