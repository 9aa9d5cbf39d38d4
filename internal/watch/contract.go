package watch

import (
	"context"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/shopspring/decimal"
)

// The watcher talks to its notifier (internal/watch/notify) and its
// releasers (internal/watch/release) through the small interfaces below.
// Their types carry the same names and fields as those packages' own, so
// that an adapter is a field-by-field copy.

// Person is someone an alert may reach (notify.Person): the holder, a
// project lead or an admin, with the addresses the roster gives.
type Person struct {
	Role    string `json:"role" yaml:"role"` // holder | lead | admin
	Project string `json:"project,omitempty" yaml:"project"`
	User    string `json:"user,omitempty" yaml:"user"`
	Name    string `json:"name,omitempty" yaml:"name"`
	Email   string `json:"email,omitempty" yaml:"email"`
	IM      string `json:"im,omitempty" yaml:"im"`
	Lang    string `json:"lang,omitempty" yaml:"lang"`
}

// BudgetFacts describe a budget alert (notify.BudgetFacts).
type BudgetFacts struct {
	Scope   string          `json:"scope"`  // project | student
	Period  string          `json:"period"` // 2026-12 or a term id
	Unit    string          `json:"unit"`   // money | card_hours
	Limit   decimal.Decimal `json:"limit"`
	Used    decimal.Decimal `json:"used"`
	Percent int             `json:"percent"` // the threshold crossed
}

// Facts are what a message says (notify.Facts).
type Facts struct {
	Project       string          `json:"project,omitempty"`
	User          string          `json:"user,omitempty"`
	Node          string          `json:"node,omitempty"`
	GPUUUID       string          `json:"gpu_uuid,omitempty"`
	GPUModel      string          `json:"gpu_model,omitempty"`
	Profile       string          `json:"profile,omitempty"`
	InstanceID    string          `json:"instance_id,omitempty"`
	HeldSince     time.Time       `json:"held_since"`
	IdleSince     time.Time       `json:"idle_since"`
	At            time.Time       `json:"at"`
	NextAction    string          `json:"next_action,omitempty"` // "" | reminder | release
	NextAt        time.Time       `json:"next_at"`
	Cost          decimal.Decimal `json:"cost"`
	Currency      string          `json:"currency,omitempty"`
	TZ            *time.Location  `json:"-"`
	Budget        *BudgetFacts    `json:"budget,omitempty"`
	ExemptionHint string          `json:"exemption_hint,omitempty"`
	Outcome       string          `json:"outcome,omitempty"` // the release's action text
}

// Message is one alert to render (notify.Message).
type Message struct {
	Kind  billing.AlertKind `json:"kind"`
	Key   string            `json:"key"` // the alert's natural key
	Facts Facts             `json:"facts"`
}

// Envelope is one rendered message to one person on one channel
// (notify.Envelope).
type Envelope struct {
	Channel string  `json:"channel"`
	To      Person  `json:"to"`
	Lang    string  `json:"lang"`
	Subject string  `json:"subject"`
	Body    string  `json:"body"`
	Message Message `json:"message"`
}

// Notifier routes, renders and sends (notify.Config with its Senders).
type Notifier interface {
	// Plan routes m to people's channels and renders each envelope.
	Plan(m Message, people []Person) ([]Envelope, error)
	// Send makes one attempt at delivering e on its channel.
	Send(ctx context.Context, e Envelope) error
	// Permanent reports an error that retrying cannot cure.
	Permanent(err error) bool
	// Backoff is the wait before attempt number attempt+1.
	Backoff(attempt int) time.Duration
}

// Target is the instance a releaser acts on (release.Target).
type Target struct {
	Node, GPUUUID, InstanceID, GPUModel, Profile, Project, User, HolderRef string
}

// Evidence is why it is released (release.Evidence).
type Evidence struct {
	StreakStart, StreakEnd time.Time
	IdleSamples            int
	Threshold              float64
}

// ReleaseRequest asks a releaser to act (release.Request).
type ReleaseRequest struct {
	Key      string // natural key of the release: instance|streak start ms
	Target   Target
	Evidence Evidence
	DryRun   bool
}

// Outcome is what a releaser did (release.Outcome).
type Outcome struct {
	Released bool   // true only when something was released
	Action   string // what was (or, dry run, would have been) done
}

// Releaser releases held instances (release.Releaser).
type Releaser interface {
	Release(ctx context.Context, r ReleaseRequest) (Outcome, error)
	// Permanent reports an error that retrying cannot cure
	// (release.ErrNoHandle, release.ErrForbidden).
	Permanent(err error) bool
}
