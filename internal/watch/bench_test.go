package watch

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	ingestsqlite "github.com/cardhour/cardhour/ingest/sqlite"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/ledger/sqlite"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/schemas"
)

// BenchmarkCycle is one watch cycle over held instances (samples every
// 300 s for the last 2 hours, every other instance idle for the last 70
// minutes) and student budgets, on an SQLite ledger, after a first cycle
// that recorded what was due (first_cycle_s): the steady state, where
// nothing new is decided, is what every interval costs.
//
//	go test -run '^$' -bench Cycle -benchtime=1x ./internal/watch/
//
// CARDHOUR_WATCH_BENCH_HELD=70000 sets the held instances of every case
// (1 000 and 7 000 by default). The chcluster cases write to and read from
// the ClickHouse cluster of the testenv profile chcluster
// (CLICKHOUSE_CLUSTER_ADDRS), through its Distributed tables.
func BenchmarkCycle(b *testing.B) {
	held := 0
	if v := os.Getenv("CARDHOUR_WATCH_BENCH_HELD"); v != "" {
		if _, err := fmt.Sscan(v, &held); err != nil || held <= 0 {
			b.Fatalf("CARDHOUR_WATCH_BENCH_HELD=%q: want a positive count", v)
		}
	}
	for _, c := range []struct {
		store              string
		instances, budgets int
	}{{"mem", 1000, 500}, {"mem", 7000, 5000}, {"sqlite", 7000, 0}, {"sqlite", 7000, 5000}, {"clickhouse", 7000, 0}, {"clickhouse", 7000, 5000},
		{"chcluster", 7000, 0}, {"chcluster", 7000, 5000}} {
		if held > 0 {
			c.instances = held
		}
		b.Run(fmt.Sprintf("%s/held=%d/budgets=%d", c.store, c.instances, c.budgets), func(b *testing.B) {
			benchCycle(b, c.store, c.instances, c.budgets)
		})
	}
}

func benchCycle(b *testing.B, store string, instances, budgets int) {
	ctx := context.Background()
	// CARDHOUR_WATCH_BENCH_QUIET=off takes the quiet hours out of the test
	// catalog, whose one project with quiet hours 22:00-08:00 sets the
	// cycle's look-back (heldLookback) to 12 h 10 min instead of 2 h 10 min.
	text := testCatalog
	if os.Getenv("CARDHOUR_WATCH_BENCH_QUIET") == "off" {
		const quiet = `idle: {quiet_hours: "22:00-08:00"}`
		if !strings.Contains(text, quiet) {
			b.Fatal("the test catalog has no quiet hours to take out")
		}
		text = strings.Replace(text, quiet, `idle: {threshold: 0.05}`, 1)
	}
	cat, err := schemas.ParseCatalog([]byte(text), "catalog")
	if err != nil {
		b.Fatal(err)
	}
	now := at("12:00")
	// The history held instances have in the store (default 2 h; a site
	// in steady state has at least reads.HeldLookback, which HeldNow
	// reads: CARDHOUR_WATCH_BENCH_HISTORY=24h measures that).
	history := 2 * time.Hour
	if v := os.Getenv("CARDHOUR_WATCH_BENCH_HISTORY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 2*time.Hour {
			b.Fatalf("CARDHOUR_WATCH_BENCH_HISTORY=%q: want a duration of at least 2h", v)
		}
		history = d
	}
	// How long every other instance has been idle (default 70 min, past
	// the benchmark's release_after of 60 min; CARDHOUR_WATCH_BENCH_IDLE=20h
	// makes streaks older than the cycle's look-back).
	idleFor := 70 * time.Minute
	if v := os.Getenv("CARDHOUR_WATCH_BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > history {
			b.Fatalf("CARDHOUR_WATCH_BENCH_IDLE=%q: want a positive duration within the history (%s)", v, history)
		}
		idleFor = d
	}
	var ss []schemas.Sample
	for i := range instances {
		for t := now.Add(-history); t.Before(now); t = t.Add(5 * time.Minute) {
			util := 0.8
			if i%2 == 0 && !t.Before(now.Add(-idleFor)) {
				util = 0
			}
			ss = append(ss, schemas.Sample{StartMS: t.UnixMilli(), IntervalMS: 300_000, Node: fmt.Sprintf("node-%d", i/8),
				GPUUUID: fmt.Sprintf("GPU-%d", i/8), GPUModel: "A100", InstanceID: fmt.Sprintf("mig-%d", i), Profile: "1g.10gb",
				Project: fmt.Sprintf("p%d", i%50), User: fmt.Sprintf("s%d", i%5000), Util: util, UtilKnown: true, Processes: 1})
		}
	}
	batch := ingest.NewCompactor(0).Build(ss)
	var usage Usage
	switch store {
	case "mem":
		m := ingest.NewMemStore()
		if err := m.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
		usage = m
	case "clickhouse", "chcluster":
		db := testenv.UniqueName(b, "watchbench")
		cfg := clickhouse.Config{Database: db, Migrate: true, Logger: slog.New(slog.DiscardHandler), ReadTimeout: time.Minute}
		onCluster := ""
		if store == "chcluster" {
			addrs, cluster := testenv.ClickHouseCluster(b)
			cfg.Addr, cfg.Cluster, onCluster = addrs[0], cluster, " ON CLUSTER "+cluster
		} else {
			cfg.Addr = testenv.ClickHouseAddr(b)
		}
		st, err := clickhouse.Open(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = st.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS `"+db+"`"+onCluster)
			_ = st.Close()
		})
		if err := st.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
		if v := os.Getenv("CARDHOUR_WATCH_BENCH_PAD"); v != "" {
			padHistory(b, st, db, instances, now.Add(-history), v)
		}
		usage = st
	default:
		st, err := ingestsqlite.Open(ctx, ingestsqlite.Config{Path: filepath.Join(b.TempDir(), "usage.db"), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		if err := st.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
		usage = st
	}
	clock := ledgertest.NewClock(now)
	led, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "ledger.db"), Clock: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = led.Close() })
	for i := range budgets {
		if _, err := led.PutBudget(ctx, "bench", ledger.Budget{Scope: billing.BudgetStudent, Project: fmt.Sprintf("p%d", i%50),
			User: fmt.Sprintf("s%d", i), Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "1000"}); err != nil {
			b.Fatal(err)
		}
	}
	// CARDHOUR_WATCH_BENCH_RAW=1 hides the store's latest samples: the cycle
	// reads what is held from a window of raw samples (reads.HeldNowWithin).
	timed := &timedUsage{u: usage}
	var measured Usage = timed
	if lr, ok := usage.(reads.LatestRows); ok && os.Getenv("CARDHOUR_WATCH_BENCH_RAW") == "" {
		measured = timedCompact{timed, lr}
	}
	w, err := New(Config{Ledger: led, Usage: measured, Catalog: func(context.Context) (*schemas.Catalog, error) { return cat, nil },
		Notifier: &fakeNotifier{}, Releaser: &fakeReleaser{}, Admins: []alert.Person{{Email: "ops@example.edu"}}, MaxReleasesPerCycle: instances})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	rep, err := w.Cycle(ctx, now)
	if err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	timed.reset()
	b.ResetTimer()
	for range b.N {
		if rep, err = w.Cycle(ctx, now); err != nil {
			b.Fatal(err)
		}
		if rep.Alerts != 0 || rep.Releases != 0 {
			b.Fatalf("a steady cycle decided something new: %+v", rep)
		}
	}
	b.StopTimer()
	b.ReportMetric(timed.store().Seconds()/float64(b.N), "store_s/op")
	timed.mu.Lock()
	b.ReportMetric(timed.held.Seconds()/float64(b.N), "held_store_s/op")
	timed.mu.Unlock()
	b.ReportMetric(first.Seconds(), "first_cycle_s")
	b.ReportMetric(float64(rep.Held), "held")
	b.ReportMetric(float64(rep.Budgets), "budgets")
}

// timedUsage measures the time spent inside the usage store: each call's
// duration less the time its callbacks (the caller's Go code) took.
type timedUsage struct {
	u            Usage
	mu           sync.Mutex
	total, inner time.Duration
	held         time.Duration // of which HeldSamples (reads.HeldNow, the evidence)
}

func (t *timedUsage) reset() {
	t.mu.Lock()
	t.total, t.inner, t.held = 0, 0, 0
	t.mu.Unlock()
}

// store is the time spent in the store since the last reset.
func (t *timedUsage) store() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total - t.inner
}

func timedCall[T any](t *timedUsage, held bool, fn func(T) error, call func(func(T) error) error) error {
	start := time.Now()
	var inner time.Duration
	err := call(func(v T) error {
		s := time.Now()
		err := fn(v)
		inner += time.Since(s)
		return err
	})
	d := time.Since(start)
	t.mu.Lock()
	t.total += d
	t.inner += inner
	if held {
		t.held += d - inner
	}
	t.mu.Unlock()
	return err
}

func (t *timedUsage) HeldSamples(ctx context.Context, from, to int64, fn func(*schemas.Sample) error) error {
	return timedCall(t, true, fn, func(f func(*schemas.Sample) error) error { return t.u.HeldSamples(ctx, from, to, f) })
}

func (t *timedUsage) Occupancy(ctx context.Context, lo, hi int64, fn func([]schemas.Run) error) error {
	return timedCall(t, false, fn, func(f func([]schemas.Run) error) error { return t.u.Occupancy(ctx, lo, hi, f) })
}

func (t *timedUsage) IdleRuns(ctx context.Context, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error {
	return timedCall(t, false, fn, func(f func([]schemas.IdleRun) error) error { return t.u.IdleRuns(ctx, from, to, maxUtil, f) })
}

func (t *timedUsage) RawIdle(ctx context.Context, instances []string, from, to int64, utilBelow float64, fn func([]schemas.RawPoint) error) error {
	return timedCall(t, false, fn, func(f func([]schemas.RawPoint) error) error {
		return t.u.RawIdle(ctx, instances, from, to, utilBelow, f)
	})
}

func (t *timedUsage) UsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) error {
	return timedCall(t, false, fn, func(f func(schemas.UsageRow) error) error { return t.u.UsageRows(ctx, q, f) })
}

func (t *timedUsage) CompactUsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) (bool, error) {
	cu, ok := t.u.(reads.CompactUsage)
	if !ok {
		return false, nil
	}
	var handled bool
	err := timedCall(t, false, fn, func(f func(schemas.UsageRow) error) error {
		var err error
		handled, err = cu.CompactUsageRows(ctx, q, f)
		return err
	})
	return handled, err
}

// timedCompact is timedUsage over a store that keeps the latest samples:
// the watcher reads what is held from compact rows (reads.HeldNowFrom).
type timedCompact struct {
	*timedUsage
	lr reads.LatestRows
}

func (t timedCompact) LatestSamples(ctx context.Context, from int64, fn func(*schemas.Sample) error) error {
	return timedCall(t.timedUsage, true, fn, func(f func(*schemas.Sample) error) error { return t.lr.LatestSamples(ctx, from, f) })
}

// padHistory gives the ClickHouse store pad more of the same history
// before from (CARDHOUR_WATCH_BENCH_PAD=29d, say: "d" is 24 h), written
// by the server itself (INSERT … SELECT FROM numbers): busy samples every
// 5 minutes and the occupancy and idle rows ingest would have made of
// them, so that the store holds what a site holds late in a month
// without the benchmark building it in memory. The pad must stay in the
// UTC month of from, since runs are cut at month boundaries.
func padHistory(b *testing.B, st *clickhouse.Store, db string, instances int, from time.Time, pad string) {
	ctx := context.Background()
	days, ok := strings.CutSuffix(pad, "d")
	d, err := time.ParseDuration(pad)
	if ok {
		var n int
		_, err = fmt.Sscanf(days, "%d", &n)
		d = time.Duration(n) * 24 * time.Hour
	}
	if err != nil || d <= 0 || d%(5*time.Minute) != 0 {
		b.Fatalf("CARDHOUR_WATCH_BENCH_PAD=%q: want a positive duration in whole 5 minutes (29d, 72h)", pad)
	}
	start := from.Add(-d).UTC()
	if start.Month() != from.UTC().Month() {
		b.Fatalf("CARDHOUR_WATCH_BENCH_PAD=%q: the pad from %s crosses a month boundary before %s", pad, start, from.UTC())
	}
	n, k, h, p := int64(instances), int64(d/(5*time.Minute)), from.UnixMilli(), start.UnixMilli()
	key := "concat('p', toString(i % 50)), concat('s', toString(i % 5000)), concat('mig-', toString(i)), 'A100', '1g.10gb'"
	var qs []string
	// A day of samples an insert, each well within the connection's read timeout.
	for day := int64(0); day*288 < k; day++ {
		steps := min(k-day*288, 288)
		qs = append(qs, "INSERT INTO `"+db+"`.raw_samples (ts, start_ms, interval_ms, node, gpu_uuid, gpu_model, instance_id, profile, project, user, util, "+
			"mem_used_bytes, mem_total_bytes, processes, util_source, holder_ref, ingested_at) "+
			"SELECT toDateTime(intDiv(s, 1000)), s, 300000, concat('node-', toString(intDiv(i, 8))), concat('GPU-', toString(intDiv(i, 8))), 'A100', "+
			"concat('mig-', toString(i)), '1g.10gb', concat('p', toString(i % 50)), concat('s', toString(i % 5000)), 0.8, 0, 0, 1, '', '', now() "+
			fmt.Sprintf("FROM (SELECT number %% %d AS i, %d - (intDiv(number, %d) + 1) * 300000 AS s FROM numbers(%d))", n, h-day*288*300_000, n, n*steps))
	}
	for _, q := range append(qs,
		"INSERT INTO `"+db+"`.occupancy (start, project, user, instance_id, gpu_model, profile, start_ms, end_ms) "+
			fmt.Sprintf("SELECT toDateTime(%d), %s, %d, %d FROM (SELECT number AS i FROM numbers(%d))", p/1000, key, p, h, n),
		"INSERT INTO `"+db+"`.idle_spans (start, project, user, instance_id, gpu_model, profile, class, min_util, max_util, start_ms, end_ms) "+
			fmt.Sprintf("SELECT toDateTime(%d), %s, 5, 0.8, 0.8, %d, %d FROM (SELECT number AS i FROM numbers(%d))", p/1000, key, p, h, n),
	) {
		if err := st.Conn().Exec(ctx, q); err != nil {
			b.Fatalf("padding the history: %v", err)
		}
	}
	b.Logf("padded %d instances with %s of samples every 5 min before %s (%d rows)", instances, d, from.UTC(), n*k)
}

// BenchmarkReleasePasses is the cost of the passes over the releases that
// run every cycle whatever is held (settleStale, tellFinished) on an
// SQLite ledger holding CARDHOUR_WATCH_BENCH_RELEASES releases (default
// 10 000) finished over the last 60 days, each with its outcome alert:
// one op is a cycle with nothing held, a minute after the previous one;
// first_cycle_s is a process's first, whose pass reads 31 days back.
//
//	go test -run '^$' -bench ReleasePasses -benchtime=20x ./internal/watch/
func BenchmarkReleasePasses(b *testing.B) {
	ctx := context.Background()
	n := 10_000
	if v := os.Getenv("CARDHOUR_WATCH_BENCH_RELEASES"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
			b.Fatalf("CARDHOUR_WATCH_BENCH_RELEASES=%q: want a positive count", v)
		}
	}
	cat, err := schemas.ParseCatalog([]byte(testCatalog), "catalog")
	if err != nil {
		b.Fatal(err)
	}
	now := at("12:00")
	clock := ledgertest.NewClock(now)
	led, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "ledger.db"), Clock: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = led.Close() })
	step := 60 * 24 * time.Hour / time.Duration(n)
	for i := range n {
		t := now.Add(-60 * 24 * time.Hour).Add(time.Duration(i) * step)
		clock.Set(t)
		inst := fmt.Sprintf("mig-%d", i)
		start := t.Add(-time.Hour)
		r, _, err := led.BeginRelease(ctx, Actor, ledger.NewRelease{Key: ledger.ReleaseKey(inst, start), InstanceID: inst,
			Project: "nlp", User: "s1", StreakStart: start})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := led.FinishRelease(ctx, Actor, r.ID, ledger.ReleaseResult{Status: billing.ReleaseDone, Action: "deleted pod ml/" + inst}); err != nil {
			b.Fatal(err)
		}
		if _, _, err := led.RecordAlert(ctx, Actor, ledger.NewAlert{Key: ledger.IdleAlertKey(billing.AlertIdleRelease, inst, start),
			Kind: billing.AlertIdleRelease, Project: "nlp", User: "s1", InstanceID: inst, StreakStart: start}, nil); err != nil {
			b.Fatal(err)
		}
	}
	w, err := New(Config{Ledger: led, Usage: ingest.NewMemStore(), Catalog: func(context.Context) (*schemas.Catalog, error) { return cat, nil }})
	if err != nil {
		b.Fatal(err)
	}
	clock.Set(now)
	start := time.Now()
	if _, err := w.Cycle(ctx, now); err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	b.ResetTimer()
	for i := range b.N {
		t := now.Add(time.Duration(i+1) * time.Minute)
		clock.Set(t)
		rep, err := w.Cycle(ctx, t)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Alerts != 0 {
			b.Fatalf("a steady cycle told something: %+v", rep)
		}
	}
	b.StopTimer()
	b.ReportMetric(first.Seconds(), "first_cycle_s")
	b.ReportMetric(float64(n), "releases")
}
