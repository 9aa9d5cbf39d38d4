package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/attrib"
	"github.com/cardhour/cardhour/collector/dcgm"
	"github.com/cardhour/cardhour/collector/fleet"
	"github.com/cardhour/cardhour/collector/kafkapub"
	"github.com/cardhour/cardhour/collector/nvmlsource"
	"github.com/cardhour/cardhour/collector/spool"
	"github.com/cardhour/cardhour/internal/rungroup"
	"github.com/cardhour/cardhour/schemas"
)

type collectFlags struct {
	node, simulate, output, brokers, topic, compression   string
	spoolDir, fsync, resolvers, staticMap, roster, socket string
	userLabel, nsProjects, listen, logLevel               string
	cpuProfile, heapProfile                               string
	tlsCA, tlsCert, tlsKey, saslMech, saslUser            string
	interval, linger, maxUnackedAge                       time.Duration
	gcPercent                                             int
	spoolMax, memLimit                                    int64
	tls, tlsInsecure, validate, noAutoCreate              bool
	vgpu, kubeShares                                      bool
	timesliceReplicas                                     int

	dcgmURL      string
	dcgmTimeout  time.Duration
	dcgmOverride bool
}

func runCollect(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("collect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host, _ := os.Hostname()
	var f collectFlags
	fs.StringVar(&f.node, "node", host, "node name written into samples")
	fs.DurationVar(&f.interval, "interval", 10*time.Second, "sampling interval (1s..1h)")
	fs.StringVar(&f.simulate, "simulate", "", "read a simulated fleet (YAML) instead of NVML; one collector per simulated node")
	fs.StringVar(&f.output, "output", "kafka", "where samples go: kafka | stdout (JSON Lines)")
	fs.StringVar(&f.brokers, "brokers", os.Getenv("KAFKA_BROKERS"), "Kafka bootstrap brokers, comma-separated (default $KAFKA_BROKERS)")
	fs.StringVar(&f.topic, "topic", schemas.SampleTopicV1, "Kafka topic")
	fs.StringVar(&f.compression, "compression", "zstd", "Kafka compression: zstd | lz4 | snappy | gzip | none")
	fs.DurationVar(&f.linger, "kafka-linger", 5*time.Second, "after a write that was not a full batch, wait this long before the next (samples wait in the spool)")
	fs.BoolVar(&f.noAutoCreate, "kafka-no-auto-create-topic", false, "do not ask the broker to create a missing topic (create it with its partitions up front)")
	fs.BoolVar(&f.tls, "kafka-tls", false, "connect to Kafka with TLS")
	fs.StringVar(&f.tlsCA, "kafka-tls-ca", "", "CA bundle (PEM) for Kafka TLS")
	fs.StringVar(&f.tlsCert, "kafka-tls-cert", "", "client certificate (PEM) for Kafka TLS")
	fs.StringVar(&f.tlsKey, "kafka-tls-key", "", "client key (PEM) for Kafka TLS")
	fs.BoolVar(&f.tlsInsecure, "kafka-tls-insecure", false, "do not verify the broker's certificate (testing only)")
	fs.StringVar(&f.saslMech, "kafka-sasl", "", "SASL mechanism: plain | scram-sha-256 | scram-sha-512 (password from $CARDHOUR_KAFKA_PASSWORD)")
	fs.StringVar(&f.saslUser, "kafka-sasl-user", "", "SASL user")
	fs.StringVar(&f.spoolDir, "spool-dir", "/var/lib/cardhour/spool", "on-disk spool directory")
	fs.Int64Var(&f.spoolMax, "spool-max-bytes", 256<<20, "spool size bound; the oldest segments are dropped beyond it")
	fs.StringVar(&f.fsync, "spool-fsync", spool.FsyncInterval, "spool fsync policy: always | interval | never")
	fs.DurationVar(&f.maxUnackedAge, "max-unacked-age", 5*time.Minute, "/readyz fails (and /healthz says degraded) while the oldest sample Kafka has not acknowledged is older than this (0: never)")
	fs.StringVar(&f.resolvers, "resolvers", "", "attribution resolvers in order, comma-separated: kube, unix, static (default: those configured)")
	fs.StringVar(&f.staticMap, "static-map", "", "static map file (YAML: instances: {UUID: {project, user}})")
	fs.StringVar(&f.roster, "roster", "", "roster file for the unix resolver (YAML: logins:, jobs:)")
	fs.StringVar(&f.socket, "kubelet-socket", attrib.DefaultKubeletSocket, "kubelet PodResources socket")
	fs.StringVar(&f.userLabel, "kube-user-label", "", "pod label naming the user, read from the API server (e.g. cardhour.io/user); empty: no API calls")
	fs.StringVar(&f.nsProjects, "kube-namespace-projects", "", "namespace=project pairs, comma-separated (default: project = namespace)")
	fs.BoolVar(&f.kubeShares, "kube-shares", false, "meter shares of whole cards (HAMi allocations, time-sliced ::N replicas) per pod container; reads the node's pods from the API server ($NODE_NAME) and per-process utilisation")
	fs.IntVar(&f.timesliceReplicas, "kube-timeslice-replicas", 0, "the device plugin's time-slicing replicas per card (0: counted from the kubelet's allocatable devices)")
	fs.BoolVar(&f.vgpu, "vgpu", false, "vGPU host: meter each active vGPU instance of a card (share_kind vgpu)")
	fs.StringVar(&f.dcgmURL, "dcgm-url", "", "dcgm-exporter metrics on this node, e.g. http://$NODE_IP:9400/metrics: utilisation of instances NVML cannot measure (A100/A30 MIG) from DCGM_FI_PROF_GR_ENGINE_ACTIVE (empty: off)")
	fs.DurationVar(&f.dcgmTimeout, "dcgm-timeout", dcgm.DefaultTimeout, "bound of one dcgm-exporter scrape (less than --interval)")
	fs.BoolVar(&f.dcgmOverride, "dcgm-override", false, "DCGM's value replaces utilisation NVML measured too (whole cards, GPM); default: DCGM fills only util that is null")
	fs.StringVar(&f.listen, "listen", ":9464", "address for /metrics and /healthz (empty: off)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug | info | warn | error")
	fs.BoolVar(&f.validate, "validate", false, "check the flags and files, then exit")
	fs.Int64Var(&f.memLimit, "memory-limit", 16<<20, "soft limit of the Go heap in bytes (GC works harder near it; 0: none; $GOMEMLIMIT wins)")
	fs.IntVar(&f.gcPercent, "gc-percent", 50, "Go GC target: the heap may grow this many percent over its live size before a collection (-1: off; $GOGC wins)")
	fs.StringVar(&f.cpuProfile, "cpu-profile", "", "write a CPU profile to this file until exit (for benchmarks)")
	fs.StringVar(&f.heapProfile, "heap-profile", "", "write a heap profile to this file at shutdown, before the spool is drained (for benchmarks)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour collect [--simulate FLEET.yaml] [--brokers host:port] [flags]")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		fmt.Fprintf(stderr, "cardhour collect: --log-level %q: want debug, info, warn or error\n", f.logLevel)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	// A node agent should stay small: at 1 Hz the extra GC work is negligible.
	if f.memLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(f.memLimit)
	}
	setGCPercent(f.gcPercent)
	switch {
	case f.heapProfile != "":
		runtime.MemProfileRate = 4 << 10 // a detailed profile of a small heap
	case !strings.Contains(os.Getenv("GODEBUG"), "memprofilerate"):
		// No allocation sampling: its bucket table is a megabyte of memory.
		runtime.MemProfileRate = 0
	}
	stopProfile, err := startCPUProfile(f.cpuProfile)
	if err != nil {
		fmt.Fprintln(stderr, "cardhour collect:", err)
		return 1
	}
	defer stopProfile()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := collect(ctx, f, stdout, log); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "cardhour collect: %v\n", err)
			fs.Usage()
			return 2
		}
		fmt.Fprintf(stderr, "cardhour collect: %v\n", err)
		return 1
	}
	return 0
}

type usageError struct{ error }

func collect(ctx context.Context, f collectFlags, stdout io.Writer, log *slog.Logger) error {
	var problems []error
	if f.output != "kafka" && f.output != "stdout" {
		problems = append(problems, fmt.Errorf("--output %q: want kafka or stdout", f.output))
	}
	if f.output == "kafka" && f.brokers == "" {
		problems = append(problems, errors.New("--brokers (or $KAFKA_BROKERS) is required with --output kafka"))
	}
	if f.interval < time.Second || f.interval > time.Hour {
		problems = append(problems, fmt.Errorf("--interval %v: want 1s..1h", f.interval))
	}
	if f.maxUnackedAge < 0 {
		problems = append(problems, fmt.Errorf("--max-unacked-age %v: must not be negative", f.maxUnackedAge))
	}
	if f.dcgmURL != "" {
		dc := dcgm.Config{URL: f.dcgmURL}
		if err := dc.Validate(); err != nil {
			problems = append(problems, fmt.Errorf("--dcgm-url: %w", err))
		}
		if f.simulate != "" {
			problems = append(problems, errors.New("--dcgm-url reads the exporter of a real node: it cannot be combined with --simulate"))
		}
	}
	// The scrape's bound matters only when there is a scrape: a 1 s interval
	// without --dcgm-url needs no --dcgm-timeout below it.
	if f.dcgmTimeout <= 0 || (f.dcgmURL != "" && f.dcgmTimeout >= f.interval) {
		problems = append(problems, fmt.Errorf("--dcgm-timeout %v: want more than 0 and less than --interval %v", f.dcgmTimeout, f.interval))
	}
	if err := errors.Join(problems...); err != nil {
		return usageError{err}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	resolvers, closeRes, err := collectResolvers(f, log)
	if err != nil {
		return err
	}
	defer closeRes()

	var fl *fleet.Fleet
	if f.simulate != "" {
		spec, err := fleet.Load(f.simulate)
		if err != nil {
			return err
		}
		if fl, err = fleet.Build(spec, collector.RealClock{}, time.Now()); err != nil {
			return err
		}
	}
	if f.validate {
		log.Info("configuration is valid")
		return nil
	}

	// The collectors take their final sample when ctx ends; then the heap
	// profile is written, the publisher stops, what it did not send is
	// drained (bounded), the metrics server stops; then the spool and the
	// Kafka writer close. A failure before the actors start still closes
	// them.
	var g rungroup.Group
	early := func(err error) error { return errors.Join(err, g.Run(ctx)) }

	// Publisher: Kafka through the spool, or JSON Lines on stdout.
	var pub collector.Publisher
	var runPub func(context.Context) error
	var drain func(context.Context) error
	var degraded []func() error
	switch f.output {
	case "stdout":
		jp := collector.NewJSONLPublisher(stdout)
		pub = flushingPublisher{jp}
		g.Close("stdout", jp.Flush)
	default:
		sp, err := spool.Open(spool.Config{Dir: f.spoolDir, MaxBytes: f.spoolMax, Fsync: f.fsync, Logger: log, Registerer: reg})
		if err != nil {
			return err
		}
		g.Close("spool", sp.Close)
		sink, err := newKafkaSink(kafkapub.KafkaConfig{Brokers: strings.Split(f.brokers, ","), Topic: f.topic,
			Compression: f.compression, NoAutoCreateTopic: f.noAutoCreate, TLS: f.tls, TLSCAFile: f.tlsCA, TLSCertFile: f.tlsCert, TLSKeyFile: f.tlsKey,
			TLSInsecureSkipVerify: f.tlsInsecure, SASLMechanism: f.saslMech, SASLUser: f.saslUser,
			SASLPassword: os.Getenv("CARDHOUR_KAFKA_PASSWORD")})
		if err != nil {
			return early(usageError{err})
		}
		g.Close("kafka writer", sink.Close)
		kp, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink, Linger: f.linger, Logger: log, Registerer: reg})
		if err != nil {
			return early(err)
		}
		pub, runPub = kp, kp.Run
		degraded = append(degraded, func() error { return sp.CheckUnackedAge(f.maxUnackedAge) })
		drain = func(context.Context) error {
			// A short, bounded drain: what remains stays in the spool for the next start.
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := kp.Drain(dctx); err != nil {
				log.Warn("samples left in the spool for the next start", "pending", sp.Pending(), "err", err)
			}
			return nil
		}
	}

	base := collector.Config{Node: f.node, Interval: f.interval, Publisher: pub, Logger: log, Registerer: reg}
	var cs []*collector.Collector
	if fl != nil {
		var closeAll func()
		cs, closeAll, err = fl.NodeCollectors(base, resolvers...)
		if err != nil {
			return early(err)
		}
		defer closeAll()
	} else {
		src, err := nvmlsource.New(nvmlsource.Config{Lib: nvml.New(), Logger: log, Registerer: reg,
			VGPU: f.vgpu, ProcessUtilization: f.kubeShares})
		if err != nil {
			return early(err) // ErrNoNVML says what is missing, once, at start
		}
		defer src.Close() //nolint:errcheck // NVML shutdown: nothing to do on failure
		base.Source, base.Resolvers, base.Splitters = src, resolvers, splitters(resolvers)
		if f.dcgmURL != "" {
			ds, err := dcgm.New(src, dcgm.Config{URL: f.dcgmURL, Timeout: f.dcgmTimeout, Override: f.dcgmOverride,
				Logger: log, Registerer: reg})
			if err != nil {
				return early(usageError{err})
			}
			defer ds.Close()
			base.Source = ds
			log.Info("utilisation from dcgm-exporter where NVML has none", "url", f.dcgmURL,
				"timeout", f.dcgmTimeout.String(), "override", f.dcgmOverride)
		}
		c, err := collector.New(base)
		if err != nil {
			return early(usageError{err})
		}
		cs = []*collector.Collector{c}
	}

	var metrics func(context.Context) error
	if f.listen != "" {
		ln, err := net.Listen("tcp", f.listen)
		if err != nil {
			return early(fmt.Errorf("cannot listen for metrics: %w", err))
		}
		srv := &http.Server{Handler: collector.HTTPHandler(reg, degraded, cs...), ReadHeaderTimeout: 5 * time.Second}
		log.Info("serving /metrics, /healthz and /readyz", "addr", ln.Addr().String())
		metrics = func(ctx context.Context) error { return serveUntil(ctx, srv, ln, 2*time.Second, nil) }
	}

	var began time.Time
	g.Stage("collectors").Go("samplers", collectorsActor(cs, log).run)
	g.Stage("profile").Go("heap profile", func(ctx context.Context) error {
		<-ctx.Done()
		if f.heapProfile != "" {
			if err := writeHeapProfile(f.heapProfile); err != nil {
				log.Warn("cannot write the heap profile", "err", err)
			}
		}
		began = time.Now()
		return nil
	})
	if runPub != nil {
		g.Stage("publisher").Go("kafka", runPub)
	}
	if drain != nil {
		g.Stage("drain").Go("spool", untilStopped(drain))
	}
	if metrics != nil {
		g.Stage("metrics").Go("http", metrics)
	}
	err = g.Run(ctx)
	log.Info("collector shut down", "took", time.Since(began).String())
	return err
}

// kafkaWriter is what collect needs of the Kafka writer.
type kafkaWriter interface {
	kafkapub.Sink
	Close() error
}

// newKafkaSink makes the Kafka writer (tests replace it).
var newKafkaSink = func(cfg kafkapub.KafkaConfig) (kafkaWriter, error) { return kafkapub.NewKafkaSink(cfg) }

// untilStopped is an actor that waits for its stop, then does f.
func untilStopped(f func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		<-ctx.Done()
		return f(ctx)
	}
}

// actor is a long-running part of a command, run in the command's
// rungroup: it runs until ctx ends, and its error is the command's.
type actor struct {
	name string
	run  func(ctx context.Context) error
}

// collectorsActor runs cs until ctx ends (or their StopAt), each taking
// its final sample, and returns when all have, with their errors. They are
// one actor: the first to reach StopAt does not cut the others short.
func collectorsActor(cs []*collector.Collector, log *slog.Logger) actor {
	return actor{name: "collectors", run: func(ctx context.Context) error {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for _, c := range cs {
			wg.Go(func() {
				if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
					log.Error("collector stopped", "err", err)
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}}
}

func writeHeapProfile(path string) error {
	pf, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(pf, 0); err != nil {
		_ = pf.Close()
		return err
	}
	return pf.Close()
}

// flushingPublisher flushes stdout after every tick so a pipe sees lines at once.
type flushingPublisher struct{ p *collector.JSONLPublisher }

func (f flushingPublisher) Publish(ctx context.Context, s []schemas.Sample) error {
	if err := f.p.Publish(ctx, s); err != nil {
		return err
	}
	return f.p.Flush()
}

// splitters are the resolvers that also split shared cards (attrib's Kube).
func splitters(rs []collector.Resolver) []collector.Splitter {
	var out []collector.Splitter
	for _, r := range rs {
		if sp, ok := r.(collector.Splitter); ok {
			out = append(out, sp)
		}
	}
	return out
}

func collectResolvers(f collectFlags, log *slog.Logger) ([]collector.Resolver, func(), error) {
	order := f.resolvers
	if order == "" {
		var names []string
		if f.staticMap != "" {
			names = append(names, "static")
		}
		if f.roster != "" {
			names = append(names, "unix")
		}
		if _, err := os.Stat(f.socket); err == nil && f.simulate == "" {
			names = append([]string{"kube"}, names...)
		}
		order = strings.Join(names, ",")
	}
	var out []collector.Resolver
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	var errs []error
	for _, name := range strings.Split(order, ",") {
		switch strings.TrimSpace(name) {
		case "":
		case "static":
			if f.staticMap == "" {
				errs = append(errs, errors.New("--resolvers static needs --static-map"))
				continue
			}
			s, err := attrib.LoadStatic(f.staticMap)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, s)
		case "unix":
			var r attrib.RosterFile
			if f.roster != "" {
				var err error
				if r, err = attrib.LoadRoster(f.roster); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			out = append(out, attrib.NewUnix(attrib.UnixConfig{Roster: r}))
		case "kube":
			nsp := map[string]string{}
			for _, kv := range strings.Split(f.nsProjects, ",") {
				if kv == "" {
					continue
				}
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" || v == "" {
					errs = append(errs, fmt.Errorf("--kube-namespace-projects %q: want namespace=project", kv))
					continue
				}
				nsp[k] = v
			}
			k, err := attrib.NewKube(attrib.KubeConfig{Socket: f.socket, UserLabel: f.userLabel, NamespaceProjects: nsp,
				Shares: f.kubeShares, TimeSlicingReplicas: f.timesliceReplicas})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			closers = append(closers, k.Close)
			out = append(out, k)
		default:
			errs = append(errs, fmt.Errorf("--resolvers: unknown resolver %q (want kube, unix, static)", name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, nil, usageError{err}
	}
	log.Info("attribution resolvers", "order", order)
	return out, closeAll, nil
}
