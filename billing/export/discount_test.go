package export

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// reservationCatalog: an annual upfront reservation from September (year 8
// 折), a quarterly upfront one from October (95 折) and an annual one paid
// monthly on a SKU whose year discount is overridden (0.25).
const reservationCatalog = `
currency: CNY
timezone: Asia/Shanghai
skus:
  - {id: a1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "1.80", monthly_price: "900"}
  - {id: a3g, gpu_model: A100, profile: 3g.40gb, hourly_price: "5.125", monthly_price: "2700", discounts: {year: "0.25"}}
projects:
  - id: lab
    name: Lab 课题组
    funding: F-1
    reservations:
      - {sku: a1g, quantity: 2, term: year, start: "2026-09", billing: upfront}
      - {sku: a1g, quantity: 1, term: quarter, start: "2026-10", billing: upfront}
      - {sku: a3g, quantity: 1, term: year, start: "2026-10", billing: monthly}
`

// reservationDoc is lab's document of a month of reservationCatalog (no usage).
func reservationDoc(t *testing.T, year int, month time.Month) *Document {
	t.Helper()
	cat, err := schemas.ParseCatalog([]byte(reservationCatalog), "reservations")
	require.NoError(t, err)
	res := billing.NewAccumulator(cat, billing.NewPeriod(year, month, shanghai)).Invoices()
	docs := Build(res, fixtureMeta)
	d := docByProject(t, docs, "lab")
	b, err := d.Marshal()
	require.NoError(t, err)
	back, err := Parse(b) // what is stored is what is rendered
	require.NoError(t, err)
	return back
}

type resvWant struct {
	sku, term, billing, start    string
	months                       int
	rate, list, discount, amount string
	prepaidIn                    string
}

func resvLines(t *testing.T, d *Document) []resvWant {
	t.Helper()
	var out []resvWant
	for _, l := range d.Lines {
		if l.Kind != billing.KindReservation {
			continue
		}
		require.True(t, l.HasDiscount(), "%+v", l)
		out = append(out, resvWant{l.SKU, l.Term, l.Billing, l.Start, l.MonthsCharged, billing.FormatPrice(*l.DiscountRate),
			billing.FormatMoney(*l.ListAmount), billing.FormatMoney(*l.DiscountAmount), billing.FormatMoney(l.Amount), l.PrepaidIn})
	}
	return out
}

// A reservation line says what its amount is made of, month by month: an
// upfront reservation charges its whole term on its first month's invoice
// (list = monthly price × months × quantity, discount = list × rate) and
// says on the later ones, at 0.00, which invoice prepaid it; a monthly one
// charges one month each month with the SKU's override.
func TestReservationDiscountAcrossTheTerm(t *testing.T) {
	sep := resvLines(t, reservationDoc(t, 2026, time.September))
	require.Equal(t, []resvWant{
		{"a1g", "year", "upfront", "2026-09", 12, "0.20", "21600.00", "4320.00", "17280.00", ""},
	}, sep)
	oct := resvLines(t, reservationDoc(t, 2026, time.October))
	require.Equal(t, []resvWant{
		{"a1g", "year", "upfront", "2026-09", 0, "0.20", "0.00", "0.00", "0.00", "2026-09"},
		{"a1g", "quarter", "upfront", "2026-10", 3, "0.05", "2700.00", "135.00", "2565.00", ""},
		{"a3g", "year", "monthly", "2026-10", 1, "0.25", "2700.00", "675.00", "2025.00", ""},
	}, oct)
	for _, m := range []time.Month{time.November, time.December} {
		require.Equal(t, []resvWant{
			{"a1g", "year", "upfront", "2026-09", 0, "0.20", "0.00", "0.00", "0.00", "2026-09"},
			{"a1g", "quarter", "upfront", "2026-10", 0, "0.05", "0.00", "0.00", "0.00", "2026-10"},
			{"a3g", "year", "monthly", "2026-10", 1, "0.25", "2700.00", "675.00", "2025.00", ""},
		}, resvLines(t, reservationDoc(t, 2026, m)), m)
	}
	jan := resvLines(t, reservationDoc(t, 2027, time.January))
	require.Equal(t, []resvWant{
		{"a1g", "year", "upfront", "2026-09", 0, "0.20", "0.00", "0.00", "0.00", "2026-09"},
		{"a3g", "year", "monthly", "2026-10", 1, "0.25", "2700.00", "675.00", "2025.00", ""},
	}, jan, "the quarter ended in December")

	// In the stored bytes: decimal strings, the later month's zeros and
	// the prepaid month.
	b, err := reservationDoc(t, 2026, time.November).Marshal()
	require.NoError(t, err)
	require.Contains(t, string(b), `"prepaid_in": "2026-09"`)
	require.Contains(t, string(b), `"discount_amount": "0.00"`)
	require.Contains(t, string(b), `"discount_rate": "0.25"`)
	// A credit note negates the amounts and keeps the rate.
	stamped, err := Stamp(mustMarshal(t, reservationDoc(t, 2026, time.October)), "2026-000001", fixtureMeta.GeneratedAt)
	require.NoError(t, err)
	cn, err := CreditNote(stamped, "2026-000002", fixtureMeta.GeneratedAt)
	require.NoError(t, err)
	credit, err := Parse(cn)
	require.NoError(t, err)
	require.Equal(t, "-135.00", resvLines(t, credit)[1].discount)
	require.Equal(t, "-2700.00", resvLines(t, credit)[1].list)
}

func mustMarshal(t *testing.T, d *Document) []byte {
	t.Helper()
	b, err := d.Marshal()
	require.NoError(t, err)
	return b
}

// A document stored before the discount was recorded keeps its bytes and
// hash, and every export renders it (without the discount).
func TestDocumentWithoutDiscountStillRenders(t *testing.T) {
	old := readTestdata(t, "invoice-lab-v0.json")
	require.NotContains(t, string(old), "discount_rate")
	d, err := Parse(old)
	require.NoError(t, err)
	again, err := d.Marshal()
	require.NoError(t, err)
	require.Equal(t, string(old), string(again), "the stored bytes come back")
	for _, l := range d.Lines {
		require.False(t, l.HasDiscount())
	}
	var csvOut bytes.Buffer
	require.NoError(t, WriteCSV(&csvOut, d))
	for _, row := range readCSV(t, csvOut.Bytes())[1:] {
		require.Empty(t, row[csvColumn("discount_rate 折扣率")])
	}
	writeXLSX(t, d)
	needPDFTools(t)
	text := pdfText(t, writePDF(t, d, PDFOptions{}))
	require.Contains(t, text, "855.00")
	require.NotContains(t, text, "Reservations")
}

// A document's discount fields must add up; Parse names the field.
func TestParseRejectsBadDiscount(t *testing.T) {
	good := mustMarshal(t, reservationDoc(t, 2026, time.October))
	for name, c := range map[string]struct{ old, new, want string }{
		"amount":  {`"discount_amount": "135.00"`, `"discount_amount": "130.00"`, "lines[1].discount_amount"},
		"rate":    {`"discount_rate": "0.05"`, `"discount_rate": "1.05"`, "lines[1].discount_rate"},
		"number":  {`"list_amount": "2700.00"`, `"list_amount": 2700`, "lines[1].list_amount"},
		"partial": {`"discount_amount": "135.00"`, `"x": 1`, "unknown field"},
		"prepaid": {`"prepaid_in": "2026-09"`, `"prepaid_in": "Sept"`, "lines[0].prepaid_in"},
	} {
		bad := strings.Replace(string(good), c.old, c.new, 1)
		require.NotEqual(t, string(good), bad, name)
		_, err := Parse([]byte(bad))
		require.ErrorContains(t, err, c.want, name)
	}
	// Given in part: all or none.
	partial := strings.Replace(string(good), `,
      "discount_amount": "135.00"`, "", 1)
	_, err := Parse([]byte(partial))
	require.ErrorContains(t, err, "all or none")
}

// The CSV, XLSX and PDF of the months of an upfront reservation carry what
// the document says: months charged, list, rate, discount, and the prepaid
// month on the later invoices.
func TestReservationDiscountInExports(t *testing.T) {
	oct, nov := reservationDoc(t, 2026, time.October), reservationDoc(t, 2026, time.November)

	var buf bytes.Buffer
	require.NoError(t, WriteCSV(&buf, oct, nov))
	type csvLine struct{ period, sku, term, months, list, rate, discount, amount, note string }
	var got []csvLine
	for _, row := range readCSV(t, buf.Bytes())[1:] {
		if row[csvColumn("kind 类型")] != billing.KindReservation {
			continue
		}
		col := func(n string) string { return row[csvColumn(n)] }
		got = append(got, csvLine{col("period 账期"), col("sku 规格"), col("term 期限"), col("months_charged 计费月数"),
			col("list_amount 标价金额"), col("discount_rate 折扣率"), col("discount_amount 折扣金额"), col("amount 金额"), col("message 说明")})
	}
	require.Equal(t, []csvLine{
		{"2026-10", "a1g", "year upfront", "0", "0.00", "0.20", "0.00", "0.00", "prepaid on the 2026-09 invoice / 已于 2026-09 账单预付"},
		{"2026-10", "a1g", "quarter upfront", "3", "2700.00", "0.05", "135.00", "2565.00", ""},
		{"2026-10", "a3g", "year monthly", "1", "2700.00", "0.25", "675.00", "2025.00", ""},
		{"2026-11", "a1g", "year upfront", "0", "0.00", "0.20", "0.00", "0.00", "prepaid on the 2026-09 invoice / 已于 2026-09 账单预付"},
		{"2026-11", "a1g", "quarter upfront", "0", "0.00", "0.05", "0.00", "0.00", "prepaid on the 2026-10 invoice / 已于 2026-10 账单预付"},
		{"2026-11", "a3g", "year monthly", "1", "2700.00", "0.25", "675.00", "2025.00", ""},
	}, got)

	f, err := excelize.OpenReader(bytes.NewReader(writeXLSX(t, oct, nov)))
	require.NoError(t, err)
	defer f.Close()
	rows, err := f.GetRows(SheetDetail)
	require.NoError(t, err)
	hi := map[string]int{}
	for i, h := range XLSXDetailHeader {
		hi[h] = i
	}
	var shown []string
	for _, row := range rows {
		if len(row) > hi["金额 Amount"] && row[hi["类型 Kind"]] == billing.KindReservation {
			note := ""
			if len(row) > hi["说明 Note"] {
				note = row[hi["说明 Note"]]
			}
			shown = append(shown, strings.Join([]string{row[hi["规格 SKU"]], row[hi["计费月数 Months charged"]], row[hi["标价金额 List amount"]],
				row[hi["折扣率 Discount rate"]], row[hi["折扣金额 Discount amount"]], row[hi["金额 Amount"]], note}, " | "))
		}
	}
	require.Equal(t, []string{
		"a1g | 0 | 0.00 | 20.0% | 0.00 | 0.00 | prepaid on the 2026-09 invoice / 已于 2026-09 账单预付",
		"a1g | 3 | 2,700.00 | 5.0% | 135.00 | 2,565.00 | ",
		"a3g | 1 | 2,700.00 | 25.0% | 675.00 | 2,025.00 | ",
		"a1g | 0 | 0.00 | 20.0% | 0.00 | 0.00 | prepaid on the 2026-09 invoice / 已于 2026-09 账单预付",
		"a1g | 0 | 0.00 | 5.0% | 0.00 | 0.00 | prepaid on the 2026-10 invoice / 已于 2026-10 账单预付",
		"a3g | 1 | 2,700.00 | 25.0% | 675.00 | 2,025.00 | ",
	}, shown)

	needPDFTools(t)
	sep := pdfText(t, writePDF(t, reservationDoc(t, 2026, time.September), PDFOptions{}))
	require.Contains(t, sep, "Reservations 预留")
	for _, want := range []string{"year 包年, upfront 预付", "from 起 2026-09", "21600.00", "20% (8 折)", "4320.00", "17280.00"} {
		require.Contains(t, sep, want)
	}
	require.NotContains(t, sep, "prepaid")
	novText := pdfText(t, writePDF(t, nov, PDFOptions{}))
	for _, want := range []string{"year 包年, monthly 按月付", "2700.00", "25% (75 折)", "675.00", "2025.00", "5% (95 折)",
		"a1g year × 2 from 2026-09: prepaid on the 2026-09 invoice / 已于 2026-09 账单预付",
		"a1g quarter × 1 from 2026-10: prepaid on the 2026-10 invoice / 已于 2026-10 账单预付"} {
		require.Contains(t, novText, want)
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// The PDF's discount cell: percent off and the 折 that pays the rest.
func TestRateText(t *testing.T) {
	for rate, want := range map[string]string{"0.20": "20% (8 折)", "0.05": "5% (95 折)", "0.125": "12.5% (87.5 折)",
		"0.15": "15% (85 折)", "0": "0%", "0.00": "0%"} {
		require.Equal(t, want, rateText(decimal.RequireFromString(rate)), rate)
	}
}
