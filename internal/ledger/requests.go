package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Exemption requests: a student asks for an exemption from the idle policy
// (one instance or all of theirs, until a time, with a reason); the
// project's lead (or admin, finance) grants it, which creates the exemption
// (GrantExemption's record, in the same transaction), or refuses it with a
// reason. Part of Store; every change is audited.

// RequestStore is the exemption requests' part of Store.
type RequestStore interface {
	// RequestExemption stores a pending request made by actor.
	RequestExemption(ctx context.Context, actor string, r NewExemptionRequest) (ExemptionRequest, error)
	// ExemptionRequest returns one request.
	ExemptionRequest(ctx context.Context, id int64) (ExemptionRequest, error)
	// ExemptionRequests lists requests, newest first, filtered and
	// paginated.
	ExemptionRequests(ctx context.Context, f ExemptionRequestFilter) (page []ExemptionRequest, next string, err error)
	// GrantExemptionRequest grants a pending request: the exemption it
	// asked for (until and reason as asked) is created with actor as who
	// granted it, and the request records it, in one transaction. A
	// request that is not pending is ErrInvalidTransition.
	GrantExemptionRequest(ctx context.Context, actor string, id int64, answer string) (ExemptionRequest, Exemption, error)
	// RefuseExemptionRequest refuses a pending request with a reason; one
	// that is not pending is ErrInvalidTransition.
	RefuseExemptionRequest(ctx context.Context, actor string, id int64, answer string) (ExemptionRequest, error)
}

// ExemptionRequestStatus is where a request is.
type ExemptionRequestStatus string

// Request statuses.
const (
	RequestPending ExemptionRequestStatus = "pending"
	RequestGranted ExemptionRequestStatus = "granted"
	RequestRefused ExemptionRequestStatus = "refused"
)

// NewExemptionRequest is what a student asks: an exemption for one of their
// instances (InstanceID) or all of them ("") in Project, until Until.
type NewExemptionRequest struct {
	Project    string
	User       string
	InstanceID string
	Until      time.Time
	Reason     string
}

// ExemptionRequest is a stored request.
type ExemptionRequest struct {
	ID int64
	NewExemptionRequest
	Status      ExemptionRequestStatus
	RequestedBy string
	CreatedAt   time.Time
	DecidedBy   string
	DecidedAt   time.Time // zero while pending
	Answer      string    // the refusal's reason, or a note with the grant
	ExemptionID int64     // granted: the exemption created
	UpdatedAt   time.Time
}

// ExemptionRequestFilter selects requests; zero fields match everything.
type ExemptionRequestFilter struct {
	Project string
	User    string
	Status  ExemptionRequestStatus
	// UpdatedSince: only requests made or decided at or after this time.
	UpdatedSince time.Time
	Cursor       string
	Limit        int
}

// CheckNewExemptionRequest reports every problem with r at once; now is the
// store's time (the exemption asked for must end in the future).
func CheckNewExemptionRequest(r *NewExemptionRequest, now time.Time) error {
	var errs []error
	if strings.TrimSpace(r.Project) == "" {
		errs = append(errs, errors.New("project is required"))
	}
	if strings.TrimSpace(r.User) == "" {
		errs = append(errs, errors.New("user is required: a request is a student's"))
	}
	if !r.Until.After(now) {
		errs = append(errs, fmt.Errorf("until %s: want a time after now (%s)", r.Until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)))
	}
	if strings.TrimSpace(r.Reason) == "" {
		errs = append(errs, errors.New("reason is required"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: exemption request: %w", ErrInvalidArgument, errors.Join(errs...))
	}
	return nil
}

// CheckRequestStatus rejects an unknown status ("" is allowed: any).
func CheckRequestStatus(s ExemptionRequestStatus) error {
	switch s {
	case "", RequestPending, RequestGranted, RequestRefused:
		return nil
	}
	return fmt.Errorf("%w: exemption request status %q: want pending, granted or refused", ErrInvalidArgument, s)
}
