package export_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"

	"github.com/cardhour/cardhour/billing/export"
)

func sampleTable() *export.Table {
	return &export.Table{Sheet: "用量 Usage", Header: []string{"Student", "Cost (CNY)"}, Numeric: []bool{false, true},
		Rows: [][]string{{"0042", "1234.50"}, {"=1+2", "-0.10"}, {"Total", "1234.40"}}, Bold: []bool{false, false, true},
		At: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
}

// The CSV: a byte-order mark, CRLF, IDs kept as text, formulas neutralised,
// decimal text as it is.
func TestWriteTableCSV(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, export.WriteTableCSV(&b, sampleTable()))
	require.Equal(t, "\uFEFFStudent,Cost (CNY)\r\n'0042,1234.50\r\n'=1+2,-0.10\r\nTotal,1234.40\r\n", b.String())
	bad := sampleTable()
	bad.Rows[0] = bad.Rows[0][:1]
	require.Error(t, export.WriteTableCSV(&b, bad))
}

// The XLSX: one sheet, every cell text (a formula is shown, never
// evaluated), the same bytes for the same table.
func TestWriteTableXLSX(t *testing.T) {
	var a, b bytes.Buffer
	require.NoError(t, export.WriteTableXLSX(&a, sampleTable()))
	require.NoError(t, export.WriteTableXLSX(&b, sampleTable()))
	require.Equal(t, a.Bytes(), b.Bytes(), "deterministic")
	x, err := excelize.OpenReader(bytes.NewReader(a.Bytes()))
	require.NoError(t, err)
	defer x.Close() //nolint:errcheck // read only
	require.Equal(t, []string{"用量 Usage"}, x.GetSheetList())
	rows, err := x.GetRows("用量 Usage", excelize.Options{RawCellValue: true})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"Student", "Cost (CNY)"}, {"0042", "1234.50"}, {"=1+2", "-0.10"}, {"Total", "1234.40"}}, rows)
	for _, cell := range []string{"A2", "B2", "A3"} {
		typ, err := x.GetCellType("用量 Usage", cell)
		require.NoError(t, err)
		require.NotEqual(t, excelize.CellTypeNumber, typ, cell)
		f, err := x.GetCellFormula("用量 Usage", cell)
		require.NoError(t, err)
		require.Empty(t, f, cell)
	}
}
