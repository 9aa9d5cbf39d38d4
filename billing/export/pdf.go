package export

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-pdf/fpdf"

	"github.com/cardhour/cardhour/billing"
)

// PDFOptions configures WritePDF.
type PDFOptions struct {
	// FontPath is a TrueType font (.ttf; not a .ttc collection) with Chinese and
	// Latin glyphs. Empty: the first of DefaultFontPaths that exists.
	FontPath string
}

// FontPackage is the Debian package that provides the default font.
const FontPackage = "fonts-droid-fallback"

// DefaultFontPaths are where Debian and Ubuntu install a TrueType font with
// Chinese glyphs, in the order WritePDF looks for one.
var DefaultFontPaths = []string{
	"/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf", // fonts-droid-fallback
	"/usr/share/fonts/truetype/droid/DroidSansFallback.ttf",
}

// ErrNoFont is returned (wrapped) when no font is given and none of
// DefaultFontPaths exists.
var ErrNoFont = errors.New("no TrueType font with Chinese glyphs found")

// FindFont returns opt.FontPath when set and readable, or the first of
// DefaultFontPaths that exists; the error names the package to install.
func (opt PDFOptions) FindFont() (string, error) {
	if opt.FontPath != "" {
		if _, err := os.Stat(opt.FontPath); err != nil {
			return "", fmt.Errorf("pdf font: %w", err)
		}
		return opt.FontPath, nil
	}
	for _, p := range DefaultFontPaths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("pdf font: %w (looked in %s): install the Debian package %s "+
		"(apt-get install -y %s) or give a .ttf font with Chinese glyphs", ErrNoFont,
		strings.Join(DefaultFontPaths, ", "), FontPackage, FontPackage)
}

const pdfFont = "cjk"

// WritePDF renders the document as an A4 invoice (or, for a statement, a
// statement) with bilingual labels: header, lines, student subtotals, unpriced
// usage, total and warnings. The PDF's creation date is the document's issue
// date (its generation time in drafts), so the same document gives the same bytes.
func WritePDF(w io.Writer, d *Document, opt PDFOptions) error {
	if d == nil {
		return errors.New("export: the document is nil")
	}
	path, err := opt.FindFont()
	if err != nil {
		return err
	}
	font, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("pdf font: %w", err)
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
	pdf.AddUTF8FontFromBytes(pdfFont, "", font)
	if err := pdf.Error(); err != nil {
		return fmt.Errorf("pdf font %s: %w", path, err)
	}
	r := &pdfDoc{pdf: pdf, d: d}
	r.render()
	if err := pdf.Error(); err != nil {
		return fmt.Errorf("pdf: %w", err)
	}
	return pdf.Output(w)
}

type pdfDoc struct {
	pdf *fpdf.Fpdf
	d   *Document
}

const (
	pdfLine    = 5.5 // row height, mm
	pdfWidth   = 180 // printable width, mm
	pdfMarginL = 15
)

func (r *pdfDoc) title() string {
	if r.d.User != "" {
		return "Statement 对账单"
	}
	return "Invoice 账单"
}

func (r *pdfDoc) render() {
	p, d := r.pdf, r.d
	p.SetMargins(pdfMarginL, 15, 15)
	p.SetAutoPageBreak(true, 15)
	p.AliasNbPages("{nb}")
	p.SetFooterFunc(func() {
		p.SetY(-12)
		p.SetFont(pdfFont, "", 8)
		p.CellFormat(0, 5, fmt.Sprintf("%s %s · %s · %d/{nb}", d.Project, d.Period, r.number(), p.PageNo()),
			"", 0, "C", false, 0, "")
	})
	p.AddPage()
	p.SetFont(pdfFont, "", 18)
	p.CellFormat(0, 10, r.title(), "", 1, "L", false, 0, "")
	p.SetFont(pdfFont, "", 10)

	issued := "—"
	if d.IssuedAt != nil {
		issued = d.IssuedAt.Format(time.RFC3339)
	}
	project := d.Project
	if d.Name != "" {
		project += " — " + d.Name
	}
	fields := [][2]string{
		{"Invoice number 发票号", r.number()},
		{"Issued at 开具日期", issued},
		{"Period 账期", d.Period + " (" + d.Timezone + ")"},
		{"Project 项目", project},
		{"Funding 经费来源", orNone(d.Funding)},
	}
	if d.User != "" {
		who := d.User
		if n := d.StudentName(d.User); n != "" {
			who += " — " + n
		}
		fields = append(fields, [2]string{"Student 学生", who})
	}
	fields = append(fields,
		[2]string{"Currency 币种", d.Currency},
		[2]string{"Catalog version 价目表版本", strconv.FormatInt(d.CatalogVersion, 10)},
		[2]string{"Data cut-off 数据截止", d.DataCutoff.Format(time.RFC3339)},
		[2]string{"Generated at 生成时间", d.GeneratedAt.Format(time.RFC3339)},
	)
	for _, f := range fields {
		p.CellFormat(70, pdfLine, f[0], "", 0, "L", false, 0, "")
		p.CellFormat(pdfWidth-70, pdfLine, r.fit(f[1], pdfWidth-70), "", 1, "L", false, 0, "")
	}

	r.section("Lines 明细")
	cols := []pdfCol{{"User 学号", 22, "L"}, {"Name 姓名", 26, "L"}, {"SKU 规格", 16, "L"}, {"Sessions 会话数", 22, "R"},
		{"Billed h 计费小时", 20, "R"}, {"Idle h 空闲小时", 16, "R"}, {"Unit price 单价", 30, "R"}, {"Amount 金额", 28, "R"}}
	r.header(cols)
	names := d.studentNames()
	for _, l := range d.Lines {
		if l.Kind == billing.KindUsage {
			r.row(cols, l.User, names[l.User], l.SKU, strconv.Itoa(l.Sessions),
				hoursOf(l.BilledSeconds), hoursOf(l.IdleMS/1000), billing.FormatPrice(l.UnitPrice)+"/h", billing.FormatMoney(l.Amount))
		} else {
			r.row(cols, "(预留)", l.Term+"/"+l.Billing, l.SKU, "×"+strconv.FormatInt(l.Quantity, 10), "", "",
				billing.FormatPrice(l.UnitPrice)+"/mo", billing.FormatMoney(l.Amount))
		}
	}
	if len(d.Lines) == 0 {
		r.row(cols, "none 无", "", "", "", "", "", "", "")
	}

	if len(d.Students) > 0 {
		r.section("Students 学生小计")
		sc := []pdfCol{{"User 学号", 50, "L"}, {"Name 姓名", 60, "L"}, {"Sessions 会话数", 30, "R"}, {"Subtotal 小计", 40, "R"}}
		r.header(sc)
		for _, st := range d.Students {
			r.row(sc, st.User, st.Name, strconv.Itoa(st.Sessions), billing.FormatMoney(st.Total))
		}
	}

	if len(d.Unpriced) > 0 {
		r.section("Unpriced usage 未计价用量")
		uc := []pdfCol{{"User 学号", 40, "L"}, {"GPU / profile 型号/规格", 80, "L"}, {"Sessions 会话数", 25, "R"}, {"Used h 使用小时", 35, "R"}}
		r.header(uc)
		for _, u := range d.Unpriced {
			r.row(uc, u.User, u.GPUModel+" / "+u.Profile, strconv.Itoa(u.Sessions), hoursOf(u.UsedMS/1000))
		}
	}

	p.Ln(3)
	p.SetFont(pdfFont, "", 13)
	p.CellFormat(pdfWidth-50, 8, "Total 合计 ("+d.Currency+")", "T", 0, "L", false, 0, "")
	p.CellFormat(50, 8, billing.FormatMoney(d.Total), "T", 1, "R", false, 0, "")
	p.SetFont(pdfFont, "", 10)

	if len(d.Releases) > 0 {
		r.section("Idle releases 空闲释放")
		p.SetFont(pdfFont, "", 8.5)
		for _, rl := range d.Releases {
			who := rl.InstanceID
			if rl.Node != "" {
				who += " on " + rl.Node
			}
			if rl.User != "" {
				who = rl.User + ": " + who
			}
			since, at := rl.IdleSince.Format("2006-01-02 15:04"), rl.At.Format("2006-01-02 15:04")
			line := fmt.Sprintf("• %s, idle since %s, released %s: %s (已释放)", who, since, at, rl.Action)
			if rl.Status == ReleaseFailed {
				line = fmt.Sprintf("• %s, idle since %s, release failed %s: %s; it stayed held and its idle time is billed (释放失败，空闲时间照常计费)",
					who, since, at, rl.Failure)
			}
			p.MultiCell(pdfWidth, 4.5, line, "", "L", false)
		}
		p.SetFont(pdfFont, "", 10)
	}

	if len(d.Warnings) > 0 {
		r.section("Warnings 警告")
		p.SetFont(pdfFont, "", 8.5)
		for _, wn := range d.Warnings {
			p.MultiCell(pdfWidth, 4.5, "• "+wn.Message, "", "L", false)
		}
		p.SetFont(pdfFont, "", 10)
	}
}

func (r *pdfDoc) number() string {
	if r.d.Number == "" {
		return "DRAFT 草稿"
	}
	return r.d.Number
}

type pdfCol struct {
	title string
	width float64
	align string
}

func (r *pdfDoc) section(title string) {
	r.pdf.Ln(4)
	r.pdf.SetFont(pdfFont, "", 12)
	r.pdf.CellFormat(0, 7, title, "", 1, "L", false, 0, "")
	r.pdf.SetFont(pdfFont, "", 10)
}

// header writes the column titles on two lines: English, then Chinese (the
// title's last word).
func (r *pdfDoc) header(cols []pdfCol) {
	r.pdf.SetFont(pdfFont, "", 7)
	r.pdf.SetFillColor(235, 235, 235)
	for line := range 2 {
		border := ""
		if line == 1 {
			border = "B"
		}
		for _, c := range cols {
			en, zh := c.title, ""
			if i := strings.LastIndexByte(c.title, ' '); i >= 0 {
				en, zh = c.title[:i], c.title[i+1:]
			}
			text := en
			if line == 1 {
				text = zh
			}
			r.pdf.CellFormat(c.width, 4.5, r.fit(text, c.width), border, 0, c.align, true, 0, "")
		}
		r.pdf.Ln(-1)
	}
	r.pdf.SetFont(pdfFont, "", 8)
}

func (r *pdfDoc) row(cols []pdfCol, cells ...string) {
	for i, c := range cols {
		r.pdf.CellFormat(c.width, pdfLine, r.fit(cells[i], c.width), "", 0, c.align, false, 0, "")
	}
	r.pdf.Ln(-1)
}

// fit shortens s with an ellipsis to the cell width (minus padding).
func (r *pdfDoc) fit(s string, width float64) string {
	limit := width - 2
	if r.pdf.GetStringWidth(s) <= limit {
		return s
	}
	rs := []rune(s)
	for len(rs) > 0 && r.pdf.GetStringWidth(string(rs)+"…") > limit {
		rs = rs[:len(rs)-1]
	}
	return string(rs) + "…"
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
