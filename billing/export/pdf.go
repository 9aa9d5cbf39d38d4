package export

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-pdf/fpdf"
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
	paths, err := opt.FindFonts()
	if err != nil && opt.FontPath == "" {
		return err
	}
	if err != nil {
		// FontPath is usable (FindFonts checked it first): keep it and the
		// defaults that exist.
		paths = []string{opt.FontPath}
		for _, role := range DefaultFonts {
			for _, p := range role.Paths {
				if _, lerr := loadFont(p); lerr == nil {
					paths = append(paths, p)
					break
				}
			}
		}
	}
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetCatalogSort(true)
	stamp := d.GeneratedAt
	if d.IssuedAt != nil {
		stamp = *d.IssuedAt
	}
	pdf.SetCreationDate(stamp)
	pdf.SetModificationDate(stamp)
	pdf.SetProducer("cardhour", false)
	pdf.SetCreator("cardhour", false)
	r := &pdfDoc{pdf: pdf, d: d}
	for i, p := range paths {
		f, err := loadFont(p)
		if err != nil {
			return err
		}
		r.faces = append(r.faces, &pdfFace{name: "f" + strconv.Itoa(i), file: f})
	}
	if err := r.prepare(); err != nil {
		return err
	}
	r.render()
	if err := pdf.Error(); err != nil {
		return fmt.Errorf("pdf: %w", err)
	}
	return pdf.Output(w)
}

// pdfFace is one font of the font set as fpdf knows it. A face with ext set
// has runes outside the BMP, drawn with ext: a copy of the font whose cmap maps
// private-use code points (ext.pua) to their glyphs.
type pdfFace struct {
	name  string
	file  *fontFile
	bytes []byte // the font given to fpdf; nil: file.data
	added bool
	pua   map[rune]rune // ext faces: rune → private-use code point
	ext   *pdfFace
}

type pdfDoc struct {
	pdf     *fpdf.Fpdf
	d       *Document
	faces   []*pdfFace
	repl    *pdfFace // the face that draws Replacement (nil: "?" in the first face)
	missing []rune   // runes of the document no face has, sorted
	table   []pdfCol // the table being written: its header is repeated on a new page
	tableSz float64  // the size of its header
	faceOf  map[rune]*pdfFace
}

// prepare finds, for the document's runes outside the BMP (and all the runes
// of a font without a BMP cmap, which fpdf cannot read), the face that has
// each and builds its private-use copy, and lists the runes no face has.
func (r *pdfDoc) prepare() error {
	r.faceOf = map[rune]*pdfFace{}
	text, err := r.d.Marshal()
	if err != nil {
		return err
	}
	all := string(text)
	if v := r.d.Void; v != nil {
		all += v.CreditNote + v.Reason
	}
	seen := map[rune]bool{}
	wide := map[*pdfFace][]rune{}
	for _, c := range all {
		c = printable(c)
		if seen[c] {
			continue
		}
		seen[c] = true
		f := r.find(c)
		switch {
		case f == nil:
			r.missing = append(r.missing, c)
		case c > 0xFFFF || !f.file.format4:
			wide[f] = append(wide[f], c)
		}
	}
	for _, f := range r.faces {
		runes := wide[f]
		if len(runes) == 0 {
			continue
		}
		slices.Sort(runes)
		if len(runes) > pdfMaxPUA { // the private-use area is full: the rest are replaced
			r.missing = append(r.missing, runes[pdfMaxPUA:]...)
			runes = runes[:pdfMaxPUA]
		}
		pua := make([]rune, len(runes))
		ext := &pdfFace{name: f.name + "x", file: f.file, pua: map[rune]rune{}}
		for i, c := range runes {
			pua[i] = 0xE000 + rune(i)
			ext.pua[c] = pua[i]
		}
		b, err := f.file.remapBMP(runes, pua)
		if err != nil {
			return fmt.Errorf("pdf font %s: %w", f.file.path, err)
		}
		ext.bytes = b
		f.ext = ext
	}
	slices.Sort(r.missing)
	if f := r.find(Replacement); f != nil {
		r.repl = f
	}
	return nil
}

// printable maps the characters that are not drawn to what is: tabs and line
// breaks to a space, other control characters to Replacement.
func printable(c rune) rune {
	switch {
	case c == '\t' || c == '\n' || c == '\r':
		return ' '
	case unicode.IsControl(c):
		return Replacement
	}
	return c
}

// find is the first face with a glyph for c, or nil.
func (r *pdfDoc) find(c rune) *pdfFace {
	for _, f := range r.faces {
		if f.file.has(c) {
			return f
		}
	}
	return nil
}

// glyph returns the face that draws c and the code point it draws, or nil
// when no face has c.
func (r *pdfDoc) glyph(c rune) (*pdfFace, rune) {
	f, ok := r.faceOf[c]
	if !ok {
		f = r.find(c)
		if f != nil && (c > 0xFFFF || !f.file.format4) {
			if f.ext == nil || f.ext.pua[c] == 0 {
				f = nil // not collected by prepare: cannot be drawn
			} else {
				f = f.ext
			}
		}
		r.faceOf[c] = f
	}
	if f == nil {
		return nil, 0
	}
	if f.pua != nil {
		return f, f.pua[c]
	}
	return f, c
}

// pdfRun is a stretch of text drawn in one face: draw is what fpdf draws,
// actual the text it stands for when they differ (private-use code points).
type pdfRun struct {
	face         *pdfFace
	draw, actual string
	width        int // 1/1000 em
}

// runs splits s by the face that draws each rune; runes no face has become
// Replacement (or "?" when no face has that either).
func (r *pdfDoc) runs(s string) []pdfRun {
	var out []pdfRun
	for _, c := range s {
		c = printable(c)
		f, d := r.glyph(c)
		src := c
		if f == nil {
			f, d, src = r.repl, Replacement, Replacement
			if f == nil {
				f, d, src = r.faces[0], '?', '?'
			}
		}
		w := f.file.width(src)
		if n := len(out); n > 0 && out[n-1].face == f {
			out[n-1].draw += string(d)
			if f.pua != nil {
				out[n-1].actual += string(c)
			}
			out[n-1].width += w
			continue
		}
		run := pdfRun{face: f, draw: string(d), width: w}
		if f.pua != nil {
			run.actual = string(c)
		}
		out = append(out, run)
	}
	return out
}

const ptMM = 25.4 / 72 // one point in mm

// pdfMaxPUA is how many runes a private-use copy of a font can map (U+E000–U+F8FF).
const pdfMaxPUA = 0xF900 - 0xE000

// width is s's width in mm at size points.
func (r *pdfDoc) width(s string, size float64) float64 {
	total := 0
	for _, c := range s {
		c = printable(c)
		f, _ := r.glyph(c)
		switch {
		case f != nil:
			total += f.file.width(c)
		case r.repl != nil:
			total += r.repl.file.width(Replacement)
		default:
			total += r.faces[0].file.width('?')
		}
	}
	return float64(total) * size / 1000 * ptMM
}

func (r *pdfDoc) use(f *pdfFace, size float64) {
	if !f.added {
		b := f.bytes
		if b == nil {
			b = f.file.data
		}
		r.pdf.AddUTF8FontFromBytes(f.name, "", b)
		f.added = true
	}
	// fpdf skips a SetFont that changes nothing; it also restores its own
	// font across page breaks, so no copy of its state is kept here.
	r.pdf.SetFont(f.name, "", size)
}

// text draws s with its left end at x and its baseline at y.
func (r *pdfDoc) text(x, y float64, s string, size float64) {
	for _, run := range r.runs(s) {
		r.use(run.face, size)
		if run.actual != "" {
			r.pdf.RawWriteStr("/Span <</ActualText <FEFF" + utf16Hex(run.actual) + ">>> BDC")
		}
		r.pdf.Text(x, y, run.draw)
		if run.actual != "" {
			r.pdf.RawWriteStr("EMC")
		}
		x += float64(run.width) * size / 1000 * ptMM
	}
}

func utf16Hex(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c > 0xFFFF {
			c -= 0x10000
			fmt.Fprintf(&b, "%04X%04X", 0xD800+(c>>10), 0xDC00+(c&0x3FF))
		} else {
			fmt.Fprintf(&b, "%04X", c)
		}
	}
	return b.String()
}

// cell is fpdf's CellFormat with the font set: a one-line cell of width w
// (0: to the right margin) and height h, the cursor moved as ln says.
func (r *pdfDoc) cell(w, h float64, s, border string, ln int, align string, size float64) {
	p := r.pdf
	x, y := p.GetXY()
	if w == 0 {
		pw, _ := p.GetPageSize()
		_, _, right, _ := p.GetMargins()
		w = pw - right - x
	}
	p.CellFormat(w, h, "", border, ln, "", false, 0, "")
	r.line(x, y, w, h, s, align, size)
}

// line draws s in the box (x, y, w, h), vertically centred, aligned as align says.
func (r *pdfDoc) line(x, y, w, h float64, s, align string, size float64) {
	if s == "" {
		return
	}
	m := r.pdf.GetCellMargin()
	tx := x + m
	switch align {
	case "R":
		tx = x + w - m - r.width(s, size)
	case "C":
		tx = x + (w-r.width(s, size))/2
	}
	r.text(tx, y+h/2+0.3*size*ptMM, s, size)
}

const (
	pdfLine    = 5.5 // row height, mm
	pdfWidth   = 180 // printable width, mm
	pdfMarginL = 15
	pdfMarginT = 15
	pdfBottom  = 297 - 15 // the lowest y content may reach, mm
	pdfMinID   = 5.0      // the smallest size an identifier is shrunk to, pt
)

// need starts a new page when h mm do not fit on this one, repeating the
// header of the table being written.
func (r *pdfDoc) need(h float64) {
	if r.pdf.GetY()+h <= pdfBottom {
		return
	}
	r.pdf.AddPage()
	if r.table != nil {
		r.header(r.table)
	}
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
	p.SetMargins(pdfMarginL, pdfMarginT, 15)
	p.SetAutoPageBreak(false, 15)
	p.AliasNbPages("{nb}")
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

// notShown names the characters of the document no face has (the first 50),
// so that a reader knows what each Replacement stands for.
func (r *pdfDoc) notShown() {
	if len(r.missing) == 0 {
		return
	}
	r.section("Characters not shown 无法显示的字符")
	var codes []string
	for i, c := range r.missing {
		if i == 50 {
			codes = append(codes, fmt.Sprintf("… (+%d)", len(r.missing)-50))
			break
		}
		codes = append(codes, fmt.Sprintf("U+%04X", c))
	}
	r.para(fmt.Sprintf("No font of this PDF has %d character(s) of the document; each is shown as %c: %s. "+
		"The document's data (JSON, CSV, XLSX) has them. 本 PDF 的字体缺少 %d 个字符，以 %c 代替；JSON、CSV、XLSX 导出包含原字符。",
		len(r.missing), Replacement, strings.Join(codes, ", "), len(r.missing), Replacement), 8.5)
}

func (r *pdfDoc) number() string {
	if r.d.Number == "" {
		return "DRAFT 草稿"
	}
	return r.d.Number
}

// pdfCol is a table column; an id column's text is shrunk to fit rather
// than wrapped (down to pdfMinID, then wrapped too).
type pdfCol struct {
	title string
	width float64
	align string
	id    bool
}

func (r *pdfDoc) section(title string) {
	r.pdf.Ln(4)
	r.need(7 + 2*pdfLine)
	r.cell(0, 7, title, "", 1, "L", 12)
}

// para writes a paragraph over the printable width, wrapped, breaking pages
// between lines.
func (r *pdfDoc) para(s string, size float64) {
	for _, l := range r.wrap(s, pdfWidth-2*r.pdf.GetCellMargin(), size) {
		r.need(4.5)
		r.cell(pdfWidth, 4.5, l, "", 1, "L", size)
	}
}

func (r *pdfDoc) begin(cols []pdfCol) {
	r.table = cols
	r.header(cols)
}

func (r *pdfDoc) end() { r.table = nil }

// header writes the column titles on two lines, English then Chinese (the
// title's last word), on a grey ground with a rule below.
func (r *pdfDoc) header(cols []pdfCol) {
	cells := make([]string, len(cols))
	for i, c := range cols {
		en, zh := c.title, ""
		if i := strings.LastIndexByte(c.title, ' '); i >= 0 {
			en, zh = c.title[:i], c.title[i+1:]
		}
		cells[i] = en + "\n" + zh
	}
	plain := make([]pdfCol, len(cols))
	for i, c := range cols {
		plain[i] = pdfCol{width: c.width, align: c.align}
	}
	h := r.rowHeight(plain, 7, cells)
	r.need(h + pdfLine)
	x, y := r.pdf.GetXY()
	r.pdf.SetFillColor(235, 235, 235)
	r.pdf.Rect(x, y, pdfWidth, h, "F")
	r.pdf.Line(x, y+h, x+pdfWidth, y+h)
	r.rowAt(plain, 7, cells, h)
}

// laid is a cell's text broken into lines at a size.
type laid struct {
	lines []string
	size  float64
}

// layout fits s into avail mm: as it is at size when it fits; an identifier
// shrunk (down to pdfMinID) to stay on one line; otherwise wrapped.
func (r *pdfDoc) layout(s string, avail, size float64, id bool) laid {
	if !strings.Contains(s, "\n") {
		w := r.width(s, size)
		if w <= avail {
			return laid{[]string{s}, size}
		}
		if id {
			shrunk := math.Floor(size*avail/w*10) / 10
			if shrunk >= pdfMinID && r.width(s, shrunk) <= avail {
				return laid{[]string{s}, shrunk}
			}
			size = pdfMinID
		}
	}
	return laid{r.wrap(s, avail, size), size}
}

// wrap breaks s into lines of at most avail mm at size: at spaces and line
// breaks, and inside a word that is wider than a line.
func (r *pdfDoc) wrap(s string, avail, size float64) []string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Split(para, " ") {
			try := word
			if line != "" {
				try = line + " " + word
			}
			if r.width(try, size) <= avail {
				line = try
				continue
			}
			if line != "" {
				out = append(out, line)
				line = ""
			}
			// The word alone: broken after the last '-', '.', '_', '/' or ':'
			// that fits, or else where it passes the width.
			for r.width(word, size) > avail {
				cut, soft, w := 0, 0, 0.0
				for i, c := range word {
					cw := r.width(string(c), size)
					if w+cw > avail && i > 0 {
						break
					}
					w += cw
					cut = i + utf8.RuneLen(c)
					if strings.ContainsRune("-._/:", c) && cut < len(word) {
						soft = cut
					}
				}
				if soft > 0 {
					cut = soft
				}
				out = append(out, word[:cut])
				word = word[cut:]
			}
			line = word
		}
		out = append(out, line)
	}
	return out
}

// lineHeight is the height of one line of a wrapped cell at size, mm.
func lineHeight(size float64) float64 { return size * ptMM * 1.25 }

func (r *pdfDoc) cells(cols []pdfCol, size float64, cells []string) []laid {
	m := r.pdf.GetCellMargin()
	out := make([]laid, len(cols))
	for i, c := range cols {
		out[i] = r.layout(cells[i], c.width-2*m, size, c.id)
	}
	return out
}

func (r *pdfDoc) rowHeight(cols []pdfCol, size float64, cells []string) float64 {
	h := pdfLine
	for _, l := range r.cells(cols, size, cells) {
		if lh := float64(len(l.lines))*lineHeight(l.size) + 1.5; len(l.lines) > 1 && lh > h {
			h = lh
		}
	}
	return h
}

// row writes one table row; a cell whose text does not fit is shrunk or
// wrapped (layout), the row as high as its tallest cell.
func (r *pdfDoc) row(cols []pdfCol, size float64, cells ...string) {
	h := r.rowHeight(cols, size, cells)
	r.need(h)
	r.rowAt(cols, size, cells, h)
}

func (r *pdfDoc) rowAt(cols []pdfCol, size float64, cells []string, h float64) {
	p := r.pdf
	x0, y0 := p.GetXY()
	x := x0
	for i, l := range r.cells(cols, size, cells) {
		c := cols[i]
		lh := lineHeight(l.size)
		if len(l.lines) == 1 {
			lh = h
		}
		top := y0 + (h-float64(len(l.lines))*lh)/2
		for j, s := range l.lines {
			r.line(x, top+float64(j)*lh, c.width, lh, s, c.align, l.size)
		}
		x += c.width
	}
	p.SetXY(x0, y0+h)
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
