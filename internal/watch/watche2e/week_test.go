package watche2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgertest"
	"github.com/cardhour/cardhour/internal/ledger/postgres"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/internal/watch"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/watch/notify"
	"github.com/cardhour/cardhour/internal/watch/release"
	"github.com/cardhour/cardhour/schemas"
)

// The catalog of the week: nlp releases after a day idle (warned after
// 4 h, reminded after 12 h); vision (the generated background fleet) is
// never warned nor released.
const catalogYAML = `
currency: CNY
timezone: Asia/Shanghai
defaults:
  gap_tolerance_s: 600
  idle: {threshold: 0.05, warn_after: 4h, remind_after: 12h, release_after: 24h, release: "on"}
skus:
  - {id: a100-1g, gpu_model: NVIDIA A100-SXM4-80GB, profile: 1g.10gb, hourly_price: "1.80"}
  - {id: a100-2g, gpu_model: NVIDIA A100-SXM4-80GB, profile: 2g.20gb, hourly_price: "3.20"}
  - {id: a100-3g, gpu_model: NVIDIA A100-SXM4-80GB, profile: 3g.40gb, hourly_price: "4.50"}
  - {id: a100-full, gpu_model: NVIDIA A100-SXM4-80GB, profile: full, hourly_price: "5.00"}
  - {id: h100-1g, gpu_model: NVIDIA H100 80GB HBM3, profile: 1g.10gb, hourly_price: "3.00"}
  - {id: h100-3g, gpu_model: NVIDIA H100 80GB HBM3, profile: 3g.40gb, hourly_price: "9.00"}
projects:
  - id: nlp
  - id: vision
    idle: {warn_after: 300h, remind_after: 350h, release_after: 400h, release: "off"}
`

const (
	step      = 2 * time.Hour // the watcher's (accelerated) interval; samples every 5 min
	sampleInt = 5 * time.Minute
	forgot    = "MIG-nlp-forgot" // held from Monday 09:00, busy until Friday 18:00, then forgotten
	forgotRef = "k8s:nlp/forgetful-nb-0"
	steadyInt = "MIG-nlp-steady" // held 09:00-18:00 on weekdays, busy, given back every evening
	alertKey  = "alert-secret"
	relKey    = "release-secret"
	phase1    = 30 // steps with replica a alone; then a restarts (as a2) beside replica b
)

// A week through the whole pipeline: samples (a generated background
// fleet, a forgotten slice and a steady student) go through Kafka and the
// ingest worker into ClickHouse; watcher replicas read it at an
// accelerated clock, 2 h a cycle, and share one PostgreSQL ledger. The
// forgotten slice is warned once, reminded once, released once by a
// webhook releaser (from then on its samples stop, as a real release would
// stop them), and its invoice ends at the release. Budget alerts fire once
// per threshold across a restart of the first replica and with two
// replicas cycling side by side, each alert reaches the signed webhook
// once per recipient.
func TestWatchWeek(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated week through Kafka, ClickHouse and PostgreSQL (about 40 s)")
	}
	ctx := context.Background()
	cat, err := schemas.ParseCatalog([]byte(catalogYAML), "catalog")
	require.NoError(t, err)
	loc := cat.Location
	weekStart := time.Date(2026, 11, 2, 0, 0, 0, 0, loc) // a Monday
	weekEnd := weekStart.AddDate(0, 0, 7)
	idleFrom := weekStart.AddDate(0, 0, 4).Add(18 * time.Hour) // Friday 18:00

	// ------------------------------------------------------------ services
	brokers, chAddr, dsn := testenv.KafkaBrokers(t), testenv.ClickHouseAddr(t), testenv.DurablePostgresDSN(t)
	topic := testenv.UniqueName(t, "samples")
	db := testenv.UniqueName(t, "watch")
	kc := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	res, err := kc.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: 2, ReplicationFactor: 1}, {Topic: topic + "_dlq", NumPartitions: 1, ReplicationFactor: 1}}})
	require.NoError(t, err)
	for tp, err := range res.Errors {
		require.NoError(t, err, tp)
	}
	t.Cleanup(func() {
		_, _ = kc.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic, topic + "_dlq"}})
	})
	store, err := clickhouse.Open(ctx, clickhouse.Config{Addr: chAddr, Database: db, Logger: quiet(), Migrate: true,
		DialTimeout: 2 * time.Second, ReadTimeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = store.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS `"+db+"`")
		_ = store.Close()
	})
	worker, err := ingest.NewWorker(ingest.WorkerConfig{Brokers: brokers, Topic: topic, GroupID: topic + "_group",
		DLQTopic: topic + "_dlq", BatchSize: 4000, BatchAge: 200 * time.Millisecond, RetryMin: 50 * time.Millisecond,
		RetryMax: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, Store: store, Logger: quiet()})
	require.NoError(t, err)
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- worker.Run(wctx) }()
	t.Cleanup(func() { stopWorker(); <-workerDone })
	producer := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, BatchSize: 2000,
		BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	t.Cleanup(func() { _ = producer.Close() })

	// ------------------------------------------------------------ the week
	var simNow time.Time // the accelerated clock, as the receivers see it
	var mu sync.Mutex
	releasedAt := map[string]time.Time{} // by instance: the release the receiver carried out
	var background []schemas.Sample
	_, err = gen.Each(gen.Config{Samples: 12 * int64(weekEnd.Sub(weekStart)/sampleInt), StartMS: weekStart.UnixMilli(),
		IntervalMS: sampleInt.Milliseconds(), Instances: 12, Seed: 11, Projects: []string{"vision"}, Users: 4},
		func(s *schemas.Sample) error {
			if s.StartMS < weekEnd.UnixMilli() {
				background = append(background, *s)
			}
			return nil
		})
	require.NoError(t, err)
	slice := func(inst, user, ref string, ts time.Time, busy bool) schemas.Sample {
		s := schemas.Sample{StartMS: ts.UnixMilli(), IntervalMS: sampleInt.Milliseconds(), Node: "gpu-nlp-01", GPUUUID: "GPU-nlp-0001",
			GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: inst, Profile: "1g.10gb", Project: "nlp", User: user, HolderRef: ref,
			MemTotal: 10 << 30}
		if busy { // an A100 MIG slice: no utilisation, a process while busy
			s.Processes, s.MemUsed = 1, 6<<30
		}
		return s
	}
	// samplesIn is what the collectors send in [from, to).
	samplesIn := func(from, to time.Time) []schemas.Sample {
		var out []schemas.Sample
		for _, s := range background {
			if s.StartMS >= from.UnixMilli() && s.StartMS < to.UnixMilli() {
				out = append(out, s)
			}
		}
		mu.Lock()
		rel, released := releasedAt[forgot]
		mu.Unlock()
		for ts := from; ts.Before(to); ts = ts.Add(sampleInt) {
			if !ts.Before(weekStart.Add(9*time.Hour)) && (!released || ts.Before(rel)) {
				out = append(out, slice(forgot, "forgetful", forgotRef, ts, ts.Before(idleFrom)))
			}
			if h := ts.In(loc).Hour(); ts.In(loc).Weekday() >= time.Monday && ts.In(loc).Weekday() <= time.Friday && h >= 9 && h < 18 {
				out = append(out, slice(steadyInt, "steady", "k8s:nlp/steady-0", ts, true))
			}
		}
		return out
	}

	// The vision budget: 90 % of what the fleet costs in the week, in money,
	// billed by the engine over the same samples; crossed at about 45, 72
	// and 90 % of the week.
	mem := ingest.NewMemStore()
	require.NoError(t, mem.Write(ctx, ingest.NewCompactor(0).Build(background)))
	weekBill, err := reads.BillFrom(ctx, mem, cat, billing.NewPeriod(2026, time.November, loc))
	require.NoError(t, err)
	visionTotal := decimal.Zero
	for _, inv := range weekBill.Invoices {
		if inv.Project == "vision" {
			visionTotal = visionTotal.Add(inv.Total)
		}
	}
	require.True(t, visionTotal.IsPositive(), "the background fleet costs something")
	visionLimit := visionTotal.Mul(decimal.RequireFromString("0.9")).Truncate(2)

	// ------------------------------------------------------------ receivers
	type got struct {
		key  string // Idempotency-Key
		at   time.Time
		body []byte
	}
	var alertsGot, releasesGot []got
	receive := func(secret string, into *[]got, reply func(body []byte, now time.Time) string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			ts := r.Header.Get("X-Cardhour-Timestamp")
			m := hmac.New(sha256.New, []byte(secret))
			m.Write([]byte(ts + "."))
			m.Write(body)
			if ts == "" || !hmac.Equal([]byte(hex.EncodeToString(m.Sum(nil))), []byte(r.Header.Get("X-Cardhour-Signature"))) {
				http.Error(w, "bad signature", http.StatusUnauthorized)
				return
			}
			mu.Lock()
			now := simNow
			*into = append(*into, got{key: r.Header.Get("Idempotency-Key"), at: now, body: body})
			mu.Unlock()
			_, _ = io.WriteString(w, reply(body, now))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	alertSrv := receive(alertKey, &alertsGot, func([]byte, time.Time) string { return "" })
	releaseSrv := receive(relKey, &releasesGot, func(body []byte, now time.Time) string {
		var req release.WebhookRequest
		if err := json.Unmarshal(body, &req); err != nil || req.DryRun {
			return `{"released": false, "detail": "not a release request"}`
		}
		mu.Lock()
		releasedAt[req.Target.InstanceID] = now // its samples stop from now on
		mu.Unlock()
		return `{"released": true, "detail": "deleted pod ` + strings.TrimPrefix(req.Target.HolderRef, "k8s:") + `"}`
	})

	ncfg, err := notify.ParseConfig([]byte(fmt.Sprintf(`languages: [en, zh-CN]
channels:
  - name: hook
    type: webhook
    url: %s/alerts
    secret: %s
`, alertSrv.URL, alertKey)))
	require.NoError(t, err)
	notifier, err := notify.NewNotifier(ncfg, nil)
	require.NoError(t, err)
	hook := release.NewWebhook(release.WebhookConfig{URL: releaseSrv.URL + "/release", Secret: relKey})
	releaser, err := release.NewSet(map[string]release.Releaser{"site-hook": hook}, []string{"site-hook"}, nil)
	require.NoError(t, err)

	// ------------------------------------------------------------ ledger
	clock := ledgertest.NewClock(weekStart)
	open := func() ledger.Store {
		l, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Clock: clock.Now, MaxConns: 4})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	led := open()
	_, err = led.ImportRoster(ctx, "admin", ledger.RosterImport{Mode: ledger.RosterReplace, Projects: []string{"nlp"},
		Students: []ledger.Student{{Project: "nlp", User: "forgetful", Name: "Forgetful", Email: "forgetful@example.edu"},
			{Project: "nlp", User: "steady", Name: "Steady", Email: "steady@example.edu"}}})
	require.NoError(t, err)
	_, err = led.PutBudget(ctx, "lead:nlp", ledger.Budget{Scope: billing.BudgetStudent, Project: "nlp", User: "forgetful",
		Period: billing.BudgetMonth, Unit: billing.BudgetCardHours, Limit: "80"})
	require.NoError(t, err)
	_, err = led.PutBudget(ctx, "lead:vision", ledger.Budget{Scope: billing.BudgetProject, Project: "vision",
		Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: visionLimit.String()})
	require.NoError(t, err)

	type replica struct {
		name string
		w    *watch.Watcher
	}
	newReplica := func(name string) *replica {
		w, err := watch.New(watch.Config{Ledger: open(), Usage: store,
			Catalog:  func(context.Context) (*schemas.Catalog, error) { return cat, nil },
			Notifier: notifier, Releaser: releaser,
			Admins: []alert.Person{{Name: "Ops", Email: "ops@example.edu", Lang: "en"}},
			Leads: map[string][]alert.Person{"nlp": {{Name: "Prof. Li", Email: "li@example.edu", Lang: "zh-CN"}},
				"vision": {{Name: "Prof. Wang", Email: "wang@example.edu", Lang: "en"}}},
			ExemptionHint: "ask your lead", BudgetEvery: 4 * time.Hour, Logger: quiet()})
		require.NoError(t, err)
		return &replica{name: name, w: w}
	}

	// ------------------------------------------------------------ run
	replicas := []*replica{newReplica("a")}
	nsteps := int(weekEnd.Sub(weekStart) / step)
	leaders := map[int][]string{}
	for k := 1; k <= nsteps; k++ {
		from, now := weekStart.Add(time.Duration(k-1)*step), weekStart.Add(time.Duration(k)*step)
		produce(t, producer, samplesIn(from, now))
		waitIngested(t, kc, topic, 60*time.Second)
		if k == phase1+1 { // a restarts (its lease left to run out), b joins
			replicas = []*replica{newReplica("a2"), newReplica("b")}
		}
		mu.Lock()
		simNow = now
		mu.Unlock()
		clock.Set(now)
		// Every replica cycles, as one whose lease ran out mid-cycle
		// would: only the natural keys keep alerts and releases single.
		// The leader delivers.
		var wg sync.WaitGroup
		errs := make([]error, len(replicas))
		for i, r := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lead, err := r.w.Leader(ctx, r.name, 3*step)
				if err != nil {
					errs[i] = err
					return
				}
				if _, err := r.w.Cycle(ctx, now); err != nil {
					errs[i] = fmt.Errorf("%s: cycle at %s: %w", r.name, now.In(loc).Format("Mon 15:04"), err)
					return
				}
				if lead {
					mu.Lock()
					leaders[k] = append(leaders[k], r.name)
					mu.Unlock()
					r.w.Deliver(ctx, now)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	}

	// What the last cycles recorded beside the leader's delivery.
	for _, r := range replicas {
		lead, err := r.w.Leader(ctx, r.name, 3*step)
		require.NoError(t, err)
		if lead {
			r.w.Deliver(ctx, weekEnd)
		}
	}

	// ------------------------------------------------------------ checks
	for k := 1; k <= nsteps; k++ {
		if k > phase1 && k <= phase1+3 && len(leaders[k]) == 0 {
			continue // the lease of the stopped replica runs out after three intervals
		}
		require.Len(t, leaders[k], 1, "step %d: one leader at a time", k)
	}

	at := func(d int, hm string) time.Time { // day d of the week (0: Monday) at hm
		tm, err := time.ParseInLocation("15:04", hm, loc)
		require.NoError(t, err)
		return weekStart.AddDate(0, 0, d).Add(time.Duration(tm.Hour())*time.Hour + time.Duration(tm.Minute())*time.Minute)
	}
	// The forgotten slice: warned (Saturday 00:00, the first cycle past
	// 4 h), reminded (08:00, past 12 h), released (20:00, past 24 h: a
	// streak longer than the store read's lookback), each once.
	as, _, err := led.Alerts(ctx, ledger.AlertFilter{InstanceID: forgot, Limit: ledger.MaxLimit})
	require.NoError(t, err)
	var seen []string
	for i := len(as) - 1; i >= 0; i-- {
		a := as[i]
		require.True(t, a.StreakStart.Equal(idleFrom), "%s: streak start %s", a.Key, a.StreakStart)
		seen = append(seen, string(a.Kind)+"@"+a.CreatedAt.In(loc).Format("Mon 15:04"))
	}
	require.Equal(t, []string{"idle_warning@Sat 00:00", "idle_reminder@Sat 08:00", "idle_release@Sat 20:00"}, seen)
	// The release notice (decided on a streak and a holding longer than the
	// lookback) says idle since Friday 18:00, held since Monday 09:00, and
	// the cost of the 131 h held at 1.80 an hour.
	var facts alert.Facts
	require.NoError(t, json.Unmarshal(as[0].Facts, &facts))
	require.Equal(t, billing.AlertIdleRelease, as[0].Kind)
	require.True(t, facts.IdleSince.Equal(idleFrom), "idle since %s", facts.IdleSince)
	require.True(t, facts.HeldSince.Equal(weekStart.Add(9*time.Hour)), "held since %s", facts.HeldSince.In(loc))
	require.Equal(t, "235.8", facts.Cost.String())
	for _, inst := range []string{steadyInt} {
		as, _, err := led.Alerts(ctx, ledger.AlertFilter{InstanceID: inst, Limit: 10})
		require.NoError(t, err)
		require.Empty(t, as, "%s is given back every evening: nothing to say", inst)
	}
	rels, _, err := led.Releases(ctx, ledger.ReleaseFilter{Limit: 10})
	require.NoError(t, err)
	require.Len(t, rels, 1)
	require.Equal(t, billing.ReleaseDone, rels[0].Status)
	require.Equal(t, ledger.ReleaseKey(forgot, idleFrom), rels[0].Key)
	require.Len(t, releasesGot, 1, "released once, by one replica")
	var rreq release.WebhookRequest
	require.NoError(t, json.Unmarshal(releasesGot[0].body, &rreq))
	require.Equal(t, rels[0].Key, releasesGot[0].key)
	require.Equal(t, forgot, rreq.Target.InstanceID)
	require.Equal(t, forgotRef, rreq.Target.HolderRef)
	require.Equal(t, "forgetful", rreq.Target.User)
	require.True(t, rreq.Evidence.StreakStart.Equal(idleFrom))
	require.Equal(t, 26*12, rreq.Evidence.IdleSamples, "26 h of samples every 5 min")
	relAt := at(5, "20:00")
	require.True(t, releasedAt[forgot].Equal(relAt), "released at %s", releasedAt[forgot])
	require.True(t, releasesGot[0].at.Equal(relAt), "the release request came in the cycle of Saturday 20:00")

	// Every alert reached the webhook once per recipient; only the release
	// notice says "released".
	byKey := map[string]int{}
	kinds := map[string][]string{} // message key → recipients
	for _, g := range alertsGot {
		byKey[g.key]++
		var p notify.WebhookPayload
		require.NoError(t, json.Unmarshal(g.body, &p))
		kinds[p.Key] = append(kinds[p.Key], p.To.Role+":"+p.To.Email)
		if p.Lang == "en" {
			require.Equal(t, p.Kind == billing.AlertIdleRelease, strings.Contains(p.Subject+p.Body, "was released"), "%s: %s", p.Kind, p.Subject)
		}
	}
	for k, n := range byKey {
		require.Equal(t, 1, n, "delivery %s sent %d times", k, n)
	}
	for _, a := range as {
		n := 0
		// Delivered in the cycle that recorded it, or in the next one: a
		// delivery round skips a channel whose previous round ended after
		// it read what is due, and on a loaded machine the replicas' rounds
		// can overlap (within two poll intervals, as promised).
		for _, g := range alertsGot {
			if strings.HasPrefix(g.key, a.Key+"|") {
				n++
				require.True(t, g.at.Equal(a.CreatedAt) || g.at.Equal(a.CreatedAt.Add(step)),
					"%s recorded at %s, delivered at %s", a.Key, a.CreatedAt, g.at)
			}
		}
		require.Equal(t, 3, n, "%s: one delivery per recipient", a.Key)
		got := kinds[a.Key]
		slices.Sort(got)
		require.Equal(t, []string{"admin:ops@example.edu", "holder:forgetful@example.edu", "lead:li@example.edu"}, got, a.Key)
	}

	// Budgets: each threshold once, across the restart and the two replicas.
	bs, _, err := led.Alerts(ctx, ledger.AlertFilter{Kind: billing.AlertBudgetThreshold, Limit: ledger.MaxLimit})
	require.NoError(t, err)
	var budgetKeys []string
	for _, a := range bs {
		budgetKeys = append(budgetKeys, fmt.Sprintf("%s/%s %d", a.Project, a.User, a.Threshold))
		require.NotEmpty(t, kinds[a.Key], "%s reached nobody", a.Key)
		want := []string{"admin:ops@example.edu", "lead:wang@example.edu"}
		if a.Project == "nlp" {
			want = []string{"admin:ops@example.edu", "holder:forgetful@example.edu", "lead:li@example.edu"}
		}
		got := kinds[a.Key]
		slices.Sort(got)
		require.Equal(t, want, got, a.Key)
	}
	sort.Strings(budgetKeys)
	require.Equal(t, []string{"nlp/forgetful 100", "nlp/forgetful 50", "nlp/forgetful 80", "vision/ 100", "vision/ 50", "vision/ 80"}, budgetKeys)
	// 80 card-hours from Monday 09:00: 40 h on Wednesday 01:00 (budgets
	// checked every 4 h from the first cycle at 02:00), 64 h on Thursday
	// 01:00, 80 h on Thursday 17:00 (after the restart on Wednesday 14:00,
	// checked from then on every 4 h).
	for _, a := range bs {
		if a.Project == "nlp" {
			want := map[int]time.Time{50: at(2, "02:00"), 80: at(3, "02:00"), 100: at(3, "18:00")}[a.Threshold]
			require.True(t, a.CreatedAt.Equal(want), "threshold %d recorded at %s, want %s", a.Threshold, a.CreatedAt.In(loc), want)
		}
	}

	// The invoice from the same store ends at the release: Monday 09:00 to
	// Saturday 20:00 for the forgotten slice; 5 × 9 h for the steady one.
	bill, err := reads.BillFrom(ctx, store, cat, billing.NewPeriod(2026, time.November, loc))
	require.NoError(t, err)
	used := map[string]int64{}
	for _, inv := range bill.Invoices {
		for _, l := range inv.Lines {
			if l.Kind == billing.KindUsage && inv.Project == "nlp" {
				used[l.User] += l.UsedMS
			}
		}
	}
	require.Equal(t, relAt.Sub(at(0, "09:00")).Milliseconds(), used["forgetful"], "billed until the release")
	require.Equal(t, (45 * time.Hour).Milliseconds(), used["steady"])
	t.Logf("week: %d background samples, vision budget %s CNY of %s, leaders by step %v", len(background), visionLimit, visionTotal, leaders)
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// produce publishes samples framed as the collector frames them.
func produce(t *testing.T, w *kafka.Writer, samples []schemas.Sample) {
	t.Helper()
	if len(samples) == 0 {
		return
	}
	slices.SortStableFunc(samples, func(a, b schemas.Sample) int { return strings.Compare(a.Node, b.Node) })
	hdr := []kafka.Header{{Key: "schema", Value: []byte(schemas.SampleSchemaV1)}}
	buf, spans := schemas.AppendMessages(nil, nil, samples, 16<<10)
	msgs := make([]kafka.Message, 0, len(spans))
	for _, m := range spans {
		msgs = append(msgs, kafka.Message{Key: []byte(m.Key), Value: buf[m.Start:m.End], Headers: hdr})
	}
	require.NoError(t, w.WriteMessages(context.Background(), msgs...))
}

// waitIngested waits until the worker's group has committed every message
// of topic (the worker commits after the store write).
func waitIngested(t *testing.T, c *kafka.Client, topic string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		require.NoError(t, err)
		var parts []int
		var reqs []kafka.OffsetRequest
		for _, p := range meta.Topics[0].Partitions {
			parts = append(parts, p.ID)
			reqs = append(reqs, kafka.LastOffsetOf(p.ID))
		}
		lo, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
		require.NoError(t, err)
		of, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: topic + "_group", Topics: map[string][]int{topic: parts}})
		require.NoError(t, err)
		committed := map[int]int64{}
		for _, p := range of.Topics[topic] {
			committed[p.Partition] = max(p.CommittedOffset, 0)
		}
		var lag int64
		for _, p := range lo.Topics[topic] {
			lag += p.LastOffset - committed[p.Partition]
		}
		if lag == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages not ingested after %v", lag, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
