package export

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
)

// PDFOptions configures WritePDF.
type PDFOptions struct {
	// FontPath is a TrueType font (.ttf with glyf outlines; not a .ttc
	// collection nor a CFF .otf) tried first for every character; the fonts of
	// DefaultFonts are tried after it. With FontPath set, a missing default
	// font is skipped instead of refused.
	FontPath string
}

// Replacement is what the PDF draws for a character that no font of its font
// set has; the page then lists those characters (see WritePDF).
const Replacement = '\uFFFD'

// WritePDF renders the document as an A4 invoice (a statement for a statement,
// a credit note for a credit note) with bilingual labels: header, lines,
// student subtotals, unpriced usage, total, releases and warnings.
//
// Every character is drawn in the first font of the font set (PDFOptions.
// FindFonts) that has a glyph for it; characters outside the BMP are drawn
// through a private-use copy of their font's glyphs (fpdf's UTF-8 fonts are
// BMP-only) with their real text kept for extraction (/ActualText). A
// character no font has is drawn as U+FFFD and listed under "Characters not
// shown". Long identifiers are shrunk to fit their column (and wrapped when
// even that is not enough) and long names wrap: nothing is cut.
//
// A draft (no number) carries 草稿 / DRAFT on every page, a voided invoice's
// rendering (d.Void set) 已作废 / VOID with the credit note's number, both as a
// diagonal watermark and a header line. The PDF's creation date is the
// document's issue date (its generation time in drafts), so the same document
// gives the same bytes.
func WritePDF(w io.Writer, d *Document, opt PDFOptions) error {
	if d == nil {
		return errors.New("export: the document is nil")
	}
	stamp := d.GeneratedAt
	if d.IssuedAt != nil {
		stamp = *d.IssuedAt
	}
	dr, err := newPDFDraw("P", opt, stamp)
	if err != nil {
		return err
	}
	dr.headText = bilingualHead
	r := &pdfDoc{pdfDraw: dr, d: d}
	text, err := d.Marshal()
	if err != nil {
		return err
	}
	all := string(text)
	if v := d.Void; v != nil {
		all += v.CreditNote + v.Reason
	}
	if err := r.prepare(all); err != nil {
		return err
	}
	r.render()
	if err := r.pdf.Error(); err != nil {
		return fmt.Errorf("pdf: %w", err)
	}
	return r.pdf.Output(w)
}

// pdfDoc is an invoice document being drawn.
type pdfDoc struct {
	*pdfDraw
	d *Document
}

// bilingualHead draws an invoice column title on two lines, English then
// Chinese (the title's last word).
func bilingualHead(title string) string {
	en, zh := title, ""
	if i := strings.LastIndexByte(title, ' '); i >= 0 {
		en, zh = title[:i], title[i+1:]
	}
	return en + "\n" + zh
}

func (r *pdfDoc) title() string {
	switch {
	case r.d.CreditFor != "":
		return "Credit note 红字发票"
	case r.d.User != "":
		return "Statement 对账单"
	}
	return "Invoice 账单"
}

// marks are the diagonal mark of every page ("" for none) and the header
// lines (Document.Marks).
func (r *pdfDoc) marks() (watermark string, banner []string) {
	for _, m := range r.d.Marks() {
		banner = append(banner, m.Text)
		switch m.Kind {
		case MarkVoid:
			watermark = "已作废 VOID"
		case MarkDraft:
			if watermark == "" {
				watermark = "草稿 DRAFT"
			}
		}
	}
	return watermark, banner
}

// render draws the document: its header fields, then each section in
// order, with the watermark, banner and footer on every page.
func (r *pdfDoc) render() {
	p := r.pdf
	watermark, banner := r.marks()
	p.SetHeaderFunc(func() { r.pageHeader(watermark, banner) })
	p.SetFooterFunc(func() { r.pageFooter(watermark) })
	r.use(r.faces[0], 10) // fpdf wants a font before any cell
	p.AddPage()
	r.cell(0, 10, r.title(), "", 1, "L", 18)
	fc := []pdfCol{{"", 70, "L", false}, {"", pdfWidth - 70, "L", true}}
	for _, f := range r.fields() {
		r.row(fc, 10, f[0], f[1])
	}
	r.linesTable()
	r.reservations()
	r.studentsTable()
	r.unpricedTable()
	r.totalLine()
	r.releaseList()
	r.oversubscribedTable()
	r.warningList()
	r.notShown()
}

// pageHeader draws the watermark across the page and the banner lines above
// its content, on every page.
func (r *pdfDoc) pageHeader(watermark string, banner []string) {
	p := r.pdf
	if watermark != "" {
		const big = 64.0
		p.SetTextColor(240, 190, 190)
		p.TransformBegin()
		p.TransformRotate(55, 105, 148.5)
		r.text(105-r.width(watermark, big)/2, 148.5+0.3*big*ptMM, watermark, big)
		p.TransformEnd()
	}
	if len(banner) > 0 {
		p.SetTextColor(190, 0, 0)
		for _, b := range banner {
			for _, l := range r.wrap(b, pdfWidth-2, 9) {
				r.cell(pdfWidth, 4.5, l, "", 1, "L", 9)
			}
		}
		p.SetTextColor(0, 0, 0)
		p.Ln(1)
	}
}

// pageFooter names the document and the page on every page; a voided
// document's footer says so too.
func (r *pdfDoc) pageFooter(watermark string) {
	p, d := r.pdf, r.d
	p.SetY(-12)
	footer := fmt.Sprintf("%s %s · %s · %d/{nb}", d.Project, d.Period, r.number(), p.PageNo())
	if d.Void != nil {
		footer = watermark + " · " + footer
	}
	r.cell(0, 5, footer, "", 0, "C", 8)
}

// fields are the document's header fields (label, value), in print order.
func (r *pdfDoc) fields() [][2]string {
	d := r.d
	issued := "—"
	if d.IssuedAt != nil {
		issued = d.IssuedAt.Format(time.RFC3339)
	}
	project := d.Project
	if d.Name != "" {
		project += " — " + d.Name
	}
	numberLabel := "Invoice number 发票号"
	if d.CreditFor != "" {
		numberLabel = "Credit note number 红字发票号"
	}
	fields := [][2]string{{numberLabel, r.number()}}
	if d.CreditFor != "" {
		fields = append(fields, [2]string{"Voids invoice 冲销发票", d.CreditFor})
	}
	if v := d.Void; v != nil {
		fields = append(fields, [2]string{"Voided 已作废", "by credit note 红字发票 " + orNone(v.CreditNote)})
	}
	fields = append(fields,
		[2]string{"Issued at 开具日期", issued},
		[2]string{"Period 账期", d.Period + " (" + d.Timezone + ")"},
		[2]string{"Project 项目", project},
		[2]string{"Funding 经费来源", orNone(d.Funding)},
	)
	if d.User != "" {
		who := d.User
		if n := d.StudentName(d.User); n != "" {
			who += " — " + n
		}
		fields = append(fields, [2]string{"Student 学生", who})
	}
	return append(fields,
		[2]string{"Currency 币种", d.Currency},
		[2]string{"Catalog version 价目表版本", strconv.FormatInt(d.CatalogVersion, 10)},
		[2]string{"Data cut-off 数据截止", d.DataCutoff.Format(time.RFC3339)},
		[2]string{"Generated at 生成时间", d.GeneratedAt.Format(time.RFC3339)},
	)
}

// linesTable is the table of the document's lines, usage and reservations.
func (r *pdfDoc) linesTable() {
	d := r.d
	r.section("Lines 明细")
	cols := []pdfCol{{"User 学号", 30, "L", true}, {"Name 姓名", 28, "L", false}, {"SKU 规格", 26, "L", true},
		{"Sessions 会话数", 14, "R", false}, {"Billed h 计费小时", 16, "R", false}, {"Idle h 空闲小时", 14, "R", false},
		{"Unit price 单价", 26, "R", false}, {"Amount 金额", 26, "R", false}}
	r.begin(cols)
	names := d.studentNames()
	for _, l := range d.Lines {
		if l.Kind == billing.KindUsage {
			r.row(cols, 8, l.User, names[l.User], l.SKU, strconv.Itoa(l.Sessions),
				hoursOf(l.BilledSeconds), hoursOf(l.IdleMS/1000), billing.FormatPrice(l.UnitPrice)+"/h", billing.FormatMoney(l.Amount))
		} else {
			r.row(cols, 8, "(预留)", l.Term+"/"+l.Billing, l.SKU, "×"+strconv.FormatInt(l.Quantity, 10), "", "",
				billing.FormatPrice(l.UnitPrice)+"/mo", billing.FormatMoney(l.Amount))
		}
	}
	if len(d.Lines) == 0 {
		r.row(cols, 8, "none 无", "", "", "", "", "", "", "")
	}
	r.end()
}

// studentsTable is the table of the students' subtotals, when there are students.
func (r *pdfDoc) studentsTable() {
	if len(r.d.Students) == 0 {
		return
	}
	r.section("Students 学生小计")
	sc := []pdfCol{{"User 学号", 50, "L", true}, {"Name 姓名", 60, "L", false}, {"Sessions 会话数", 30, "R", false},
		{"Subtotal 小计", 40, "R", false}}
	r.begin(sc)
	for _, st := range r.d.Students {
		r.row(sc, 8, st.User, st.Name, strconv.Itoa(st.Sessions), billing.FormatMoney(st.Total))
	}
	r.end()
}

// unpricedTable is the table of the usage no SKU prices, when there is some.
func (r *pdfDoc) unpricedTable() {
	if len(r.d.Unpriced) == 0 {
		return
	}
	r.section("Unpriced usage 未计价用量")
	uc := []pdfCol{{"User 学号", 40, "L", true}, {"GPU / profile 型号/规格", 80, "L", false},
		{"Sessions 会话数", 25, "R", false}, {"Used h 使用小时", 35, "R", false}}
	r.begin(uc)
	for _, u := range r.d.Unpriced {
		r.row(uc, 8, u.User, u.GPUModel+" / "+u.Profile, strconv.Itoa(u.Sessions), hoursOf(u.UsedMS/1000))
	}
	r.end()
}

// totalLine is the ruled total line.
func (r *pdfDoc) totalLine() {
	p := r.pdf
	p.Ln(3)
	r.need(8)
	x, y := p.GetXY()
	p.Line(x, y, x+pdfWidth, y)
	r.cell(pdfWidth-50, 8, "Total 合计 ("+r.d.Currency+")", "", 0, "L", 13)
	r.cell(50, 8, billing.FormatMoney(r.d.Total), "", 1, "R", 13)
}

// releaseList lists the idle releases of the period, when there were any; a
// failed one says that its idle time is billed.
func (r *pdfDoc) releaseList() {
	if len(r.d.Releases) == 0 {
		return
	}
	r.section("Idle releases 空闲释放")
	for _, rl := range r.d.Releases {
		who := rl.InstanceID
		if rl.Node != "" {
			who += " on " + rl.Node
		}
		if rl.User != "" {
			who = rl.User + ": " + who
		}
		since, at := rl.IdleSince.Format("2006-01-02 15:04"), rl.At.Format("2006-01-02 15:04")
		line := fmt.Sprintf("• %s, idle since %s, released %s: %s (已释放)", who, since, at, rl.Action)
		if rl.Status == billing.ReleaseFailed {
			line = fmt.Sprintf("• %s, idle since %s, release failed %s: %s; it stayed held and its idle time is billed (释放失败，空闲时间照常计费)",
				who, since, at, rl.Failure)
		}
		r.para(line, 8.5)
	}
}

// warningList lists the document's warnings, when it has any.
func (r *pdfDoc) warningList() {
	if len(r.d.Warnings) == 0 {
		return
	}
	r.section("Warnings 警告")
	for _, wn := range r.d.Warnings {
		r.para("• "+wn.Message, 8.5)
	}
}

func (r *pdfDoc) number() string {
	if r.d.Number == "" {
		return "DRAFT 草稿"
	}
	return r.d.Number
}

// Chinese names of the reservation terms and payments.
var (
	termZh    = map[string]string{"month": "包月", "quarter": "包季", "year": "包年"}
	billingZh = map[string]string{"upfront": "预付", "monthly": "按月付"}
)

// reservations is the section that says what each reservation line's amount
// is made of: months charged, list amount, discount rate and amount, and on
// an upfront reservation's later months the invoice that prepaid it. Only
// documents that record the discount have it (older ones render as they did).
func (r *pdfDoc) reservations() {
	var lines []*Line
	for i := range r.d.Lines {
		if r.d.Lines[i].HasDiscount() {
			lines = append(lines, &r.d.Lines[i])
		}
	}
	if len(lines) == 0 {
		return
	}
	r.section("Reservations 预留")
	cols := []pdfCol{{"SKU 规格", 24, "L", true}, {"Term 期限", 44, "L", false}, {"Qty 数量", 12, "R", false},
		{"Months 计费月数", 14, "R", false}, {"List amount 标价金额", 22, "R", false}, {"Discount 折扣", 22, "R", false},
		{"Discount amount 折扣金额", 22, "R", false}, {"Amount 金额", 20, "R", false}}
	r.begin(cols)
	var notes []string
	for _, l := range lines {
		term := l.Term + " " + termZh[l.Term] + ", " + l.Billing + " " + billingZh[l.Billing] + "\nfrom 起 " + l.Start
		r.row(cols, 8, l.SKU, term, strconv.FormatInt(l.Quantity, 10), strconv.Itoa(l.MonthsCharged),
			billing.FormatMoney(*l.ListAmount), rateText(*l.DiscountRate), billing.FormatMoney(*l.DiscountAmount),
			billing.FormatMoney(l.Amount))
		if n := prepaidNote(l); n != "" {
			notes = append(notes, "• "+l.SKU+" "+l.Term+" × "+strconv.FormatInt(l.Quantity, 10)+" from "+l.Start+": "+n)
		}
	}
	r.end()
	for _, n := range notes {
		r.para(n, 8.5)
	}
}

// rateText is a discount rate as people read it: "20% (8 折)", "0%".
func rateText(rate decimal.Decimal) string {
	if rate.IsZero() {
		return "0%"
	}
	return formatRate(rate) + "% (" + formatZhe(rate) + " 折)"
}

func orNone(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// hoursOf renders seconds as hours with two decimals (a quantity, not money).
func hoursOf(seconds int64) string {
	return strconv.FormatFloat(float64(seconds)/3600, 'f', 2, 64)
}
