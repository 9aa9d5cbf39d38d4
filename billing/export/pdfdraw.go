package export

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-pdf/fpdf"
)

// The drawing primitives of the PDFs (the invoice's, WritePDF, and the
// monthly review's, WritePDFReview): the font set drawn per rune, text
// measured, cells, paragraphs and tables that wrap and break pages.

// pdfDraw is a PDF being drawn with the font set.
type pdfDraw struct {
	pdf     *fpdf.Fpdf
	faces   []*pdfFace
	repl    *pdfFace // the face that draws Replacement (nil: "?" in the first face)
	missing []rune   // runes of the document no face has, sorted
	table   []pdfCol // the table being written: its header is repeated on a new page
	faceOf  map[rune]*pdfFace
	// pageW is the printable width and bottom the lowest y content may
	// reach, mm (the page's size less its margins).
	pageW, bottom float64
	// headText is what a column's title is drawn as in a table header
	// (nil: the title itself, wrapped as a cell).
	headText func(title string) string
}

// newPDFDraw starts an A4 PDF in orientation ("P" or "L") with the font set
// of opt, dated stamp (so that the same content gives the same bytes), with
// 15 mm margins.
func newPDFDraw(orientation string, opt PDFOptions, stamp time.Time) (*pdfDraw, error) {
	paths, err := opt.FindFonts()
	if err != nil && opt.FontPath == "" {
		return nil, err
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
	pdf := fpdf.New(orientation, "mm", "A4", "")
	pdf.SetCatalogSort(true)
	pdf.SetCreationDate(stamp)
	pdf.SetModificationDate(stamp)
	pdf.SetProducer("cardhour", false)
	pdf.SetCreator("cardhour", false)
	pw, ph := pdf.GetPageSize()
	r := &pdfDraw{pdf: pdf, pageW: pw - pdfMarginL - pdfMarginR, bottom: ph - pdfMarginB}
	for i, p := range paths {
		f, err := loadFont(p)
		if err != nil {
			return nil, err
		}
		r.faces = append(r.faces, &pdfFace{name: "f" + strconv.Itoa(i), file: f})
	}
	pdf.SetMargins(pdfMarginL, pdfMarginT, pdfMarginR)
	pdf.SetAutoPageBreak(false, pdfMarginB)
	pdf.AliasNbPages("{nb}")
	return r, nil
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

// prepare finds, for the document's runes outside the BMP (and all the runes
// of a font without a BMP cmap, which fpdf cannot read), the face that has
// each and builds its private-use copy, and lists the runes no face has.
// all is every text the document draws (it may hold more).
func (r *pdfDraw) prepare(all string) error {
	r.faceOf = map[rune]*pdfFace{}
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
func (r *pdfDraw) find(c rune) *pdfFace {
	for _, f := range r.faces {
		if f.file.has(c) {
			return f
		}
	}
	return nil
}

// glyph returns the face that draws c and the code point it draws, or nil
// when no face has c.
func (r *pdfDraw) glyph(c rune) (*pdfFace, rune) {
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
func (r *pdfDraw) runs(s string) []pdfRun {
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
func (r *pdfDraw) width(s string, size float64) float64 {
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

func (r *pdfDraw) use(f *pdfFace, size float64) {
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
func (r *pdfDraw) text(x, y float64, s string, size float64) {
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
func (r *pdfDraw) cell(w, h float64, s, border string, ln int, align string, size float64) {
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
func (r *pdfDraw) line(x, y, w, h float64, s, align string, size float64) {
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
	pdfWidth   = 180 // the invoice's printable width (portrait), mm
	pdfMarginL = 15
	pdfMarginT = 15
	pdfMarginR = 15
	pdfMarginB = 15
	pdfMinID   = 5.0 // the smallest size an identifier is shrunk to, pt
)

// need starts a new page when h mm do not fit on this one, repeating the
// header of the table being written.
func (r *pdfDraw) need(h float64) {
	if r.pdf.GetY()+h <= r.bottom {
		return
	}
	r.pdf.AddPage()
	if r.table != nil {
		r.header(r.table)
	}
}

// notShown names the characters of the document no face has (the first 50),
// so that a reader knows what each Replacement stands for.
func (r *pdfDraw) notShown() {
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

// pdfCol is a table column; an id column's text is shrunk to fit rather
// than wrapped (down to pdfMinID, then wrapped too).
type pdfCol struct {
	title string
	width float64
	align string
	id    bool
}

func (r *pdfDraw) section(title string) {
	r.pdf.Ln(4)
	r.need(7 + 2*pdfLine)
	r.cell(0, 7, title, "", 1, "L", 12)
}

// para writes a paragraph over the printable width, wrapped, breaking pages
// between lines.
func (r *pdfDraw) para(s string, size float64) {
	for _, l := range r.wrap(s, r.pageW-2*r.pdf.GetCellMargin(), size) {
		r.need(4.5)
		r.cell(r.pageW, 4.5, l, "", 1, "L", size)
	}
}

func (r *pdfDraw) begin(cols []pdfCol) {
	r.table = cols
	r.header(cols)
}

func (r *pdfDraw) end() { r.table = nil }

// header writes the column titles (as headText draws them) on a grey ground
// with a rule below.
func (r *pdfDraw) header(cols []pdfCol) {
	cells := make([]string, len(cols))
	for i, c := range cols {
		cells[i] = c.title
		if r.headText != nil {
			cells[i] = r.headText(c.title)
		}
	}
	plain := make([]pdfCol, len(cols))
	for i, c := range cols {
		plain[i] = pdfCol{width: c.width, align: c.align}
	}
	h := r.rowHeight(plain, 7, cells)
	r.need(h + pdfLine)
	x, y := r.pdf.GetXY()
	r.pdf.SetFillColor(235, 235, 235)
	r.pdf.Rect(x, y, r.pageW, h, "F")
	r.pdf.Line(x, y+h, x+r.pageW, y+h)
	r.rowAt(plain, 7, cells, h)
}

// laid is a cell's text broken into lines at a size.
type laid struct {
	lines []string
	size  float64
}

// layout fits s into avail mm: as it is at size when it fits; an identifier
// shrunk (down to pdfMinID) to stay on one line; otherwise wrapped.
func (r *pdfDraw) layout(s string, avail, size float64, id bool) laid {
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

// wrap breaks s into lines of at most avail mm at size: at line breaks, at
// spaces, between CJK characters (Chinese breaks per character, Latin per
// word; see wrapUnits), and inside a word that is wider than a line.
func (r *pdfDraw) wrap(s string, avail, size float64) []string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Split(para, " ") {
			for k, unit := range wrapUnits(word) {
				try := unit
				switch {
				case line != "" && k == 0:
					try = line + " " + unit
				case line != "":
					try = line + unit
				}
				if r.width(try, size) <= avail {
					line = try
					continue
				}
				if line != "" {
					out = append(out, line)
				}
				var full []string
				full, line = r.breakWord(unit, avail, size)
				out = append(out, full...)
			}
		}
		out = append(out, line)
	}
	return out
}

// breakWord breaks a word wider than avail mm into full lines, each broken
// after the last '-', '.', '_', '/' or ':' that fits or else where it passes
// the width, and the rest.
func (r *pdfDraw) breakWord(word string, avail, size float64) (full []string, rest string) {
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
		full = append(full, word[:cut])
		word = word[cut:]
	}
	return full, word
}

// wrapUnits splits a word (no spaces) into the pieces a line may break
// between: a line may break before and after every CJK character, except
// before closing punctuation (，。）…) and after opening punctuation (（「…);
// a run of other characters stays whole. A word of at most wrapShort
// characters (a column title such as 显存 or 空闲小时) stays whole too. "" is
// one empty piece.
func wrapUnits(word string) []string {
	if utf8.RuneCountInString(word) <= wrapShort {
		return []string{word}
	}
	var out []string
	cur, prev := "", rune(0)
	for _, c := range word {
		if cur != "" && (isCJK(c) || isCJK(prev)) && !strings.ContainsRune(noLineStart, c) && !strings.ContainsRune(noLineEnd, prev) {
			out = append(out, cur)
			cur = ""
		}
		cur += string(c)
		prev = c
	}
	return append(out, cur)
}

// wrapShort is the length of the longest word wrapUnits keeps whole.
const wrapShort = 4

// The punctuation a line does not start with, and does not end with.
const (
	noLineStart = "，。、；：！？）】」』》〉”’,.;:!?)]}%"
	noLineEnd   = "（【「『《〈“‘([{"
)

// isCJK reports whether c is a CJK character a line may break around: an
// ideograph, kana, hangul, or CJK or full-width punctuation.
func isCJK(c rune) bool {
	return unicode.In(c, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) ||
		(c >= 0x3000 && c <= 0x303F) || (c >= 0xFF00 && c <= 0xFFEF)
}

// lineHeight is the height of one line of a wrapped cell at size, mm.
func lineHeight(size float64) float64 { return size * ptMM * 1.25 }

func (r *pdfDraw) cells(cols []pdfCol, size float64, cells []string) []laid {
	m := r.pdf.GetCellMargin()
	out := make([]laid, len(cols))
	for i, c := range cols {
		out[i] = r.layout(cells[i], c.width-2*m, size, c.id)
	}
	return out
}

func (r *pdfDraw) rowHeight(cols []pdfCol, size float64, cells []string) float64 {
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
func (r *pdfDraw) row(cols []pdfCol, size float64, cells ...string) {
	h := r.rowHeight(cols, size, cells)
	r.need(h)
	r.rowAt(cols, size, cells, h)
}

func (r *pdfDraw) rowAt(cols []pdfCol, size float64, cells []string, h float64) {
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
