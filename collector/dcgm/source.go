// Package dcgm is an optional utilisation source of the collector: it reads
// DCGM_FI_PROF_GR_ENGINE_ACTIVE per GPU instance from dcgm-exporter's
// Prometheus endpoint (the GPU Operator runs dcgm-exporter on every GPU node,
// http://<node>:9400/metrics by default) and fills util where NVML has none:
// MIG instances of A100 and A30, which have no per-instance utilisation in NVML
// and no GPM.
//
// Source wraps the node's device Source. Each Sample reads the devices and
// scrapes the exporter concurrently, then matches every instance to the
// exporter's series by GPU UUID and GPU instance ID (GPU_I_ID), or a whole GPU
// by its UUID and no GPU_I_ID, and sets util and util_source "dcgm". An
// instance without a usable series keeps util null: nothing is ever guessed.
// A failed scrape is counted and logged and the samples go out as NVML saw
// them; it never stops sampling.
package dcgm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardhour/cardhour/collector"
)

// Defaults of Config.
const (
	DefaultTimeout      = 2 * time.Second
	DefaultMaxAge       = time.Minute
	DefaultMaxBodyBytes = 16 << 20
)

// Config configures a Source.
type Config struct {
	// URL of the exporter's metrics, e.g. http://10.0.3.7:9400/metrics (required).
	URL string
	// Timeout bounds one scrape, connection and body included (default 2 s).
	Timeout time.Duration
	// MaxAge: a series carrying a timestamp older than this is stale and not
	// used (default 1 min; dcgm-exporter itself writes no timestamps).
	MaxAge time.Duration
	// Override lets DCGM's value replace utilisation NVML measured (whole
	// cards, GPM on Hopper). By default NVML and GPM values win and DCGM fills
	// only the instances whose util is null.
	Override bool
	// MaxBodyBytes bounds the exposition read (default 16 MiB).
	MaxBodyBytes int64
	// Client makes the requests (default: a client of its own, no proxy).
	Client     *http.Client
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: metrics are not registered
	Now        func() time.Time      // default time.Now
}

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("dcgm: URL is required"))
	} else if u, err := url.Parse(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("dcgm: URL %q: %w", c.URL, err))
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("dcgm: URL %q: want http://host:port/path or https://…", c.URL))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("dcgm: timeout %v must not be negative", c.Timeout))
	}
	if c.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("dcgm: max age %v must not be negative", c.MaxAge))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("dcgm: max body bytes %d must not be negative", c.MaxBodyBytes))
	}
	return errors.Join(errs...)
}

// Reasons a scrape fails (cardhour_collector_dcgm_scrape_errors_total).
const (
	ScrapeRequest  = "request"   // connection refused, DNS, reset, …
	ScrapeTimeout  = "timeout"   // no complete answer within the timeout
	ScrapeStatus   = "status"    // an HTTP status other than 200
	ScrapeTooLarge = "too_large" // the body exceeds MaxBodyBytes
	ScrapeParse    = "parse"     // not a valid text exposition
)

// Per-instance outcomes of a tick (cardhour_collector_dcgm_instances_total).
const (
	InstanceFilled   = "filled"           // util set from DCGM
	InstanceKept     = "kept"             // NVML measured util and Override is off
	InstanceNoSeries = "no_series"        // no usable series for the instance: util stays null
	InstanceMismatch = "profile_mismatch" // the series' GPU_I_PROFILE differs from the instance's
	InstanceNoScrape = "no_scrape"        // the scrape failed: util as NVML saw it
)

// ScrapeError is a failed scrape with its reason (one of the Scrape* constants).
type ScrapeError struct {
	Reason string
	Err    error
}

func (e *ScrapeError) Error() string {
	return "dcgm-exporter scrape (" + e.Reason + "): " + e.Err.Error()
}
func (e *ScrapeError) Unwrap() error { return e.Err }

// Source is a collector.Source that adds DCGM utilisation to an inner source.
// It is safe for use by one goroutine at a time (the collector's tick loop).
type Source struct {
	inner  collector.Source
	cfg    Config
	client *http.Client
	own    *http.Transport // the default client's transport, closed by Close
	log    *slog.Logger
	m      *metrics

	body bytes.Buffer // the last response, reused (one scrape at a time)

	mu      sync.Mutex
	lastLog map[string]time.Time
}

// New returns a Source that reads the devices through inner.
func New(inner collector.Source, cfg Config) (*Source, error) {
	if inner == nil {
		return nil, errors.New("dcgm: inner source is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Source{inner: inner, cfg: cfg, client: cfg.Client, m: m, lastLog: map[string]time.Time{},
		log: cfg.Logger.With("component", "dcgm", "url", cfg.URL)}
	if s.client == nil {
		// The exporter runs on this node: no proxy; one kept-alive connection.
		s.own = &http.Transport{
			DialContext:           (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          1,
			MaxIdleConnsPerHost:   1,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   cfg.Timeout,
			ResponseHeaderTimeout: cfg.Timeout,
		}
		s.client = &http.Client{Transport: s.own}
	}
	return s, nil
}

// Close closes the idle connection to the exporter. It does not close the inner source.
func (s *Source) Close() {
	if s.own != nil {
		s.own.CloseIdleConnections()
	}
}

type scraped struct {
	res *Result
	err error
}

// Sample reads the inner source and the exporter concurrently and fills util
// from DCGM. Its error is the inner source's: a failed scrape is counted and
// logged, never returned.
func (s *Source) Sample(ctx context.Context) ([]collector.Instance, error) {
	ch := make(chan scraped, 1)
	go func() {
		res, err := s.Scrape(ctx)
		ch <- scraped{res, err}
	}()
	insts, err := s.inner.Sample(ctx)
	sc := <-ch
	if sc.err != nil {
		reason := ScrapeRequest
		var se *ScrapeError
		if errors.As(sc.err, &se) {
			reason = se.Reason
		}
		s.m.scrapeErrors.WithLabelValues(reason).Inc()
		s.m.instances.WithLabelValues(InstanceNoScrape).Add(float64(len(insts)))
		s.logThrottled("scrape:"+reason, "cannot read dcgm-exporter; utilisation as NVML measured it", sc.err)
		return insts, err
	}
	for reason, n := range sc.res.Ignored {
		s.m.ignored.WithLabelValues(reason).Add(float64(n))
	}
	if len(sc.res.Ignored) > 0 {
		attrs := []any{}
		for _, r := range sc.res.IgnoredReasons() {
			attrs = append(attrs, r, sc.res.Ignored[r])
		}
		s.logThrottled("ignored", "some dcgm-exporter series were not used",
			fmt.Errorf("%d of %d %s series ignored", sum(sc.res.Ignored), sc.res.Series, Metric), attrs...)
	}
	s.apply(insts, sc.res)
	return insts, err
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// apply sets util from res on the instances that need it.
func (s *Source) apply(insts []collector.Instance, res *Result) {
	var filled, kept, none, mismatch int
	for i := range insts {
		in := &insts[i]
		if in.UtilKnown && !s.cfg.Override {
			kept++
			continue
		}
		key := Key{GPUUUID: in.GPUUUID, GIID: in.GIID}
		if in.Profile == collector.ProfileFull || in.GIID < 0 {
			key.GIID = WholeGPU
		}
		v, ok := res.Values[key]
		if !ok {
			none++
			continue
		}
		if key.GIID != WholeGPU && v.Profile != "" && v.Profile != in.Profile {
			// The exporter's view of the MIG layout is not the node's (it
			// lists GPU instances when it starts): its value may be another
			// instance's that had this ID.
			mismatch++
			s.logThrottled("mismatch", "dcgm-exporter names another profile for this GPU instance; not used",
				fmt.Errorf("GPU_I_PROFILE %q, NVML profile %q", v.Profile, in.Profile),
				"gpu_uuid", in.GPUUUID, "gpu_instance_id", in.GIID, "instance_id", in.InstanceID)
			continue
		}
		in.Util, in.UtilKnown, in.UtilSource = v.Util, true, collector.UtilSourceDCGM
		filled++
	}
	s.m.instances.WithLabelValues(InstanceFilled).Add(float64(filled))
	s.m.instances.WithLabelValues(InstanceKept).Add(float64(kept))
	s.m.instances.WithLabelValues(InstanceNoSeries).Add(float64(none))
	s.m.instances.WithLabelValues(InstanceMismatch).Add(float64(mismatch))
}

// Scrape reads and parses the exporter's metrics once, within the timeout.
// Its error is a *ScrapeError. Like Sample, it must not run concurrently with
// itself (the response buffer is reused).
func (s *Source) Scrape(ctx context.Context) (*Result, error) {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	body, err := s.fetch(ctx)
	if err != nil {
		return nil, err
	}
	res, err := ParseBytes(body, s.cfg.Now(), s.cfg.MaxAge)
	if err != nil {
		return nil, &ScrapeError{Reason: ScrapeParse, Err: err}
	}
	s.m.duration.Observe(time.Since(t0).Seconds())
	s.m.lastSuccess.Set(float64(s.cfg.Now().UnixMilli()) / 1000)
	return res, nil
}

func (s *Source) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, &ScrapeError{Reason: ScrapeRequest, Err: err}
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, &ScrapeError{Reason: transportReason(ctx, err), Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, &ScrapeError{Reason: ScrapeStatus, Err: fmt.Errorf("GET %s: HTTP %s", s.cfg.URL, resp.Status)}
	}
	s.body.Reset()
	if _, err := s.body.ReadFrom(io.LimitReader(resp.Body, s.cfg.MaxBodyBytes+1)); err != nil {
		return nil, &ScrapeError{Reason: transportReason(ctx, err), Err: fmt.Errorf("reading the body: %w", err)}
	}
	body := s.body.Bytes()
	if int64(len(body)) > s.cfg.MaxBodyBytes {
		return nil, &ScrapeError{Reason: ScrapeTooLarge, Err: fmt.Errorf("body larger than %d bytes", s.cfg.MaxBodyBytes)}
	}
	return body, nil
}

func transportReason(ctx context.Context, err error) string {
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return ScrapeTimeout
	}
	return ScrapeRequest
}

// logThrottled logs at most once a minute per key.
func (s *Source) logThrottled(key, msg string, err error, attrs ...any) {
	s.mu.Lock()
	now := time.Now()
	if last, ok := s.lastLog[key]; ok && now.Sub(last) < time.Minute {
		s.mu.Unlock()
		return
	}
	s.lastLog[key] = now
	s.mu.Unlock()
	s.log.Warn(msg, append(attrs, "err", err.Error())...)
}
