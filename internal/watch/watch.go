// Package watch is the reconciler of cardhour serve: every interval, the
// replica that holds the watch lease reads the held instances and their
// idle streaks from the usage store (reads.HeldNow), applies each
// project's idle policy (warn, remind, release off | dry-run | on, quiet
// hours, exemptions) and the budgets (month- or term-to-date cost and
// card-hours from the billing engine), and records every decision in the
// ledger under its natural key before acting on it. Messages are planned
// into deliveries written with their alert (an outbox) and sent by a
// delivery loop with backoff, apart from detection, so that a slow channel
// never stalls a cycle, and a restart or a second replica never sends an
// alert twice or releases an instance twice.
package watch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/schemas"
)

// Usage is what the watcher reads from the usage store: held samples (for
// HeldNow), the compact rows BillFrom bills from, and the sums Usage
// groups. ingest.MemStore, ingest/sqlite and ingest/clickhouse are one.
type Usage interface {
	reads.
		HeldRows
	reads.
		UsageSource
	reads.
		UsageRows
}

// Actor is what the watcher's changes are recorded as in the audit log.
const Actor = "watch"

// LeaseName is the ledger lease of the leader.
const LeaseName = "watch"

// Config configures a Watcher.
type Config struct {
	Ledger  Ledger                                          // required
	Usage   Usage                                           // required
	Catalog func(context.Context) (*schemas.Catalog, error) // required: the catalog in force
	// Notifier plans and sends messages; nil: alerts are recorded with no
	// deliveries.
	Notifier Notifier
	// Releaser carries releases out; nil: a release in mode on fails (and
	// says so), a dry run records that nothing is configured.
	Releaser Releaser
	Admins   []alert.Person            // reached by every alert the notifier routes to admins
	Leads    map[string][]alert.Person // by project
	// ExemptionHint tells a holder how to ask for an exemption.
	ExemptionHint string
	// DashboardURL is where people reach the dashboard
	// (https://gpu.example.edu, no trailing slash): an idle message then
	// links to the exemption request form of its instance
	// (<url>/ui/#/exemptions?request=<instance>) and a request's messages
	// to the Exemptions page. "": no links.
	DashboardURL string
	// BudgetEvery is how often budgets are checked (their cost is a
	// billing run): 0 checks them every cycle.
	BudgetEvery time.Duration
	// ReleaseTimeout bounds one release attempt (default 10 s);
	// SendTimeout one delivery attempt (default 20 s).
	ReleaseTimeout time.Duration
	SendTimeout    time.Duration
	// MaxReleasesPerCycle bounds the release attempts of one cycle
	// (default 20), so that a hanging releaser delays detection by at
	// most that many timeouts; the others wait for the next cycle.
	MaxReleasesPerCycle int
	// MaxReleaseAttempts: after this many failed attempts the release
	// fails for good (default 5).
	MaxReleaseAttempts int
	// DeliveryRetryFor is how long a delivery is retried (with the
	// notifier's capped backoff) from when it was first due or re-sent
	// before it fails for good (default DefaultDeliveryRetryFor): a
	// receiver that is down for less loses nothing.
	DeliveryRetryFor time.Duration
	// Registerer receives the metrics; nil registers nowhere.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// DefaultDeliveryRetryFor is how long a delivery is retried by default.
const DefaultDeliveryRetryFor = 24 * time.Hour

// Watcher is the reconciler. Cycle and Deliver may be called from tests
// with a frozen clock; Run drives both while holding the lease.
type Watcher struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	mu         sync.Mutex
	lastBudget time.Time
	toldFrom   time.Time         // when the latest complete pass of tellFinished began
	askedFrom  time.Time         // when the latest complete pass of tellRequests began
	inFlight   map[string]bool   // channels with a delivery under way
	roundSeq   uint64            // counts the delivery rounds that ended
	roundEnd   map[string]uint64 // by channel: roundSeq when its latest round ended
	wg         sync.WaitGroup
	rnd        *rand.Rand
}

// New checks cfg and returns a Watcher.
func New(cfg Config) (*Watcher, error) {
	var errs []error
	if cfg.Ledger == nil {
		errs = append(errs, errors.New("watch: a ledger is required"))
	}
	if cfg.Usage == nil {
		errs = append(errs, errors.New("watch: a usage store is required"))
	}
	if cfg.Catalog == nil {
		errs = append(errs, errors.New("watch: a catalog source is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.ReleaseTimeout <= 0 {
		cfg.ReleaseTimeout = 10 * time.Second
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 20 * time.Second
	}
	if cfg.MaxReleasesPerCycle <= 0 {
		cfg.MaxReleasesPerCycle = 20
	}
	if cfg.MaxReleaseAttempts <= 0 {
		cfg.MaxReleaseAttempts = 5
	}
	if cfg.DeliveryRetryFor <= 0 {
		cfg.DeliveryRetryFor = DefaultDeliveryRetryFor
	}
	cfg.DashboardURL = strings.TrimRight(cfg.DashboardURL, "/")
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Watcher{cfg: cfg, log: log, m: m, inFlight: map[string]bool{}, roundEnd: map[string]uint64{}, rnd: rand.New(rand.NewSource(time.Now().UnixNano()))}, nil
}

// CycleReport counts what one cycle did.
type CycleReport struct {
	Held       int // instances held
	Idle       int // of them idle
	Exempt     int // idle and exempt
	Alerts     int // alerts recorded
	Releases   int // release attempts made (dry runs included)
	Postponed  int // releases left for the next cycle (MaxReleasesPerCycle)
	Budgets    int // budgets checked
	Deferred   int // warnings or reminders held back by quiet hours
	BudgetsRun bool
}

// Cycle reads, decides and acts once, as of now. Every decision is
// recorded before it is acted on; calling Cycle again with the same state
// (a restart, a second replica) does nothing new.
func (w *Watcher) Cycle(ctx context.Context, now time.Time) (CycleReport, error) {
	start := time.Now()
	defer func() { w.m.cycle.Observe(time.Since(start).Seconds()) }()
	var rep CycleReport
	cat, err := w.cfg.Catalog(ctx)
	if err != nil {
		return rep, fmt.Errorf("watch: catalog: %w", err)
	}
	held, err := reads.HeldAt(ctx, w.cfg.Usage, cat, now, heldLookback(cat))
	if err != nil {
		return rep, fmt.Errorf("watch: %w", err)
	}
	rep.Held = len(held)
	st, err := w.loadState(ctx, cat, held, now)
	if err != nil {
		return rep, err
	}
	var errs []error
	if err := w.settleStale(ctx, cat, st, held, now, &rep); err != nil {
		errs = append(errs, err)
	}
	for i := range held {
		if err := w.idle(ctx, cat, st, &held[i], now, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	if err := w.tellFinished(ctx, cat, st, held, now, &rep); err != nil {
		errs = append(errs, err)
	}
	if err := w.tellRequests(ctx, cat, now, &rep); err != nil {
		errs = append(errs, err)
	}
	w.mu.Lock()
	runBudgets := w.cfg.BudgetEvery <= 0 || w.lastBudget.IsZero() || !now.Before(w.lastBudget.Add(w.cfg.BudgetEvery))
	if runBudgets {
		w.lastBudget = now
	}
	w.mu.Unlock()
	if runBudgets {
		rep.BudgetsRun = true
		if err := w.budgets(ctx, cat, held, now, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// heldLookback is how far back a cycle reads held samples: the longest
// idle policy (warn, remind or release after, plus its quiet hours, during
// which no warning is recorded) with room for gaps and an hour to spare,
// at least 2 h and at most reads.HeldLookback. Every decision falls
// within it: a streak longer than it was warned about (and so recorded
// with its start, which streakStarts gives back) before it left the
// window, and a holding older than it takes its start from the occupancy
// runs (heldSince) or its recorded release (holdingStart). Reading a day
// of samples every cycle would cost the store a day of samples of every
// held instance.
func heldLookback(cat *schemas.Catalog) time.Duration {
	var longest time.Duration
	consider := func(p schemas.IdlePolicy) {
		d := max(p.WarnAfter, p.RemindAfter, p.ReleaseAfter)
		if q := p.QuietHours; q != nil {
			d += time.Duration((q.End-q.Start+24*60)%(24*60)) * time.Minute
		}
		longest = max(longest, d)
	}
	consider(cat.Defaults.Idle)
	for _, p := range cat.Projects {
		if p.Idle != nil {
			consider(*p.Idle)
		}
	}
	lb := longest + 2*time.Duration(cat.Defaults.GapToleranceMS)*time.Millisecond + time.Hour
	return min(max(lb, 2*time.Hour), reads.HeldLookback)
}

// state is what a cycle reads once.
type state struct {
	alerts     map[string]bool // natural keys of alerts recorded
	exemptions []ledger.Exemption
	// The idle samples of the instances idle past their release_after
	// (idleInsts) since the oldest of their streaks, by instance: read on
	// the first release's evidence, once a cycle.
	idleFrom, idleTo time.Time
	idleInsts        []string
	idle             map[string][]schemas.Sample
	// The occupancy runs of the last holdingLookback by key: read on the
	// first message about a holding older than reads.HeldLookback.
	runs map[schemas.Key][]schemas.Run
}

// holdingLookback is how far back the start of a holding older than
// reads.HeldLookback is looked for, in the occupancy runs.
const holdingLookback = 31 * 24 * time.Hour

// heldSince is when h's holding began, for messages (held since, cost so
// far). HeldNow reports a holding older than its lookback as beginning at
// the lookback's start; its start is then read from the occupancy runs
// (once a cycle), the runs of its key joined while their gaps are within
// the tolerance, as HeldNow joins samples. It is never after the streak's
// start.
func (w *Watcher) heldSince(ctx context.Context, cat *schemas.Catalog, st *state, h *reads.Held, idleSince, now time.Time) (time.Time, error) {
	since := h.Since
	if h.SinceClipped {
		if st.runs == nil {
			st.runs = map[schemas.Key][]schemas.Run{}
			err := w.cfg.Usage.Occupancy(ctx, now.Add(-holdingLookback).UnixMilli(), now.UnixMilli(), func(rs []schemas.Run) error {
				for _, r := range rs {
					st.runs[r.Key] = append(st.runs[r.Key], r)
				}
				return nil
			})
			if err != nil {
				st.runs = nil
				return time.Time{}, fmt.Errorf("watch: occupancy of %s: %w", h.InstanceID, err)
			}
		}
		rs := slices.Clone(st.runs[schemas.Key{Project: h.Project, User: h.User, InstanceID: h.InstanceID, GPUModel: h.GPUModel, Profile: h.Profile}])
		slices.SortFunc(rs, func(a, b schemas.Run) int { return cmp.Compare(b.EndMS, a.EndMS) })
		cur, tol := since.UnixMilli(), cat.Defaults.GapToleranceMS
		for _, r := range rs { // latest end first: cur only moves back
			if r.EndMS+tol >= cur && r.StartMS < cur {
				cur = r.StartMS
			}
		}
		since = time.UnixMilli(cur).UTC()
	}
	if !idleSince.IsZero() && idleSince.Before(since) {
		since = idleSince
	}
	return since, nil
}

// idleSamples returns the idle held samples of idleInsts in [idleFrom,
// idleTo] by instance, reading them on first use: by instance where the
// store can (reads.InstanceRows), else the window of every instance.
func (st *state) idleSamples(ctx context.Context, src reads.HeldRows, cat *schemas.Catalog) (map[string][]schemas.Sample, error) {
	if st.idle != nil {
		return st.idle, nil
	}
	read := func(fn func(*schemas.Sample) error) error {
		return src.HeldSamples(ctx, st.idleFrom.UnixMilli(), st.idleTo.UnixMilli()+1, fn)
	}
	if ir, ok := src.(reads.InstanceRows); ok {
		read = func(fn func(*schemas.Sample) error) error {
			return ir.InstanceSamples(ctx, st.idleInsts, st.idleFrom.UnixMilli(), st.idleTo.UnixMilli()+1, fn)
		}
	}
	idle := map[string][]schemas.Sample{}
	type at struct {
		inst  string
		start int64
	}
	seen := map[at]bool{} // a replayed sample counts once
	err := read(func(s *schemas.Sample) error {
		if k := (at{s.InstanceID, s.StartMS}); reads.IsIdleSample(cat, s) && !seen[k] {
			seen[k] = true
			idle[s.InstanceID] = append(idle[s.InstanceID], *s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	st.idle = idle
	return idle, nil
}

func (w *Watcher) loadState(ctx context.Context, cat *schemas.Catalog, held []reads.Held, now time.Time) (*state, error) {
	st := &state{alerts: map[string]bool{}, idleTo: now, idleFrom: now}
	if err := w.streakStarts(ctx, st, held); err != nil {
		return nil, err
	}
	oldest := now
	for _, h := range held {
		if !h.Idle {
			continue
		}
		if h.IdleSince.Before(oldest) {
			oldest = h.IdleSince
		}
		// Idle past release_after (an exemption can only make the streak
		// shorter): its release may want the evidence.
		if p := cat.IdlePolicyFor(h.Project); p.Release != schemas.ReleaseOff && p.ReleaseAfter > 0 && now.Sub(h.IdleSince) > p.ReleaseAfter {
			st.idleInsts = append(st.idleInsts, h.InstanceID)
			if h.IdleSince.Before(st.idleFrom) {
				st.idleFrom = h.IdleSince
			}
		}
	}
	// Alerts of the streaks under way were recorded after their start.
	cursor := ""
	for {
		page, next, err := w.cfg.Ledger.Alerts(ctx, ledger.AlertFilter{Since: oldest, Cursor: cursor, Limit: ledger.MaxLimit})
		if err != nil {
			return nil, fmt.Errorf("watch: alerts: %w", err)
		}
		for _, a := range page {
			st.alerts[a.Key] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	// Exemptions in force now, or that ended during a streak under way.
	cursor = ""
	for {
		page, next, err := w.cfg.Ledger.Exemptions(ctx, ledger.ExemptionFilter{EndsAfter: oldest, Cursor: cursor, Limit: ledger.MaxLimit})
		if err != nil {
			return nil, fmt.Errorf("watch: exemptions: %w", err)
		}
		st.exemptions = append(st.exemptions, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	return st, nil
}

// idleKinds are the alerts that name an idle streak.
var idleKinds = []billing.AlertKind{billing.AlertIdleWarning, billing.AlertIdleReminder, billing.AlertIdleRelease, billing.AlertIdleReleaseDryRun, billing.AlertIdleReleaseFailed}

// streakStarts gives back their start to the streaks longer than
// reads.HeldLookback, whose IdleSince HeldNow reports as the lookback's
// start (it moves with every cycle, and every decision is keyed by the
// streak's start): the start is the one the latest idle alert of the
// instance and holder recorded at or before that point. Any streak that
// began after it would have been warned about (or released) under its own
// start while inside the lookback. An instance with no such alert keeps
// the lookback's start. The alerts read are added to st.alerts.
func (w *Watcher) streakStarts(ctx context.Context, st *state, held []reads.Held) error {
	for i := range held {
		h := &held[i]
		if !h.Idle || !h.IdleSinceClipped {
			continue
		}
		page, _, err := w.cfg.Ledger.Alerts(ctx, ledger.AlertFilter{Project: h.Project, User: h.User, InstanceID: h.InstanceID, Limit: 50})
		if err != nil {
			return fmt.Errorf("watch: alerts of %s: %w", h.InstanceID, err)
		}
		var start time.Time
		for _, a := range page { // newest first
			st.alerts[a.Key] = true
			if start.IsZero() && slices.Contains(idleKinds, a.Kind) && a.User == h.User && // "" in the filter is any user
				!a.StreakStart.IsZero() && !a.StreakStart.After(h.IdleSince) {
				start = a.StreakStart
			}
		}
		if !start.IsZero() {
			h.IdleSince = start
		}
	}
	return nil
}

// Run drives the watcher until ctx ends: every interval, while holder
// holds the lease, a cycle, and deliveries of what is due (which run
// apart: a slow channel never delays the next cycle). On return the lease
// is given up. Run returns ctx's error; when the lease cannot be given up
// (another replica cannot lead until it expires), that error instead of
// the context.Canceled of a stop that was asked for (which a run group
// takes for a clean stop), joined with any other.
func (w *Watcher) Run(ctx context.Context, holder string, every time.Duration, clock func() time.Time) (err error) {
	if every <= 0 {
		return fmt.Errorf("watch: interval %s: want a positive duration", every)
	}
	if clock == nil {
		clock = time.Now
	}
	defer func() {
		w.m.leader.Set(0)
		w.wg.Wait()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := w.cfg.Ledger.ReleaseLease(rctx, LeaseName, holder); rerr != nil {
			rerr = fmt.Errorf("watch: cannot give the %s lease up: %w", LeaseName, rerr)
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				err = rerr
			} else {
				err = errors.Join(err, rerr)
			}
		}
	}()
	// Deliveries run on their own ticker while this replica leads: a
	// long cycle (a slow releaser) does not hold messages back.
	var leading atomic.Bool
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		dt := time.NewTicker(every)
		defer dt.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-dt.C:
				if leading.Load() {
					w.startDeliveries(ctx, clock())
				}
			}
		}
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		lead, err := w.cfg.Ledger.AcquireLease(ctx, LeaseName, holder, 3*every)
		leading.Store(err == nil && lead)
		switch {
		case err != nil:
			w.log.Warn("cannot acquire the watch lease", "holder", holder, "err", err)
			w.m.leader.Set(0)
		case lead:
			w.m.leader.Set(1)
			now := clock()
			if rep, err := w.Cycle(ctx, now); err != nil && ctx.Err() == nil {
				w.log.Error("watch cycle failed", "err", err, "held", rep.Held, "alerts", rep.Alerts)
			}
			w.startDeliveries(ctx, clock())
		default:
			w.m.leader.Set(0)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Leader reports whether holder holds the watch lease now (renewing it
// for ttl when it does).
func (w *Watcher) Leader(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	return w.cfg.Ledger.AcquireLease(ctx, LeaseName, holder, ttl)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings, numbers, times and decimals
	}
	return b
}
