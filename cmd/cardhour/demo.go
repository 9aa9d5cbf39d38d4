//go:build !collector

package main

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	pprof_http "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/fleet"
	"github.com/cardhour/cardhour/internal/catalogs"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/watch"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/schemas"
)

// The demo's fleet, catalog and budgets, in the binary.
var (
	//go:embed demodata/fleet.yaml
	demoFleet []byte
	//go:embed demodata/catalog.yaml
	demoCatalog []byte
	//go:embed demodata/budgets.yaml
	demoBudgetsFile []byte
)

// demoAfterRun, when set (tests), is called once a run with --for has
// simulated all its time and stored, watched and delivered everything,
// before the API stops.
var demoAfterRun func(ctx context.Context, d demoRun) error

// demoRun is what a running demo tells: where it listens, the admin
// token, its state directory (catalog.yaml, samples.jsonl, the stores).
type demoRun struct {
	URL, Token, Dir string
	From, To        time.Time // simulated time covered
}

// simClock is the demo's time: it runs speed times faster than the wall
// clock from sim0, and stops at until (when set). It drives the
// collectors' ticks and timestamps, the watcher, the state store and the
// API's "now".
type simClock struct {
	sim0, until time.Time
	wall0       time.Time
	speed       float64
}

func (c *simClock) Now() time.Time {
	t := c.sim0.Add(time.Duration(float64(time.Since(c.wall0)) * c.speed))
	if !c.until.IsZero() && t.After(c.until) {
		return c.until
	}
	return t
}

// viewClock is the time the demo's readers see (the state store, the API,
// the watcher): the simulated time minus lag, the time the samples take from
// the collectors' tick to the usage store (a sampling interval, and the
// ingest loop's gathering, in simulated time), so that what is held now is
// what has been stored. Once the run has stopped and everything is stored
// (caughtUp) it is the simulated time itself.
type viewClock struct {
	sim      *simClock
	lag      time.Duration
	caughtUp atomic.Bool
}

func (v *viewClock) Now() time.Time {
	t := v.sim.Now()
	if v.caughtUp.Load() {
		return t
	}
	if t = t.Add(-v.lag); t.Before(v.sim.sim0) {
		return v.sim.sim0
	}
	return t
}

// After waits d of simulated time (d/speed of wall time).
func (c *simClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	time.AfterFunc(time.Duration(float64(d)/c.speed), func() { ch <- c.Now() })
	return ch
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address of the API and the dashboard")
	speed := fs.Float64("speed", 60, "how many times faster than the wall clock simulated time runs")
	stateDir := fs.String("state", "", "directory for the stores, the catalog and the samples ingested (default: a temporary directory, removed at exit)")
	runFor := fs.Duration("for", 0, "stop after this much simulated time (0: run until interrupted)")
	start := fs.String("start", "", "simulated start, RFC 3339 (default: the latest Monday 08:00 in the catalog's time zone)")
	interval := fs.Duration("interval", 0, "sampling interval in simulated time (0: the fleet's, 60s)")
	pprofOn := fs.Bool("pprof", false, "also serve /debug/pprof/ on --addr (profiling a long run)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour demo [--addr 127.0.0.1:8080] [--speed 60] [--state DIR] [--for 168h] [--start RFC3339]")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var problems []string
	if *speed < 1 || *speed > 1e6 {
		problems = append(problems, fmt.Sprintf("--speed %v: want 1..1000000", *speed))
	}
	if *runFor < 0 {
		problems = append(problems, "--for must not be negative")
	}
	if *interval != 0 && (*interval < time.Second || *interval > time.Hour) {
		problems = append(problems, "--interval: want 1s..1h")
	}
	cat, err := schemas.ParseCatalog(demoCatalog, "demo catalog")
	if err != nil {
		fmt.Fprintln(stderr, "cardhour demo:", err)
		return 1
	}
	var sim0 time.Time
	if *start != "" {
		if sim0, err = time.Parse(time.RFC3339, *start); err != nil {
			problems = append(problems, fmt.Sprintf("--start %q: want RFC 3339, e.g. 2026-11-23T08:00:00+08:00", *start))
		}
	} else {
		sim0 = lastMonday8(time.Now().In(cat.Location))
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "cardhour demo: "+strings.Join(problems, "; "))
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := demo(ctx, demoOptions{Addr: *addr, Speed: *speed, Dir: *stateDir, For: *runFor, Start: sim0, Interval: *interval, Pprof: *pprofOn}, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "cardhour demo:", err)
		return 1
	}
	return 0
}

// lastMonday8 is the latest Monday 08:00 at or before t, in t's zone.
func lastMonday8(t time.Time) time.Time {
	d := time.Date(t.Year(), t.Month(), t.Day(), 8, 0, 0, 0, t.Location())
	for d.Weekday() != time.Monday || d.After(t) {
		d = d.AddDate(0, 0, -1)
	}
	return d
}

// demoWatchEvery is how often the watcher runs a cycle, in simulated time
// (and at least every 100 ms of wall time): idle policies count in minutes.
const demoWatchEvery = 2 * time.Minute

type demoOptions struct {
	Addr     string
	Speed    float64
	Dir      string
	For      time.Duration
	Start    time.Time
	Interval time.Duration
	Pprof    bool // serve /debug/pprof/ beside the API
}

func demo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) (err error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cardhour-demo-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir) //nolint:errcheck // a temporary directory
	} else {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		// A simulation starts at --start with an empty store: an earlier
		// run's samples would overlap this one's.
		if _, err := os.Stat(filepath.Join(dir, "usage.db")); err == nil {
			return fmt.Errorf("--state %s already holds an earlier run's stores: remove it or choose another directory", dir)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	catPath := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(catPath, demoCatalog, 0o640); err != nil {
		return err
	}
	spec, err := fleet.Parse(demoFleet)
	if err != nil {
		return fmt.Errorf("demo fleet: %w", err)
	}
	clock := &simClock{sim0: o.Start, wall0: time.Now(), speed: o.Speed}
	if o.For > 0 {
		clock.until = o.Start.Add(o.For)
	}
	fl, err := fleet.Build(spec, clock, o.Start)
	if err != nil {
		return fmt.Errorf("demo fleet: %w", err)
	}
	iv := o.Interval
	if iv == 0 {
		iv = fl.Interval
	}
	// The ingest loop writes about once a sampling interval (of wall time),
	// between 20 ms and 500 ms.
	flush := min(max(time.Duration(float64(iv)/o.Speed), 20*time.Millisecond), 500*time.Millisecond)
	view := &viewClock{sim: clock, lag: iv + time.Duration(float64(flush+250*time.Millisecond)*o.Speed)}
	samplesFile, err := os.OpenFile(filepath.Join(dir, "samples.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	defer samplesFile.Close() //nolint:errcheck // flushed and synced below
	tee := collector.NewJSONLPublisher(samplesFile)
	sink := newDemoSink(fl, log)
	every := max(time.Duration(float64(demoWatchEvery)/o.Speed), 100*time.Millisecond)
	// The Now page polls at the demo watcher's wall-clock interval.
	b := &box{UsagePath: filepath.Join(dir, "usage.db"), StatePath: filepath.Join(dir, "state.db"), CatalogPath: catPath,
		Addr: o.Addr, Clock: view.Now, Log: log, Tee: tee, FlushEvery: flush, SignIn: demoSignIn(o.Speed), Watch: watchOptions{Every: every},
		LeadApproval: true} // the demo shows the lead's sign-off before finance finalizes
	defer b.close()
	if err := b.open(ctx); err != nil {
		return err
	}
	sink.routes(b.engine(), b.led)
	if o.Pprof {
		b.engine().GET("/debug/pprof/*profile", gin.WrapF(pprof_http.Index))
	}
	if err := putDemoBudgets(ctx, b.led, demoBudgetsYAML()); err != nil {
		return err
	}
	began := time.Now()
	month, n, err := demoHistory(ctx, b, spec, o.Start)
	if err != nil {
		return err
	}
	log.Info("demo history stored: the month before the start, for the monthly review and the trends", "month", month, "samples", n,
		"interval", demoHistoryInterval, "took", time.Since(began).Round(time.Millisecond))
	secret, _, err := b.led.CreateToken(ctx, "demo", ledger.NewToken{Role: ledger.RoleAdmin, Name: "cardhour demo", TTL: 10 * 365 * 24 * time.Hour})
	if err != nil {
		return err
	}
	w, err := demoWatcher(b, sink, log)
	if err != nil {
		return err
	}

	base := collector.Config{Interval: iv, Clock: clock, StopAt: clock.until, Publisher: b.Publisher(), Logger: log,
		Registerer: prometheus.NewRegistry()}
	cs, closeAll, err := fl.NodeCollectors(base)
	if err != nil {
		return err
	}
	defer closeAll()
	watcher := actor{name: "demo watcher", run: func(wctx context.Context) error {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return nil
			case <-t.C:
				demoCycle(wctx, w, view.Now(), log)
			}
		}
	}}
	// finish runs once the samples are stored (its stage comes after the
	// ingest loop's): the samples file is flushed, and at the stop time a
	// last cycle runs and the test hook reads the run, while the HTTP
	// server (the demo's webhook sink, the API) still serves.
	finish := actor{name: "finish", run: func(fctx context.Context) error {
		<-fctx.Done()
		if err := tee.Flush(); err != nil {
			return err
		}
		if err := samplesFile.Sync(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			log.Info("demo stopped", "simulated_until", clock.Now().Format(time.RFC3339))
			return nil
		}
		// The stop time: everything is stored; a last cycle and its
		// deliveries, as of the end.
		view.caughtUp.Store(true)
		end := view.Now()
		demoCycle(ctx, w, end, log)
		log.Info("demo reached its stop time", "simulated_until", end.Format(time.RFC3339))
		if demoAfterRun != nil {
			return demoAfterRun(ctx, demoRun{URL: b.url, Token: secret, Dir: dir, From: o.Start, To: end})
		}
		return nil
	}}
	b.markServing()
	zone := o.Start.Location()
	fmt.Fprintf(stdout, "cardhour demo: dashboard  %s/ui/\n", b.url)
	fmt.Fprintf(stdout, "cardhour demo: sign in with one click as a student, a lead or finance of the simulated lab (demo only), or paste the admin token\n")
	fmt.Fprintf(stdout, "cardhour demo: admin token %s\n", secret)
	fmt.Fprintf(stdout, "cardhour demo: alerts and releases received by the demo's webhook sink: %s/demo/\n", b.url)
	fmt.Fprintf(stdout, "cardhour demo: simulated time starts %s and runs %gx faster; state in %s (Ctrl-C stops)\n",
		o.Start.In(zone).Format("Mon 2006-01-02 15:04 MST"), o.Speed, dir)

	// The collectors stop at --for's stop time or when ctx ends; then the
	// demo's watcher (its deliveries go to the sink this process serves),
	// the ingest loop (what was published is stored), finish, the HTTP
	// server; then the stores close.
	return b.run(ctx, stage{"collectors", []actor{collectorsActor(cs, log)}}, stage{"watcher", []actor{watcher}},
		stage{"ingest", []actor{b.ingestActor()}}, stage{"finish", []actor{finish}})
}

// demoCycle runs one watcher cycle as of now and sends what it recorded.
func demoCycle(ctx context.Context, w *watch.Watcher, now time.Time, log *slog.Logger) {
	rep, err := w.Cycle(ctx, now)
	if err != nil && ctx.Err() == nil {
		log.Error("watch cycle failed", "err", err)
	}
	if rep.Alerts > 0 || rep.Releases > 0 {
		log.Info("watch cycle", "at", now.Format(time.RFC3339), "held", rep.Held, "idle", rep.Idle, "alerts", rep.Alerts, "releases", rep.Releases)
	}
	w.Deliver(ctx, now)
}

// demoAdmins and demoLeads are the people the demo's alerts reach besides
// the holder, each with a language: an alert is written for each person in
// theirs (a holder, whose roster entry has none, gets the default, zh-CN).
var (
	demoAdmins = []alert.Person{{Role: "admin", Name: "Demo admin", Email: "admin@demo.invalid", Lang: "en"}}
	demoLeads  = map[string][]alert.Person{
		"dl-course": {{Name: "张老师 (course lead)", Email: "dl-lead@demo.invalid", User: "t-zhang", Lang: "zh-CN"}},
		"bio-lab":   {{Name: "Dr. Smith (lab lead)", Email: "bio-lead@demo.invalid", User: "t-smith", Lang: "en"}},
	}
)

// demoWatcher is the watcher of internal/watch with notify's webhook channel
// and release's webhook releaser, both pointed at the demo's sink. Alerts
// go to the holder, the project's leads and the admin, each in their
// language.
func demoWatcher(b *box, sink *demoSink, log *slog.Logger) (*watch.Watcher, error) {
	notifyYAML := fmt.Sprintf(`languages: [zh-CN, en]
exemption_hint:
  zh-CN: 请向课程或课题负责人申请豁免
  en: ask the course lead for an exemption
channels:
  - name: demo-sink
    type: webhook
    url: %s/demo/hooks/notify
    secret: %s
    roles: [holder, lead, admin]
`, b.url, sink.secret)
	n, err := watchNotifier([]byte(notifyYAML))
	if err != nil {
		return nil, fmt.Errorf("demo notify: %w", err)
	}
	releaseYAML := fmt.Sprintf(`default: [fleet]
releasers:
  fleet:
    kind: webhook
    url: %s/demo/hooks/release
    secret: %s
`, b.url, sink.secret)
	r, err := watchReleaser([]byte(releaseYAML))
	if err != nil {
		return nil, fmt.Errorf("demo release: %w", err)
	}
	if b.releases != nil {
		b.releases.set(r) // a student releases their slice from the dashboard with the same releaser
	}
	cats := catalogs.New(b.led)
	return watch.New(watch.Config{Ledger: b.led, Usage: b.usage.(watch.Usage), Catalog: cats.Current, Notifier: n, Releaser: r,
		Admins: demoAdmins, Leads: demoLeads,
		BudgetEvery: time.Hour, Logger: log})
}

// demoBudgetsYAML is the embedded budgets file.
func demoBudgetsYAML() []byte { return demoBudgetsFile }

// putDemoBudgets stores the budgets of the file in the state store.
func putDemoBudgets(ctx context.Context, led ledger.Store, data []byte) error {
	var f struct {
		Budgets []struct {
			Scope      string `yaml:"scope"`
			Project    string `yaml:"project"`
			User       string `yaml:"user"`
			Period     string `yaml:"period"`
			Unit       string `yaml:"unit"`
			Limit      string `yaml:"limit"`
			Thresholds []int  `yaml:"thresholds"`
			Action     string `yaml:"action"`
		} `yaml:"budgets"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("demo budgets: %w", err)
	}
	var errs []error
	for i, x := range f.Budgets {
		_, err := led.PutBudget(ctx, "demo", ledger.Budget{Scope: billing.BudgetScope(x.Scope), Project: x.Project, User: x.User,
			Period: billing.BudgetPeriodKind(x.Period), Unit: billing.BudgetUnit(x.Unit), Limit: x.Limit, Thresholds: x.Thresholds,
			Action: billing.BudgetAction(x.Action)})
		if err != nil {
			errs = append(errs, fmt.Errorf("demo budgets: budgets[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// demoJSON writes v as JSON.
func demoJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// randomHex is n random bytes, hex-encoded.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
