package invoicing_test

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// A period's summary adds the documents' totals by funding source and for
// the period, drafts and finalized apart; a void revision is listed but
// counted nowhere; a document that cannot be read fails the summary.
func TestSummarizePeriod(t *testing.T) {
	docs := map[string]invoicing.DocSummary{
		"a-draft": {Funding: "NSFC-1", Currency: "CNY", Name: "NLP Lab", Total: decimal.RequireFromString("10.00")},
		"a-final": {Funding: "NSFC-1", Currency: "CNY", Total: decimal.RequireFromString("5.50")},
		"a-void":  {Funding: "NSFC-1", Currency: "CNY", Total: decimal.RequireFromString("99.00")},
		"none":    {Currency: "CNY", Total: decimal.RequireFromString("1.25")},
	}
	read := func(b []byte) (invoicing.DocSummary, error) {
		d, ok := docs[string(b)]
		if !ok {
			return d, errors.New("unreadable")
		}
		return d, nil
	}
	invs := []ledger.Invoice{
		{ID: 1, InvoiceKey: ledger.InvoiceKey{Project: "nlp", Period: "2026-11", Revision: 2}, Status: ledger.StatusDraft, Document: []byte("a-draft")},
		{ID: 2, InvoiceKey: ledger.InvoiceKey{Project: "nlp", Period: "2026-11", Revision: 1}, Status: ledger.StatusVoid, Document: []byte("a-void")},
		{ID: 3, InvoiceKey: ledger.InvoiceKey{Project: "cv", Period: "2026-11", Revision: 1}, Status: ledger.StatusFinalized, Number: "2026-000001", Document: []byte("a-final")},
		{ID: 4, InvoiceKey: ledger.InvoiceKey{Project: "guest", Period: "2026-11", Revision: 1}, Status: ledger.StatusDraft, Document: []byte("none")},
	}
	s, err := invoicing.SummarizePeriod("2026-11", invs, read)
	require.NoError(t, err)
	var ids []int64
	for _, it := range s.Invoices {
		ids = append(ids, it.ID)
	}
	require.Equal(t, []int64{4, 3, 2, 1}, ids, "by funding, project, revision")
	require.Equal(t, "NLP Lab", s.Invoices[3].Name)
	require.Len(t, s.ByFunding, 2)
	none, nsfc := s.ByFunding[0], s.ByFunding[1]
	require.Equal(t, "", none.Funding)
	require.Equal(t, 1, none.Drafts)
	require.Equal(t, "1.25", none.Total.String())
	require.Equal(t, "NSFC-1", nsfc.Funding)
	require.Equal(t, [2]int{1, 1}, [2]int{nsfc.Drafts, nsfc.Finalized})
	require.Equal(t, []string{"10", "5.5", "15.5"}, []string{nsfc.DraftTotal.String(), nsfc.FinalTotal.String(), nsfc.Total.String()}, "the void revision counts nowhere")
	require.Len(t, s.Totals, 1)
	require.Equal(t, "16.75", s.Totals[0].Total.String())
	require.Equal(t, [2]int{2, 1}, [2]int{s.Totals[0].Drafts, s.Totals[0].Finalized})

	invs[0].Document = []byte("garbled")
	_, err = invoicing.SummarizePeriod("2026-11", invs, read)
	require.ErrorContains(t, err, "invoice 1")
}
