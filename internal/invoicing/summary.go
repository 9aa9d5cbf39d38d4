package invoicing

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/internal/ledger"
)

// PeriodSummary is a month's invoices as finance reviews them before
// finalizing: each revision with its total and funding as its stored
// document states them, and the totals by funding source and of the
// period. Void revisions are listed but counted in no total.
type PeriodSummary struct {
	Period    string
	Invoices  []InvoiceTotal
	ByFunding []FundingTotal // by funding code ("" none), then currency
	Totals    []FundingTotal // the period's, one per currency (Funding "")
}

// InvoiceTotal is one invoice revision in a summary.
type InvoiceTotal struct {
	ID                     int64
	Project, Name, Funding string
	Revision               int
	Status                 ledger.Status
	Number, SHA256         string
	Currency               string
	Total                  decimal.Decimal
}

// FundingTotal adds up the invoices that count (drafts and finalized).
type FundingTotal struct {
	Funding, Currency      string
	Drafts, Finalized      int
	DraftTotal, FinalTotal decimal.Decimal
	Total                  decimal.Decimal
}

// SummarizePeriod is the summary of period's invoices invs (with their
// documents), read with summary. The amounts are the documents' own,
// already rounded: they are only added.
func SummarizePeriod(period string, invs []ledger.Invoice, summary func([]byte) (DocSummary, error)) (*PeriodSummary, error) {
	out := &PeriodSummary{Period: period, Invoices: []InvoiceTotal{}, ByFunding: []FundingTotal{}, Totals: []FundingTotal{}}
	type key struct{ funding, currency string }
	by, totals := map[key]*FundingTotal{}, map[string]*FundingTotal{}
	add := func(t *FundingTotal, it InvoiceTotal) {
		t.Total = t.Total.Add(it.Total)
		if it.Status == ledger.StatusDraft {
			t.Drafts++
			t.DraftTotal = t.DraftTotal.Add(it.Total)
		} else {
			t.Finalized++
			t.FinalTotal = t.FinalTotal.Add(it.Total)
		}
	}
	for _, inv := range invs {
		d, err := summary(inv.Document)
		if err != nil {
			return nil, fmt.Errorf("invoicing: summary of %s: invoice %d: %w", period, inv.ID, err)
		}
		it := InvoiceTotal{ID: inv.ID, Project: inv.Project, Name: d.Name, Funding: d.Funding, Revision: inv.Revision, Status: inv.Status,
			Number: inv.Number, SHA256: inv.SHA256, Currency: d.Currency, Total: d.Total}
		out.Invoices = append(out.Invoices, it)
		if inv.Status == ledger.StatusVoid {
			continue
		}
		k := key{d.Funding, d.Currency}
		if by[k] == nil {
			by[k] = &FundingTotal{Funding: d.Funding, Currency: d.Currency}
		}
		if totals[d.Currency] == nil {
			totals[d.Currency] = &FundingTotal{Currency: d.Currency}
		}
		add(by[k], it)
		add(totals[d.Currency], it)
	}
	slices.SortFunc(out.Invoices, func(a, b InvoiceTotal) int {
		return cmp.Or(cmp.Compare(a.Funding, b.Funding), cmp.Compare(a.Project, b.Project), cmp.Compare(a.Revision, b.Revision))
	})
	for _, t := range by {
		out.ByFunding = append(out.ByFunding, *t)
	}
	slices.SortFunc(out.ByFunding, func(a, b FundingTotal) int {
		return cmp.Or(cmp.Compare(a.Funding, b.Funding), cmp.Compare(a.Currency, b.Currency))
	})
	for _, t := range totals {
		out.Totals = append(out.Totals, *t)
	}
	slices.SortFunc(out.Totals, func(a, b FundingTotal) int { return cmp.Compare(a.Currency, b.Currency) })
	return out, nil
}

// PeriodSummary summarizes the invoices of period (of project, when not
// ""), each read with its stored document.
func (s *Service) PeriodSummary(ctx context.Context, period, project string) (*PeriodSummary, error) {
	invs, err := PeriodInvoices(ctx, s.cfg.Ledger, period, project)
	if err != nil {
		return nil, err
	}
	return SummarizePeriod(period, invs, s.cfg.Documents.Summary)
}

// InvoiceReader is what PeriodInvoices reads.
type InvoiceReader interface {
	Invoices(ctx context.Context, f ledger.InvoiceFilter) (page []ledger.Invoice, next string, err error)
	Invoice(ctx context.Context, id int64) (ledger.Invoice, error)
}

// PeriodInvoices reads every invoice revision of period (of project, when
// not "") with its document.
func PeriodInvoices(ctx context.Context, led InvoiceReader, period, project string) ([]ledger.Invoice, error) {
	var out []ledger.Invoice
	f := ledger.InvoiceFilter{Period: period, Project: project, Limit: ledger.MaxLimit}
	for {
		page, next, err := led.Invoices(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, inv := range page {
			full, err := led.Invoice(ctx, inv.ID)
			if err != nil {
				return nil, err
			}
			out = append(out, full)
		}
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}
