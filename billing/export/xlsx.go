package export

import (
	"archive/zip"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"
)

// Sheet names of WriteXLSX.
const (
	SheetSummary  = "汇总 Summary"
	SheetStudents = "学生 Students"
	SheetDetail   = "明细 Detail"
	SheetWarnings = "警告 Warnings"
)

// Headers of the XLSX sheets, Chinese then English in each cell.
var (
	XLSXSummaryHeader = []string{
		"经费来源 Funding", "项目 Project", "项目名称 Project name", "账期 Period", "发票号 Invoice number",
		"开具日期 Issued at", "学生数 Students", "用量金额 Usage amount", "预留金额 Reservation amount",
		"合计 Total", "币种 Currency", "未计价 Unpriced", "警告 Warnings",
	}
	XLSXStudentsHeader = []string{
		"经费来源 Funding", "项目 Project", "学号/用户 User", "姓名 Name", "会话数 Sessions", "小计 Subtotal",
		"币种 Currency",
	}
	XLSXDetailHeader = []string{
		"经费来源 Funding", "项目 Project", "学号/用户 User", "姓名 Name", "类型 Kind", "规格 SKU", "期限 Term",
		"数量 Quantity", "会话数 Sessions", "使用秒数 Used seconds", "预留覆盖秒数 Covered seconds",
		"空闲秒数 Idle seconds", "计费秒数 Billed seconds", "单价 Unit price", "计费月数 Months charged",
		"标价金额 List amount", "折扣率 Discount rate", "折扣金额 Discount amount", "金额 Amount", "币种 Currency",
		"说明 Note",
	}
	XLSXWarningsHeader = []string{
		"项目 Project", "学号/用户 User", "代码 Code", "说明 Message",
	}
)

// Row labels of the summary sheet.
const (
	xlsxFundingSubtotal = "小计 Subtotal"
	xlsxGrandTotal      = "合计 Total"
	xlsxNoFunding       = "(无 none)"
	xlsxAllProjects     = "(全部 all)"
)

// Number formats: amounts with two decimals, prices with at least two.
const (
	fmtMoney   = "#,##0.00"
	fmtPrice   = "#,##0.00####"
	fmtSeconds = "#,##0.###"
	fmtRate    = "0.0%"
)

// WriteXLSX writes the documents as one workbook with excelize's stream writer.
// Every sheet starts with the marks of the documents (sheetMarks: drafts,
// voided invoices, credit notes; none when all are finalized), also printed
// in its page header and footer, then its header row:
// a summary sheet with a row per funding source and project (a subtotal per
// funding source and a grand total per currency), a students sheet with each
// student's subtotal, one detail sheet with a row per invoice line (the student
// in its columns), a warnings sheet, and, only when a document records one, a
// sheet of the over-subscribed cards (SheetOversubscribed). Amounts are numbers formatted to two
// decimals; IDs and every other text are text cells (never formulas). The
// document properties' times are the latest issue or generation time of the
// documents and the parts of the archive are written in name order, so the same
// documents give the same bytes.
//
// The detail is one sheet, not a sheet per student: a period has thousands of
// students, and a workbook with thousands of sheets is slow to write and to open
// and cannot be navigated; sheet names are limited to 31 characters without
// []:*?/\, which student IDs need not respect. Filter the detail sheet by user.
func WriteXLSX(w io.Writer, docs ...*Document) (err error) {
	if err := checkDocs(docs); err != nil {
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
	x.marks = sheetMarks(docs)
	if err := f.SetSheetName("Sheet1", SheetSummary); err != nil {
		return err
	}
	sheets := []string{SheetSummary, SheetStudents, SheetDetail, SheetWarnings}
	steps := []func([]*Document) error{x.summary, x.students, x.detail, x.warnings}
	if hasOversubscribed(docs) { // a sheet of its own, only when there are some
		sheets, steps = append(sheets, SheetOversubscribed), append(steps, x.oversubscribed)
	}
	for _, name := range sheets[1:] {
		if _, err := f.NewSheet(name); err != nil {
			return err
		}
	}
	if hf := printedMark(docs); hf != "" {
		for _, name := range sheets {
			if err := f.SetHeaderFooter(name, &excelize.HeaderFooterOptions{
				OddHeader: "&C&\"-,Bold\"&14" + hf, OddFooter: "&C" + hf + " &P/&N"}); err != nil {
				return err
			}
		}
	}
	sorted := slices.Clone(docs)
	slices.SortStableFunc(sorted, func(a, b *Document) int {
		return cmp.Or(cmp.Compare(a.Funding, b.Funding), cmp.Compare(a.Project, b.Project),
			cmp.Compare(a.Period, b.Period), cmp.Compare(a.User, b.User))
	})
	for _, step := range steps {
		if err := step(sorted); err != nil {
			return err
		}
	}
	// The summary, the first sheet, is the active one. (SetActiveSheet would
	// parse every streamed sheet back into memory.)
	var stamp time.Time
	for _, d := range docs {
		t := d.GeneratedAt
		if d.IssuedAt != nil {
			t = *d.IssuedAt
		}
		if t.After(stamp) {
			stamp = t
		}
	}
	when := stamp.UTC().Format(time.RFC3339)
	if err := f.SetDocProps(&excelize.DocProperties{
		Creator: "cardhour", LastModifiedBy: "cardhour", Title: "cardhour invoices 账单",
		Created: when, Modified: when, Language: "zh-CN",
	}); err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		return err
	}
	return canonicalZip(w, buf.Bytes())
}

// canonicalZip rewrites a zip archive with its entries sorted by name and no
// modification times, copying the compressed data as it is. excelize writes the
// parts of a workbook in map order; this makes the bytes depend on the content only.
func canonicalZip(w io.Writer, archive []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return err
	}
	files := slices.Clone(zr.File)
	slices.SortFunc(files, func(a, b *zip.File) int { return cmp.Compare(a.Name, b.Name) })
	zw := zip.NewWriter(w)
	for _, zf := range files {
		raw, err := zf.OpenRaw()
		if err != nil {
			return err
		}
		hdr := &zip.FileHeader{Name: zf.Name, Method: zf.Method, CRC32: zf.CRC32,
			CompressedSize64: zf.CompressedSize64, UncompressedSize64: zf.UncompressedSize64}
		out, err := zw.CreateRaw(hdr)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, raw); err != nil {
			return err
		}
	}
	return zw.Close()
}

type xlsxWriter struct {
	f                                    *excelize.File
	header, money, price, seconds, total int
	rate                                 int
	mark                                 int
	marks                                []string // the rows above every sheet's header (sheetMarks)
}

// xlsxMaxListed is how many voided invoices or credit notes the marks of a
// sheet name one by one.
const xlsxMaxListed = 20

// sheetMarks are the rows shown above the header of every sheet: one for the
// drafts among the documents (how many, and which), one per voided invoice
// and one per credit note (Document.Marks), at most xlsxMaxListed of each.
func sheetMarks(docs []*Document) []string {
	var drafts, listed []string
	voids, credits := 0, 0
	for _, d := range docs {
		where := d.Project + " " + d.Period
		if d.User != "" {
			where += " " + d.User
		}
		for _, m := range d.Marks() {
			switch m.Kind {
			case MarkDraft:
				drafts = append(drafts, where)
			case MarkVoid:
				if voids++; voids <= xlsxMaxListed {
					listed = append(listed, m.Text+" ("+d.Number+", "+where+")")
				}
			case MarkCredit:
				if credits++; credits <= xlsxMaxListed {
					listed = append(listed, m.Text+" ("+d.Number+", "+where+")")
				}
			}
		}
	}
	var out []string
	if len(drafts) > 0 {
		names := drafts
		more := ""
		if len(names) > xlsxMaxListed {
			names, more = names[:xlsxMaxListed], fmt.Sprintf(" … +%d", len(drafts)-xlsxMaxListed)
		}
		out = append(out, fmt.Sprintf("草稿 DRAFT — %d of %d document(s) are drafts, not valid invoices until finalized "+
			"%d 份为草稿，定稿前不是有效账单: %s%s", len(drafts), len(docs), len(drafts), strings.Join(names, ", "), more))
	}
	out = append(out, listed...)
	for _, n := range []int{voids, credits} {
		if n > xlsxMaxListed {
			out = append(out, fmt.Sprintf("… +%d", n-xlsxMaxListed))
		}
	}
	return out
}

// printedMark is the header and footer of every printed page of a marked
// workbook: what the marks are, in short.
func printedMark(docs []*Document) string {
	kinds := map[string]bool{}
	for _, d := range docs {
		for _, m := range d.Marks() {
			kinds[m.Kind] = true
		}
	}
	var parts []string
	if kinds[MarkDraft] {
		parts = append(parts, "草稿 DRAFT")
	}
	if kinds[MarkVoid] {
		parts = append(parts, "已作废 VOID")
	}
	if kinds[MarkCredit] {
		parts = append(parts, "红字发票 Credit note")
	}
	return strings.Join(parts, " · ")
}

func newXLSXWriter(f *excelize.File) (*xlsxWriter, error) {
	x := &xlsxWriter{f: f}
	var err error
	style := func(s *excelize.Style) int {
		if err != nil {
			return 0
		}
		var id int
		id, err = f.NewStyle(s)
		return id
	}
	fmtOf := func(s string) *string { return &s }
	x.header = style(&excelize.Style{Font: &excelize.Font{Bold: true}})
	x.money = style(&excelize.Style{CustomNumFmt: fmtOf(fmtMoney)})
	x.price = style(&excelize.Style{CustomNumFmt: fmtOf(fmtPrice)})
	x.seconds = style(&excelize.Style{CustomNumFmt: fmtOf(fmtSeconds)})
	x.rate = style(&excelize.Style{CustomNumFmt: fmtOf(fmtRate)})
	x.total = style(&excelize.Style{CustomNumFmt: fmtOf(fmtMoney), Font: &excelize.Font{Bold: true}})
	x.mark = style(&excelize.Style{Font: &excelize.Font{Bold: true, Color: "C00000", Size: 12}})
	return x, err
}

// sheet streams rows into one sheet, starting with its header.
type sheet struct {
	x   *xlsxWriter
	sw  *excelize.StreamWriter
	row int
}

func (x *xlsxWriter) open(name string, header []string, widths ...float64) (*sheet, error) {
	sw, err := x.f.NewStreamWriter(name)
	if err != nil {
		return nil, err
	}
	for i, wd := range widths {
		if err := sw.SetColWidth(i+1, i+1, wd); err != nil {
			return nil, err
		}
	}
	top := len(x.marks) + 1 // the header's row
	below, err := excelize.CoordinatesToCellName(1, top+1)
	if err != nil {
		return nil, err
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: top, TopLeftCell: below, ActivePane: "bottomLeft"}); err != nil {
		return nil, err
	}
	s := &sheet{x: x, sw: sw}
	for _, m := range x.marks {
		if err := s.add(excelize.Cell{StyleID: x.mark, Value: m}); err != nil {
			return nil, err
		}
	}
	cells := make([]any, len(header))
	for i, h := range header {
		cells[i] = excelize.Cell{StyleID: x.header, Value: h}
	}
	return s, s.add(cells...)
}

func (s *sheet) add(cells ...any) error {
	s.row++
	ref, err := excelize.CoordinatesToCellName(1, s.row)
	if err != nil {
		return err
	}
	return s.sw.SetRow(ref, cells)
}

// text is a text cell whatever it looks like: IDs stay text, and a value such
// as "=1+2" is shown, never evaluated.
func text(s string) any { return s }

// num is a numeric cell with a style. The decimal is written with the shortest
// digits that read back as the same double: for amounts in cents this is the
// amount itself (a spreadsheet number is a double; amounts are exact to 2^53 cents).
func (s *sheet) num(d decimal.Decimal, style int) any {
	f, _ := d.Float64()
	return excelize.Cell{StyleID: style, Value: f}
}

func (s *sheet) int(n int64, style int) any {
	return excelize.Cell{StyleID: style, Value: n}
}

// secs is a duration in seconds from milliseconds.
func (s *sheet) secs(ms int64) any {
	return excelize.Cell{StyleID: s.x.seconds, Value: decimal.New(ms, -3).InexactFloat64()}
}

func (s *sheet) done() error { return s.sw.Flush() }

func issuedText(d *Document) string {
	if d.IssuedAt == nil {
		return ""
	}
	return d.IssuedAt.Format(time.RFC3339)
}

func (x *xlsxWriter) summary(docs []*Document) error {
	s, err := x.open(SheetSummary, XLSXSummaryHeader, 16, 16, 24, 10, 16, 26, 10, 16, 18, 16, 10, 10, 10)
	if err != nil {
		return err
	}
	type key struct{ funding, currency string }
	fundingSum := map[key]decimal.Decimal{}
	grand := map[string]decimal.Decimal{}
	var currencies []string
	flush := func(funding string, currs []string) error {
		for _, c := range currs {
			k := key{funding, c}
			if sum, ok := fundingSum[k]; ok {
				if err := s.add(text(fundingLabel(funding)), text(xlsxFundingSubtotal), "", "", "", "", "", "", "",
					s.num(sum, x.total), text(c)); err != nil {
					return err
				}
				delete(fundingSum, k)
			}
		}
		return nil
	}
	for i, d := range docs {
		usage, reserved := decimal.Zero, decimal.Zero
		for _, l := range d.Lines {
			if l.Kind == billing.KindUsage {
				usage = usage.Add(l.Amount)
			} else {
				reserved = reserved.Add(l.Amount)
			}
		}
		if err := s.add(text(fundingLabel(d.Funding)), text(d.Project), text(d.Name), text(d.Period), text(d.Number),
			text(issuedText(d)), s.int(int64(len(d.Students)), 0), s.num(usage, x.money), s.num(reserved, x.money),
			s.num(d.Total, x.money), text(d.Currency), s.int(int64(len(d.Unpriced)), 0),
			s.int(int64(len(d.Warnings)), 0)); err != nil {
			return err
		}
		k := key{d.Funding, d.Currency}
		fundingSum[k] = fundingSum[k].Add(d.Total)
		if _, ok := grand[d.Currency]; !ok {
			currencies = append(currencies, d.Currency)
		}
		grand[d.Currency] = grand[d.Currency].Add(d.Total)
		if i == len(docs)-1 || docs[i+1].Funding != d.Funding {
			slices.Sort(currencies)
			if err := flush(d.Funding, currencies); err != nil {
				return err
			}
		}
	}
	slices.Sort(currencies)
	for _, c := range currencies {
		if err := s.add(text(xlsxGrandTotal), "", "", "", "", "", "", "", "", s.num(grand[c], x.total), text(c)); err != nil {
			return err
		}
	}
	return s.done()
}

func fundingLabel(f string) string {
	if f == "" {
		return xlsxNoFunding
	}
	return f
}

func (x *xlsxWriter) students(docs []*Document) error {
	s, err := x.open(SheetStudents, XLSXStudentsHeader, 16, 16, 18, 18, 10, 14, 10)
	if err != nil {
		return err
	}
	for _, d := range docs {
		for _, st := range d.Students {
			if err := s.add(text(fundingLabel(d.Funding)), text(d.Project), text(st.User), text(st.Name),
				s.int(int64(st.Sessions), 0), s.num(st.Total, x.money), text(d.Currency)); err != nil {
				return err
			}
		}
	}
	return s.done()
}

func (x *xlsxWriter) detail(docs []*Document) error {
	s, err := x.open(SheetDetail, XLSXDetailHeader, 16, 16, 18, 18, 14, 18, 12, 8, 8, 14, 14, 14, 14, 12, 10, 14, 10, 14, 14, 8, 40)
	if err != nil {
		return err
	}
	for _, d := range docs {
		names := d.studentNames()
		for _, l := range d.Lines {
			row := []any{text(fundingLabel(d.Funding)), text(d.Project), text(l.User), text(names[l.User]),
				text(l.Kind), text(l.SKU)}
			if l.Kind == billing.KindUsage {
				row = append(row, "", "", s.int(int64(l.Sessions), 0), s.secs(l.UsedMS), s.secs(l.CoveredMS),
					s.secs(l.IdleMS), s.int(l.BilledSeconds, 0))
			} else {
				row = append(row, text(l.Term+" "+l.Billing), s.int(l.Quantity, 0), "", "", "", "", "")
			}
			row = append(row, s.num(l.UnitPrice, x.price))
			note := ""
			if l.HasDiscount() {
				row = append(row, s.int(int64(l.MonthsCharged), 0), s.num(*l.ListAmount, x.money), s.num(*l.DiscountRate, x.rate),
					s.num(*l.DiscountAmount, x.money))
				note = prepaidNote(&l)
			} else {
				row = append(row, "", "", "", "")
			}
			row = append(row, s.num(l.Amount, x.money), text(d.Currency), text(note))
			if err := s.add(row...); err != nil {
				return err
			}
		}
		for _, u := range d.Unpriced {
			if err := s.add(text(fundingLabel(d.Funding)), text(d.Project), text(u.User), text(names[u.User]),
				text(RowUnpriced), text(u.GPUModel+" "+u.Profile), "", "", s.int(int64(u.Sessions), 0), s.secs(u.UsedMS), "",
				s.secs(u.IdleMS), "", "", "", "", "", "", "", "", text(d.Currency), ""); err != nil {
				return err
			}
		}
	}
	return s.done()
}

func (x *xlsxWriter) warnings(docs []*Document) error {
	s, err := x.open(SheetWarnings, XLSXWarningsHeader, 16, 18, 22, 120)
	if err != nil {
		return err
	}
	seen := map[string]bool{} // warnings about the whole input are in every document: shown once
	for _, d := range docs {
		for _, w := range d.Warnings {
			user := ""
			if len(w.Users) == 1 {
				user = w.Users[0]
			}
			project := w.Project
			if project == "" {
				if seen[w.Code+"\x00"+w.Message] {
					continue
				}
				seen[w.Code+"\x00"+w.Message] = true
				project = xlsxAllProjects
			}
			if err := s.add(text(project), text(user), text(w.Code), text(w.Message)); err != nil {
				return err
			}
		}
	}
	return s.done()
}
