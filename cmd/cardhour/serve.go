//go:build !collector

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"os/user"
	"strings"
	"syscall"
	"time"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
	"github.com/cardhour/cardhour/internal/rungroup"
	"github.com/cardhour/cardhour/schemas"
)

// defaultGrace is how long after a month's end its invoices may not be
// finalized (late samples may still arrive).
const defaultGrace = 72 * time.Hour

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	catalogPath := fs.String("catalog", "", "price catalog (YAML): stored as the current catalog version at start when its content differs")
	store := fs.String("store", "", "usage store written by 'cardhour ingest': clickhouse://host:port/db or sqlite:///path.db")
	state := fs.String("state", "", "state store (catalog versions, invoices, tokens, audit): sqlite:///path.db or postgres://user@host:port/db (default: the --store file when it is SQLite)")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	grace := fs.Duration("grace", defaultGrace, "after a month's end, how long its invoices may not be finalized (late samples)")
	tlsCert := fs.String("tls-cert", "", "TLS certificate (PEM); with --tls-key the server speaks HTTPS")
	tlsKey := fs.String("tls-key", "", "TLS private key (PEM)")
	autoFinalize := fs.Bool("auto-finalize", false, "finalize a period's drafts automatically once its grace period is over")
	leadApproval := fs.Bool("lead-approval", false, "finalize a draft only once its project's lead has approved that very document (POST /api/v1/invoices/{id}/approve)")
	exportDir := fs.String("export-dir", "", "write every finalized period's files (CSV, XLSX, JSON, a PDF per invoice) to this directory, once per edition")
	webhook := fs.String("webhook", "", "POST every finalized period's files to this finance URL, once per edition (HMAC-SHA256 signed)")
	webhookSecret := fs.String("webhook-secret-file", "", "file holding the webhook's signing secret (at least 16 bytes)")
	jobsEvery := fs.Duration("jobs-every", 5*time.Minute, "how often the automatic finalization and the export job look for work")
	watchFile := fs.String("watch", "", "watch configuration (YAML: watch:, notify:, release:): run the idle and budget watcher (one replica at a time)")
	watchEvery := fs.Duration("watch-every", 30*time.Second, "how often the watcher runs a cycle (watch.interval in the file wins)")
	maxBody := fs.Int64("max-body-bytes", api.DefaultMaxBodyBytes, "largest request body accepted (413 above)")
	usageCache := fs.Bool("usage-cache", true, "answer usage reads from reports already computed while the usage store's data version is unchanged")
	usageStale := fs.Duration("usage-max-stale", 10*time.Second, "with --usage-cache, how long after it was computed a report a write superseded may still be served while a fresh one is computed (negative: never)")
	exportCache := fs.Int("export-cache-mb", api.DefaultExportCacheBytes>>20, "memory for rendered exports kept by document SHA-256, format and void mark, so that a finalized invoice's PDF is rendered once (0: render every request)")
	pdfFont := fs.String("pdf-font", "", "a TrueType font (.ttf) tried first for every rune of PDF exports and of the export job, before the default font set (docs/exports.md)")
	drain := fs.Duration("shutdown-timeout", api.DefaultShutdownTimeout, "on SIGTERM or SIGINT, how long in-flight requests may finish")
	sf := addSigninFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour serve --store DSN [--state DSN] [--catalog FILE] [--addr 127.0.0.1:8080] [--tls-cert F --tls-key F]")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var problems []string
	if *store == "" {
		problems = append(problems, "--store is required")
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		problems = append(problems, "--tls-cert and --tls-key go together")
	}
	if *grace <= 0 {
		problems = append(problems, fmt.Sprintf("--grace %s: want a positive duration", *grace))
	}
	if (*webhook == "") != (*webhookSecret == "") {
		problems = append(problems, "--webhook and --webhook-secret-file go together")
	}
	if *jobsEvery <= 0 {
		problems = append(problems, "--jobs-every must be positive")
	}
	if *watchEvery <= 0 {
		problems = append(problems, "--watch-every must be positive")
	}
	if *maxBody <= 0 {
		problems = append(problems, "--max-body-bytes must be positive")
	}
	if err := sf.applyConfig(); err != nil {
		problems = append(problems, err.Error())
	}
	stateDSN, err := stateDefault(*state, *store)
	if err != nil && *store != "" {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "cardhour serve: "+strings.Join(problems, "; "))
		fs.Usage()
		return 2
	}
	// Without a watch file no watcher runs, but its interval is still how
	// often the dashboard's Now page reads again (api.Config.RefreshInterval).
	wo := watchOptions{Every: *watchEvery}
	if *watchFile != "" {
		if wo, err = loadWatch(*watchFile, *watchEvery); err != nil {
			fmt.Fprintln(stderr, "cardhour serve:", err)
			return 1
		}
		if wo.Config.DashboardURL == "" { // the watch file's dashboard_url wins
			wo.Config.DashboardURL = strings.TrimRight(*sf.publicURL, "/")
		}
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, serveOptions{stateDSN: stateDSN, store: *store, catalog: *catalogPath, webhookSecret: *webhookSecret,
		exportCacheMB: *exportCache, maxBody: *maxBody, signin: sf, serve: api.ServeOptions{Addr: *addr, TLSCert: *tlsCert, TLSKey: *tlsKey, ShutdownTimeout: *drain,
			Ready: func(a net.Addr) { fmt.Fprintf(stdout, "cardhour serve: listening on %s\n", a) }},
		jobs: jobOptions{PDFFont: *pdfFont, Grace: *grace, AutoFinalize: *autoFinalize, LeadApproval: *leadApproval, ExportDir: *exportDir, Every: *jobsEvery, Webhook: invoicing.Webhook{URL: *webhook},
			UsageCache: *usageCache, UsageMaxStale: *usageStale, Watch: wo}}, log, stderr); err != nil {
		fmt.Fprintln(stderr, "cardhour serve:", err)
		return 1
	}
	return 0
}

// serveOptions are serve's flags, checked.
type serveOptions struct {
	stateDSN, store, catalog, webhookSecret string
	exportCacheMB                           int
	maxBody                                 int64
	signin                                  *signinFlags // nil: tokens only
	serve                                   api.ServeOptions
	jobs                                    jobOptions
}

// serve opens the stores and runs, in one rungroup, the HTTP server, then
// the background jobs and the watcher, until ctx ends or one of them
// returns. They stop in that order: the server drains its in-flight
// requests (--shutdown-timeout) while the jobs still run; then the jobs
// and the watcher stop and give their leases up; then the stores close.
// Every error (an actor's, a failed lease release, a store's close) is
// returned.
func serve(ctx context.Context, o serveOptions, log *slog.Logger, stderr io.Writer) error {
	var g rungroup.Group
	// A failure before the actors start still closes what was opened.
	early := func(err error) error { return errors.Join(err, g.Run(ctx)) }
	led, err := ledgerdsn.Open(ctx, o.stateDSN, ledgerdsn.Options{Clock: time.Now})
	if err != nil {
		return err
	}
	g.Close("state store", led.Close)
	if o.catalog != "" {
		if err := seedCatalog(ctx, led, o.catalog, stderr); err != nil {
			return early(err)
		}
	}
	usageStore, err := storedsn.Open(ctx, o.store, storedsn.Options{Logger: log, Mode: storedsn.Read})
	if err != nil {
		return early(err)
	}
	g.Close("usage store", usageStore.Close)
	jo := o.jobs
	if o.webhookSecret != "" {
		secret, err := os.ReadFile(o.webhookSecret)
		if err != nil {
			return early(fmt.Errorf("webhook secret: %w", err))
		}
		jo.Webhook.Secret = bytes.TrimSpace(secret)
	}
	cfg, jobs, err := serveBackends(led, usageStore, jo, log)
	if err != nil {
		return early(err)
	}
	cfg.Ledger = led
	cfg.Logger = log
	cfg.Version = version
	cfg.MaxBodyBytes = o.maxBody
	cfg.ExportCacheBytes = int64(o.exportCacheMB) << 20
	if o.exportCacheMB <= 0 {
		cfg.ExportCacheBytes = -1
	}
	if o.signin != nil {
		if cfg.SignIn, err = o.signin.build(ctx, led, o.serve.TLSCert != ""); err != nil {
			return early(fmt.Errorf("sign-in: %w", err))
		}
	}
	srv, err := api.New(cfg)
	if err != nil {
		return early(err)
	}
	g.Stage("http").Go("api", func(ctx context.Context) error { return srv.Serve(ctx, o.serve) })
	background := g.Stage("jobs")
	for _, a := range jobs {
		background.Go(a.name, a.run)
	}
	return g.Run(ctx)
}

// stateDefault is the state store: the one given, else the usage store's
// SQLite file.
func stateDefault(state, store string) (string, error) {
	if state != "" {
		return state, nil
	}
	u, err := url.Parse(store)
	if err == nil && u.Scheme == "sqlite" {
		return store, nil
	}
	return "", errors.New("--state is required when --store is not SQLite")
}

// cliActor names the person running a command in the audit log.
func cliActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}

// seedCatalog stores the catalog file as the current version when its
// content differs (validated like bill does), audited as the command line.
func seedCatalog(ctx context.Context, led ledger.Store, path string, stderr io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read catalog: %w", err)
	}
	if _, err := schemas.ParseCatalog(data, path); err != nil {
		return fmt.Errorf("invalid catalog:\n%w", err)
	}
	if cur, err := led.CurrentCatalog(ctx); err == nil && bytes.Equal(cur.Content, data) {
		return nil
	} else if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return err
	}
	v, created, err := led.PutCatalog(ctx, cliActor(), data)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(stderr, "cardhour serve: %s stored as catalog version %d\n", path, v.Version)
	}
	return nil
}
