package api_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
)

// fakeUsage answers from fixed rows, filtering and grouping like the store.
type fakeUsage struct {
	rows []reads.UsageGroup // one row per project, user, sku, node, day
	held []reads.Held
	// quiet are nodes without a held instance (in every node's list).
	quiet []reads.NodeState
	down  bool
	// released is every release Savings was given.
	released []reads.Released
	// block, when set, holds HeldNow until it is closed (in-flight requests).
	block chan struct{}
	began chan struct{}
}

func (f *fakeUsage) ping(context.Context) error {
	if f.down {
		return fmt.Errorf("%w: usage store down", api.ErrUnavailable)
	}
	return nil
}

func match(vals []string, v string) bool { return len(vals) == 0 || slices.Contains(vals, v) }

func (f *fakeUsage) Usage(_ context.Context, q reads.UsageQuery) (*reads.UsageReport, error) {
	rep := &reads.UsageReport{From: q.From, To: q.To, Timezone: "Asia/Shanghai", Currency: "CNY", GroupBy: q.GroupBy}
	groups := map[string]*reads.UsageGroup{}
	var keys []string
	for _, r := range f.rows {
		if !match(q.Projects, r.Project) || !match(q.Users, r.User) || !match(q.SKUs, r.SKU) || !match(q.Nodes, r.Node) {
			continue
		}
		var g reads.UsageGroup
		for _, d := range q.GroupBy {
			switch d {
			case "project":
				g.Project = r.Project
			case "user":
				g.User = r.User
			case "sku":
				g.SKU = r.SKU
			case "node":
				g.Node = r.Node
			case "month":
				g.Month = r.Day[:7]
			case "day":
				g.Day = r.Day
			}
		}
		k := fmt.Sprint(g)
		if groups[k] == nil {
			groups[k] = &g
			keys = append(keys, k)
		}
		groups[k].HeldSeconds += r.HeldSeconds
		groups[k].IdleSeconds += r.IdleSeconds
		rep.Total.HeldSeconds += r.HeldSeconds
		rep.Total.IdleSeconds += r.IdleSeconds
	}
	idleCost := func(g *reads.UsageGroup) billing.Money {
		return billing.Money{Decimal: decimal.NewFromInt(g.IdleSeconds).Div(decimal.NewFromInt(3600)).Round(2)}
	}
	slices.Sort(keys)
	for _, k := range keys {
		g := groups[k]
		g.Cost = billing.Money{Decimal: decimal.NewFromInt(g.HeldSeconds / 3600)}
		g.IdleCost = idleCost(g)
		reads.SetEfficiency(g)
		rep.Rows = append(rep.Rows, *g)
	}
	rep.Total.Cost = billing.Money{Decimal: decimal.NewFromInt(rep.Total.HeldSeconds / 3600)}
	rep.Total.IdleCost = idleCost(&rep.Total)
	reads.SetEfficiency(&rep.Total)
	if rep.Rows == nil {
		rep.Rows = []reads.UsageGroup{}
	}
	return rep, nil
}

// Savings records the releases it was given and adds one saved second per
// release to the total (the fake has no runs to look a holder's next
// holding up in; reads.AddSavings is tested over real stores).
func (f *fakeUsage) Savings(_ context.Context, _ reads.UsageQuery, rep *reads.UsageReport, rels []reads.Released) (*reads.UsageReport, error) {
	f.released = append(f.released, rels...)
	out := *rep
	out.Total.SavedSeconds = int64(len(rels))
	return &out, nil
}

func (f *fakeUsage) HeldNow(context.Context) ([]reads.Held, error) {
	if f.block != nil {
		close(f.began)
		<-f.block
	}
	return f.held, nil
}

// Nodes lists the nodes of the held instances (in the query's scope) and,
// for every node, the quiet ones; the clock is the fixture's.
func (f *fakeUsage) Nodes(_ context.Context, q reads.NodeQuery) (*reads.NodeReport, error) {
	by := map[string]*reads.NodeState{}
	if q.Project == "" && q.User == "" {
		for _, n := range f.quiet {
			by[n.Node] = &n
		}
	}
	for _, h := range f.held {
		if (q.Project != "" && h.Project != q.Project) || (q.User != "" && h.User != q.User) {
			continue
		}
		if by[h.Node] == nil {
			by[h.Node] = &reads.NodeState{Node: h.Node, LastSample: h.LastSample}
		}
		by[h.Node].AddHeld(&h)
	}
	rep := &reads.NodeReport{At: now}
	for _, n := range by {
		rep.Nodes = append(rep.Nodes, *n)
	}
	slices.SortFunc(rep.Nodes, func(a, b reads.NodeState) int { return strings.Compare(a.Node, b.Node) })
	return rep, nil
}

// fakeDoc is the shape of the fake invoice documents.
type fakeDoc struct {
	Project  string         `json:"project"`
	Period   string         `json:"period"`
	Number   string         `json:"number"`
	Lines    []fakeLine     `json:"lines"`
	Students []fakeStudent  `json:"students"`
	Warnings []string       `json:"warnings"`
	Extra    map[string]any `json:"extra,omitempty"`
}

type fakeLine struct {
	User   string `json:"user"`
	Amount string `json:"amount"`
}

type fakeStudent struct {
	User string `json:"user"`
	Name string `json:"name"`
}

// fakeFlow is the invoice flow over a real ledger, with fixed documents.
type fakeFlow struct {
	led   ledger.Store
	now   func() time.Time
	grace time.Duration
	docs  map[string][]byte // project → the document a run makes
	mu    sync.Mutex
	stud  []ledger.Student
}

func (f *fakeFlow) Run(ctx context.Context, actor, period string) (*invoicing.RunReport, error) {
	cv, err := f.led.CurrentCatalog(ctx)
	if err != nil {
		return nil, err
	}
	r := &invoicing.RunReport{Period: period, CatalogVersion: cv.Version, DataCutoff: f.now(), GeneratedAt: f.now(),
		Drafts: []invoicing.RunDraft{}, Kept: []invoicing.RunKept{}, Unpriced: []invoicing.RunUnpriced{}, Warnings: []string{}, Diffs: []invoicing.RunDiff{}}
	for _, p := range []string{"ai101", "nlp-lab"} {
		var d fakeDoc
		_ = json.Unmarshal(f.docs[p], &d)
		d.Period = period
		b, _ := json.Marshal(d)
		inv, err := f.led.SaveDraft(ctx, actor, ledger.Draft{Project: p, Period: period, Document: b, CatalogVersion: cv.Version, DataCutoff: f.now()})
		if err != nil {
			return nil, err
		}
		outcome := invoicing.OutcomeUpdated
		if inv.CreatedAt.Equal(inv.UpdatedAt) {
			outcome = invoicing.OutcomeCreated
		}
		r.Drafts = append(r.Drafts, invoicing.RunDraft{Project: p, InvoiceID: inv.ID, Revision: inv.Revision, SHA256: inv.SHA256, Total: billing.Money{Decimal: decimal.NewFromInt(1)}, Outcome: outcome})
	}
	return r, nil
}

func (f *fakeFlow) Finalize(ctx context.Context, actor string, id int64, ifSHA256 string) (ledger.Invoice, error) {
	inv, err := f.led.Invoice(ctx, id)
	if err != nil {
		return inv, err
	}
	end, _ := time.Parse("2006-01", inv.Period)
	if f.now().Before(end.AddDate(0, 1, 0).Add(f.grace)) {
		return inv, fmt.Errorf("%w: %s may be finalized after the grace period", api.ErrGracePeriod, inv.Period)
	}
	return f.led.Finalize(ctx, actor, id, ledger.FinalizeOptions{IfSHA256: ifSHA256})
}

// PeriodSummary reads the fake documents: the lines' amounts are the total,
// the document's extra "funding" its funding code.
func (f *fakeFlow) PeriodSummary(ctx context.Context, period, project string) (*invoicing.PeriodSummary, error) {
	invs, err := invoicing.PeriodInvoices(ctx, f.led, period, project)
	if err != nil {
		return nil, err
	}
	return invoicing.SummarizePeriod(period, invs, func(b []byte) (invoicing.DocSummary, error) {
		var d fakeDoc
		if err := json.Unmarshal(b, &d); err != nil {
			return invoicing.DocSummary{}, err
		}
		s := invoicing.DocSummary{Project: d.Project, Period: d.Period, Currency: "CNY"}
		s.Funding, _ = d.Extra["funding"].(string)
		for _, l := range d.Lines {
			s.Total = s.Total.Add(decimal.RequireFromString(l.Amount))
		}
		return s, nil
	})
}

// The lead's sign-off, kept as the real flow keeps it (an audit entry per
// approved document).
func (f *fakeFlow) LeadApproval() bool { return true }

func (f *fakeFlow) Approve(ctx context.Context, actor string, id int64, ifSHA256 string) (invoicing.Approval, error) {
	inv, err := f.led.Invoice(ctx, id)
	if err != nil {
		return invoicing.Approval{}, err
	}
	if inv.Status != ledger.StatusDraft || inv.SHA256 != ifSHA256 {
		return invoicing.Approval{}, fmt.Errorf("%w: not the draft reviewed", ledger.ErrConflict)
	}
	e, err := f.led.RecordAudit(ctx, ledger.AuditRecord{Actor: actor, Action: invoicing.ActionApprove, Object: fmt.Sprintf("invoice/%d", id),
		After: json.RawMessage(fmt.Sprintf(`{"sha256":%q}`, inv.SHA256))})
	return invoicing.Approval{By: e.Actor, At: e.At, SHA: inv.SHA256}, err
}

func (f *fakeFlow) ApprovalOf(ctx context.Context, inv ledger.Invoice) (invoicing.Approval, bool, error) {
	es, _, err := f.led.Audit(ctx, ledger.AuditFilter{Action: invoicing.ActionApprove, Object: fmt.Sprintf("invoice/%d", inv.ID)})
	for _, e := range es {
		if strings.Contains(string(e.After), inv.SHA256) {
			return invoicing.Approval{By: e.Actor, At: e.At, SHA: inv.SHA256}, true, err
		}
	}
	return invoicing.Approval{}, false, err
}

func (f *fakeFlow) Void(ctx context.Context, actor string, id int64, reason string) (ledger.Voided, error) {
	return f.led.Void(ctx, actor, id, reason, ledger.VoidOptions{
		CreditNote: func(number string, _ time.Time, voided []byte) ([]byte, error) {
			var d fakeDoc
			if err := json.Unmarshal(voided, &d); err != nil {
				return nil, err
			}
			d.Number = number
			for i := range d.Lines {
				d.Lines[i].Amount = "-" + d.Lines[i].Amount
			}
			return json.Marshal(d)
		}})
}

func (f *fakeFlow) RenderVoid(ctx context.Context, w io.Writer, format string, m export.VoidMark, doc []byte) error {
	if format != api.FormatJSON && m.CreditNote != "" {
		fmt.Fprintf(w, "%s,VOID,%s\n", format, m.CreditNote)
	}
	return f.Render(ctx, w, format, doc)
}

func (f *fakeFlow) CreditNote(ctx context.Context, id int64) (ledger.CreditNote, error) {
	return f.led.CreditNote(ctx, id)
}

func (f *fakeFlow) Statement(ctx context.Context, id int64, user string) ([]byte, error) {
	inv, err := f.led.Invoice(ctx, id)
	if err != nil {
		return nil, err
	}
	var d fakeDoc
	if err := json.Unmarshal(inv.Document, &d); err != nil {
		return nil, err
	}
	st := fakeDoc{Project: d.Project, Period: d.Period, Number: d.Number, Lines: []fakeLine{}, Students: []fakeStudent{}, Warnings: []string{}}
	for _, l := range d.Lines {
		if l.User == user {
			st.Lines = append(st.Lines, l)
		}
	}
	for _, s := range d.Students {
		if s.User == user {
			st.Students = append(st.Students, s)
		}
	}
	return json.Marshal(st)
}

func (f *fakeFlow) ImportRoster(_ context.Context, _ string, r io.Reader, project string) (invoicing.RosterResult, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return invoicing.RosterResult{}, fmt.Errorf("%w: roster: %v", ledger.ErrInvalidArgument, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	res := invoicing.RosterResult{Projects: []string{project}}
	var bad []invoicing.RosterProblem
	for i, row := range rows {
		if i > 0 && len(row) > 0 && row[0] == "" {
			bad = append(bad, invoicing.RosterProblem{Line: i + 1, Field: "student_id", Message: "student_id is required"})
		}
	}
	if len(bad) > 0 {
		return invoicing.RosterResult{}, fmt.Errorf("import: %w", &invoicing.RosterError{Problems: bad})
	}
	for i, row := range rows {
		if i == 0 || len(row) < 2 {
			continue
		}
		f.stud = append(f.stud, ledger.Student{Project: project, User: row[0], Name: row[1]})
		res.Rows++
		res.Added++
	}
	return res, nil
}

func (f *fakeFlow) Students(_ context.Context, project, user, _ string, _ int) ([]ledger.Student, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ledger.Student
	for _, s := range f.stud {
		if s.Project == project && (user == "" || s.User == user) {
			out = append(out, s)
		}
	}
	return out, "", nil
}

func (f *fakeFlow) Render(_ context.Context, w io.Writer, format string, docs ...[]byte) error {
	if format == api.FormatPDF && len(docs) != 1 {
		return fmt.Errorf("%w: a PDF holds one document", ledger.ErrInvalidArgument)
	}
	switch format {
	case api.FormatJSON:
		_, err := fmt.Fprintf(w, "[%s]", strings.Join(func() []string {
			var s []string
			for _, d := range docs {
				s = append(s, string(d))
			}
			return s
		}(), ","))
		return err
	default:
		for _, d := range docs {
			var doc fakeDoc
			if err := json.Unmarshal(d, &doc); err != nil {
				return err
			}
			for _, l := range doc.Lines {
				fmt.Fprintf(w, "%s,%s,%s,%s\n", format, doc.Project, l.User, l.Amount)
			}
		}
	}
	return nil
}
