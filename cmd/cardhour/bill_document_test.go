//go:build !collector

package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/schemas"
)

// billJSON is the part of `bill --format json` an invoice document also says.
type billJSON struct {
	Invoices []billInvoice `json:"invoices"`
}

type billInvoice struct {
	Project   string         `json:"project"`
	Name      string         `json:"name"`
	Funding   string         `json:"funding"`
	InCatalog bool           `json:"in_catalog"`
	Total     string         `json:"total"`
	Lines     []billLine     `json:"lines"`
	Unpriced  []billUnpriced `json:"unpriced"`
}

type billLine struct {
	Kind           string      `json:"kind"`
	User           string      `json:"user"`
	SKU            string      `json:"sku"`
	Sessions       int         `json:"sessions"`
	UsedSeconds    json.Number `json:"used_seconds"`
	CoveredSeconds json.Number `json:"covered_seconds"`
	BilledSeconds  int64       `json:"billed_seconds"`
	IdleSeconds    json.Number `json:"idle_seconds"`
	UnitPrice      string      `json:"unit_price"`
	Term           string      `json:"term"`
	Quantity       int64       `json:"quantity"`
	Billing        string      `json:"billing"`
	Start          string      `json:"start"`
	MonthlyPrice   string      `json:"monthly_price"`
	Amount         string      `json:"amount"`
}

type billUnpriced struct {
	User        string      `json:"user"`
	GPUModel    string      `json:"gpu_model"`
	Profile     string      `json:"profile"`
	Sessions    int         `json:"sessions"`
	UsedSeconds json.Number `json:"used_seconds"`
	IdleSeconds json.Number `json:"idle_seconds"`
}

// exampleDocuments are the invoice documents a billing run would freeze for
// the example samples (user: the statements derived from them), as their
// stored bytes read back.
func exampleDocuments(t *testing.T, period, user string) map[string]*export.Document {
	t.Helper()
	cat, err := schemas.LoadCatalog(exampleCatalog)
	require.NoError(t, err)
	p, err := billing.ParsePeriod(period, cat.Location)
	require.NoError(t, err)
	f, err := os.Open(exampleSamples)
	require.NoError(t, err)
	defer f.Close() //nolint:errcheck // read-only
	res, _, err := billing.BillStream(f, cat, p, schemas.ReadOptions{})
	require.NoError(t, err)
	out := map[string]*export.Document{}
	for _, d := range export.Build(res, export.Meta{}) {
		if user != "" {
			d = *d.Statement(user)
		}
		b, err := d.Marshal()
		require.NoError(t, err)
		stored, err := export.Parse(b)
		require.NoError(t, err)
		out[d.Project] = stored
	}
	return out
}

// `bill` writes its own JSON and CSV (a contract of their own, see
// docs/billing.md, "Output formats"), not the invoice document; they must
// still say what the document says. For each worked example, as invoices
// and as a student's statement, every invoice of bill's JSON and CSV has the
// document's lines in the document's order, with its amounts, prices,
// times and quantities, its unpriced usage and its total.
func TestBillSaysWhatTheInvoiceDocumentSays(t *testing.T) {
	statements := 0
	for _, period := range []string{"2026-09", "2026-11", "2026-12"} {
		bill := checkBillAgainstDocuments(t, period, "")
		// Every student's statement too.
		users := map[string]bool{}
		for _, inv := range bill.Invoices {
			for _, l := range inv.Lines {
				if l.User != "" && !users[l.User] {
					users[l.User] = true
					checkBillAgainstDocuments(t, period, l.User)
					statements++
				}
			}
		}
	}
	require.Greater(t, statements, 5, "the examples' students' statements were checked")
}

// checkBillAgainstDocuments checks bill's JSON and CSV of period (user's
// statement when set) against the documents, and returns the JSON.
func checkBillAgainstDocuments(t *testing.T, period, user string) billJSON {
	t.Helper()
	args := []string{"bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", period}
	if user != "" {
		args = append(args, "--user", user)
	}
	docs := exampleDocuments(t, period, user)
	code, out, errOut := runCLI(t, "", append(args, "--format", "json")...)
	require.Equal(t, 0, code, errOut)
	var bill billJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&bill))
	require.NotEmpty(t, bill.Invoices, "%s %s", period, user)
	for _, inv := range bill.Invoices {
		d := docs[inv.Project]
		require.NotNil(t, d, "%s %s: bill invoices %s, which has no document", period, user, inv.Project)
		checkBillJSONInvoice(t, d, inv)
	}
	code, out, errOut = runCLI(t, "", append(args, "--format", "csv")...)
	require.Equal(t, 0, code, errOut)
	checkBillCSV(t, docs, out, len(bill.Invoices))
	return bill
}

func checkBillJSONInvoice(t *testing.T, d *export.Document, inv billInvoice) {
	t.Helper()
	p := inv.Project
	require.Equal(t, []any{d.Name, d.Funding, d.InCatalog, billing.FormatMoney(d.Total)},
		[]any{inv.Name, inv.Funding, inv.InCatalog, inv.Total}, "%s: name, funding, in catalog, total", p)
	require.Len(t, inv.Lines, len(d.Lines), "%s: lines", p)
	for i, l := range inv.Lines {
		dl := d.Lines[i]
		where := fmt.Sprintf("%s line %d (%s %s %s)", p, i, dl.Kind, dl.User, dl.SKU)
		require.Equal(t, []string{dl.Kind, dl.User, dl.SKU, billing.FormatMoney(dl.Amount)},
			[]string{l.Kind, l.User, l.SKU, l.Amount}, where)
		if dl.Kind == billing.KindUsage {
			require.Equal(t, []any{dl.Sessions, dl.BilledSeconds, billing.FormatSeconds(dl.UsedMS), billing.FormatSeconds(dl.CoveredMS),
				billing.FormatSeconds(dl.IdleMS), billing.FormatPrice(dl.UnitPrice)},
				[]any{l.Sessions, l.BilledSeconds, l.UsedSeconds.String(), l.CoveredSeconds.String(), l.IdleSeconds.String(), l.UnitPrice}, where)
		} else {
			require.Equal(t, []any{dl.Term, dl.Quantity, dl.Billing, dl.Start, billing.FormatPrice(dl.UnitPrice)},
				[]any{l.Term, l.Quantity, l.Billing, l.Start, l.MonthlyPrice}, where)
		}
	}
	require.Len(t, inv.Unpriced, len(d.Unpriced), "%s: unpriced", p)
	for i, u := range inv.Unpriced {
		du := d.Unpriced[i]
		require.Equal(t, []any{du.User, du.GPUModel, du.Profile, du.Sessions, billing.FormatSeconds(du.UsedMS), billing.FormatSeconds(du.IdleMS)},
			[]any{u.User, u.GPUModel, u.Profile, u.Sessions, u.UsedSeconds.String(), u.IdleSeconds.String()}, "%s unpriced %d", p, i)
	}
}

// checkBillCSV checks that bill's CSV has, per invoice, the document's line
// amounts in its order and its total (the rows a finance office sums).
func checkBillCSV(t *testing.T, docs map[string]*export.Document, out string, invoices int) {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "\uFEFF"))).ReadAll()
	require.NoError(t, err)
	col := map[string]int{}
	for i, h := range rows[0] {
		col[strings.Fields(h)[0]] = i
	}
	amounts := map[string][]string{}
	totals := map[string]string{}
	for _, r := range rows[1:] {
		project := strings.TrimPrefix(r[col["project"]], "'")
		switch r[col["kind"]] {
		case billing.KindUsage, billing.KindReservation:
			amounts[project] = append(amounts[project], r[col["kind"]]+" "+strings.TrimPrefix(r[col["user"]], "'")+" "+r[col["sku"]]+" "+r[col["amount"]])
		case billing.CSVKindTotal:
			totals[project] = r[col["amount"]]
		}
	}
	require.Len(t, totals, invoices, "one total row per invoice")
	for p, total := range totals {
		d := docs[p]
		require.NotNil(t, d, "the CSV bills %s, which has no document", p)
		var want []string
		for _, l := range d.Lines {
			want = append(want, l.Kind+" "+l.User+" "+l.SKU+" "+billing.FormatMoney(l.Amount))
		}
		require.Equal(t, want, amounts[p], "%s: the CSV's lines", p)
		require.Equal(t, billing.FormatMoney(d.Total), total, "%s: the CSV's total", p)
	}
}
