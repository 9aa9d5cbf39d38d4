package release

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cardhour/cardhour/internal/watch/alert"
)

// WebhookConfig configures a webhook releaser.
type WebhookConfig struct {
	URL     string
	Secret  string        // HMAC-SHA256 key; empty: requests are not signed
	Timeout time.Duration // per request (default 10 s)
	Client  *http.Client  // default: one with no redirects followed
	Now     func() time.Time
}

// Validate reports a URL that is not absolute http(s) and a negative timeout.
func (c WebhookConfig) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q: want an absolute http:// or https:// URL", c.URL)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("timeout %v: must not be negative", c.Timeout)
	}
	return nil
}

// WebhookRequest is the JSON body a webhook releaser POSTs.
type WebhookRequest struct {
	Key      string          `json:"key"`
	DryRun   bool            `json:"dry_run"` // the receiver checks and reports, releases nothing
	Target   WebhookTarget   `json:"target"`
	Evidence WebhookEvidence `json:"evidence"`
}

// WebhookTarget is Target on the wire.
type WebhookTarget struct {
	Node       string `json:"node"`
	GPUUUID    string `json:"gpu_uuid"`
	InstanceID string `json:"instance_id"`
	GPUModel   string `json:"gpu_model"`
	Profile    string `json:"profile"`
	Project    string `json:"project"`
	User       string `json:"user"`
	HolderRef  string `json:"holder_ref"`
}

// WebhookEvidence is Evidence on the wire (RFC 3339 times).
type WebhookEvidence struct {
	StreakStart time.Time `json:"streak_start"`
	StreakEnd   time.Time `json:"streak_end"`
	IdleSamples int       `json:"idle_samples"`
	Threshold   float64   `json:"threshold"`
}

// WebhookReply is what the receiver answers with a 2xx status.
type WebhookReply struct {
	Released bool   `json:"released"`
	Detail   string `json:"detail"`
}

// Webhook asks a site's service to release, with a signed POST:
// X-Cardhour-Timestamp (Unix seconds), X-Cardhour-Signature (hex
// HMAC-SHA256 of timestamp + "." + body under the secret) and Idempotency-Key
// (the request's key, the same on every retry).
type Webhook struct {
	cfg WebhookConfig
	err error
}

// NewWebhook returns a webhook releaser. A config that does not validate makes
// every Release fail (ParseConfig reports it first, with its line).
func NewWebhook(cfg WebhookConfig) *Webhook {
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Webhook{cfg: cfg, err: cfg.Validate()}
}

// Sign returns the X-Cardhour-Signature value of body sent at timestamp ts.
func Sign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Release POSTs the request. Released is what a 2xx reply says
// ({"released": true}); any other status is an error.
func (w *Webhook) Release(ctx context.Context, r alert.ReleaseRequest) (alert.ReleaseOutcome, error) {
	if w.err != nil {
		return alert.ReleaseOutcome{}, fmt.Errorf("webhook release: %w", w.err)
	}
	body, err := json.Marshal(WebhookRequest{Key: r.Key, DryRun: r.DryRun, Target: WebhookTarget(r.Target),
		Evidence: WebhookEvidence{StreakStart: r.Evidence.StreakStart.UTC(), StreakEnd: r.Evidence.StreakEnd.UTC(),
			IdleSamples: r.Evidence.IdleSamples, Threshold: r.Evidence.Threshold}})
	if err != nil {
		return alert.ReleaseOutcome{}, fmt.Errorf("webhook release: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return alert.ReleaseOutcome{}, fmt.Errorf("webhook release: %w", err)
	}
	ts := strconv.FormatInt(w.cfg.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "cardhour-release")
	req.Header.Set("X-Cardhour-Timestamp", ts)
	if w.cfg.Secret != "" {
		req.Header.Set("X-Cardhour-Signature", Sign(w.cfg.Secret, ts, body))
	}
	req.Header.Set("Idempotency-Key", r.Key)
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		return alert.ReleaseOutcome{}, fmt.Errorf("webhook release: POST %s: %w", redact(w.cfg.URL), err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return alert.ReleaseOutcome{}, fmt.Errorf("webhook release: reading the reply of %s: %w", redact(w.cfg.URL), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return alert.ReleaseOutcome{}, fmt.Errorf("webhook release: %s answered HTTP %d: %s", redact(w.cfg.URL), resp.StatusCode, snippet(raw))
	}
	var reply WebhookReply
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&reply); err != nil {
			return alert.ReleaseOutcome{}, fmt.Errorf("webhook release: %s answered HTTP %d with a reply that is not {\"released\": bool, \"detail\": string}: %v: %s",
				redact(w.cfg.URL), resp.StatusCode, err, snippet(raw))
		}
	}
	who := "webhook " + redact(w.cfg.URL)
	var action string
	switch {
	case r.DryRun && reply.Released: // the receiver's fault; say what happened
		action = who + " released although asked for a dry run"
	case r.DryRun:
		action = "dry run: " + who + " answered"
	case reply.Released:
		action = who + " released"
	default:
		action = who + " did not release"
	}
	if reply.Detail != "" {
		action += ": " + reply.Detail
	} else if !reply.Released {
		action += fmt.Sprintf(" (HTTP %d, no detail)", resp.StatusCode)
	}
	return alert.ReleaseOutcome{Released: reply.Released, Action: action}, nil
}

// redact drops the user info and query of a URL (they may hold tokens).
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(webhook URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func snippet(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if len(s) > 512 {
		s = strings.ToValidUTF8(s[:512], "") + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
