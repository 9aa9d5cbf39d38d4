//go:build !collector

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	pprof_http "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/rungroup"
	"github.com/cardhour/cardhour/schemas"
)

func runIngest(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "", "where to write: clickhouse://host:port/db or sqlite:///path.db")
	migrate := fs.Bool("migrate", false, "apply pending ClickHouse migrations at start (SQLite always migrates)")
	retention := fs.Int("raw-retention-days", 0, "with --migrate: TTL of raw samples at table creation (0: keep forever)")
	fromFile := fs.String("from-file", "", "back-fill from a JSON Lines file ('-': standard input) instead of Kafka, then exit")
	fromStore := fs.String("from-store", "", "copy every raw sample of another usage store (clickhouse://… or sqlite://…) instead of Kafka, then exit: a SQLite store outgrown, or one server's database moving to a cluster (docs/scale.md)")
	brokers := fs.String("brokers", "", "Kafka bootstrap brokers, comma-separated host:port")
	topic := fs.String("topic", schemas.SampleTopicV1, "sample topic")
	group := fs.String("group", ingest.DefaultGroupID, "consumer group")
	dlq := fs.String("dlq-topic", ingest.DefaultDLQTopic, "dead-letter topic for invalid messages")
	consumers := fs.Int("consumers", 1, "group members (goroutines) in this process")
	batchSize := fs.Int("batch-size", ingest.DefaultBatchSize, "samples per store write")
	batchAge := fs.Duration("batch-age", ingest.DefaultBatchAge, "longest a message waits for its batch")
	dlqMaxMsg := fs.Int("dlq-max-message-bytes", 0, "the dead-letter topic's max.message.bytes: larger dead letters go there in parts (0: ask Kafka at start; Kafka's default 1048588 if it cannot tell)")
	grace := fs.Duration("shutdown-grace", ingest.DefaultShutdownGrace, "on SIGTERM, time to flush the open batch before abandoning it uncommitted")
	commitInterval := fs.Duration("commit-interval", ingest.DefaultCommitInterval, "while batches come full (a backlog), write their occupancy and idle runs and commit their offsets at most this often; a batch that is not full is committed at once")
	storeTimeout := fs.Duration("store-timeout", ingest.DefaultAttemptTimeout, "longest one store write may take before it is abandoned and retried (a hung store counts as down)")
	session := fs.Duration("session-timeout", 10*time.Second, "Kafka group session timeout: how soon a dead worker's partitions move to the others")
	listen := fs.String("listen", ":9464", "address of /metrics and /healthz ('' to disable)")
	logLevel := fs.String("log-level", "info", "debug | info | warn | error")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile to this file until exit (for benchmarks)")
	gcPercent := fs.Int("gc-percent", 200, "Go GC target: the heap may grow this many percent over its live size before a collection (-1: off; $GOGC wins)")
	memLimit := fs.String("memory-limit", defaultIngestMemoryLimit, "soft limit of the Go runtime's memory (heap, stacks, runtime structures; not the executable's file pages), e.g. 96MiB: near it the garbage collector runs more often, trading CPU for memory (0: none; $GOMEMLIMIT wins)")
	pprofOn := fs.Bool("pprof", false, "also serve /debug/pprof/ on --listen (profiling a running worker)")
	sumsEvery := fs.Duration("sums-every", time.Minute, "how often to bring the store's hourly sums (ClickHouse: util_hours, read by the efficiency pages) up to date with the hours that have ended; a back-fill does it once at its end (0: never; with several workers, one is enough)")
	bounds := addSampleBounds(fs, true)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour ingest --store DSN (--brokers HOST:PORT[,…] | --from-file samples.jsonl | --from-store DSN) [flags]")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var problems []string
	if *store == "" {
		problems = append(problems, "--store is required")
	}
	if n := count(*fromFile != "", *brokers != "", *fromStore != ""); n != 1 {
		problems = append(problems, "give exactly one of --brokers, --from-file and --from-store")
	}
	problems = append(problems, bounds.problems()...)
	limit, err := parseBytes(*memLimit)
	if err != nil {
		problems = append(problems, fmt.Sprintf("--memory-limit %q: %v", *memLimit, err))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		problems = append(problems, fmt.Sprintf("--log-level %q: want debug, info, warn or error", *logLevel))
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "cardhour ingest: "+strings.Join(problems, "; "))
		fs.Usage()
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// Ingest allocates a copy of every Kafka message; collecting at 3× the
	// live heap instead of 2× saves about a tenth of its CPU for ~100 MB.
	setGCPercent(*gcPercent)
	setMemoryLimit(limit)
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		fmt.Fprintln(stderr, "cardhour ingest:", err)
		return 1
	}
	defer stopProfile()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := ingest.NewMetrics(reg)

	st, err := storedsn.Open(ctx, *store, storedsn.Options{Logger: log, Mode: storedsn.Write, Migrate: *migrate, RawRetentionDays: *retention})
	if err != nil {
		fmt.Fprintln(stderr, "cardhour ingest:", err)
		return 1
	}
	// The worker stops first (its open batch flushed and committed within
	// --shutdown-grace), then the metrics server; then the store closes.
	var g rungroup.Group
	g.Close("store", st.Close)
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, "cardhour ingest:", errors.Join(err, g.Run(ctx)))
		return code
	}

	if *fromFile != "" || *fromStore != "" {
		fcfg := ingest.FileConfig{BatchSize: *batchSize, DecoderOptions: bounds.options(), Now: time.Now}
		var code int
		if *fromStore != "" {
			code = copyStore(ctx, log, st, metrics, *fromStore, fcfg, *storeTimeout, stdout, stderr)
		} else {
			code = backfill(ctx, log, st, metrics, *fromFile, fcfg, *storeTimeout, stdout, stderr)
		}
		if code == 0 && *sumsEvery > 0 {
			if err := refreshSums(ctx, log, st); err != nil {
				fmt.Fprintln(stderr, "cardhour ingest: the samples are stored; the hourly sums are not up to date (the next run brings them up to date; reads do not need them):", err)
				code = 1
			}
		}
		if err := g.Run(ctx); err != nil {
			fmt.Fprintln(stderr, "cardhour ingest:", err)
			return max(code, 1)
		}
		return code
	}

	w, err := ingest.NewWorker(ingest.WorkerConfig{
		Brokers: splitList(*brokers), Topic: *topic, GroupID: *group, DLQTopic: *dlq, Consumers: *consumers,
		BatchSize: *batchSize, BatchAge: *batchAge, DLQMessageBytes: *dlqMaxMsg, ShutdownGrace: *grace, SessionTimeout: *session, StoreTimeout: *storeTimeout, CommitInterval: *commitInterval,
		DecoderOptions: bounds.options(), Now: time.Now,
		Store: st, Logger: log, Metrics: metrics,
	})
	if err != nil {
		return fail(2, err)
	}
	var metricsServer func(context.Context) error
	if *listen != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if *pprofOn {
			mux.HandleFunc("/debug/pprof/", pprof_http.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof_http.Profile)
		}
		mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
			if err := w.Healthy(time.Minute); err != nil {
				http.Error(rw, err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(rw, "ok")
		})
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fail(1, err)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		metricsServer = func(ctx context.Context) error { return serveUntil(ctx, srv, ln, 2*time.Second, nil) }
		log.Info("serving /metrics and /healthz", "addr", ln.Addr().String())
	}
	sinceStop := sinceDone(ctx)
	g.Stage("worker").Go("kafka", func(ctx context.Context) error {
		err := w.Run(ctx)
		log.Info("ingest stopped", "shutdown_took", sinceStop().Round(time.Millisecond))
		return err
	})
	if sums, ok := st.(ingest.HourlySums); ok && *sumsEvery > 0 {
		g.Stage("worker").Go("hourly sums", func(ctx context.Context) error { return sumsLoop(ctx, log, sums, *sumsEvery) })
	}
	if metricsServer != nil {
		g.Stage("metrics").Go("http", metricsServer)
	}
	if err := g.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "cardhour ingest:", err)
		return 1
	}
	return 0
}

func backfill(ctx context.Context, log *slog.Logger, st ingest.Store, metrics *ingest.Metrics, path string, fcfg ingest.FileConfig, storeTimeout time.Duration, stdout, stderr io.Writer) int {
	var in io.Reader = os.Stdin
	// The rejects of the input are recorded under its name: the absolute
	// path of a file (a second back-fill of it counts them once), or standard
	// input and the start time (every back-fill from it is a new input).
	source := "stdin@" + time.Now().UTC().Format(time.RFC3339Nano)
	if path != "-" {
		abs, err := filepath.Abs(path)
		if err != nil {
			fmt.Fprintln(stderr, "cardhour ingest:", err)
			return 1
		}
		source = "file:" + abs
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(stderr, "cardhour ingest:", err)
			return 1
		}
		defer f.Close() //nolint:errcheck // read-only
		in = f
	}
	return backfillFrom(ctx, log, st, metrics, in, path, source, fcfg, storeTimeout, stdout, stderr)
}

// backfillFrom writes the samples of in (JSON Lines; named name in messages,
// source in the rejects) to st, and reports what it did.
func backfillFrom(ctx context.Context, log *slog.Logger, st ingest.Store, metrics *ingest.Metrics, in io.Reader, path, source string,
	fcfg ingest.FileConfig, storeTimeout time.Duration, stdout, stderr io.Writer) int {
	wr, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: log, Metrics: metrics, AttemptTimeout: storeTimeout})
	if err != nil {
		fmt.Fprintln(stderr, "cardhour ingest:", err)
		return 2
	}
	t0 := time.Now()
	fcfg.Writer, fcfg.Source = wr, source
	stats, err := ingest.Backfill(ctx, in, fcfg)
	for _, le := range stats.Invalid {
		fmt.Fprintf(stderr, "cardhour ingest: %s:%d: %v\n", path, le.Line, le.Err)
	}
	if err != nil {
		if ingest.IsPermanent(err) {
			fmt.Fprintf(stderr, "cardhour ingest: %s: %v\n", path, err)
		} else {
			fmt.Fprintf(stderr, "cardhour ingest: %s: %v (running the back-fill again is safe)\n", path, err)
		}
		return 1
	}
	recorded := ""
	if stats.InvalidCount > 0 {
		recorded = ", recorded as rejected in the store"
	}
	fmt.Fprintf(stdout, "back-filled %d samples from %s in %s (%d invalid lines not stored%s)\n",
		stats.Valid, path, time.Since(t0).Round(time.Millisecond), stats.InvalidCount, recorded)
	if stats.InvalidCount > 0 {
		if int64(len(stats.Invalid)) < stats.InvalidCount {
			fmt.Fprintf(stderr, "cardhour ingest: %d more invalid lines not listed\n", stats.InvalidCount-int64(len(stats.Invalid)))
		}
		return 1
	}
	return 0
}

// sinceDone returns a function that tells how long ago ctx ended (the signal
// that asked for the shutdown), or 0 while it has not.
func sinceDone(ctx context.Context) func() time.Duration {
	// at keeps its monotonic reading (a wall-clock step must not change the
	// duration); the channel's close publishes it to the reader.
	var at time.Time
	stopped := make(chan struct{})
	context.AfterFunc(ctx, func() {
		at = time.Now()
		close(stopped)
	})
	return func() time.Duration {
		if ctx.Err() == nil {
			return 0
		}
		<-stopped // ctx ended: the function above runs, if it has not yet
		return time.Since(at)
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// defaultIngestMemoryLimit is --memory-limit's default.
const defaultIngestMemoryLimit = "0"

// setMemoryLimit sets the runtime's soft memory limit to n bytes (0: none),
// unless $GOMEMLIMIT is set.
func setMemoryLimit(n int64) {
	if n > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(n)
	}
}

// parseBytes reads a size: a number of bytes, or a number followed by B, KiB,
// MiB or GiB (as $GOMEMLIMIT writes them).
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mul := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mul = rest, u.mul
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mul {
		return 0, errors.New("want a number of bytes, optionally followed by B, KiB, MiB or GiB")
	}
	return n * mul, nil
}

// refreshSums brings the store's hourly sums up to date once, when it keeps
// any (ingest.HourlySums), and logs what it computed.
func refreshSums(ctx context.Context, log *slog.Logger, st ingest.Store) error {
	sums, ok := st.(ingest.HourlySums)
	if !ok {
		return nil
	}
	r, err := sums.RefreshHourlySums(ctx)
	if err != nil {
		return err
	}
	if r.Hours > 0 {
		log.Info("hourly sums brought up to date", "hours", r.Hours, "rows", r.Rows, "took", r.Took.Round(time.Millisecond))
	}
	return nil
}

// sumsLoop refreshes the hourly sums at start and then every period until
// ctx ends. A failed refresh is logged and tried again at the next period:
// reads answer from the raw samples meanwhile, so nothing waits for it.
func sumsLoop(ctx context.Context, log *slog.Logger, sums ingest.HourlySums, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
		r, err := sums.RefreshHourlySums(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Warn("cannot bring the hourly sums up to date; trying again later", "retry_in", every, "err", err)
		case r.Hours > 0:
			log.Info("hourly sums brought up to date", "hours", r.Hours, "rows", r.Rows, "took", r.Took.Round(time.Millisecond))
		}
	}
}
