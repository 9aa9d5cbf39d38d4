// Package alert holds what the watcher hands its edges and what they answer:
// the messages the notifier (internal/watch/notify) routes, renders and
// sends, and the releases a releaser (internal/watch/release) carries out.
// It is a leaf of the watcher's packages, so that the watcher links none of
// the edges' code (SMTP, client-go) and no adapter copies one type into
// another.
package alert

import (
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
)

// Roles a Person can have.
const (
	RoleHolder = "holder" // the student (or user) holding the instance
	RoleLead   = "lead"   // the project's lead
	RoleAdmin  = "admin"  // the site's administrators
)

// Person is someone an alert may reach: the holder, a project lead or an
// admin, with the addresses the watch file or the roster gives.
type Person struct {
	Role    string `json:"role" yaml:"role"` // holder | lead | admin
	Project string `json:"project,omitempty" yaml:"project"`
	User    string `json:"user,omitempty" yaml:"user"`
	Name    string `json:"name,omitempty" yaml:"name"`
	Email   string `json:"email,omitempty" yaml:"email"` // for SMTP channels
	// IM is the person's id for group robots: a DingTalk user id or mobile
	// number, a Feishu open_id/user_id, a WeCom user id, a Slack member id.
	// Several ids may be given per vendor as "dingtalk:123,feishu:ou_x,slack:U1"
	// (keys: the channel types); a bare id is used for every type.
	IM   string `json:"im,omitempty" yaml:"im"`
	Lang string `json:"lang,omitempty" yaml:"lang"` // zh-CN | en; "" takes the notifier's default
}

// Identity names a person apart from their role: their user when the
// watch file or the roster gives one, else their email (lower-cased),
// else their IM handle, else their name. Two entries with the same
// identity are the same person; entries that differ in it are different
// people, even in the same role and project.
func (p Person) Identity() string {
	switch {
	case p.User != "":
		return "user:" + p.User
	case p.Email != "":
		return "email:" + strings.ToLower(p.Email)
	case p.IM != "":
		return "im:" + p.IM
	}
	return "name:" + p.Name
}

// BudgetFacts describe the budget of a budget_threshold message.
// Its JSON writes Limit and Used in the unit's way (BudgetUnit.Format), after
// Percent.
type BudgetFacts struct {
	Scope  billing.BudgetScope `json:"scope"`
	Period string              `json:"period"` // 2026-12 or a term's name
	Unit   billing.BudgetUnit  `json:"unit"`
	Limit  decimal.Decimal     `json:"limit"`
	Used   decimal.Decimal     `json:"used"`
	// Percent is the threshold crossed (50, 80, 100, …). The share used,
	// Used / Limit, is shown beside it.
	Percent int `json:"percent"`
}

// RequestFacts describe the exemption request of an exemption_requested or
// exemption_decided message.
type RequestFacts struct {
	ID     int64     `json:"id"`
	Status string    `json:"status"` // pending | granted | refused
	Until  time.Time `json:"until"`  // the end of the exemption asked for
	Reason string    `json:"reason"` // the student's
	// DecidedBy and Answer: who granted or refused it, and the refusal's
	// reason or the note with the grant.
	DecidedBy   string `json:"decided_by,omitempty"`
	Answer      string `json:"answer,omitempty"`
	ExemptionID int64  `json:"exemption_id,omitempty"` // granted: the exemption created
}

// Facts are what a message says. Cost is last, where its JSON has always
// written it.
type Facts struct {
	Project       string         `json:"project,omitempty"`
	User          string         `json:"user,omitempty"`
	Node          string         `json:"node,omitempty"`
	GPUUUID       string         `json:"gpu_uuid,omitempty"`
	GPUModel      string         `json:"gpu_model,omitempty"`
	Profile       string         `json:"profile,omitempty"`
	InstanceID    string         `json:"instance_id,omitempty"`
	HeldSince     time.Time      `json:"held_since"`
	IdleSince     time.Time      `json:"idle_since"`
	At            time.Time      `json:"at"`
	NextAction    string         `json:"next_action,omitempty"` // "" | reminder | release
	NextAt        time.Time      `json:"next_at"`
	Currency      string         `json:"currency,omitempty"`
	TZ            *time.Location `json:"-"` // the catalog's zone; nil: UTC
	Budget        *BudgetFacts   `json:"budget,omitempty"`
	ExemptionHint string         `json:"exemption_hint,omitempty"` // how to ask for an exemption; "" takes the notifier's
	Outcome       string         `json:"outcome,omitempty"`        // the release's action ("deleted pod ns/p") or, for a failure, the error
	Request       *RequestFacts  `json:"request,omitempty"`        // exemption request messages
	// Link is the dashboard's page for what the message asks of its reader:
	// an idle message's exemption request form for the instance, a
	// request's Exemptions page; "" when the dashboard's URL is unknown.
	Link string        `json:"link,omitempty"`
	Cost billing.Money `json:"cost"` // cost so far, already rounded by the billing engine
}

// Message is one alert, identified by its natural key.
type Message struct {
	Kind  billing.AlertKind `json:"kind"`
	Key   string            `json:"key"` // the alert's natural key (e.g. kind|instance|streak start)
	Facts Facts             `json:"facts"`
}

// Envelope is a message rendered for one person on one channel: what a
// delivery stores (as JSON) and sends.
type Envelope struct {
	Channel string  `json:"channel"`
	To      Person  `json:"to"`
	Lang    string  `json:"lang"`
	Subject string  `json:"subject"`
	Body    string  `json:"body"`
	Message Message `json:"message"`
}

// DeliveryKey identifies one envelope: the message key, the channel and the
// recipient. It is the generic webhook's Idempotency-Key and the seed of the
// email's Message-ID, so that a retried delivery is recognisable as the same
// one while the holder's and the lead's copies of a message stay distinct.
func (e Envelope) DeliveryKey() string {
	return e.Message.Key + "|" + e.Channel + "|" + e.To.Role + "|" + e.To.Project + "|" + e.To.User
}

// ReleaseTarget is the instance to release and who holds it.
type ReleaseTarget struct {
	Node, GPUUUID, InstanceID, GPUModel, Profile, Project, User, HolderRef string
}

// ReleaseEvidence is why the instance is released: its idle streak.
type ReleaseEvidence struct {
	StreakStart, StreakEnd time.Time
	IdleSamples            int
	Threshold              float64
}

// ReleaseRequest asks for one release.
type ReleaseRequest struct {
	Key      string // natural key of the release: instance|streak start ms
	Target   ReleaseTarget
	Evidence ReleaseEvidence
	DryRun   bool
}

// ReleaseOutcome is what a releaser did.
type ReleaseOutcome struct {
	Released bool   // true only when something was released
	Action   string // what was (or, dry run, would have been) done, e.g. "deleted pod ns/p"
}
