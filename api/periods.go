package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// A period's invoices for finance: the summary by funding source, and
// finalizing many drafts at once.

func (s *Server) routesPeriods() {
	register(s, huma.Operation{OperationID: "get-period-summary", Method: http.MethodGet, Path: "/api/v1/periods/{period}/summary", Summary: "summarize a period's invoices",
		Description: "Every invoice revision of the month with its total, status, project name and funding code as its stored document states them, and the totals by funding source and of the period, drafts and finalized apart (void revisions are listed and counted in no total). A lead sees its project's.",
		Tags:        []string{"invoices"}},
		rolesStaff, s.periodSummary)
	register(s, huma.Operation{OperationID: "finalize-period-drafts", Method: http.MethodPost, Path: "/api/v1/periods/{period}/finalize", Summary: "finalize several drafts",
		Description: "Finalizes each listed draft of the month as `POST /invoices/{id}/finalize` does, with its own if_sha256, one after the other: each succeeds or is refused on its own (a draft recomputed since it was reviewed is refused with conflict, the grace period with grace-period) and the answer says which, in the order given.",
		Tags:        []string{"invoices"}},
		rolesFinance, s.finalizeDrafts)
}

type periodRef struct {
	Period string `path:"period" pattern:"^2[0-9]{3}-(0[1-9]|1[0-2])$" doc:"YYYY-MM (years 2000 to 2999)"`
}

// PeriodSummaryBody is invoicing.PeriodSummary as the API shows it.
type PeriodSummaryBody struct {
	Period    string             `json:"period"`
	Invoices  []InvoiceTotalBody `json:"invoices"`
	ByFunding []FundingTotalBody `json:"by_funding" doc:"by funding code (\"\" none), then currency"`
	Totals    []FundingTotalBody `json:"totals" doc:"the period's, one per currency"`
}

// InvoiceTotalBody is one revision of a period summary.
type InvoiceTotalBody struct {
	ID       int64         `json:"id"`
	Project  string        `json:"project"`
	Name     string        `json:"name,omitempty"`
	Funding  string        `json:"funding,omitempty"`
	Revision int           `json:"revision"`
	Status   string        `json:"status" enum:"draft,finalized,void"`
	Number   string        `json:"number,omitempty"`
	SHA256   string        `json:"sha256" doc:"the if_sha256 that finalizes this draft"`
	Currency string        `json:"currency"`
	Total    billing.Money `json:"total"`
}

// FundingTotalBody adds up the drafts and finalized invoices of one
// funding source (or of the period) in one currency.
type FundingTotalBody struct {
	Funding    string        `json:"funding,omitempty"`
	Currency   string        `json:"currency"`
	Drafts     int           `json:"drafts"`
	Finalized  int           `json:"finalized"`
	DraftTotal billing.Money `json:"draft_total"`
	FinalTotal billing.Money `json:"finalized_total"`
	Total      billing.Money `json:"total"`
}

func fundingTotals(ts []invoicing.FundingTotal) []FundingTotalBody {
	out := make([]FundingTotalBody, 0, len(ts))
	for _, t := range ts {
		out = append(out, FundingTotalBody{Funding: t.Funding, Currency: t.Currency, Drafts: t.Drafts, Finalized: t.Finalized,
			DraftTotal: billing.Money{Decimal: t.DraftTotal}, FinalTotal: billing.Money{Decimal: t.FinalTotal}, Total: billing.Money{Decimal: t.Total}})
	}
	return out
}

func (s *Server) periodSummary(ctx context.Context, in *periodRef) (*body[PeriodSummaryBody], error) {
	fl, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	project, err := projectScope(ctx, "")
	if err != nil {
		return nil, err
	}
	sum, err := fl.PeriodSummary(ctx, in.Period, project)
	if err != nil {
		return nil, err
	}
	out := PeriodSummaryBody{Period: sum.Period, Invoices: make([]InvoiceTotalBody, 0, len(sum.Invoices)),
		ByFunding: fundingTotals(sum.ByFunding), Totals: fundingTotals(sum.Totals)}
	for _, it := range sum.Invoices {
		out.Invoices = append(out.Invoices, InvoiceTotalBody{ID: it.ID, Project: it.Project, Name: it.Name, Funding: it.Funding,
			Revision: it.Revision, Status: string(it.Status), Number: it.Number, SHA256: it.SHA256, Currency: it.Currency,
			Total: billing.Money{Decimal: it.Total}})
	}
	return &body[PeriodSummaryBody]{out}, nil
}

type finalizeDraftsInput struct {
	Period string `path:"period" pattern:"^2[0-9]{3}-(0[1-9]|1[0-2])$" doc:"YYYY-MM (years 2000 to 2999)"`
	Body   struct {
		Items []struct {
			ID       int64  `json:"id" minimum:"1"`
			IfSHA256 string `json:"if_sha256" pattern:"^[0-9a-f]{64}$" doc:"the SHA-256 of the draft that was reviewed"`
		} `json:"items" minItems:"1" maxItems:"500"`
	}
}

// FinalizeResult is what finalizing one draft of a batch did.
type FinalizeResult struct {
	ID      int64        `json:"id"`
	OK      bool         `json:"ok"`
	Invoice *InvoiceBody `json:"invoice,omitempty" doc:"the finalized invoice"`
	Problem *Problem     `json:"problem,omitempty" doc:"why it was refused, as the single finalize would answer"`
}

// FinalizeResults answers a batch finalize.
type FinalizeResults struct {
	Finalized int              `json:"finalized"`
	Refused   int              `json:"refused"`
	Results   []FinalizeResult `json:"results"`
}

func (s *Server) finalizeDrafts(ctx context.Context, in *finalizeDraftsInput) (*body[FinalizeResults], error) {
	fl, err := s.invoicing()
	if err != nil {
		return nil, err
	}
	out := FinalizeResults{Results: make([]FinalizeResult, 0, len(in.Body.Items))}
	for _, it := range in.Body.Items {
		r := FinalizeResult{ID: it.ID}
		inv, err := s.cfg.Ledger.Invoice(ctx, it.ID)
		if err == nil && inv.Period != in.Period {
			err = fmt.Errorf("%w: invoice %d is of %s, not %s", ledger.ErrInvalidArgument, it.ID, inv.Period, in.Period)
		}
		if err == nil {
			inv, err = fl.Finalize(ctx, actor(ctx), it.ID, it.IfSHA256)
		}
		if err != nil {
			p, ok := problem(ctx, err).(*Problem)
			if !ok || p.Status >= 500 {
				return nil, err // not a refusal of this item: the server or its store failed
			}
			r.Problem = p
			out.Refused++
		} else {
			b := invoiceBody(inv)
			r.OK, r.Invoice = true, &b
			out.Finalized++
		}
		out.Results = append(out.Results, r)
	}
	return &body[FinalizeResults]{out}, nil
}
