// Package notify turns the watcher's decisions (idle warnings, reminders,
// releases, budget thresholds) into messages for people, in zh-CN or en, and
// delivers them through the channels a site configures: a signed generic
// webhook, DingTalk, Feishu/Lark and WeCom group robots, Slack incoming
// webhooks and SMTP email.
//
// The package does not decide what to send or when to retry: the watcher
// records each Message under its natural key, calls Config.Plan to route and
// render it, and sends each Envelope with one Sender.Send attempt at a time,
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

	"github.com/cardhour/cardhour/billing"
	"github.com/shopspring/decimal"
)

// Roles a Person can have.
const (
	RoleHolder = "holder" // the student (or user) holding the instance
	RoleLead   = "lead"   // the project's lead
	RoleAdmin  = "admin"  // the site's administrators
)

// Person is one recipient.
type Person struct {
	Role    string // holder | lead | admin
	Project string
	User    string
	Name    string
	Email   string // for SMTP channels
	// IM is the person's id for group robots: a DingTalk user id or mobile
	// number, a Feishu open_id/user_id, a WeCom user id, a Slack member id.
	// Several ids may be given per vendor as "dingtalk:123,feishu:ou_x,slack:U1"
	// (keys: the channel types); a bare id is used for every type.
	IM   string
	Lang string // zh-CN | en; "" takes the configuration's default
}

// BudgetFacts describe a budget for a budget_threshold message.
type BudgetFacts struct {
	Scope  string // project | student
	Period string // e.g. "2026-12" or a term's name
	Unit   string // money | card_hours
	Limit  decimal.Decimal
	Used   decimal.Decimal
	// Percent is the threshold crossed (50, 80, 100, …). The share used,
	// Used / Limit, is shown beside it.
	Percent int
}

// Facts are what a message says.
type Facts struct {
	Project, User, Node, GPUUUID, GPUModel, Profile, InstanceID string

	HeldSince, IdleSince, At time.Time
	NextAction               string // "" | "reminder" | "release"
	NextAt                   time.Time
	Cost                     decimal.Decimal // cost so far, already rounded by the billing engine
	Currency                 string
	TZ                       *time.Location // the catalog's zone; nil: UTC
	Budget                   *BudgetFacts
	ExemptionHint            string // how to ask for an exemption; "" takes the configuration's
	Outcome                  string // the release action ("deleted pod ns/p") or, for a failure, the error
}

// Message is one alert, identified by its natural key.
type Message struct {
	Kind  billing.AlertKind
	Key   string // the alert's natural key (e.g. kind|instance|streak start)
	Facts Facts
}

// Envelope is a rendered message for one person through one channel.
type Envelope struct {
	Channel string
	To      Person
	Lang    string
	Subject string
	Body    string
	Message Message
}

// DeliveryKey identifies one envelope: the message key, the channel and the
// recipient. It is the generic webhook's Idempotency-Key and the seed of the
// email's Message-ID, so that a retried delivery is recognisable as the same
// one while the holder's and the lead's copies of a message stay distinct.
func (e Envelope) DeliveryKey() string {
	return e.Message.Key + "|" + e.Channel + "|" + e.To.Role + "|" + e.To.Project + "|" + e.To.User
}

func (e Envelope) deliveryHash() string {
	h := sha256.Sum256([]byte(e.DeliveryKey()))
	return hex.EncodeToString(h[:16])
}

// Sender delivers one envelope with one attempt.
type Sender interface {
	Send(ctx context.Context, e Envelope) error
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
