package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/storefail"
)

// ProblemBase prefixes every problem type URI.
const ProblemBase = "https://cardhour.dev/problems/"

// The problem types, one per kind of error; stable (clients switch on them).
const (
	ProblemBadRequest        = ProblemBase + "bad-request"
	ProblemValidation        = ProblemBase + "validation"
	ProblemUnauthorized      = ProblemBase + "unauthorized"
	ProblemForbidden         = ProblemBase + "forbidden"
	ProblemNotFound          = ProblemBase + "not-found"
	ProblemMethodNotAllowed  = ProblemBase + "method-not-allowed"
	ProblemNotAcceptable     = ProblemBase + "not-acceptable"
	ProblemConflict          = ProblemBase + "conflict"
	ProblemInvalidTransition = ProblemBase + "invalid-transition"
	ProblemGracePeriod       = ProblemBase + "grace-period"
	ProblemNotReleased       = ProblemBase + "not-released"
	ProblemTooLarge          = ProblemBase + "too-large"
	ProblemUnsupportedMedia  = ProblemBase + "unsupported-media-type"
	ProblemUnavailable       = ProblemBase + "unavailable"
	ProblemInternal          = ProblemBase + "internal"
)

// ProblemDetail is one item of a problem: what is wrong, and where (a
// request location like query.limit or body.period, or a line of an
// uploaded file).
type ProblemDetail struct {
	Message  string `json:"message"`
	Location string `json:"location,omitempty"`
	Line     int    `json:"line,omitempty"`
	Field    string `json:"field,omitempty"`
	Value    any    `json:"value,omitempty"`
}

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type      string          `json:"type" doc:"stable URI of the kind of error"`
	Title     string          `json:"title"`
	Status    int             `json:"status"`
	Detail    string          `json:"detail,omitempty"`
	Instance  string          `json:"instance,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	Errors    []ProblemDetail `json:"errors,omitempty"`

	headers http.Header // sent with the problem (Retry-After)
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// GetHeaders are the headers sent with the problem (huma.HeadersError).
func (p *Problem) GetHeaders() http.Header { return p.headers }

// RetryAfter is the Retry-After, in seconds, of a store that cannot answer
// for now, unless its cause suggests another wait (storefail.RetryAfter).
const RetryAfter = 5

// unavailableProblem is the 503 of a store that cannot answer for now:
// the cause is named (disk full, read-only, unreachable, locked), the rest
// of the error (paths, addresses) only logged.
func unavailableProblem(ctx context.Context, err error) *Problem {
	logFrom(ctx).Warn("store unavailable", "err", err)
	wait := RetryAfter
	if d := storefail.RetryAfter(err); d > 0 {
		wait = int((d + time.Second - 1) / time.Second)
	}
	p := newProblem(http.StatusServiceUnavailable, ProblemUnavailable,
		fmt.Sprintf("a store cannot answer for now: %s; retry in %d s", storefail.Cause(err), wait))
	p.headers = http.Header{"Retry-After": {strconv.Itoa(wait)}}
	p.RequestID = RequestID(ctx)
	return p
}

// writeUnavailable writes the problem of err, a store that cannot answer
// for now, outside an operation's handler (the token lookup).
func writeUnavailable(ctx huma.Context, err error) {
	p := unavailableProblem(ctx.Context(), err)
	p.Instance = ctx.URL().Path
	for k, vs := range p.headers {
		for _, v := range vs {
			ctx.AppendHeader(k, v)
		}
	}
	ctx.SetHeader("Content-Type", "application/problem+json")
	ctx.SetStatus(p.Status)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(p)
}

// GetStatus is the HTTP status.
func (p *Problem) GetStatus() int { return p.Status }

// ContentType is application/problem+json.
func (p *Problem) ContentType(string) string { return "application/problem+json" }

// typeForStatus names the problem type of an error huma itself raises
// (validation, body too large, …) by its status.
func typeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return ProblemBadRequest
	case http.StatusUnprocessableEntity:
		return ProblemValidation
	case http.StatusUnauthorized:
		return ProblemUnauthorized
	case http.StatusForbidden:
		return ProblemForbidden
	case http.StatusNotFound:
		return ProblemNotFound
	case http.StatusMethodNotAllowed:
		return ProblemMethodNotAllowed
	case http.StatusNotAcceptable:
		return ProblemNotAcceptable
	case http.StatusConflict:
		return ProblemConflict
	case http.StatusRequestEntityTooLarge:
		return ProblemTooLarge
	case http.StatusUnsupportedMediaType:
		return ProblemUnsupportedMedia
	case http.StatusServiceUnavailable:
		return ProblemUnavailable
	}
	if status >= 500 {
		return ProblemInternal
	}
	return ProblemBadRequest
}

func newProblem(status int, typ, detail string) *Problem {
	if status == 0 {
		status = http.StatusInternalServerError
	}
	return &Problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail}
}

func init() {
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		p := newProblem(status, typeForStatus(status), msg)
		for _, e := range errs {
			if e == nil {
				continue
			}
			if d, ok := e.(huma.ErrorDetailer); ok {
				ed := d.ErrorDetail()
				p.Errors = append(p.Errors, ProblemDetail{Message: ed.Message, Location: ed.Location, Value: ed.Value})
				continue
			}
			p.Errors = append(p.Errors, ProblemDetail{Message: e.Error()})
		}
		if status >= 500 {
			// Never show internal error text to a client; it is logged.
			p.Errors = nil
			p.Detail = "the server could not answer; the request ID names it in the server's log"
		}
		return p
	}
	huma.NewErrorWithContext = func(ctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
		se := huma.NewError(status, msg, errs...)
		if p, ok := se.(*Problem); ok && ctx != nil {
			p.RequestID = RequestID(ctx.Context())
			p.Instance = ctx.URL().Path
		}
		return se
	}
}

// catalogLineRE reads one of schemas.ParseCatalog's errors:
// "name:line: path: message".
var catalogLineRE = regexp.MustCompile(`^[^:\n]*:(\d+): (?:([A-Za-z0-9_.\[\]-]+): )?(.*)$`)

// catalogProblems splits a catalog validation error into one detail per
// line, each naming its line and field.
func catalogProblems(err error) []ProblemDetail {
	var out []ProblemDetail
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if m := catalogLineRE.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, ProblemDetail{Message: m[3], Line: n, Field: m[2], Location: "body"})
			continue
		}
		out = append(out, ProblemDetail{Message: l, Location: "body"})
	}
	return out
}

// problem turns an error from the stores or the flow into its problem: the
// one place that maps errors to HTTP statuses, so handlers never choose one.
func problem(ctx context.Context, err error) error {
	var p *Problem
	if errors.As(err, &p) {
		if p.RequestID == "" {
			p.RequestID = RequestID(ctx)
		}
		return p
	}
	var se huma.StatusError
	if errors.As(err, &se) {
		return se
	}
	var out *Problem
	switch {
	case errors.Is(err, storefail.ErrUnavailable):
		return unavailableProblem(ctx, err)
	case errors.Is(err, ledger.ErrNotFound):
		out = newProblem(http.StatusNotFound, ProblemNotFound, err.Error())
	case errors.Is(err, ErrGracePeriod):
		out = newProblem(http.StatusConflict, ProblemGracePeriod, err.Error())
	case errors.Is(err, ledger.ErrInvalidTransition):
		out = newProblem(http.StatusConflict, ProblemInvalidTransition, err.Error())
	case errors.Is(err, ErrNotReleased):
		out = newProblem(http.StatusConflict, ProblemNotReleased, err.Error())
	case errors.Is(err, ledger.ErrConflict):
		out = newProblem(http.StatusConflict, ProblemConflict, err.Error())
	case errors.Is(err, ledger.ErrTokenExpired), errors.Is(err, ledger.ErrTokenRevoked):
		out = newProblem(http.StatusUnauthorized, ProblemUnauthorized, err.Error())
	case errors.Is(err, ledger.ErrInvalidArgument):
		out = newProblem(http.StatusUnprocessableEntity, ProblemValidation, err.Error())
		var re *invoicing.RosterError
		if errors.As(err, &re) {
			for _, x := range re.Problems {
				out.Errors = append(out.Errors, ProblemDetail{Message: x.Message, Line: x.Line, Field: x.Field, Location: "body"})
			}
		}
	case errors.Is(err, ErrUnavailable):
		out = newProblem(http.StatusServiceUnavailable, ProblemUnavailable, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		out = newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "the request was cancelled or ran out of time")
	default:
		logFrom(ctx).Error("request failed", "err", err)
		return huma.NewError(http.StatusInternalServerError, "")
	}
	out.RequestID = RequestID(ctx)
	return out
}

// forbidden is the problem of a token whose role or scope does not allow
// the request.
func forbidden(ctx context.Context, format string, args ...any) error {
	p := newProblem(http.StatusForbidden, ProblemForbidden, fmt.Sprintf(format, args...))
	p.RequestID = RequestID(ctx)
	return p
}

// invalid is a validation problem about one request location.
func invalid(ctx context.Context, location, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	p := newProblem(http.StatusUnprocessableEntity, ProblemValidation, msg)
	p.Errors = []ProblemDetail{{Message: msg, Location: location}}
	p.RequestID = RequestID(ctx)
	return p
}
