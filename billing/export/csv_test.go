package export

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"

	"github.com/cardhour/cardhour/billing"
	"github.com/stretchr/testify/require"
)

func ptrs(docs []Document) []*Document {
	out := make([]*Document, len(docs))
	for i := range docs {
		out[i] = &docs[i]
	}
	return out
}

func readCSV(t *testing.T, b []byte) [][]string {
	t.Helper()
	require.True(t, bytes.HasPrefix(b, []byte("\uFEFF")), "UTF-8 byte-order mark")
	r := csv.NewReader(bytes.NewReader(b[3:]))
	rows, err := r.ReadAll()
	require.NoError(t, err)
	return rows
}

func TestCSVGolden(t *testing.T) {
	docs := fixtureDocs(t)
	var period bytes.Buffer
	require.NoError(t, WriteCSV(&period, ptrs(docs)...))
	golden(t, "period.csv", period.Bytes())

	lab := docByProject(t, docs, "lab")
	draft, err := lab.Marshal()
	require.NoError(t, err)
	final, err := Stamp(draft, "2026-000042", fixtureMeta.GeneratedAt)
	require.NoError(t, err)
	stored, err := Parse(final)
	require.NoError(t, err)
	var one bytes.Buffer
	require.NoError(t, WriteCSV(&one, stored))
	golden(t, "invoice-lab.csv", one.Bytes())

	var st bytes.Buffer
	require.NoError(t, WriteCSV(&st, stored.Statement("alice")))
	golden(t, "statement-lab-alice.csv", st.Bytes())
}

func TestCSVRowsTotalsAndWarnings(t *testing.T) {
	docs := fixtureDocs(t)
	var buf bytes.Buffer
	require.NoError(t, WriteCSV(&buf, ptrs(docs)...))
	rows := readCSV(t, buf.Bytes())
	require.Equal(t, CSVHeader, rows[0])
	kinds := map[string]int{}
	for i, row := range rows {
		require.Len(t, row, len(CSVHeader), "row %d", i)
		kinds[row[6]]++
	}
	require.Equal(t, len(docs), kinds[RowTotal])
	require.Positive(t, kinds[RowWarning])
	require.Positive(t, kinds[RowSubtotal])
	require.Equal(t, 1, kinds[RowUnpriced])
	require.Equal(t, 1, kinds[billing.KindReservation])
	// The total row of lab carries the document's total; student names are filled in.
	lab := docByProject(t, docs, "lab")
	found := false
	for _, row := range rows {
		if row[3] == "lab" && row[6] == RowTotal {
			require.Equal(t, billing.FormatMoney(lab.Total), row[csvColumn("amount 金额")])
			found = true
		}
		if row[7] == "alice" && row[6] == billing.KindUsage {
			require.Equal(t, "Alice 李", row[8])
		}
	}
	require.True(t, found)
}

func TestCSVNeutralisesFormulas(t *testing.T) {
	d := docByProject(t, fixtureDocs(t), "-lab")
	d.Name = "=HYPERLINK(\"http://x\")"
	d.Funding = "007"
	d.Lines[0].SKU = "@SUM(A1)"
	d.Warnings = append(d.Warnings, Warning{Code: "input", Message: "\tcmd|' /C calc'!A0"},
		Warning{Code: "input", Message: "+1 more"})
	var buf bytes.Buffer
	require.NoError(t, WriteCSV(&buf, d))
	rows := readCSV(t, buf.Bytes())
	for _, row := range rows[1:] {
		for _, cell := range row {
			if cell == "" {
				continue
			}
			switch cell[0] {
			case '=', '+', '@', '\t', '\r':
				t.Fatalf("cell %q starts a formula", cell)
			case '-':
				require.Regexp(t, `^-\d+(\.\d+)?$`, cell, "only numbers may start with '-'")
			}
		}
		if row[3] == "" {
			require.Equal(t, RowWarning, row[6], "only warnings about the whole input have no project")
			continue
		}
		require.Equal(t, "'-lab", row[3], "the project ID -lab is neutralised")
		require.Equal(t, "'007", row[5], "a numeric ID stays text")
		if row[6] == billing.KindUsage {
			require.Equal(t, "'=1+2", row[7])
			require.Equal(t, "'@SUM(A1)", row[9])
		}
	}
	require.Contains(t, buf.String(), `'=HYPERLINK(""http://x"")`)
	require.True(t, strings.Contains(buf.String(), "input: \tcmd"), "a message starting with the code is not a formula")
}

func TestJSONExportIsTheStoredBytes(t *testing.T) {
	docs := fixtureDocs(t)
	lab := docByProject(t, docs, "lab")
	draft, err := lab.Marshal()
	require.NoError(t, err)
	stored, err := Stamp(draft, "2026-000042", fixtureMeta.GeneratedAt)
	require.NoError(t, err)
	d, err := Parse(stored)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, d))
	require.Equal(t, string(stored), buf.String())

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, ptrs(docs)...))
	var arr []map[string]any
	require.NoError(t, jsonUnmarshal(buf.Bytes(), &arr))
	require.Len(t, arr, len(docs))
	golden(t, "period.json", buf.Bytes())
}

func TestRenderersRefuseNilAndTakeNoDocuments(t *testing.T) {
	var buf bytes.Buffer
	require.ErrorContains(t, WriteCSV(&buf, nil), "document 0 is nil")
	require.ErrorContains(t, WriteXLSX(&buf, nil), "document 0 is nil")
	require.ErrorContains(t, WriteJSON(&buf, nil), "document 0 is nil")
	require.ErrorContains(t, WritePDF(&buf, nil, PDFOptions{}), "nil")

	buf.Reset()
	require.NoError(t, WriteCSV(&buf))
	require.Len(t, readCSV(t, buf.Bytes()), 1, "the header only")
	buf.Reset()
	require.NoError(t, WriteJSON(&buf))
	require.Equal(t, "[\n]\n", buf.String())
	buf.Reset()
	require.NoError(t, WriteXLSX(&buf))
	require.NotEmpty(t, buf.Bytes())
}

// A draft's CSV, a voided invoice's and a credit note's carry their mark in a
// row of its own before the document's rows; a finalized invoice's has none.
func TestCSVMarks(t *testing.T) {
	csvOf := func(docs ...*Document) [][]string {
		var buf bytes.Buffer
		require.NoError(t, WriteCSV(&buf, docs...))
		return readCSV(t, buf.Bytes())
	}
	kind, msg := 6, len(CSVHeader)-1
	require.Equal(t, "kind 类型", CSVHeader[kind])

	draft := docByProject(t, fixtureDocs(t), "lab")
	rows := csvOf(draft)
	require.Equal(t, MarkDraft, rows[1][kind])
	require.Contains(t, rows[1][msg], "草稿 DRAFT")
	require.Equal(t, "lab", rows[1][3]) // project

	final := stampedLab(t)
	for _, row := range csvOf(final)[1:] {
		require.NotContains(t, []string{MarkDraft, MarkVoid, MarkCredit}, row[kind])
		require.NotContains(t, strings.Join(row, ","), "DRAFT")
	}

	final.Void = &VoidMark{CreditNote: "2026-000051", VoidedAt: fixtureMeta.GeneratedAt, Reason: "wrong SKU"}
	rows = csvOf(final)
	require.Equal(t, MarkVoid, rows[1][kind])
	require.Equal(t, "2026-000042", rows[1][1])
	require.Contains(t, rows[1][msg], "已作废 VOID")
	require.Contains(t, rows[1][msg], "2026-000051")
	require.Contains(t, rows[1][msg], "wrong SKU")

	credit := stampedLab(t)
	credit.Number, credit.CreditFor = "2026-000051", "2026-000042"
	for i := range credit.Lines {
		credit.Lines[i].Amount = credit.Lines[i].Amount.Neg()
	}
	credit.Total = credit.Total.Neg()
	rows = csvOf(credit)
	require.Equal(t, MarkCredit, rows[1][kind])
	require.Contains(t, rows[1][msg], "冲销发票 2026-000042")
	require.Equal(t, "-859.21", rows[len(rows)-1-len(credit.Warnings)][csvColumn("amount 金额")])

	// In a period file each marked document has its own mark row.
	docs := ptrs(fixtureDocs(t))
	marks := 0
	for _, row := range csvOf(docs...) {
		if row[kind] == MarkDraft {
			marks++
		}
	}
	require.Equal(t, len(docs), marks)
}

// csvColumn is the column of a CSV header cell.
func csvColumn(name string) int {
	for i, h := range CSVHeader {
		if h == name {
			return i
		}
	}
	return -1
}
