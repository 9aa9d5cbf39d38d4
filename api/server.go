// Package api is cardhour's HTTP API: resources under /api/v1 (catalog,
// projects and students, usage, billing runs, invoices and their exports,
// tokens, the audit log), its OpenAPI 3.1 document generated from the
// handlers at /api/v1/openapi.json, and the operational endpoints /healthz,
// /readyz and /metrics, and the dashboard (package web) at /ui/.
//
// It is built on gin with huma v2 (code-first: the document cannot drift
// from the handlers). Errors are RFC 9457 problem details; problems.go maps
// store and flow errors to statuses in one place. Every request under
// /api/v1 except the document carries Authorization: Bearer <token>, or
// comes from a person signed in on the dashboard with the session cookie
// (signin.go; then with X-CSRF-Token when it changes something); the roles
// each operation allows are part of its registration (auth.go).
package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humagin"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cardhour/cardhour/api/web"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/catalogs"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes      = 8 << 20
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 120 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultShutdownTimeout   = 30 * time.Second
	// DefaultRefreshInterval is Config.RefreshInterval's default: the
	// watcher's default interval (cardhour serve --watch-every).
	DefaultRefreshInterval = 30 * time.Second
)

// Config configures a Server.
type Config struct {
	Ledger    Ledger    // required: catalog, invoices, tokens, audit, what the watcher recorded
	Usage     Usage     // nil: usage routes answer 503 unavailable
	Invoicing Invoicing // nil: billing-run, finalize, export routes answer 503
	Advice    Advisor   // nil: the advice route answers 503
	// Catalogs parses the ledger's catalog versions; nil: a cache of the
	// server's own over Ledger (serve shares one with the invoice flow and
	// the usage reads).
	Catalogs *catalogs.Cache
	// UsagePing reports whether the usage store answers (/readyz); nil:
	// not configured, and /readyz answers 503.
	UsagePing func(ctx context.Context) error
	Logger    *slog.Logger     // nil: discard
	Clock     func() time.Time // nil: time.Now
	Version   string
	// MaxBodyBytes bounds request bodies (413 above); 0: DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Registry receives the request metrics and is served at /metrics;
	// nil: a registry of the server's own, with Go and process collectors.
	Registry *prometheus.Registry
	// ExportCacheBytes bounds the renderings of exports kept in memory
	// (see exportCache); 0: DefaultExportCacheBytes; negative: every
	// export is rendered per request.
	ExportCacheBytes int64
	// SignIn lets people sign in through the site's identity provider
	// (signin.go); nil: tokens only.
	SignIn *SignIn
	// RefreshInterval is how often the server's data is worth reading
	// again: the interval cardhour serve runs its watcher at. GET
	// /api/v1/nodes tells it (refresh_s), and the dashboard's Now page
	// polls at it. 0: DefaultRefreshInterval.
	RefreshInterval time.Duration
	// PDF is the font set of the PDFs the API draws itself (the monthly
	// review's; invoice PDFs are the invoice flow's).
	PDF export.PDFOptions
	// Releases carries out the releases people ask for (POST
	// /api/v1/held/release); nil: none is configured, and the route says
	// so (409 not-released).
	Releases Releases
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	engine  *gin.Engine
	api     huma.API
	log     *slog.Logger
	now     func() time.Time
	serving atomic.Bool
	cats    *catalogs.Cache
	exports *exportCache
	// rechecked: when each LDAP session's grants were last read again
	// (session ID → time; see recheck).
	rechecked sync.Map

	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// New builds the server and its routes.
func New(cfg Config) (*Server, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("api: a state store (ledger) is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Catalogs == nil {
		cfg.Catalogs = catalogs.New(cfg.Ledger)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.SignIn != nil {
		if err := cfg.SignIn.check(); err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
	}
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.Version = cmp.Or(cfg.Version, "dev")
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	}
	s := &Server{cfg: cfg, cats: cfg.Catalogs, log: cfg.Logger, now: cfg.Clock, exports: newExportCache(cmp.Or(cfg.ExportCacheBytes, DefaultExportCacheBytes))}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cardhour_http_requests_total",
		Help: "HTTP requests by method, route template and status code.",
	}, []string{"method", "route", "code"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cardhour_http_request_duration_seconds",
		Help:    "HTTP request latency by method and route template.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"method", "route"})
	if err := cfg.Registry.Register(s.requests); err != nil {
		return nil, fmt.Errorf("api: metrics: %w", err)
	}
	if err := cfg.Registry.Register(s.latency); err != nil {
		return nil, fmt.Errorf("api: metrics: %w", err)
	}

	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.Use(s.requestIDMiddleware, s.recoverMiddleware, s.metricsMiddleware, s.bodyLimitMiddleware)
	e.NoRoute(func(c *gin.Context) {
		s.writeProblem(c, newProblem(http.StatusNotFound, ProblemNotFound, "no route "+c.Request.URL.Path))
	})
	e.NoMethod(func(c *gin.Context) {
		s.writeProblem(c, newProblem(http.StatusMethodNotAllowed, ProblemMethodNotAllowed, c.Request.Method+" is not allowed on "+c.Request.URL.Path))
	})
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", gin.WrapH(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})))
	// The dashboard (api/web): embedded files under /ui/, over this API.
	ui := gin.WrapH(http.StripPrefix("/ui", web.New()))
	e.GET("/ui/*file", ui)
	e.HEAD("/ui/*file", ui)
	e.GET("/", func(c *gin.Context) { c.Redirect(http.StatusFound, "/ui/") })
	s.routesSignIn(e)
	s.engine = e

	hc := huma.DefaultConfig("cardhour API", cfg.Version)
	hc.Info.Description = "Metered GPU and MIG usage, billing runs, invoices that stay as they were sent, exports. " +
		"Errors are RFC 9457 problem details; lists are paginated with an opaque cursor."
	hc.OpenAPIPath = "/api/v1/openapi"
	hc.DocsPath = ""
	hc.SchemasPath = ""
	hc.CreateHooks = nil // no $schema links in bodies
	hc.Components.Schemas = huma.NewMapRegistry("#/components/schemas/", schemaNamer)
	// The data-quality report of a billing run is documented as an open
	// object: its fields are the usage store's checks (docs/api.md).
	hc.Components.Schemas.RegisterTypeAlias(reflect.TypeFor[reads.DataQuality](), reflect.TypeFor[map[string]any]())
	hc.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "a token from `cardhour token create` or POST /api/v1/tokens"},
	}
	s.api = humagin.New(e, hc)
	s.api.UseMiddleware(s.authMiddleware, s.paramsMiddleware)
	s.routes()
	s.documentLinks()
	return s, nil
}

// schemaNames are the OpenAPI schema names of the domain records the API
// serves as they are, by their qualified Go names: the names the document
// gave the API's own copies before, kept so clients generated from it do
// not change.
var schemaNames = map[string]string{
	qualified(reflect.TypeFor[ledger.Token]()):      "TokenBody",
	qualified(reflect.TypeFor[ledger.AuditEntry]()): "AuditBody",
	qualified(reflect.TypeFor[ledger.CreditNote]()): "CreditNoteBody",
}

func qualified(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// typeArg is one qualified type in a generic type's name, such as
// github.com/cardhour/cardhour/internal/ledger.Token in Page[...].
var typeArg = regexp.MustCompile(`[^\[\],*]+`)

// schemaNamer is huma's DefaultSchemaNamer with the types in schemaNames
// renamed, also as type arguments (Page[ledger.Token] is PageTokenBody).
func schemaNamer(t reflect.Type, hint string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n, ok := schemaNames[qualified(t)]; ok {
		return n
	}
	name := typeArg.ReplaceAllStringFunc(t.Name(), func(part string) string {
		if n, ok := schemaNames[part]; ok {
			return n
		}
		return part
	})
	if name == "" {
		name = hint
	}
	// An unnamed type makes DefaultSchemaNamer name the hint.
	return huma.DefaultSchemaNamer(reflect.TypeFor[struct{}](), name)
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.engine }

// API is the huma API (its OpenAPI document).
func (s *Server) API() huma.API { return s.api }

// Engine is the gin engine (its routes, for tests).
func (s *Server) Engine() *gin.Engine { return s.engine }

// ServeOptions are the listener's settings.
type ServeOptions struct {
	Addr              string
	TLSCert, TLSKey   string // both or neither
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration // how long in-flight requests may drain
	// Ready, when set, is called with the address once listening.
	Ready func(addr net.Addr)
}

// Serve listens and serves until ctx is done, then stops accepting and
// drains in-flight requests (up to ShutdownTimeout).
func (s *Server) Serve(ctx context.Context, o ServeOptions) error {
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return errors.New("api: give both a TLS certificate and a key, or neither")
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           s.engine,
		ReadHeaderTimeout: cmp.Or(o.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       cmp.Or(o.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      cmp.Or(o.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       cmp.Or(o.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() {
		if o.TLSCert != "" {
			errc <- hs.ServeTLS(ln, o.TLSCert, o.TLSKey)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	s.serving.Store(true)
	s.log.Info("serving", "addr", ln.Addr().String(), "tls", o.TLSCert != "")
	if o.Ready != nil {
		o.Ready(ln.Addr())
	}
	select {
	case err := <-errc:
		s.serving.Store(false)
		return err
	case <-ctx.Done():
	}
	s.serving.Store(false)
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), cmp.Or(o.ShutdownTimeout, DefaultShutdownTimeout))
	defer cancel()
	err = hs.Shutdown(sctx)
	s.log.Info("stopped", "drain_took", time.Since(start).String(), "err", err)
	if err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	return nil
}

// MarkServing sets what /healthz answers (Serve does it itself; for tests
// that use Handler directly).
func (s *Server) MarkServing(v bool) { s.serving.Store(v) }

// ---------------------------------------------------------------- middleware

type ctxKey int

const (
	keyRequestID ctxKey = iota
	keyLogger
	keyPrincipal
	keyActor
)

// RequestID is the request's ID ("" outside a request).
func RequestID(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	id, _ := ctx.Value(keyRequestID).(string)
	return id
}

func logFrom(ctx context.Context) *slog.Logger {
	if ctx != nil {
		if l, ok := ctx.Value(keyLogger).(*slog.Logger); ok {
			return l
		}
	}
	return slog.New(slog.DiscardHandler)
}

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestIDMiddleware takes X-Request-ID from the request when it is a
// sane one, else makes one; it is echoed, logged and put in problems.
func (s *Server) requestIDMiddleware(c *gin.Context) {
	id := c.GetHeader("X-Request-ID")
	if !requestIDRE.MatchString(id) {
		id = newRequestID()
	}
	c.Header("X-Request-ID", id)
	log := s.log.With("request_id", id)
	ctx := context.WithValue(c.Request.Context(), keyRequestID, id)
	ctx = context.WithValue(ctx, keyLogger, log)
	c.Request = c.Request.WithContext(ctx)
	start := time.Now()
	c.Next()
	route := c.FullPath()
	log.Info("request", "method", c.Request.Method, "path", c.Request.URL.Path, "route", route,
		"status", c.Writer.Status(), "bytes", c.Writer.Size(), "took", time.Since(start).String())
}

func (s *Server) recoverMiddleware(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			logFrom(c.Request.Context()).Error("panic", "panic", fmt.Sprint(r))
			if !c.Writer.Written() {
				s.writeProblem(c, huma.NewError(http.StatusInternalServerError, "").(*Problem))
			}
			c.Abort()
		}
	}()
	c.Next()
}

// metricsMiddleware counts requests and their latency by route template
// (never the raw path: IDs would make a series each).
func (s *Server) metricsMiddleware(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	m := c.Request.Method
	s.requests.WithLabelValues(m, route, strconv.Itoa(c.Writer.Status())).Inc()
	s.latency.WithLabelValues(m, route).Observe(time.Since(start).Seconds())
}

// bodyLimitMiddleware refuses bodies that say they are over MaxBodyBytes
// with 413 before reading them.
func (s *Server) bodyLimitMiddleware(c *gin.Context) {
	if c.Request.ContentLength > s.cfg.MaxBodyBytes {
		s.writeProblem(c, newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge,
			fmt.Sprintf("the request body is %d bytes; at most %d are accepted", c.Request.ContentLength, s.cfg.MaxBodyBytes)))
		c.Abort()
		return
	}
	c.Next() // bodies without a length: each operation's MaxBodyBytes (register)
}

func (s *Server) writeProblem(c *gin.Context, p *Problem) {
	p.RequestID = RequestID(c.Request.Context())
	if p.Instance == "" {
		p.Instance = c.Request.URL.Path
	}
	c.Header("Content-Type", "application/problem+json")
	c.JSON(p.Status, p)
	c.Header("Content-Type", "application/problem+json")
}

// ---------------------------------------------------------------- health

func (s *Server) healthz(c *gin.Context) {
	if !s.serving.Load() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "starting"})
		return
	}
	out := gin.H{"status": "ok"}
	// The watcher's delivery backlog, for the eye: it never fails the check.
	ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
	defer cancel()
	if b, err := s.cfg.Ledger.DeliveryBacklog(ctx); err == nil {
		out["deliveries"] = gin.H{"pending": b.Pending, "failed": b.Failed}
	}
	c.JSON(http.StatusOK, out)
}

// readyz checks that the state store and the usage store answer.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	checks := gin.H{}
	ok := true
	if _, err := s.cfg.Ledger.CatalogVersions(ctx); err != nil {
		checks["state"] = err.Error()
		ok = false
	} else {
		checks["state"] = "ok"
	}
	switch {
	case s.cfg.UsagePing == nil:
		checks["usage"] = "not configured"
		ok = false
	default:
		if err := s.cfg.UsagePing(ctx); err != nil {
			checks["usage"] = err.Error()
			ok = false
		} else {
			checks["usage"] = "ok"
		}
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	checks["status"] = map[bool]string{true: "ready", false: "not ready"}[ok]
	c.JSON(status, checks)
}

// ---------------------------------------------------------------- document

// documentLinks completes the generated document with what huma cannot
// derive from the handlers: the 400 bad-cursor answer of every list with a
// cursor, and the OpenAPI links of the invoice lifecycle (billing run ->
// draft -> finalize -> void -> finalize the reissue draft), which clients
// and schemathesis' stateful phase follow.
func (s *Server) documentLinks() {
	oapi := s.api.OpenAPI()
	ops := map[string]*huma.Operation{}
	for _, item := range oapi.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch, item.Head} {
			if op == nil {
				continue
			}
			ops[op.OperationID] = op
			for _, p := range op.Parameters {
				if p.In != "query" || p.Name != "cursor" {
					continue
				}
				like := op.Responses["default"]
				if like == nil {
					like = op.Responses["422"]
				}
				if like != nil && op.Responses["400"] == nil {
					op.Responses["400"] = &huma.Response{Description: "The cursor is not one this server made (problem type " + ProblemBadCursor + ").", Content: like.Content}
				}
			}
		}
	}
	link := func(from, status, name string, l *huma.Link) {
		op := ops[from]
		if op == nil || ops[l.OperationID] == nil || op.Responses[status] == nil {
			panic("api: link " + name + " from " + from + " to " + l.OperationID + ": no such operation or response")
		}
		r := op.Responses[status]
		if r.Links == nil {
			r.Links = map[string]*huma.Link{}
		}
		r.Links[name] = l
	}
	link("create-billing-run", "200", "GetFirstDraft", &huma.Link{OperationID: "get-invoice",
		Parameters:  map[string]any{"id": "$response.body#/drafts/0/invoice_id"},
		Description: "the first draft the run saved"})
	link("create-billing-run", "200", "FinalizeFirstDraft", &huma.Link{OperationID: "finalize-invoice",
		Parameters:  map[string]any{"id": "$response.body#/drafts/0/invoice_id"},
		RequestBody: map[string]any{"if_sha256": "$response.body#/drafts/0/sha256"},
		Description: "finalize the first draft as the run saved it"})
	link("get-invoice", "200", "Finalize", &huma.Link{OperationID: "finalize-invoice",
		Parameters:  map[string]any{"id": "$response.body#/id"},
		RequestBody: map[string]any{"if_sha256": "$response.body#/sha256"},
		Description: "finalize this draft as read"})
	link("finalize-invoice", "200", "Void", &huma.Link{OperationID: "void-invoice",
		Parameters:  map[string]any{"id": "$response.body#/id"},
		Description: "void the finalized invoice"})
	link("finalize-invoice", "200", "Export", &huma.Link{OperationID: "export-invoice",
		Parameters:  map[string]any{"id": "$response.body#/id"},
		Description: "export the finalized invoice"})
	link("void-invoice", "200", "FinalizeReissue", &huma.Link{OperationID: "finalize-invoice",
		Parameters:  map[string]any{"id": "$response.body#/draft/id"},
		RequestBody: map[string]any{"if_sha256": "$response.body#/draft/sha256"},
		Description: "finalize the reissue draft the void opened"})
	link("void-invoice", "200", "GetReissue", &huma.Link{OperationID: "get-invoice",
		Parameters:  map[string]any{"id": "$response.body#/draft/id"},
		Description: "the reissue draft"})
	link("void-invoice", "200", "CreditNotes", &huma.Link{OperationID: "list-credit-notes",
		Parameters:  map[string]any{"id": "$response.body#/invoice/id"},
		Description: "the voided invoice's credit notes"})
}
