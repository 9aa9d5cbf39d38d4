package export

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/cardhour/cardhour/billing"
)

// Table is a plain table written by WriteTableCSV and WriteTableXLSX, the
// way the invoice files are written: a header row, then rows of cells,
// every cell text (IDs stay IDs, money stays decimal text, never a float).
// The dashboard's usage tables are exported as Tables.
type Table struct {
	Sheet  string // the XLSX sheet's name: at most 31 characters, none of []:*?/\
	Header []string
	// Numeric marks the columns of decimal text (amounts, hours): right
	// aligned in XLSX; the others are text, an ID kept as written.
	Numeric []bool
	Rows    [][]string
	// Bold marks the rows shown bold in XLSX (a total row).
	Bold []bool
	// At is the XLSX document properties' time: the same table at the same
	// time gives the same bytes.
	At time.Time
}

func (t *Table) check() error {
	if len(t.Numeric) != len(t.Header) {
		return errors.New("export: table: a Numeric flag per column")
	}
	for _, r := range t.Rows {
		if len(r) != len(t.Header) {
			return errors.New("export: table: a row's cells are not its header's")
		}
	}
	return nil
}

// WriteTableCSV writes t as CSV like WriteCSV: UTF-8 with a byte-order mark,
// CRLF line ends, the header, then the rows; a text cell that looks like a
// number is kept as text and every cell is neutralised against formula
// injection (billing.CSVText, billing.CSVCell).
func WriteTableCSV(w io.Writer, t *Table) error {
	if err := t.check(); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\uFEFF"); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	header := make([]string, len(t.Header))
	for i, h := range t.Header {
		header[i] = billing.CSVCell(h)
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	row := make([]string, len(t.Header))
	for _, r := range t.Rows {
		for i, c := range r {
			if t.Numeric[i] {
				row[i] = billing.CSVCell(c)
			} else {
				row[i] = billing.CSVText(c)
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteTableXLSX writes t as a workbook of one sheet with WriteXLSX's
// writer: a bold header row, frozen, then the rows, every cell a text cell
// (never a formula), numeric columns right aligned, and the archive's parts
// in name order.
func WriteTableXLSX(w io.Writer, t *Table) (err error) {
	if err := t.check(); err != nil {
		return err
	}
	f := excelize.NewFile()
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	x, err := newXLSXWriter(f)
	if err != nil {
		return err
	}
	right, err := f.NewStyle(&excelize.Style{Alignment: &excelize.Alignment{Horizontal: "right"}})
	if err != nil {
		return err
	}
	bold, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}})
	if err != nil {
		return err
	}
	boldRight, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}, Alignment: &excelize.Alignment{Horizontal: "right"}})
	if err != nil {
		return err
	}
	if err := f.SetSheetName("Sheet1", t.Sheet); err != nil {
		return err
	}
	widths := make([]float64, len(t.Header))
	for i := range widths {
		widths[i] = 16
	}
	s, err := x.open(t.Sheet, t.Header, widths...)
	if err != nil {
		return err
	}
	styles := [2][2]int{{0, bold}, {right, boldRight}} // [numeric][bold]
	idx := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	cells := make([]any, len(t.Header))
	for j, r := range t.Rows {
		b := idx(j < len(t.Bold) && t.Bold[j])
		for i, c := range r {
			cells[i] = excelize.Cell{StyleID: styles[idx(t.Numeric[i])][b], Value: text(c)}
		}
		if err := s.add(cells...); err != nil {
			return err
		}
	}
	if err := s.done(); err != nil {
		return err
	}
	when := t.At.UTC().Format(time.RFC3339)
	if err := f.SetDocProps(&excelize.DocProperties{Creator: "cardhour", LastModifiedBy: "cardhour", Title: t.Sheet,
		Created: when, Modified: when}); err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		return err
	}
	return canonicalZip(w, buf.Bytes())
}
