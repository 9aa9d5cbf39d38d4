// Package notify turns the watcher's decisions (idle warnings, reminders,
// releases, budget thresholds) into messages for people, in zh-CN or en, and
// delivers them through the channels a site configures: a signed generic
// webhook, DingTalk, Feishu/Lark and WeCom group robots, Slack incoming
// webhooks and SMTP email.
//
// The package does not decide what to send or when to retry: the watcher
// records each alert.Message under its natural key, calls Config.Plan to route
// and render it, and sends each alert.Envelope with one Sender.Send attempt at a time,
// waiting Backoff(attempt) between attempts and giving up on Permanent errors.
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cardhour/cardhour/internal/watch/alert"
)

// deliveryHash is a short digest of e's DeliveryKey (the email's Message-ID).
func deliveryHash(e alert.Envelope) string {
	h := sha256.Sum256([]byte(e.DeliveryKey()))
	return hex.EncodeToString(h[:16])
}

// Sender delivers one envelope with one attempt.
type Sender interface {
	Send(ctx context.Context, e alert.Envelope) error
}

// SendError is a failed delivery.
type SendError struct {
	Channel   string
	Status    int    // HTTP status or SMTP reply code; 0 when none
	Code      string // the vendor's error code from its reply ("310000"), if any
	Msg       string
	permanent bool
	Err       error // the underlying error, if any
}

// Error describes the failure: channel, status or vendor code, message.
func (e *SendError) Error() string {
	s := "notify: channel " + e.Channel + ": "
	switch {
	case e.Status != 0 && e.Code != "":
		s += fmt.Sprintf("status %d, error code %s: ", e.Status, e.Code)
	case e.Status != 0:
		s += fmt.Sprintf("status %d: ", e.Status)
	case e.Code != "":
		s += fmt.Sprintf("error code %s: ", e.Code)
	}
	s += e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.permanent {
		s += " (permanent)"
	}
	return s
}

// Unwrap returns the underlying error.
func (e *SendError) Unwrap() error { return e.Err }

// ErrConfig marks errors in the configuration or the envelope (an unknown
// channel, a missing address): retrying cannot help.
var ErrConfig = errors.New("notify: bad configuration")

// Permanent reports whether retrying err cannot succeed: a 3xx (redirects are
// not followed) or 4xx reply other than 408 and 429, a vendor error code that
// is not a rate limit, an SMTP 5xx reply, a bad configuration. Network errors, timeouts, 5xx, 408, 429 and
// SMTP 4xx are retryable.
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrConfig) {
		return true
	}
	var se *SendError
	if errors.As(err, &se) {
		return se.permanent
	}
	return false
}

// Backoff bounds.
const (
	BackoffBase = 15 * time.Second
	BackoffCap  = 30 * time.Minute
)

// Backoff is how long to wait before retry number attempt (0 for the first
// retry): "full jitter", a uniform draw from [0, min(BackoffCap,
// BackoffBase·2^attempt)). r may be nil (the package's random source).
func Backoff(attempt int, r *rand.Rand) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	ceil := BackoffCap
	if attempt < 30 {
		if d := BackoffBase << attempt; d < BackoffCap {
			ceil = d
		}
	}
	if r == nil {
		return time.Duration(rand.Int64N(int64(ceil))) //nolint:gosec // G404: jitter, not a secret
	}
	return time.Duration(r.Int64N(int64(ceil)))
}
