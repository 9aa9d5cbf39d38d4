package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
)

// Students help themselves: a student releases a slice they hold (with the
// watcher's releasers, recorded like its releases, with the student as the
// actor), and asks for an exemption from the idle policy, which the
// project's lead (or admin, finance) grants or refuses. A lead, admin or
// finance may release the instances of their scope too.

var rolesStudent = []ledger.Role{ledger.RoleStudent}

// HeldReleaseBody is the answer to a release asked for.
type HeldReleaseBody struct {
	Release  ReleaseBody `json:"release" doc:"the release as the ledger records it (status done: something was released)"`
	Repeated bool        `json:"repeated" doc:"the holding's release was asked for (or done) before: nothing was done this time"`
}

type heldReleaseInput struct {
	Body struct {
		Instance string `json:"instance" minLength:"1" maxLength:"512" doc:"the held instance (instance of GET /api/v1/held)"`
	}
}

// ExemptionRequestBody is a student's request for an exemption.
// Not ledger.ExemptionRequest: times absent while undecided.
type ExemptionRequestBody struct {
	ID          int64     `json:"id"`
	Project     string    `json:"project"`
	User        string    `json:"user"`
	InstanceID  string    `json:"instance_id,omitempty" doc:"one instance; absent: every instance of the student"`
	Until       time.Time `json:"until"`
	Reason      string    `json:"reason"`
	Status      string    `json:"status" enum:"pending,granted,refused"`
	RequestedBy string    `json:"requested_by"`
	CreatedAt   time.Time `json:"created_at"`
	DecidedBy   string    `json:"decided_by,omitempty"`
	DecidedAt   time.Time `json:"decided_at,omitzero"`
	Answer      string    `json:"answer,omitempty" doc:"refused: why; granted: the lead's note, if any"`
	ExemptionID int64     `json:"exemption_id,omitempty" doc:"granted: the exemption created"`
}

func requestBody(r ledger.ExemptionRequest) ExemptionRequestBody {
	return ExemptionRequestBody{ID: r.ID, Project: r.Project, User: r.User, InstanceID: r.InstanceID, Until: r.Until, Reason: r.Reason,
		Status: string(r.Status), RequestedBy: r.RequestedBy, CreatedAt: r.CreatedAt, DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt,
		Answer: r.Answer, ExemptionID: r.ExemptionID}
}

type requestInput struct {
	Body struct {
		InstanceID string    `json:"instance_id,omitempty" maxLength:"512" doc:"one of the student's instances; empty: all of them"`
		Until      time.Time `json:"until" doc:"end of the exemption asked for, RFC 3339, in the future"`
		Reason     string    `json:"reason" minLength:"1" maxLength:"2000" pattern:"^[^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*[^\\x00-\\x20\\x7F\\x85\\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000][^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*$" doc:"why; free text, not only white space"`
	}
}

type requestListInput struct {
	Project string `query:"project"`
	User    string `query:"user" doc:"a student token sees only its own (another is 403)"`
	Status  string `query:"status" enum:"pending,granted,refused"`
	PageParams
}

// RequestRef names an exemption request in a path.
type RequestRef struct {
	ID int64 `path:"id" minimum:"1"`
}

type grantRequestInput struct {
	RequestRef
	Body struct {
		Answer string `json:"answer,omitempty" maxLength:"2000" doc:"a note to the student, kept with the exemption's reason"`
	}
}

type refuseRequestInput struct {
	RequestRef
	Body struct {
		Reason string `json:"reason" minLength:"1" maxLength:"2000" pattern:"^[^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*[^\\x00-\\x20\\x7F\\x85\\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000][^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*$" doc:"why, told to the student"`
	}
}

// ExemptionGrantBody is a granted request with the exemption it created.
type ExemptionGrantBody struct {
	Request   ExemptionRequestBody `json:"request"`
	Exemption ExemptionBody        `json:"exemption"`
}

func (s *Server) routesSelf() {
	register(s, huma.Operation{OperationID: "release-held", Method: http.MethodPost, Path: "/api/v1/held/release", Summary: "release a held instance",
		Description: "Releases a held instance now with the releasers the watcher uses (the watch file's release: section), recorded in the " +
			"ledger like the watcher's releases with the caller as the actor (audited; on GET /api/v1/releases). A student releases only " +
			"what they hold (another's is 403), a lead its project's. Asking again for the same holding does nothing (repeated: true). " +
			"Nothing released (no releaser configured, the releaser refused or failed) is 409 not-released, saying why.", Tags: []string{"watch"}},
		rolesAll, s.releaseHeld)
	register(s, huma.Operation{OperationID: "list-exemption-requests", Method: http.MethodGet, Path: "/api/v1/exemption-requests", Summary: "list exemption requests",
		Description: "Students' requests for an exemption from the idle policy, newest first. A lead sees its project's, a student its own.",
		Tags:        []string{"watch"}},
		rolesAll, s.listRequests)
	register(s, huma.Operation{OperationID: "request-exemption", Method: http.MethodPost, Path: "/api/v1/exemption-requests", Summary: "ask for an exemption",
		Description: "A student asks for an exemption for one of their instances or all of them, until a time, with a reason. The project's lead, " +
			"admin or finance grants or refuses it; the watcher tells the lead of the request and the student of the decision.",
		DefaultStatus: http.StatusCreated, Tags: []string{"watch"}},
		rolesStudent, s.requestExemption)
	register(s, huma.Operation{OperationID: "grant-exemption-request", Method: http.MethodPost, Path: "/api/v1/exemption-requests/{id}/grant",
		Summary: "grant an exemption request", Description: "Creates the exemption asked for (as POST /api/v1/exemptions would, granted by the caller) " +
			"and records it with the request, in one transaction. A request already decided is 409 invalid-transition.", Tags: []string{"watch"}},
		rolesStaff, s.grantRequest)
	register(s, huma.Operation{OperationID: "refuse-exemption-request", Method: http.MethodPost, Path: "/api/v1/exemption-requests/{id}/refuse",
		Summary: "refuse an exemption request", Description: "Refuses the request with a reason, told to the student. A request already decided is 409 invalid-transition.",
		Tags: []string{"watch"}},
		rolesStaff, s.refuseRequest)
}

func (s *Server) releaseHeld(ctx context.Context, in *heldReleaseInput) (*body[HeldReleaseBody], error) {
	u, err := s.usage()
	if err != nil {
		return nil, err
	}
	held, err := u.HeldNow(ctx)
	if err != nil {
		return nil, err
	}
	var h *reads.Held
	for i := range held {
		if held[i].InstanceID == in.Body.Instance {
			h = &held[i]
		}
	}
	if h == nil {
		return s.releasedBefore(ctx, in.Body.Instance)
	}
	if err := checkSubject(ctx, h.Project, h.User, "held instances"); err != nil {
		return nil, forbidden(ctx, "instance %s is not held by you", in.Body.Instance)
	}
	if s.cfg.Releases == nil {
		return nil, fmt.Errorf("%w: no releaser is configured on this server: nothing can be released from here; ask an administrator", ErrNotReleased)
	}
	r, repeated, err := s.cfg.Releases.ReleaseHeld(ctx, actor(ctx), *h)
	if err != nil {
		return nil, err
	}
	if r.Status == billing.ReleaseFailed {
		return nil, fmt.Errorf("%w: nothing was released (release %d): %s", ErrNotReleased, r.ID, r.LastError)
	}
	return &body[HeldReleaseBody]{HeldReleaseBody{Release: releaseBody(r), Repeated: repeated}}, nil
}

// releasedBefore answers a release asked for an instance not held now: the
// caller's latest release of it when it was done (a retry after the
// release), else 403 to a student (who holds nothing of that name) and
// 404 to the others.
func (s *Server) releasedBefore(ctx context.Context, instance string) (*body[HeldReleaseBody], error) {
	t := principal(ctx)
	f := ledger.ReleaseFilter{InstanceID: instance, Status: billing.ReleaseDone, Limit: 1}
	if t.Role == ledger.RoleLead || t.Role == ledger.RoleStudent {
		f.Project = t.Project
	}
	if t.Role == ledger.RoleStudent {
		f.User = t.User
	}
	page, _, err := s.cfg.Ledger.Releases(ctx, f)
	if err != nil {
		return nil, err
	}
	if len(page) == 1 && page[0].UpdatedAt.After(s.now().Add(-24*time.Hour)) {
		return &body[HeldReleaseBody]{HeldReleaseBody{Release: releaseBody(page[0]), Repeated: true}}, nil
	}
	if t.Role == ledger.RoleStudent {
		return nil, forbidden(ctx, "instance %s is not held by you", instance)
	}
	return nil, fmt.Errorf("%w: instance %s is not held now", ledger.ErrNotFound, instance)
}

func (s *Server) listRequests(ctx context.Context, in *requestListInput) (*body[Page[ExemptionRequestBody]], error) {
	project, user, err := subjectScope(ctx, in.Project, in.User)
	if err != nil {
		return nil, err
	}
	page, next, err := s.cfg.Ledger.ExemptionRequests(ctx, ledger.ExemptionRequestFilter{Project: project, User: user,
		Status: ledger.ExemptionRequestStatus(in.Status), Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return pageBody(page, next, requestBody), nil
}

func (s *Server) requestExemption(ctx context.Context, in *requestInput) (*body[ExemptionRequestBody], error) {
	t := principal(ctx)
	project, err := projectScope(ctx, "")
	if err != nil {
		return nil, err
	}
	if err := s.checkProject(ctx, "body", project); err != nil {
		return nil, err
	}
	r, err := s.cfg.Ledger.RequestExemption(ctx, actor(ctx), ledger.NewExemptionRequest{Project: project, User: t.User,
		InstanceID: in.Body.InstanceID, Until: in.Body.Until, Reason: in.Body.Reason})
	if err != nil {
		return nil, err
	}
	return &body[ExemptionRequestBody]{requestBody(r)}, nil
}

// scopedRequest reads a request the token may decide.
func (s *Server) scopedRequest(ctx context.Context, id int64) error {
	r, err := s.cfg.Ledger.ExemptionRequest(ctx, id)
	if err != nil {
		return err
	}
	return checkSubject(ctx, r.Project, r.User, "exemption requests")
}

func (s *Server) grantRequest(ctx context.Context, in *grantRequestInput) (*body[ExemptionGrantBody], error) {
	if err := s.scopedRequest(ctx, in.ID); err != nil {
		return nil, err
	}
	r, e, err := s.cfg.Ledger.GrantExemptionRequest(ctx, actor(ctx), in.ID, in.Body.Answer)
	if err != nil {
		return nil, err
	}
	return &body[ExemptionGrantBody]{ExemptionGrantBody{Request: requestBody(r), Exemption: s.exemptionBody(e)}}, nil
}

func (s *Server) refuseRequest(ctx context.Context, in *refuseRequestInput) (*body[ExemptionRequestBody], error) {
	if err := s.scopedRequest(ctx, in.ID); err != nil {
		return nil, err
	}
	r, err := s.cfg.Ledger.RefuseExemptionRequest(ctx, actor(ctx), in.ID, in.Body.Reason)
	if err != nil {
		return nil, err
	}
	return &body[ExemptionRequestBody]{requestBody(r)}, nil
}
