package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// ---------------------------------------------------------------- shapes

// CatalogVersionBody is one catalog version. Not ledger.CatalogVersion: the
// ledger holds the content as bytes, which JSON would show as base64.
type CatalogVersionBody struct {
	Version   int64     `json:"version"`
	SHA256    string    `json:"sha256"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	Content   string    `json:"content,omitempty" doc:"the catalog YAML as uploaded"`
}

func catalogBody(v ledger.CatalogVersion) CatalogVersionBody {
	return CatalogVersionBody{Version: v.Version, SHA256: v.SHA256, CreatedBy: v.CreatedBy, CreatedAt: v.CreatedAt, Content: string(v.Content)}
}

// InvoiceBody is one invoice revision. Not ledger.Invoice: a single draft
// read adds when it may be finalized, computed from the server's clock.
type InvoiceBody struct {
	ID             int64           `json:"id"`
	Project        string          `json:"project"`
	Period         string          `json:"period"`
	Revision       int             `json:"revision"`
	Status         string          `json:"status" enum:"draft,finalized,void"`
	Number         string          `json:"number,omitempty"`
	SHA256         string          `json:"sha256"`
	CatalogVersion int64           `json:"catalog_version"`
	DataCutoff     time.Time       `json:"data_cutoff"`
	CreatedBy      string          `json:"created_by"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	FinalizedBy    string          `json:"finalized_by,omitempty"`
	FinalizedAt    time.Time       `json:"finalized_at,omitzero"`
	VoidedBy       string          `json:"voided_by,omitempty"`
	VoidedAt       time.Time       `json:"voided_at,omitzero"`
	VoidReason     string          `json:"void_reason,omitempty"`
	Document       json.RawMessage `json:"document,omitempty" doc:"the invoice document (cardhour.invoice.v1), exactly as stored"`

	// FinalizableFrom is when a draft may be finalized (the end of its
	// period's grace period); only in a single draft read.
	FinalizableFrom time.Time `json:"finalizable_from,omitzero" doc:"a draft's earliest finalize time (the end of its period's grace period); in a single draft read"`
	// Finalizable: the grace period has ended by the server's clock.
	Finalizable bool `json:"finalizable,omitempty" doc:"a draft whose grace period has ended by the server's clock; in a single draft read"`
	// The lead's sign-off (serve --lead-approval), in a single draft read.
	ApprovalRequired bool      `json:"approval_required,omitempty" doc:"finalizing waits for the project's lead to approve this document (serve --lead-approval); in a single draft read"`
	ApprovedBy       string    `json:"approved_by,omitempty" doc:"who approved this very document, when it is approved"`
	ApprovedAt       time.Time `json:"approved_at,omitzero"`
}

func invoiceBody(i ledger.Invoice) InvoiceBody {
	b := InvoiceBody{ID: i.ID, Project: i.Project, Period: i.Period, Revision: i.Revision, Status: string(i.Status), Number: i.Number,
		SHA256: i.SHA256, CatalogVersion: i.CatalogVersion, DataCutoff: i.DataCutoff, CreatedBy: i.CreatedBy, CreatedAt: i.CreatedAt,
		UpdatedAt: i.UpdatedAt, FinalizedBy: i.FinalizedBy, FinalizedAt: i.FinalizedAt, VoidedBy: i.VoidedBy, VoidedAt: i.VoidedAt,
		VoidReason: i.VoidReason}
	if len(i.Document) > 0 {
		b.Document = json.RawMessage(i.Document)
	}
	return b
}

// Page is a page of a list; NextCursor continues it ("" on the last page).
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor" doc:"opaque; pass as cursor for the next page, empty on the last"`
}

// pageBody is a store's page as the API's, each item converted by conv.
func pageBody[T, U any](items []T, next string, conv func(T) U) *body[Page[U]] {
	out := Page[U]{Items: make([]U, 0, len(items)), NextCursor: next}
	for _, it := range items {
		out.Items = append(out.Items, conv(it))
	}
	return &body[Page[U]]{out}
}

// PageParams are the cursor and page size of a list.
type PageParams struct {
	Cursor string `query:"cursor" doc:"next_cursor of the previous page: opaque, made by this server; any other string is 400 (problem type bad-cursor)"`
	Limit  int    `query:"limit" minimum:"0" maximum:"1000" doc:"page size (0: 100)"`
}

type body[T any] struct {
	Body T
}

// currentCatalog is the current catalog version, parsed (once per version).
func (s *Server) currentCatalog(ctx context.Context) (ledger.CatalogVersion, *schemas.Catalog, error) {
	return s.cats.CurrentVersion(ctx)
}

// ---------------------------------------------------------------- routes

func (s *Server) routes() {
	s.routesAccount()
	s.routesCatalog()
	s.routesUsage()
	s.routesAdvice()
	s.routesInvoices()
	s.routesPeriods()
	s.routesApproval()
	s.routesReview()
	s.routesWatch()
	s.routesSelf()
	s.routesAdmin()
}

func (s *Server) routesAccount() {
	register(s, huma.Operation{OperationID: "get-me", Method: http.MethodGet, Path: "/api/v1/me", Summary: "read the token's identity", Tags: []string{"account"}},
		rolesAll, s.getMe)
}

func (s *Server) getMe(ctx context.Context, _ *struct{}) (*body[ledger.Token], error) {
	return &body[ledger.Token]{principal(ctx)}, nil
}

type catalogUpload struct {
	RawBody []byte `contentType:"application/yaml" required:"true"`
}

// CatalogUploadBody is what an upload did.
type CatalogUploadBody struct {
	CatalogVersionBody
	Created bool `json:"created" doc:"false when the content equals the current version (no new version)"`
}

// ProjectBody is a project of the catalog.
type ProjectBody struct {
	ID      string `json:"id"`
	Name    string `json:"name,omitempty"`
	Funding string `json:"funding,omitempty"`
}

func (s *Server) routesCatalog() {
	// Not for students: the YAML names every project with its funding code
	// (a student reads its own project through list-projects).
	register(s, huma.Operation{OperationID: "get-catalog", Method: http.MethodGet, Path: "/api/v1/catalog", Summary: "read the current catalog", Tags: []string{"catalog"}},
		rolesStaff, s.getCatalog)
	register(s, huma.Operation{OperationID: "list-catalog-versions", Method: http.MethodGet, Path: "/api/v1/catalog/versions", Summary: "list catalog versions", Tags: []string{"catalog"}},
		rolesStaff, s.listCatalogVersions)
	register(s, huma.Operation{OperationID: "get-catalog-version", Method: http.MethodGet, Path: "/api/v1/catalog/versions/{version}", Summary: "read one catalog version", Tags: []string{"catalog"}},
		rolesStaff, s.getCatalogVersion)
	register(s, huma.Operation{OperationID: "put-catalog", Method: http.MethodPut, Path: "/api/v1/catalog", Summary: "upload a new catalog version",
		Description: "The YAML is validated like `cardhour bill --catalog` does; a 422 problem lists every error with its line and field.", Tags: []string{"catalog"}},
		rolesAdmin, s.putCatalog)
	s.routesProjects()
}

// routesProjects are the catalog's projects and their rosters.
func (s *Server) routesProjects() {
	register(s, huma.Operation{OperationID: "list-projects", Method: http.MethodGet, Path: "/api/v1/projects", Summary: "list the catalog's projects", Tags: []string{"projects"}},
		rolesAll, s.listProjects)
	register(s, huma.Operation{OperationID: "list-students", Method: http.MethodGet, Path: "/api/v1/projects/{project}/students", Summary: "list a project's roster", Tags: []string{"projects"}},
		rolesStaff, s.listStudents)
	register(s, huma.Operation{OperationID: "import-roster", Method: http.MethodPost, Path: "/api/v1/projects/{project}/roster", Summary: "import a project's roster (CSV)",
		Description: "CSV with a header row: student_id, name, project, email, im (or 学号, 姓名, 项目, 邮箱, IM), any order, the project column optional. The file replaces the project's roster, all or nothing; a 422 problem names each bad line and field.", Tags: []string{"projects"}},
		rolesAdminLead, s.importRoster)
}

func (s *Server) getCatalog(ctx context.Context, _ *struct{}) (*body[CatalogVersionBody], error) {
	v, err := s.cfg.Ledger.CurrentCatalog(ctx)
	if err != nil {
		return nil, err
	}
	return &body[CatalogVersionBody]{catalogBody(v)}, nil
}

func (s *Server) listCatalogVersions(ctx context.Context, _ *struct{}) (*body[Page[CatalogVersionBody]], error) {
	vs, err := s.cfg.Ledger.CatalogVersions(ctx)
	if err != nil {
		return nil, err
	}
	out := Page[CatalogVersionBody]{Items: []CatalogVersionBody{}}
	for _, v := range vs {
		out.Items = append(out.Items, catalogBody(v))
	}
	return &body[Page[CatalogVersionBody]]{out}, nil
}

type catalogVersionRef struct {
	Version int64 `path:"version" minimum:"1"`
}

func (s *Server) getCatalogVersion(ctx context.Context, in *catalogVersionRef) (*body[CatalogVersionBody], error) {
	v, err := s.cfg.Ledger.Catalog(ctx, in.Version)
	if err != nil {
		return nil, err
	}
	return &body[CatalogVersionBody]{catalogBody(v)}, nil
}

func (s *Server) putCatalog(ctx context.Context, in *catalogUpload) (*body[CatalogUploadBody], error) {
	if _, err := schemas.ParseCatalog(in.RawBody, "catalog"); err != nil {
		p := newProblem(http.StatusUnprocessableEntity, ProblemValidation, "the catalog is not valid")
		p.Errors = catalogProblems(err)
		return nil, p
	}
	v, created, err := s.cfg.Ledger.PutCatalog(ctx, actor(ctx), in.RawBody)
	if err != nil {
		return nil, err
	}
	b := catalogBody(v)
	b.Content = ""
	return &body[CatalogUploadBody]{CatalogUploadBody{b, created}}, nil
}

func (s *Server) listProjects(ctx context.Context, _ *struct{}) (*body[Page[ProjectBody]], error) {
	_, cat, err := s.currentCatalog(ctx)
	if err != nil {
		return nil, err
	}
	only, err := projectScope(ctx, "")
	if err != nil {
		return nil, err
	}
	out := Page[ProjectBody]{Items: []ProjectBody{}}
	for _, p := range cat.Projects {
		if only == "" || p.ID == only {
			out.Items = append(out.Items, ProjectBody{ID: p.ID, Name: p.Name, Funding: p.Funding})
		}
	}
	return &body[Page[ProjectBody]]{out}, nil
}

type studentListInput struct {
	Project string `path:"project" minLength:"1" maxLength:"200"`
	User    string `query:"user"`
	PageParams
}

func (s *Server) listStudents(ctx context.Context, in *studentListInput) (*body[Page[ledger.Student]], error) {
	if _, err := projectScope(ctx, in.Project); err != nil {
		return nil, err
	}
	inv, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	rows, next, err := inv.Students(ctx, in.Project, in.User, in.Cursor, in.Limit)
	if err != nil {
		return nil, err
	}
	if rows == nil {
		rows = []ledger.Student{}
	}
	return &body[Page[ledger.Student]]{Page[ledger.Student]{rows, next}}, nil
}

type rosterUpload struct {
	Project string `path:"project" minLength:"1" maxLength:"200"`
	RawBody []byte `contentType:"text/csv" required:"true"`
}

func (s *Server) importRoster(ctx context.Context, in *rosterUpload) (*body[invoicing.RosterResult], error) {
	if _, err := projectScope(ctx, in.Project); err != nil {
		return nil, err
	}
	inv, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	res, err := inv.ImportRoster(ctx, actor(ctx), bytes.NewReader(in.RawBody), in.Project)
	if err != nil {
		return nil, err
	}
	return &body[invoicing.RosterResult]{res}, nil
}

func (s *Server) invoicing() (Invoicing, error) {
	if s.cfg.Invoicing == nil {
		return nil, fmt.Errorf("%w: this server has no invoice flow configured", ErrUnavailable)
	}
	return s.cfg.Invoicing, nil
}

func (s *Server) usage() (Usage, error) {
	if s.cfg.Usage == nil {
		return nil, fmt.Errorf("%w: this server has no usage store configured", ErrUnavailable)
	}
	return s.cfg.Usage, nil
}

// ---------------------------------------------------------------- usage

// RangeParams select a period or a time range.
type RangeParams struct {
	Period string    `query:"period" pattern:"^2[0-9]{3}-(0[1-9]|1[0-2])$" doc:"a calendar month YYYY-MM (years 2000 to 2999) in the catalog's time zone (instead of from/to)"`
	From   time.Time `query:"from" doc:"start, RFC 3339 (with to, instead of period)"`
	To     time.Time `query:"to" doc:"end (exclusive), RFC 3339"`
}

// maxUsageRange bounds a usage query.
const maxUsageRange = 400 * 24 * time.Hour

// window turns period or from/to into [from, to).
func (s *Server) window(ctx context.Context, r RangeParams) (time.Time, time.Time, error) {
	switch {
	case r.Period != "" && (!r.From.IsZero() || !r.To.IsZero()):
		return time.Time{}, time.Time{}, invalid(ctx, "query.period", "give either period or from and to, not both")
	case r.Period != "":
		_, cat, err := s.currentCatalog(ctx)
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
		p, err := billing.ParsePeriod(r.Period, cat.Location)
		if err != nil {
			return time.Time{}, time.Time{}, invalid(ctx, "query.period", "%v", err)
		}
		return p.Start, p.End, nil
	case r.From.IsZero() || r.To.IsZero():
		return time.Time{}, time.Time{}, invalid(ctx, "query.from", "give period, or both from and to")
	case !r.To.After(r.From):
		return time.Time{}, time.Time{}, invalid(ctx, "query.to", "to must be after from")
	case r.To.Sub(r.From) > maxUsageRange:
		return time.Time{}, time.Time{}, invalid(ctx, "query.to", "the range may span at most %d days", int(maxUsageRange/(24*time.Hour)))
	}
	return r.From, r.To, nil
}

// UsageParams select, group and order a usage report: the parameters of
// get-usage and export-usage alike.
type UsageParams struct {
	RangeParams
	GroupBy []string `query:"group_by" enum:"project,user,sku,instance,node,month,day,hour" doc:"dimensions, comma-separated; month, day and hour are local (the catalog's time zone)"`
	Project []string `query:"project" doc:"only these projects (comma-separated)"`
	User    []string `query:"user" doc:"only these users; a student token sees only its own (another is 403)"`
	SKU     []string `query:"sku"`
	Node    []string `query:"node"`
	OrderBy string   `query:"order_by" enum:"cost,idle_cost,held_seconds,idle_seconds,saved_cost" doc:"rows by this measure, largest first, equal ones by their groups (default: by their groups: project, user, sku, instance, node, month, day, hour); the first page of limit rows is then the top list"`
}

type usageInput struct {
	UsageParams
	PageParams
}

// UsagePage is a page of a usage report's rows.
type UsagePage struct {
	reads.UsageReport
	NextCursor string `json:"next_cursor"`
}

func offsetCursor(n int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(n)))
}

// parseOffset reads an offset cursor.
func parseOffset(c string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if s, ok := strings.CutPrefix(string(b), "o:"); ok {
			if n, err := strconv.Atoi(s); err == nil && n >= 0 {
				return n, true
			}
		}
	}
	return 0, false
}

func decodeOffset(ctx context.Context, c string) (int, error) {
	if c == "" {
		return 0, nil
	}
	if n, ok := parseOffset(c); ok {
		return n, nil
	}
	return 0, badCursor(RequestID(ctx), c)
}

func (s *Server) routesUsage() {
	register(s, huma.Operation{OperationID: "get-usage", Method: http.MethodGet, Path: "/api/v1/usage", Summary: "read usage grouped",
		Description: "Card-hours, idle hours, list-price cost and idle cost over a period or range, grouped by any of project, user, sku, instance, node, month, day, hour (computed in the store), ordered by the groups or, with order_by, by a measure largest first.", Tags: []string{"usage"}},
		rolesAll, s.getUsage)
	s.routesUsageExport()
	s.routesEfficiency()
	register(s, huma.Operation{OperationID: "get-held-now", Method: http.MethodGet, Path: "/api/v1/held", Summary: "list instances held now",
		Description: "Which instances are held right now, by whom, since when, idle or busy, with their cost so far; ordered by node, then instance. " +
			"Filters: project, user, node, state (idle or busy); total, idle, nodes, cost and unpriced sum up every instance that matches, " +
			"and limit and cursor page the items (limit 0, the default, gives them all).", Tags: []string{"usage"}},
		rolesAll, s.getHeldNow)
	register(s, huma.Operation{OperationID: "list-nodes", Method: http.MethodGet, Path: "/api/v1/nodes", Summary: "list the nodes and how fresh their data is",
		Description: "Each node that sent a sample within lookback_s: its newest sample, whether it is silent (no sample for silent_after_s, " +
			"the data-quality check's silent-node rule) and how many instances are held on it now. Admin and finance tokens see every node; " +
			"a lead token the nodes where its project holds an instance now or held one lately (its latest held sample within lookback_s), " +
			"a student token likewise its own instances, and held counts only those (idle, cost and unpriced likewise). " +
			"total, silent, held and idle sum up every listed node; limit and cursor page the items (limit 0, the default, gives them all), " +
			"order=silent lists the silent nodes first. refresh_s is how often the data is worth reading again " +
			"(the interval the server's watcher runs at): the dashboard's Now page polls this and /api/v1/held at it.", Tags: []string{"usage"}},
		rolesAll, s.listNodes)
}

func (s *Server) getUsage(ctx context.Context, in *usageInput) (*body[UsagePage], error) {
	u, err := s.usage()
	if err != nil {
		return nil, err
	}
	q, err := s.usageQuery(ctx, &in.UsageParams)
	if err != nil {
		return nil, err
	}
	off, err := decodeOffset(ctx, in.Cursor)
	if err != nil {
		return nil, err
	}
	limit, err := ledger.PageLimit(in.Limit)
	if err != nil {
		return nil, err
	}
	rep, rows, err := s.orderedUsage(ctx, u, q, in.OrderBy)
	if err != nil {
		return nil, err
	}
	return &body[UsagePage]{usagePage(rep, rows, off, limit)}, nil
}

// usageQuery checks the grouping, the window and the token's scope of a
// usage request, in that order.
func (s *Server) usageQuery(ctx context.Context, in *UsageParams) (reads.UsageQuery, error) {
	for i, d := range in.GroupBy {
		if slices.Contains(in.GroupBy[:i], d) {
			return reads.UsageQuery{}, invalid(ctx, "query.group_by", "group_by names %s twice", d)
		}
	}
	from, to, err := s.window(ctx, in.RangeParams)
	if err != nil {
		return reads.UsageQuery{}, err
	}
	projects, err := projectsScope(ctx, in.Project)
	if err != nil {
		return reads.UsageQuery{}, err
	}
	users, err := usersScope(ctx, in.User)
	if err != nil {
		return reads.UsageQuery{}, err
	}
	return reads.UsageQuery{From: from, To: to, GroupBy: in.GroupBy, Projects: projects, Users: users, SKUs: in.SKU, Nodes: in.Node}, nil
}

// usagePage is the page of rows (rep's, in the order asked) from off, at
// most limit of them; the store computes the whole report, the API pages it
// by offset.
func usagePage(rep *reads.UsageReport, rows []reads.UsageGroup, off, limit int) UsagePage {
	out := UsagePage{UsageReport: *rep}
	if out.GroupBy == nil {
		out.GroupBy = []string{}
	}
	if off > len(rows) {
		off = len(rows)
	}
	rows = rows[off:]
	if len(rows) > limit {
		rows = rows[:limit]
		out.NextCursor = offsetCursor(off + limit)
	}
	out.Rows = append([]reads.UsageGroup{}, rows...)
	return out
}
