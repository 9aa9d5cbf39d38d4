package export

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/shopspring/decimal"
)

// periodDocs is a period of students spread over projects of 100 students
// each, every student with two usage lines, every project with a reservation
// and a warning, built directly as documents.
func periodDocs(students int) []*Document {
	gen := time.Date(2026, time.December, 4, 9, 0, 0, 0, shanghai)
	var docs []*Document
	for p := 0; p*100 < students; p++ {
		d := &Document{Schema: Schema, Project: fmt.Sprintf("proj-%03d", p), Name: fmt.Sprintf("课题组 %d", p),
			Funding: fmt.Sprintf("F-%d", p%7), InCatalog: true, Period: "2026-11", Timezone: "Asia/Shanghai",
			Currency: "CNY", CatalogVersion: 3, DataCutoff: gen, GeneratedAt: gen}
		total := decimal.Zero
		for s := p * 100; s < min(students, (p+1)*100); s++ {
			user := fmt.Sprintf("2023%06d", s)
			for i, sku := range []string{"a1g", "h3g"} {
				billed := int64(3600*(s%40+1) + 17*i)
				price := decimal.RequireFromString([]string{"1.80", "5.125"}[i])
				amount := billing.UsageAmount(billed, price)
				d.Lines = append(d.Lines, Line{Kind: billing.KindUsage, User: user, SKU: sku, Sessions: s%9 + 1,
					UsedSeconds: billed, BilledSeconds: billed, UsedMS: billed * 1000, UnitPrice: price, Amount: amount})
				total = total.Add(amount)
			}
		}
		res := decimal.RequireFromString("855.00")
		d.Lines = append(d.Lines, Line{Kind: billing.KindReservation, SKU: "a1g", Term: "quarter", Quantity: 1,
			Billing: "monthly", Start: "2026-10", UnitPrice: decimal.RequireFromString("900"), Amount: res})
		d.Total = total.Add(res)
		d.Students = studentTotals(d.Lines, nil)
		d.Warnings = []Warning{{Code: billing.WarnInput, Message: "3 of 9 sample line(s) were invalid and skipped"}}
		names := map[string]string{}
		for _, st := range d.Students {
			names[st.User] = "学生 " + st.User
		}
		d.SetNames(names)
		docs = append(docs, d)
	}
	return docs
}

// BenchmarkWriteXLSX5000Students is the XLSX export of a period with 5 000
// students (50 projects, 10 000 usage lines). Target: < 3 s, < 200 MB RSS
// (scripts/bench-export.sh measures the RSS).
func BenchmarkWriteXLSX5000Students(b *testing.B) {
	docs := periodDocs(5000)
	var n countWriter
	b.ReportAllocs()
	for b.Loop() {
		n = 0
		if err := WriteXLSX(&n, docs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "xlsx-bytes")
}

// BenchmarkWriteCSV5000Students is the CSV export of the same period.
func BenchmarkWriteCSV5000Students(b *testing.B) {
	docs := periodDocs(5000)
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteCSV(io.Discard, docs...); err != nil {
			b.Fatal(err)
		}
	}
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// BenchmarkWritePDF100Students is the PDF of one project's invoice with 100
// students (200 usage lines, 9 pages), finalized; ...ExtB is the same with a
// student named 𠮷田 (the CJK Extension B font loaded and remapped).
func BenchmarkWritePDF100Students(b *testing.B) { benchPDF(b, "") }

func BenchmarkWritePDF100StudentsExtB(b *testing.B) { benchPDF(b, "𠮷田 花子") }

func benchPDF(b *testing.B, name string) {
	d := periodDocs(100)[0]
	at := d.GeneratedAt
	d.Number, d.IssuedAt = "2026-000042", &at
	if name != "" {
		d.SetNames(map[string]string{d.Students[0].User: name})
	}
	var n countWriter
	b.ReportAllocs()
	for b.Loop() {
		n = 0
		if err := WritePDF(&n, d, PDFOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "pdf-bytes")
}

// BenchmarkWritePDFReview is the monthly review PDF in Chinese of 30
// projects (each with a long Chinese name, two budgets, an advice sentence
// and an underused reservation: six A4 landscape pages, the table's header
// repeated on each of its pages). Its baseline is BenchmarkWritePDF100Students, run beside it.
func BenchmarkWritePDFReview(b *testing.B) {
	v := reviewFixture("zh-CN")
	row := v.Projects[0]
	row.Name = v.Projects[1].Name
	v.Projects = nil
	for i := range 30 {
		row.Project = fmt.Sprintf("lab-%02d", i)
		v.Projects = append(v.Projects, row)
	}
	var n countWriter
	b.ReportAllocs()
	for b.Loop() {
		n = 0
		if err := WritePDFReview(&n, v, PDFOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "pdf-bytes")
}
