package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cardhour/cardhour/internal/ledger"
)

// Role sets of the operations.
var (
	rolesAll       = []ledger.Role{ledger.RoleAdmin, ledger.RoleFinance, ledger.RoleLead, ledger.RoleStudent}
	rolesStaff     = []ledger.Role{ledger.RoleAdmin, ledger.RoleFinance, ledger.RoleLead}
	rolesFinance   = []ledger.Role{ledger.RoleAdmin, ledger.RoleFinance}
	rolesAdmin     = []ledger.Role{ledger.RoleAdmin}
	rolesAdminLead = []ledger.Role{ledger.RoleAdmin, ledger.RoleLead}
)

const metaRoles = "roles"

// register adds an operation that needs a token of one of roles; its
// errors go through problem (the one mapping to HTTP).
func register[I, O any](s *Server, op huma.Operation, roles []ledger.Role, h func(context.Context, *I) (*O, error)) {
	op.Security = []map[string][]string{{"bearer": {}}}
	op.MaxBodyBytes = s.cfg.MaxBodyBytes
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata[metaRoles] = roles
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	if op.Extensions == nil {
		op.Extensions = map[string]any{}
	}
	op.Extensions["x-cardhour-roles"] = names
	op.Description = strings.TrimSpace(op.Description + "\n\nRoles: " + strings.Join(names, ", ") + ".")
	huma.Register(s.api, op, func(ctx context.Context, in *I) (*O, error) {
		out, err := h(ctx, in)
		if err != nil {
			return nil, problem(ctx, err)
		}
		return out, nil
	})
}

// authMiddleware resolves the bearer token and checks the operation's roles:
// no or an unknown, expired or revoked token is 401; a role the operation
// does not allow is 403.
func (s *Server) authMiddleware(ctx huma.Context, next func(huma.Context)) {
	roles, _ := ctx.Operation().Metadata[metaRoles].([]ledger.Role)
	if roles == nil {
		next(ctx)
		return
	}
	unauthorized := func(msg string) {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="cardhour"`)
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, msg)
	}
	h := ctx.Header("Authorization")
	if h == "" {
		// A person signed in on the dashboard: the session's active grant.
		if tok, person, found, handled := s.sessionPrincipal(ctx); handled {
			return
		} else if found {
			s.authorize(ctx, next, roles, tok, person)
			return
		}
	}
	scheme, secret, _ := strings.Cut(h, " ")
	secret = strings.TrimSpace(secret)
	if !strings.EqualFold(scheme, "Bearer") || secret == "" {
		unauthorized("this request needs Authorization: Bearer <token>")
		return
	}
	tok, err := s.cfg.Ledger.LookupToken(ctx.Context(), secret)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		unauthorized("the token is not known")
		return
	case errors.Is(err, ledger.ErrTokenExpired), errors.Is(err, ledger.ErrTokenRevoked):
		unauthorized("the token " + err.Error())
		return
	case errors.Is(err, ledger.ErrUnavailable):
		writeUnavailable(ctx, err)
		return
	case err != nil:
		logFrom(ctx.Context()).Error("token lookup failed", "err", err)
		_ = huma.WriteErr(s.api, ctx, http.StatusServiceUnavailable, "the state store did not answer")
		return
	}
	s.authorize(ctx, next, roles, tok, "token:"+strconv.FormatInt(tok.ID, 10))
}

// authorize checks the principal's role against the operation's and goes
// on with the principal and the actor the audit log names.
func (s *Server) authorize(ctx huma.Context, next func(huma.Context), roles []ledger.Role, tok ledger.Token, actor string) {
	if (tok.Role == ledger.RoleLead || tok.Role == ledger.RoleStudent) && tok.Project == "" {
		// Every lead and student token is scoped to one project (token
		// creation refuses one without); a token stored before that rule
		// would otherwise see every project. Refused on every operation.
		_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, "this "+string(tok.Role)+" token names no project, so it may see nothing: "+
			"ask an admin for a new one (cardhour token create --role "+string(tok.Role)+" --project P ...) and revoke this one")
		return
	}
	if !slices.Contains(roles, tok.Role) {
		_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, "role "+string(tok.Role)+" may not "+ctx.Operation().Summary)
		return
	}
	next(huma.WithValue(huma.WithValue(ctx, keyPrincipal, tok), keyActor, actor))
}

// principal is the token of the request.
func principal(ctx context.Context) ledger.Token {
	t, _ := ctx.Value(keyPrincipal).(ledger.Token)
	return t
}

// actor names who made the request in the audit log: "token:12", or the
// signed-in person ("oidc:2022110315").
func actor(ctx context.Context) string {
	if a, ok := ctx.Value(keyActor).(string); ok && a != "" {
		return a
	}
	return "token:" + strconv.FormatInt(principal(ctx).ID, 10)
}

// projectScope is the project a request may see: a lead's or a student
// token's own project whatever is asked — asking for another is 403 —
// and for admin and finance the one asked for ("" all). A lead or student
// token always has a project (authMiddleware refuses one without).
func projectScope(ctx context.Context, asked string) (string, error) {
	t := principal(ctx)
	switch t.Role {
	case ledger.RoleLead, ledger.RoleStudent:
		if t.Project == "" {
			return "", forbidden(ctx, "this %s token names no project", t.Role)
		}
		if asked != "" && asked != t.Project {
			return "", forbidden(ctx, "this token is limited to project %s", t.Project)
		}
		return t.Project, nil
	}
	return asked, nil
}

// projectsScope is projectScope for a list filter.
func projectsScope(ctx context.Context, asked []string) ([]string, error) {
	t := principal(ctx)
	if t.Role == ledger.RoleLead || t.Role == ledger.RoleStudent {
		if t.Project == "" {
			return nil, forbidden(ctx, "this %s token names no project", t.Role)
		}
		for _, p := range asked {
			if p != t.Project {
				return nil, forbidden(ctx, "this token is limited to project %s", t.Project)
			}
		}
		return []string{t.Project}, nil
	}
	return asked, nil
}

// usersScope is the users a request may see: a student only themself (asking
// for anyone else is 403, never an empty answer that would confirm or deny
// that the other exists); the other roles what they asked.
func usersScope(ctx context.Context, asked []string) ([]string, error) {
	t := principal(ctx)
	if t.Role != ledger.RoleStudent {
		return asked, nil
	}
	for _, u := range asked {
		if u != t.User {
			return nil, forbidden(ctx, "a student token sees only its own user")
		}
	}
	return []string{t.User}, nil
}

// checkInvoiceScope refuses an invoice of another project to a lead or a
// student token.
func checkInvoiceScope(ctx context.Context, inv ledger.Invoice) error {
	t := principal(ctx)
	if (t.Role == ledger.RoleLead || t.Role == ledger.RoleStudent) && inv.Project != t.Project {
		return forbidden(ctx, "this token is limited to project %s", t.Project)
	}
	return nil
}
