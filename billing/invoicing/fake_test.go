package invoicing_test

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/invoicing"
)

// fakeDocs is a small stand-in for the invoice document: canonical JSON of
// the lines and total, stamped, filtered and "rendered" deterministically.
type fakeDocs struct{}

type fakeDoc struct {
	Project        string           `json:"project"`
	Period         string           `json:"period"`
	Number         string           `json:"number"`
	IssuedAt       *time.Time       `json:"issued_at"`
	CatalogVersion int64            `json:"catalog_version"`
	DataCutoff     time.Time        `json:"data_cutoff"`
	GeneratedAt    time.Time        `json:"generated_at"`
	Lines          []fakeLine       `json:"lines"`
	Students       []fakeStudent    `json:"students"`
	Total          decimal.Decimal  `json:"total"`
	Warnings       []string         `json:"warnings"`
	Extra          *json.RawMessage `json:"extra,omitempty"`
}

type fakeLine struct {
	Kind   string          `json:"kind"`
	User   string          `json:"user"`
	SKU    string          `json:"sku"`
	Amount decimal.Decimal `json:"amount"`
}

type fakeStudent struct {
	User  string          `json:"user"`
	Name  string          `json:"name"`
	Total decimal.Decimal `json:"total"`
}

func (fakeDocs) Build(res *billing.Result, m invoicing.Meta, names map[string]map[string]string) ([]invoicing.ProjectDocument, error) {
	var out []invoicing.ProjectDocument
	for _, inv := range res.Invoices {
		d := fakeDoc{Project: inv.Project, Period: res.Period.String(), CatalogVersion: m.CatalogVersion, DataCutoff: m.DataCutoff,
			GeneratedAt: m.GeneratedAt, Total: inv.Total, Lines: []fakeLine{}, Students: []fakeStudent{}, Warnings: []string{}}
		per := map[string]decimal.Decimal{}
		for _, l := range inv.Lines {
			d.Lines = append(d.Lines, fakeLine{l.Kind, l.User, l.SKU, l.Amount})
			if l.User != "" {
				per[l.User] = per[l.User].Add(l.Amount)
			}
		}
		for u, t := range per {
			d.Students = append(d.Students, fakeStudent{User: u, Name: names[inv.Project][u], Total: t})
		}
		slices.SortFunc(d.Students, func(a, b fakeStudent) int { return compareStr(a.User, b.User) })
		b, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		out = append(out, invoicing.ProjectDocument{Project: inv.Project, Document: b})
	}
	slices.SortFunc(out, func(a, b invoicing.ProjectDocument) int { return compareStr(a.Project, b.Project) })
	return out, nil
}

func compareStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func parseFake(b []byte) (*fakeDoc, error) {
	var d fakeDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (fakeDocs) Summary(b []byte) (invoicing.DocSummary, error) {
	d, err := parseFake(b)
	if err != nil {
		return invoicing.DocSummary{}, err
	}
	s := invoicing.DocSummary{Project: d.Project, Period: d.Period, Number: d.Number, Total: d.Total}
	for _, l := range d.Lines {
		s.Lines = append(s.Lines, invoicing.DocLine{Kind: l.Kind, User: l.User, SKU: l.SKU, Amount: l.Amount})
	}
	return s, nil
}

func (fakeDocs) Stamp(b []byte, number string, issuedAt time.Time) ([]byte, error) {
	d, err := parseFake(b)
	if err != nil {
		return nil, err
	}
	d.Number, d.IssuedAt = number, &issuedAt
	return json.Marshal(d)
}

func (fakeDocs) Statement(b []byte, user string, names map[string]string) ([]byte, error) {
	d, err := parseFake(b)
	if err != nil {
		return nil, err
	}
	var lines []fakeLine
	total := decimal.Zero
	for _, l := range d.Lines {
		if l.User == user {
			lines = append(lines, l)
			total = total.Add(l.Amount)
		}
	}
	d.Lines, d.Total = lines, total
	d.Students = []fakeStudent{{User: user, Name: names[user], Total: total}}
	return json.Marshal(d)
}

func (fakeDocs) Render(w io.Writer, f invoicing.Format, docs ...[]byte) error {
	if f == invoicing.FormatPDF && len(docs) != 1 {
		return fmt.Errorf("a PDF is one document, got %d", len(docs))
	}
	for _, d := range docs {
		if _, err := fmt.Fprintf(w, "%s:%s\n", f, d); err != nil {
			return err
		}
	}
	return nil
}
