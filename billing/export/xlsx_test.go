package export

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"
)

// dumpXLSX reads a workbook back with excelize: for every sheet, every non-empty
// cell with its type, number format, raw value and value as shown.
func dumpXLSX(t *testing.T, b []byte) string {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(b))
	require.NoError(t, err)
	defer f.Close()
	var out strings.Builder
	for _, name := range f.GetSheetList() {
		fmt.Fprintf(&out, "== %s\n", name)
		rows, err := f.GetRows(name, excelize.Options{RawCellValue: true})
		require.NoError(t, err)
		for r, row := range rows {
			for c, raw := range row {
				if raw == "" {
					continue
				}
				ref, _ := excelize.CoordinatesToCellName(c+1, r+1)
				typ, err := f.GetCellType(name, ref)
				require.NoError(t, err)
				shown, err := f.GetCellValue(name, ref)
				require.NoError(t, err)
				fmt.Fprintf(&out, "%s %s", ref, cellType(typ))
				if nf := numFmt(t, f, name, ref); nf != "" {
					fmt.Fprintf(&out, " fmt=%q", nf)
				}
				fmt.Fprintf(&out, " %q", raw)
				if shown != raw {
					fmt.Fprintf(&out, " shown=%q", shown)
				}
				out.WriteString("\n")
			}
		}
	}
	return out.String()
}

func cellType(t excelize.CellType) string {
	switch t {
	case excelize.CellTypeInlineString, excelize.CellTypeSharedString:
		return "text"
	case excelize.CellTypeNumber, excelize.CellTypeUnset:
		return "number"
	}
	return fmt.Sprintf("type%d", t)
}

func numFmt(t *testing.T, f *excelize.File, sheet, ref string) string {
	id, err := f.GetCellStyle(sheet, ref)
	require.NoError(t, err)
	if id == 0 {
		return ""
	}
	st, err := f.GetStyle(id)
	require.NoError(t, err)
	if st.CustomNumFmt != nil {
		return *st.CustomNumFmt
	}
	return ""
}

func writeXLSX(t *testing.T, docs ...*Document) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteXLSX(&buf, docs...))
	return buf.Bytes()
}

func TestXLSXGolden(t *testing.T) {
	docs := ptrs(fixtureDocs(t))
	golden(t, "period.xlsx.txt", []byte(dumpXLSX(t, writeXLSX(t, docs...))))
}

func TestXLSXIsDeterministic(t *testing.T) {
	a := writeXLSX(t, ptrs(fixtureDocs(t))...)
	b := writeXLSX(t, ptrs(fixtureDocs(t))...)
	require.Equal(t, a, b, "the same documents give the same bytes")
}

func TestXLSXSheetsHeadersAndTypes(t *testing.T) {
	b := writeXLSX(t, ptrs(fixtureDocs(t))...)
	f, err := excelize.OpenReader(bytes.NewReader(b))
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, []string{SheetSummary, SheetStudents, SheetDetail, SheetWarnings}, f.GetSheetList())
	require.Equal(t, 0, f.GetActiveSheetIndex(), "the summary opens first")
	for sheet, header := range map[string][]string{SheetSummary: XLSXSummaryHeader, SheetStudents: XLSXStudentsHeader,
		SheetDetail: XLSXDetailHeader, SheetWarnings: XLSXWarningsHeader} {
		rows, err := f.GetRows(sheet)
		require.NoError(t, err)
		require.Equal(t, MarkDraft, "draft 草稿")
		require.Contains(t, rows[0][0], "草稿 DRAFT", sheet) // the fixture's documents are drafts
		require.Equal(t, header, rows[1], sheet)
	}
	props, err := f.GetDocProps()
	require.NoError(t, err)
	require.Equal(t, "2026-12-04T01:02:03Z", props.Created)
	// Amount cells are numbers with a two-decimal format (column S: 金额 Amount).
	require.Equal(t, "金额 Amount", XLSXDetailHeader[18])
	ref := "S3"
	typ, err := f.GetCellType(SheetDetail, ref)
	require.NoError(t, err)
	require.Equal(t, "number", cellType(typ))
	require.Equal(t, fmtMoney, numFmt(t, f, SheetDetail, ref))
}

func TestXLSXFormulaCellsAreText(t *testing.T) {
	d := docByProject(t, fixtureDocs(t), "-lab")
	d.Name = "=HYPERLINK(\"http://x\")"
	d.Funding = "007"
	b := writeXLSX(t, d)
	f, err := excelize.OpenReader(bytes.NewReader(b))
	require.NoError(t, err)
	defer f.Close()
	check := func(sheet, ref, want string) {
		t.Helper()
		v, err := f.GetCellValue(sheet, ref)
		require.NoError(t, err)
		require.Equal(t, want, v)
		typ, err := f.GetCellType(sheet, ref)
		require.NoError(t, err)
		require.Equal(t, "text", cellType(typ), "%s!%s", sheet, ref)
		formula, err := f.GetCellFormula(sheet, ref)
		require.NoError(t, err)
		require.Empty(t, formula)
	}
	// Row 1 is the draft's mark, row 2 the header.
	check(SheetSummary, "A3", "007")
	check(SheetSummary, "B3", "-lab")
	check(SheetSummary, "C3", "=HYPERLINK(\"http://x\")")
	check(SheetDetail, "C3", "=1+2")
	require.False(t, bytes.Contains(b, []byte("<f>")), "no formula anywhere in the workbook")
}

// sheetXML is the XML of every worksheet of a workbook.
func sheetXML(t *testing.T, b []byte) []string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	var out []string
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, "xl/worksheets/sheet") {
			r, err := f.Open()
			require.NoError(t, err)
			x, err := io.ReadAll(r)
			require.NoError(t, err)
			out = append(out, string(x))
		}
	}
	return out
}

// Every sheet of a workbook with a draft, a voided invoice or a credit note
// starts with their marks (and prints them in its page header); a workbook of
// finalized invoices has none and its header is row 1.
func TestXLSXMarksOnEverySheet(t *testing.T) {
	open := func(docs ...*Document) (*excelize.File, []byte) {
		b := writeXLSX(t, docs...)
		f, err := excelize.OpenReader(bytes.NewReader(b))
		require.NoError(t, err)
		t.Cleanup(func() { _ = f.Close() })
		return f, b
	}
	sheets := []string{SheetSummary, SheetStudents, SheetDetail, SheetWarnings}
	headers := [][]string{XLSXSummaryHeader, XLSXStudentsHeader, XLSXDetailHeader, XLSXWarningsHeader}

	final := stampedLab(t)
	f, b := open(final)
	for i, sh := range sheets {
		rows, err := f.GetRows(sh)
		require.NoError(t, err)
		require.Equal(t, headers[i], rows[0], sh)
	}
	for _, x := range sheetXML(t, b) {
		require.NotContains(t, x, "DRAFT")
		require.NotContains(t, x, "oddHeader")
	}

	voided := stampedLab(t)
	voided.Void = &VoidMark{CreditNote: "2026-000051", VoidedAt: fixtureMeta.GeneratedAt, Reason: "wrong SKU"}
	credit := stampedLab(t)
	credit.Number, credit.CreditFor = "2026-000051", "2026-000042"
	draft := docByProject(t, fixtureDocs(t), "other")
	f, b = open(voided, credit, draft)
	for i, sh := range sheets {
		rows, err := f.GetRows(sh)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(rows), 4, sh)
		top := rows[0][0] + "\n" + rows[1][0] + "\n" + rows[2][0]
		require.Contains(t, top, "草稿 DRAFT — 1 of 3 document(s)", sh)
		require.Contains(t, top, "other 2026-11", sh)
		require.Contains(t, top, "已作废 VOID — voided by credit note 由红字发票 2026-000051", sh)
		require.Contains(t, top, "wrong SKU", sh)
		require.Contains(t, top, "红字发票 Credit note — voids invoice 冲销发票 2026-000042", sh)
		require.Equal(t, headers[i], rows[3], sh)
	}
	xs := sheetXML(t, b)
	require.Len(t, xs, 4)
	for _, x := range xs {
		require.Contains(t, x, "草稿 DRAFT · 已作废 VOID · 红字发票 Credit note", "printed header and footer")
		require.Contains(t, x, "oddHeader")
	}
}
