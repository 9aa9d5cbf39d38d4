package export

import (
	"bytes"
	"fmt"
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
		require.Equal(t, header, rows[0], sheet)
	}
	props, err := f.GetDocProps()
	require.NoError(t, err)
	require.Equal(t, "2026-12-04T01:02:03Z", props.Created)
	// Amount cells are numbers with a two-decimal format (column O: 金额 Amount).
	require.Equal(t, "金额 Amount", XLSXDetailHeader[14])
	ref := "O2"
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
	check(SheetSummary, "A2", "007")
	check(SheetSummary, "B2", "-lab")
	check(SheetSummary, "C2", "=HYPERLINK(\"http://x\")")
	check(SheetDetail, "C2", "=1+2")
	require.False(t, bytes.Contains(b, []byte("<f>")), "no formula anywhere in the workbook")
}
