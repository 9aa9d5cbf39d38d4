package api

import (
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cardhour/cardhour/internal/ledger"
)

// What the OpenAPI document says of parameters, and the server enforces
// alike (scripts/api-fuzz.sh checks both ways with schemathesis).

// periodPattern is a calendar month YYYY-MM of the years 2000 to 2999, in
// every period parameter and body field.
const periodPattern = `^2[0-9]{3}-(0[1-9]|1[0-2])$`

// textPattern is free text (reasons): any character but the C0 controls
// other than tab, line feed and carriage return, and DEL (a NUL in a
// reason would be stored and shown as is).
const textPattern = "^[^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*$"

// ProblemBadCursor is the problem of a cursor this server did not make.
const ProblemBadCursor = ProblemBase + "bad-cursor"

const cursorDoc = "next_cursor of the previous page: opaque, made by this server; any other string is 400 (problem type bad-cursor)"

// badCursor is the 400 problem of a cursor this server did not make.
func badCursor(requestID, cursor string) *Problem {
	p := newProblem(http.StatusBadRequest, ProblemBadCursor, "cursor "+strconvQuote(cursor)+" is not one this server made: pass next_cursor of the previous page, or no cursor for the first")
	p.Errors = []ProblemDetail{{Message: "not a cursor of this server", Location: "query.cursor", Value: cursor}}
	p.RequestID = requestID
	return p
}

func strconvQuote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// validCursor reports whether c is a cursor this server makes: a ledger
// cursor (every list) or an offset cursor (usage).
func validCursor(c string) bool {
	if _, err := ledger.DecodeCursor(c); err == nil {
		return true
	}
	_, ok := parseOffset(c)
	return ok
}

// paramsMiddleware enforces what huma leaves out of the document's
// parameters: a query parameter given empty (`status=`) is the empty string,
// not absent, and is refused when its schema refuses "" (an enum, a
// pattern, a format, a number, a boolean); a cursor must be one this server
// made (400 bad-cursor).
func (s *Server) paramsMiddleware(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	if op == nil || len(op.Parameters) == 0 {
		next(ctx)
		return
	}
	u := ctx.URL()
	q := u.Query()
	var details []error
	for _, p := range op.Parameters {
		if p.In != "query" || p.Schema == nil {
			continue
		}
		vs, present := q[p.Name]
		if !present {
			continue
		}
		if p.Name == "cursor" {
			if c := vs[len(vs)-1]; c != "" && !validCursor(c) {
				_ = writeProblem(s.api, ctx, badCursor(RequestID(ctx.Context()), c))
				return
			}
			continue
		}
		for _, v := range vs {
			if v == "" && refusesEmpty(s.api, p.Schema) {
				details = append(details, &huma.ErrorDetail{Message: "empty: give a value or leave the parameter out", Location: "query." + p.Name, Value: v})
				break
			}
		}
	}
	if len(details) > 0 {
		_ = huma.WriteErr(s.api, ctx, http.StatusUnprocessableEntity, "validation failed", details...)
		return
	}
	next(ctx)
}

// refusesEmpty reports whether schema (of a query parameter; for an array,
// its items) refuses the empty string.
func refusesEmpty(api huma.API, schema *huma.Schema) bool {
	reg := api.OpenAPI().Components.Schemas
	if schema.Ref != "" {
		schema = reg.SchemaFromRef(schema.Ref)
	}
	if schema.Type == huma.TypeArray && schema.Items != nil {
		schema = schema.Items
		if schema.Ref != "" {
			schema = reg.SchemaFromRef(schema.Ref)
		}
	}
	switch schema.Type {
	case huma.TypeInteger, huma.TypeNumber, huma.TypeBoolean:
		return true
	case huma.TypeString:
	default:
		return false
	}
	if len(schema.Enum) > 0 || schema.Format != "" || (schema.MinLength != nil && *schema.MinLength > 0) {
		return true
	}
	if schema.Pattern != "" {
		res := &huma.ValidateResult{}
		huma.Validate(reg, schema, huma.NewPathBuffer([]byte{}, 0), huma.ModeWriteToServer, "", res)
		return len(res.Errors) > 0
	}
	return false
}

func writeProblem(api huma.API, ctx huma.Context, p *Problem) error {
	p.Instance = ctx.URL().Path
	ctx.SetHeader("Content-Type", "application/problem+json")
	ctx.SetStatus(p.Status)
	return api.Marshal(ctx.BodyWriter(), "application/problem+json", p)
}
