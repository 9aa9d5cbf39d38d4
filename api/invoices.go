package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
)

type runInput struct {
	Body struct {
		Period string `json:"period" pattern:"^2[0-9]{3}-(0[1-9]|1[0-2])$" doc:"YYYY-MM (years 2000 to 2999); the current month gives month-to-date drafts"`
	}
}

// InvoiceRef names an invoice in a path.
type InvoiceRef struct {
	ID int64 `path:"id" minimum:"1"`
}

type finalizeInput struct {
	InvoiceRef
	Body struct {
		IfSHA256 string `json:"if_sha256" pattern:"^[0-9a-f]{64}$" doc:"the SHA-256 of the draft that was reviewed; another is 409 conflict"`
	}
}

type voidInput struct {
	InvoiceRef
	Body struct {
		Reason string `json:"reason" minLength:"1" maxLength:"2000" pattern:"^[^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*[^\\x00-\\x20\\x7F\\x85\\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000][^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*$" doc:"free text, not only white space; no control characters but tab and line breaks"`
	}
}

// VoidedBody is what a void did.
type VoidedBody struct {
	Invoice    InvoiceBody       `json:"invoice"`
	CreditNote ledger.CreditNote `json:"credit_note"`
	Draft      InvoiceBody       `json:"draft" doc:"the next revision, a draft"`
}

type fileOutput struct {
	ContentType        string `header:"Content-Type"`
	ContentDisposition string `header:"Content-Disposition"`
	Body               []byte
}

var formatTypes = map[string]string{
	FormatCSV:  "text/csv; charset=utf-8",
	FormatXLSX: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	FormatPDF:  "application/pdf",
	FormatJSON: "application/json",
}

// fileResponses documents a file download in each of formats.
func fileResponses(formats ...string) map[string]*huma.Response {
	content := map[string]*huma.MediaType{}
	for _, f := range formats {
		ct := formatTypes[f]
		if f == FormatCSV {
			ct = "text/csv"
		}
		content[ct] = &huma.MediaType{Schema: &huma.Schema{Type: "string", Format: "binary"}}
		if f == FormatJSON {
			// The stored document itself (cardhour.invoice.v1, see
			// schemas/jsonschema): an object; a period of several invoices
			// is an array of them.
			content[ct] = &huma.MediaType{Schema: &huma.Schema{
				Description: "cardhour.invoice.v1 document(s): one object, or an array of them for a period of several invoices",
				OneOf:       []*huma.Schema{{Type: "object"}, {Type: "array", Items: &huma.Schema{Type: "object"}}}}}
		}
	}
	return map[string]*huma.Response{"200": {Description: "the file", Content: content,
		Headers: map[string]*huma.Param{"Content-Disposition": {Schema: &huma.Schema{Type: "string"}}}}}
}

// scopedInvoice reads an invoice the token may see.
func (s *Server) scopedInvoice(ctx context.Context, id int64) (ledger.Invoice, error) {
	inv, err := s.cfg.Ledger.Invoice(ctx, id)
	if err != nil {
		return inv, err
	}
	return inv, checkInvoiceScope(ctx, inv)
}

// StatementRef names a statement (invoice and user) in a path.
type StatementRef struct {
	InvoiceRef
	User string `path:"user" minLength:"1"`
}

// statement is a user's statement on an invoice, for a token that may see it.
func (s *Server) statement(ctx context.Context, in *StatementRef) (ledger.Invoice, []byte, error) {
	if _, err := usersScope(ctx, []string{in.User}); err != nil {
		return ledger.Invoice{}, nil, err
	}
	inv, err := s.scopedInvoice(ctx, in.ID)
	if err != nil {
		return inv, nil, err
	}
	fl, err := s.invoicing()
	if err != nil {
		return inv, nil, err
	}
	doc, err := fl.Statement(ctx, in.ID, in.User)
	return inv, doc, err
}

// StatementItem is one statement in a list: the invoice it comes from and
// the user's total on it.
type StatementItem struct {
	InvoiceID int64  `json:"invoice_id"`
	Project   string `json:"project"`
	Period    string `json:"period"`
	Status    string `json:"status"`
	Number    string `json:"number,omitempty"`
	User      string `json:"user"`
	Total     string `json:"total" doc:"the user's total on the invoice, decimal string"`
}

// StatementBody is a student's statement on one invoice.
type StatementBody struct {
	InvoiceID int64           `json:"invoice_id"`
	Project   string          `json:"project"`
	Period    string          `json:"period"`
	Status    string          `json:"status"`
	User      string          `json:"user"`
	Document  json.RawMessage `json:"document" doc:"the statement: the invoice document with only this user's lines and warnings"`
}

func (s *Server) routesInvoices() {
	register(s, huma.Operation{OperationID: "create-billing-run", Method: http.MethodPost, Path: "/api/v1/billing-runs", Summary: "run billing for a period",
		Description: "Recomputes the drafts of every project for the period (month to date allowed), with a data-quality section and, where the period has finalized revisions, the difference from them. Finalized invoices are never changed.",
		Tags:        []string{"billing"}},
		rolesFinance, s.createBillingRun)
	register(s, huma.Operation{OperationID: "list-invoices", Method: http.MethodGet, Path: "/api/v1/invoices", Summary: "list invoices", Tags: []string{"invoices"}},
		rolesStaff, s.listInvoices)
	register(s, huma.Operation{OperationID: "get-invoice", Method: http.MethodGet, Path: "/api/v1/invoices/{id}", Summary: "read an invoice with its document", Tags: []string{"invoices"}},
		rolesStaff, s.getInvoice)
	register(s, huma.Operation{OperationID: "finalize-invoice", Method: http.MethodPost, Path: "/api/v1/invoices/{id}/finalize", Summary: "finalize a draft",
		Description: "Numbers the invoice and freezes its document. Refused during the grace period after the month (grace-period problem) and when the draft is not the one reviewed (if_sha256, conflict).",
		Tags:        []string{"invoices"}},
		rolesFinance, s.finalizeInvoice)
	register(s, huma.Operation{OperationID: "void-invoice", Method: http.MethodPost, Path: "/api/v1/invoices/{id}/void", Summary: "void a finalized invoice",
		Description: "Keeps the number and the stored document, issues a credit note (a document: the invoice's lines negated, credit_for naming it, stored with its SHA-256) and opens the next revision as a draft without a number or issue date; finalizing that draft gives it the next number.", Tags: []string{"invoices"}},
		rolesFinance, s.voidInvoice)
	register(s, huma.Operation{OperationID: "list-credit-notes", Method: http.MethodGet, Path: "/api/v1/invoices/{id}/credit-notes", Summary: "list an invoice's credit notes", Tags: []string{"invoices"}},
		rolesStaff, s.listCreditNotes)
	s.routesInvoiceExports()
	s.routesStatements()
}

// routesInvoiceExports are the file downloads of invoices, credit notes
// and whole periods.
func (s *Server) routesInvoiceExports() {
	register(s, huma.Operation{OperationID: "export-invoice", Method: http.MethodGet, Path: "/api/v1/invoices/{id}/export", Summary: "export an invoice",
		Description: "Rendered from the stored document only: a finalized invoice exports byte-identical forever. A voided invoice's CSV, XLSX and PDF carry 已作废 / VOID and its credit note's number (its JSON is the stored document, unchanged); a draft's carry 草稿 / DRAFT. Renderings are kept in memory by the document's SHA-256, format and void mark, so a finalized invoice's PDF is rendered once.",
		Tags:        []string{"invoices"}, Responses: fileResponses(FormatCSV, FormatXLSX, FormatPDF, FormatJSON)},
		rolesStaff, s.exportInvoice)
	register(s, huma.Operation{OperationID: "export-credit-note", Method: http.MethodGet, Path: "/api/v1/credit-notes/{id}/export", Summary: "export a credit note",
		Description: "The credit note's stored document (the voided invoice's lines negated, its own number, credit_for naming the invoice) in the formats an invoice exports in. List an invoice's credit notes with list-credit-notes.",
		Tags:        []string{"invoices"}, Responses: fileResponses(FormatCSV, FormatXLSX, FormatPDF, FormatJSON)},
		rolesStaff, s.exportCreditNote)
	register(s, huma.Operation{OperationID: "export-period", Method: http.MethodGet, Path: "/api/v1/periods/{period}/export", Summary: "export a period's finalized invoices",
		Description: "Every finalized invoice of the period in one file, then the credit notes of its voided invoices; 404 when the period has no finalized invoice.",
		Tags:        []string{"invoices"}, Responses: fileResponses(FormatCSV, FormatXLSX, FormatJSON)},
		rolesFinance, s.exportPeriod)
}

// routesStatements are a student's statements: one user's lines of a
// project invoice.
func (s *Server) routesStatements() {
	register(s, huma.Operation{OperationID: "get-statement", Method: http.MethodGet, Path: "/api/v1/invoices/{id}/statements/{user}", Summary: "read a student's statement",
		Description: "Derived from the stored project invoice: only this user's lines and warnings. A student token may read only its own.", Tags: []string{"invoices"}},
		rolesAll, s.getStatement)
	register(s, huma.Operation{OperationID: "list-statements", Method: http.MethodGet, Path: "/api/v1/statements", Summary: "list a student's statements",
		Description: "The statements of one user: every draft or finalized invoice of the user's project (a student token: its own; staff name the user) on which the user has lines, newest first, with the user's total. Read one with get-statement.",
		Tags:        []string{"invoices"}},
		rolesAll, s.listStatements)
	register(s, huma.Operation{OperationID: "export-statement", Method: http.MethodGet, Path: "/api/v1/invoices/{id}/statements/{user}/export", Summary: "export a student's statement",
		Tags: []string{"invoices"}, Responses: fileResponses(FormatCSV, FormatXLSX, FormatPDF, FormatJSON)},
		rolesAll, s.exportStatement)
}

func (s *Server) createBillingRun(ctx context.Context, in *runInput) (*body[invoicing.RunReport], error) {
	fl, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	r, err := fl.Run(ctx, actor(ctx), in.Body.Period)
	if err != nil {
		return nil, err
	}
	return &body[invoicing.RunReport]{*r}, nil
}

type invoiceListInput struct {
	Project string `query:"project"`
	Period  string `query:"period" pattern:"^2[0-9]{3}-(0[1-9]|1[0-2])$" doc:"YYYY-MM (years 2000 to 2999)"`
	Status  string `query:"status" enum:"draft,finalized,void"`
	PageParams
}

func (s *Server) listInvoices(ctx context.Context, in *invoiceListInput) (*body[Page[InvoiceBody]], error) {
	project, err := projectScope(ctx, in.Project)
	if err != nil {
		return nil, err
	}
	page, next, err := s.cfg.Ledger.Invoices(ctx, ledger.InvoiceFilter{Project: project, Period: in.Period, Status: ledger.Status(in.Status), Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return pageBody(page, next, invoiceBody), nil
}

func (s *Server) getInvoice(ctx context.Context, in *InvoiceRef) (*body[InvoiceBody], error) {
	inv, err := s.scopedInvoice(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return &body[InvoiceBody]{s.withGrace(ctx, inv, invoiceBody(inv))}, nil
}

func (s *Server) finalizeInvoice(ctx context.Context, in *finalizeInput) (*body[InvoiceBody], error) {
	fl, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	inv, err := fl.Finalize(ctx, actor(ctx), in.ID, in.Body.IfSHA256)
	if err != nil {
		return nil, err
	}
	return &body[InvoiceBody]{invoiceBody(inv)}, nil
}

func (s *Server) voidInvoice(ctx context.Context, in *voidInput) (*body[VoidedBody], error) {
	fl, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	v, err := fl.Void(ctx, actor(ctx), in.ID, in.Body.Reason)
	if err != nil {
		return nil, err
	}
	return &body[VoidedBody]{VoidedBody{invoiceBody(v.Invoice), v.CreditNote, invoiceBody(v.Draft)}}, nil
}

func (s *Server) listCreditNotes(ctx context.Context, in *InvoiceRef) (*body[Page[ledger.CreditNote]], error) {
	if _, err := s.scopedInvoice(ctx, in.ID); err != nil {
		return nil, err
	}
	cns, err := s.cfg.Ledger.CreditNotes(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return &body[Page[ledger.CreditNote]]{Page[ledger.CreditNote]{Items: append([]ledger.CreditNote{}, cns...)}}, nil
}

type invoiceExportInput struct {
	InvoiceRef
	Format string `query:"format" enum:"csv,xlsx,pdf,json" default:"json"`
}

func (s *Server) exportInvoice(ctx context.Context, in *invoiceExportInput) (*fileOutput, error) {
	inv, err := s.scopedInvoice(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	void, err := s.voidMark(ctx, inv)
	if err != nil {
		return nil, err
	}
	name := invoiceFileName(inv)
	if void != nil {
		name += "-void"
	}
	return s.export(ctx, in.Format, name, "", void, inv.Document)
}

type creditNoteExportInput struct {
	ID     int64  `path:"id" minimum:"1"`
	Format string `query:"format" enum:"csv,xlsx,pdf,json" default:"json"`
}

func (s *Server) exportCreditNote(ctx context.Context, in *creditNoteExportInput) (*fileOutput, error) {
	fl, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	cn, err := fl.CreditNote(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if _, err := s.scopedInvoice(ctx, cn.InvoiceID); err != nil {
		return nil, err
	}
	return s.export(ctx, in.Format, "credit-note-"+safeName(cn.Number), "", nil, cn.Document)
}

func (s *Server) getStatement(ctx context.Context, in *StatementRef) (*body[StatementBody], error) {
	inv, doc, err := s.statement(ctx, in)
	if err != nil {
		return nil, err
	}
	return &body[StatementBody]{StatementBody{InvoiceID: inv.ID, Project: inv.Project, Period: inv.Period, Status: string(inv.Status), User: in.User, Document: doc}}, nil
}

type statementListInput struct {
	User    string `query:"user" doc:"the student (a student token: itself, the default)"`
	Project string `query:"project"`
	Period  string `query:"period" pattern:"^2[0-9]{3}-(0[1-9]|1[0-2])$" doc:"YYYY-MM (years 2000 to 2999)"`
	PageParams
}

func (s *Server) listStatements(ctx context.Context, in *statementListInput) (*body[Page[StatementItem]], error) {
	user, err := statementUser(ctx, in.User)
	if err != nil {
		return nil, err
	}
	project, err := projectScope(ctx, in.Project)
	if err != nil {
		return nil, err
	}
	fl, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	page, next, err := s.cfg.Ledger.Invoices(ctx, ledger.InvoiceFilter{Project: project, Period: in.Period, Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out := Page[StatementItem]{Items: []StatementItem{}, NextCursor: next}
	for _, inv := range page {
		if inv.Status == ledger.StatusVoid {
			continue
		}
		item, ok, err := statementItem(ctx, fl, inv, user)
		if err != nil {
			return nil, err
		}
		if ok {
			out.Items = append(out.Items, item)
		}
	}
	return &body[Page[StatementItem]]{out}, nil
}

// statementUser is the one student whose statements are listed: a student
// token's own, or the one staff name.
func statementUser(ctx context.Context, asked string) (string, error) {
	var names []string
	if asked != "" {
		names = []string{asked}
	}
	users, err := usersScope(ctx, names)
	if err != nil {
		return "", err
	}
	if len(users) != 1 || users[0] == "" {
		return "", fmt.Errorf("%w: user: name the student whose statements to list", ledger.ErrInvalidArgument)
	}
	return users[0], nil
}

// statementItem is user's statement on inv with its total; false when the
// user had no usage on the invoice.
func statementItem(ctx context.Context, fl Invoicing, inv ledger.Invoice, user string) (StatementItem, bool, error) {
	doc, err := fl.Statement(ctx, inv.ID, user)
	if err != nil {
		return StatementItem{}, false, err
	}
	var st struct {
		Lines []json.RawMessage `json:"lines"`
		Total string            `json:"total"`
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		return StatementItem{}, false, fmt.Errorf("statement of invoice %d: %w", inv.ID, err)
	}
	if len(st.Lines) == 0 {
		return StatementItem{}, false, nil // the user had no usage on this invoice
	}
	return StatementItem{InvoiceID: inv.ID, Project: inv.Project, Period: inv.Period,
		Status: string(inv.Status), Number: inv.Number, User: user, Total: st.Total}, true, nil
}

type statementExportInput struct {
	StatementRef
	Format string `query:"format" enum:"csv,xlsx,pdf,json" default:"json"`
}

func (s *Server) exportStatement(ctx context.Context, in *statementExportInput) (*fileOutput, error) {
	inv, doc, err := s.statement(ctx, &in.StatementRef)
	if err != nil {
		return nil, err
	}
	void, err := s.voidMark(ctx, inv)
	if err != nil {
		return nil, err
	}
	return s.export(ctx, in.Format, invoiceFileName(inv)+"-"+safeName(in.User), in.User, void, doc)
}

type periodExportInput struct {
	Period string `path:"period" pattern:"^2[0-9]{3}-(0[1-9]|1[0-2])$" doc:"YYYY-MM (years 2000 to 2999)"`
	Format string `query:"format" enum:"csv,xlsx,json" default:"json"`
}

func (s *Server) exportPeriod(ctx context.Context, in *periodExportInput) (*fileOutput, error) {
	docs, err := s.periodInvoices(ctx, in.Period)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%w: period %s has no finalized invoice", ledger.ErrNotFound, in.Period)
	}
	credits, err := s.periodCreditNotes(ctx, in.Period)
	if err != nil {
		return nil, err
	}
	return s.export(ctx, in.Format, "cardhour-"+in.Period, "", nil, append(docs, credits...)...)
}

// periodInvoices are the stored documents of period's finalized invoices,
// in the store's list order.
func (s *Server) periodInvoices(ctx context.Context, period string) ([][]byte, error) {
	var docs [][]byte
	cursor := ""
	for {
		page, next, err := s.cfg.Ledger.Invoices(ctx, ledger.InvoiceFilter{Period: period, Status: ledger.StatusFinalized, Cursor: cursor, Limit: ledger.MaxLimit})
		if err != nil {
			return nil, err
		}
		for _, i := range page {
			full, err := s.cfg.Ledger.Invoice(ctx, i.ID)
			if err != nil {
				return nil, err
			}
			docs = append(docs, full.Document)
		}
		if next == "" {
			return docs, nil
		}
		cursor = next
	}
}

// periodCreditNotes are the documents of the credit notes of period's
// voided invoices, by invoice number and then credit note.
func (s *Server) periodCreditNotes(ctx context.Context, period string) ([][]byte, error) {
	fl, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	var voided []ledger.Invoice
	cursor := ""
	for {
		page, next, err := s.cfg.Ledger.Invoices(ctx, ledger.InvoiceFilter{Period: period, Status: ledger.StatusVoid, Cursor: cursor, Limit: ledger.MaxLimit})
		if err != nil {
			return nil, err
		}
		voided = append(voided, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	slices.SortFunc(voided, func(a, b ledger.Invoice) int { return strings.Compare(a.Number, b.Number) })
	var out [][]byte
	for _, v := range voided {
		cns, err := s.cfg.Ledger.CreditNotes(ctx, v.ID)
		if err != nil {
			return nil, err
		}
		for _, cn := range cns {
			if cn.Document == nil { // issued before credit notes had documents
				if cn, err = fl.CreditNote(ctx, cn.ID); err != nil {
					return nil, err
				}
			}
			out = append(out, cn.Document)
		}
	}
	return out, nil
}

func invoiceFileName(inv ledger.Invoice) string {
	if inv.Number != "" {
		return "invoice-" + inv.Number
	}
	return fmt.Sprintf("draft-%s-%s-r%d", safeName(inv.Project), inv.Period, inv.Revision)
}

// safeName keeps a file name to letters, digits, '-', '_' and '.'.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

// ---------------------------------------------------------------- admin

type tokenInput struct {
	Body struct {
		Role    string `json:"role" enum:"admin,finance,lead,student"`
		Project string `json:"project,omitempty" maxLength:"200" doc:"required for lead and student (a student token sees one project)"`
		User    string `json:"user,omitempty" maxLength:"200" doc:"required for student"`
		Name    string `json:"name,omitempty" maxLength:"200"`
		TTL     string `json:"ttl,omitempty" doc:"lifetime as a Go duration (e.g. 720h); default 2160h (90 days)"`
	}
}

// NewTokenBody is a created token with its secret, shown this once.
type NewTokenBody struct {
	Token  ledger.Token `json:"token"`
	Secret string       `json:"secret" doc:"the bearer token; only its hash is stored"`
}

// DefaultTokenTTL is a token's lifetime when none is given.
const DefaultTokenTTL = 90 * 24 * time.Hour

func (s *Server) routesAdmin() {
	register(s, huma.Operation{OperationID: "create-token", Method: http.MethodPost, Path: "/api/v1/tokens", Summary: "create a token", DefaultStatus: http.StatusCreated, Tags: []string{"tokens"}},
		rolesAdmin, s.createToken)
	register(s, huma.Operation{OperationID: "list-tokens", Method: http.MethodGet, Path: "/api/v1/tokens", Summary: "list tokens", Tags: []string{"tokens"}},
		rolesAdmin, s.listTokens)
	register(s, huma.Operation{OperationID: "revoke-token", Method: http.MethodDelete, Path: "/api/v1/tokens/{id}", Summary: "revoke a token", Tags: []string{"tokens"}},
		rolesAdmin, s.revokeToken)
	register(s, huma.Operation{OperationID: "list-audit", Method: http.MethodGet, Path: "/api/v1/audit", Summary: "read the audit log", Tags: []string{"audit"}},
		rolesAdmin, s.listAudit)
}

func (s *Server) createToken(ctx context.Context, in *tokenInput) (*body[NewTokenBody], error) {
	ttl := DefaultTokenTTL
	if in.Body.TTL != "" {
		d, err := time.ParseDuration(in.Body.TTL)
		if err != nil || d <= 0 {
			return nil, invalid(ctx, "body.ttl", "ttl %q: want a positive duration like 720h", in.Body.TTL)
		}
		ttl = d
	}
	if in.Body.Project != "" {
		if err := s.checkProject(ctx, "body.project", in.Body.Project); err != nil {
			return nil, err
		}
	}
	secret, tok, err := s.cfg.Ledger.CreateToken(ctx, actor(ctx), ledger.NewToken{Role: ledger.Role(in.Body.Role), Project: in.Body.Project, User: in.Body.User, Name: in.Body.Name, TTL: ttl})
	if err != nil {
		return nil, err
	}
	return &body[NewTokenBody]{NewTokenBody{tok, secret}}, nil
}

func (s *Server) listTokens(ctx context.Context, _ *struct{}) (*body[Page[ledger.Token]], error) {
	ts, err := s.cfg.Ledger.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	return &body[Page[ledger.Token]]{Page[ledger.Token]{Items: append([]ledger.Token{}, ts...)}}, nil
}

// tokenRef names a token in a path.
type tokenRef struct {
	ID int64 `path:"id" minimum:"1"`
}

func (s *Server) revokeToken(ctx context.Context, in *tokenRef) (*body[ledger.Token], error) {
	t, err := s.cfg.Ledger.RevokeToken(ctx, actor(ctx), in.ID)
	if err != nil {
		return nil, err
	}
	return &body[ledger.Token]{t}, nil
}

type auditListInput struct {
	Actor  string    `query:"actor"`
	Action string    `query:"action"`
	Object string    `query:"object"`
	From   time.Time `query:"from"`
	To     time.Time `query:"to"`
	PageParams
}

func (s *Server) listAudit(ctx context.Context, in *auditListInput) (*body[Page[ledger.AuditEntry]], error) {
	page, next, err := s.cfg.Ledger.Audit(ctx, ledger.AuditFilter{Actor: in.Actor, Action: in.Action, Object: in.Object, Since: in.From, Until: in.To, Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return &body[Page[ledger.AuditEntry]]{Page[ledger.AuditEntry]{Items: append([]ledger.AuditEntry{}, page...), NextCursor: next}}, nil
}
