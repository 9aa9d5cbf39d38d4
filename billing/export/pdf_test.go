package export

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/stretchr/testify/require"
)

// needPDFTools returns the font set's paths, or skips the test loudly when
// pdftotext, pdftoppm or a font is missing; under CI=true it fails instead, so
// CI cannot pass by skipping. deployments/testenv/services.sh up installs them
// when run as root.
func needPDFTools(t *testing.T) []string {
	t.Helper()
	var missing []string
	for _, tool := range []string{"pdftotext", "pdftoppm", "pdffonts"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (Debian package poppler-utils)")
		}
	}
	fonts, err := PDFOptions{}.FindFonts()
	if err != nil {
		missing = append(missing, err.Error())
	}
	if len(missing) == 0 {
		return fonts
	}
	msg := "PDF test needs " + strings.Join(missing, " and ") +
		": apt-get install -y poppler-utils " + strings.Join(FontPackages(), " ") + " (deployments/testenv/services.sh up does it as root)"
	switch strings.ToLower(os.Getenv("CI")) {
	case "true", "1", "yes":
		t.Fatal("FAILED under CI=true: " + msg)
	}
	t.Skip("SKIPPED: " + msg)
	return nil
}

func pdfText(t *testing.T, pdf []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "invoice.pdf")
	require.NoError(t, os.WriteFile(path, pdf, 0o644))
	out, err := exec.Command("pdftotext", "-layout", "-enc", "UTF-8", path, "-").Output()
	require.NoError(t, err)
	return string(out)
}

func stampedLab(t *testing.T) *Document {
	t.Helper()
	lab := docByProject(t, fixtureDocs(t), "lab")
	draft, err := lab.Marshal()
	require.NoError(t, err)
	final, err := Stamp(draft, "2026-000042", fixtureMeta.GeneratedAt)
	require.NoError(t, err)
	d, err := Parse(final)
	require.NoError(t, err)
	return d
}

func TestPDFInvoiceText(t *testing.T) {
	fonts := needPDFTools(t)
	d := stampedLab(t)
	pdf := writePDF(t, d, PDFOptions{FontPath: fonts[0]})
	text := pdfText(t, pdf)
	for _, want := range []string{
		"Invoice 账单", "发票号", "2026-000042", "2026-11", "Lab 课题组", "F-1", "经费来源",
		"Alice 李", "Bob 王", "alice", "carol", "a3g", "5.125/h", "1.76", "855.00", "0.20",
		"合计", "859.21", "CNY", "未计价", "NVIDIA L40S", "警告", "同一 GPU 实例",
	} {
		require.Contains(t, text, want)
	}
	golden(t, "invoice-lab.pdf.txt", []byte(text))

	again := writePDF(t, d, PDFOptions{})
	require.Equal(t, pdf, again, "the same document gives the same bytes")
}

func TestPDFStatementText(t *testing.T) {
	needPDFTools(t)
	st := stampedLab(t).Statement("bob")
	text := pdfText(t, writePDF(t, st, PDFOptions{}))
	require.Contains(t, text, "Statement 对账单")
	require.Contains(t, text, "Bob 王")
	require.Contains(t, text, billing.FormatMoney(st.Total))
	for _, other := range []string{"alice", "Alice", "carol", "dave", "855.00"} {
		require.NotContains(t, text, other)
	}
}

func TestPDFDraftSaysDraft(t *testing.T) {
	needPDFTools(t)
	require.Contains(t, pdfText(t, writePDF(t, docByProject(t, fixtureDocs(t), "other"), PDFOptions{})), "DRAFT 草稿")
}

func TestPDFMissingFontNamesThePackage(t *testing.T) {
	d := docByProject(t, fixtureDocs(t), "lab")
	err := WritePDF(&bytes.Buffer{}, d, PDFOptions{FontPath: filepath.Join(t.TempDir(), "none.ttf")})
	require.Error(t, err)

	saved := DefaultFonts
	t.Cleanup(func() { DefaultFonts = saved })
	DefaultFonts = append([]FontRole(nil), saved...)
	DefaultFonts[2] = FontRole{Role: "CJK Extension B", Package: "fonts-hanazono",
		Paths: []string{filepath.Join(t.TempDir(), "missing.ttf")}}
	err = WritePDF(&bytes.Buffer{}, d, PDFOptions{})
	require.True(t, errors.Is(err, ErrNoFont))
	require.ErrorContains(t, err, "fonts-hanazono")
	require.ErrorContains(t, err, "missing.ttf")

	// A collection or a CFF font is refused with what to give instead.
	for _, bad := range []string{"/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"} {
		if _, serr := os.Stat(bad); serr == nil {
			err = WritePDF(&bytes.Buffer{}, d, PDFOptions{FontPath: bad})
			require.ErrorContains(t, err, ".ttc")
		}
	}
}

// Every export of a stored invoice is a function of its bytes: two documents
// parsed from the same bytes render byte-identical files in every format.
func TestExportsOfStoredBytesAreIdentical(t *testing.T) {
	needPDFTools(t)
	lab := docByProject(t, fixtureDocs(t), "lab")
	draft, err := lab.Marshal()
	require.NoError(t, err)
	stored, err := Stamp(draft, "2026-000042", fixtureMeta.GeneratedAt)
	require.NoError(t, err)
	render := func() [4][]byte {
		d, err := Parse(stored)
		require.NoError(t, err)
		var out [4]bytes.Buffer
		require.NoError(t, WriteJSON(&out[0], d))
		require.NoError(t, WriteCSV(&out[1], d))
		require.NoError(t, WriteXLSX(&out[2], d))
		out[3].Write(writePDF(t, d, PDFOptions{}))
		return [4][]byte{out[0].Bytes(), out[1].Bytes(), out[2].Bytes(), out[3].Bytes()}
	}
	a, b := render(), render()
	for i, name := range []string{"json", "csv", "xlsx", "pdf"} {
		require.Equal(t, a[i], b[i], name)
	}
	require.Equal(t, stored, a[0])
}

// pdfPage renders page (1-based) of a PDF with pdftoppm at dpi, in grey.
func pdfPage(t *testing.T, pdf []byte, page, dpi int) *image.Gray {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "doc.pdf")
	require.NoError(t, os.WriteFile(path, pdf, 0o644))
	n := strconv.Itoa(page)
	out, err := exec.Command("pdftoppm", "-r", strconv.Itoa(dpi), "-gray", "-png", "-f", n, "-l", n, "-singlefile",
		path, filepath.Join(dir, "page")).CombinedOutput()
	require.NoError(t, err, string(out))
	f, err := os.Open(filepath.Join(dir, "page.png"))
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	g := image.NewGray(img.Bounds())
	draw.Draw(g, g.Bounds(), img, img.Bounds().Min, draw.Src)
	return g
}

// goldenPNGDiff is the fraction of pixels of two renderings whose grey levels
// differ by more than 64 of 255 (anti-aliasing differs a little between
// poppler versions; an empty box instead of a digit differs a lot).
func goldenPNGDiff(a, b *image.Gray) float64 {
	if a.Bounds() != b.Bounds() {
		return 1
	}
	diff := 0
	for i := range a.Pix {
		if d := int(a.Pix[i]) - int(b.Pix[i]); d > 64 || d < -64 {
			diff++
		}
	}
	return float64(diff) / float64(len(a.Pix))
}

// updateGolden reports whether golden images are to be rewritten: -update or
// CARDHOUR_UPDATE_GOLDEN=1.
func updateGolden() bool { return *update || os.Getenv("CARDHOUR_UPDATE_GOLDEN") == "1" }

// The finalized golden invoice, rendered by poppler as a person sees it, is
// the stored image within a tolerance. Regenerate testdata/invoice-lab.png after
// an intended change with CARDHOUR_UPDATE_GOLDEN=1 go test -run TestPDFGoldenImage
// ./billing/export/, and look at it.
func TestPDFGoldenImage(t *testing.T) {
	needPDFTools(t)
	goldenImage(t, writePDF(t, stampedLab(t), PDFOptions{}), "invoice-lab.png")
}

// goldenImage compares page 1 of pdf, rendered at 60 dpi, with the image
// testdata/name (rewritten under updateGolden).
func goldenImage(t *testing.T, pdf []byte, name string) {
	t.Helper()
	got := pdfPage(t, pdf, 1, 60)
	path := filepath.Join("testdata", name)
	if updateGolden() {
		var buf bytes.Buffer
		require.NoError(t, png.Encode(&buf, got))
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	f, err := os.Open(path)
	require.NoError(t, err, "CARDHOUR_UPDATE_GOLDEN=1 go test -run "+t.Name()+" ./billing/export/ creates it")
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	want := image.NewGray(img.Bounds())
	draw.Draw(want, want.Bounds(), img, img.Bounds().Min, draw.Src)
	diff := goldenPNGDiff(got, want)
	if diff > 0.002 {
		out := filepath.Join(t.TempDir(), "got.png")
		var buf bytes.Buffer
		require.NoError(t, png.Encode(&buf, got))
		require.NoError(t, os.WriteFile(out, buf.Bytes(), 0o644))
		t.Fatalf("page 1 differs from %s in %.2f%% of its pixels (tolerance 0.2%%); the rendering is %s", path, 100*diff, out)
	}
}

// pdfPages is the text of each page (pdftotext separates pages by form feeds).
func pdfPages(t *testing.T, pdf []byte, mode string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "doc.pdf")
	require.NoError(t, os.WriteFile(path, pdf, 0o644))
	out, err := exec.Command("pdftotext", mode, "-enc", "UTF-8", path, "-").Output()
	require.NoError(t, err)
	pages := strings.Split(string(out), "\f")
	if len(pages) > 0 && strings.TrimSpace(pages[len(pages)-1]) == "" {
		pages = pages[:len(pages)-1]
	}
	return pages
}

// longIDs is the stamped lab invoice with identifiers that the old table cut
// ("202211…", "a10…"): two students and two SKUs that differ only at the end,
// an identifier longer than its column at any legible size, and long names.
func longIDs(t *testing.T) (*Document, []string) {
	t.Helper()
	d := stampedLab(t)
	ids := []string{"2022110801234567", "2022110801234568", "a100-1g.10gb-interactive", "a100-1g.10gb-interactivf"}
	huge := "student-with-an-extremely-long-identifier-0123456789-abcdefghijklmnop"
	tmpl := d.Lines[0]
	d.Lines = []Line{}
	for _, u := range []string{ids[0], ids[1], huge} {
		for _, sku := range ids[2:] {
			l := tmpl
			l.User, l.SKU = u, sku
			d.Lines = append(d.Lines, l)
		}
	}
	res := tmpl
	res.Kind, res.User, res.SKU, res.Term, res.Billing, res.Quantity = billing.KindReservation, "", ids[2], "quarter", "monthly", 1
	d.Lines = append(d.Lines, res)
	d.Students = studentTotals(d.Lines, nil)
	d.SetNames(map[string]string{ids[0]: "Maximilian Alexander von Hohenzollern-Sigmaringen 李",
		ids[1]: "欧阳 诸葛 司马 上官 长名字的同学 第二行"})
	d.Unpriced = []Unpriced{}
	d.normalize()
	return d, append(ids, huge)
}

// Full student and SKU IDs always: the shrinkable ones whole on their line,
// the one too long for its column wrapped inside it (its pieces follow each
// other in reading order); long names wrap; nothing is cut with an ellipsis.
func TestPDFFullIdentifiers(t *testing.T) {
	needPDFTools(t)
	d, ids := longIDs(t)
	pdf := writePDF(t, d, PDFOptions{})
	layout := strings.Join(pdfPages(t, pdf, "-layout"), "\n")
	for _, id := range ids[:4] {
		require.Contains(t, layout, id)
	}
	require.Contains(t, layout, "quarter/monthly")
	require.NotContains(t, layout, "…")
	raw := strings.ReplaceAll(strings.Join(pdfPages(t, pdf, "-raw"), ""), "\n", "")
	require.Contains(t, raw, ids[4])
	for _, word := range []string{"Maximilian", "Alexander", "Hohenzollern-Sigmaringen", "李", "长名字的同学", "第二行"} {
		require.Contains(t, layout, word)
	}
	// The students table too.
	require.Equal(t, 3, strings.Count(layout, ids[0]), "in its two lines and in the students table")
}

// A name outside the BMP (𠮷田) is drawn with the CJK Extension B font and
// extracts as itself; an emoji a font has (😀) is drawn; one that no font has
// (🫠) and control characters are replaced by U+FFFD and listed on the page;
// nothing fails or panics, in the names, the IDs or the warnings.
func TestPDFRunesOutsideTheBMP(t *testing.T) {
	fonts := needPDFTools(t)
	const absent = '\U0001FAE0' // melting face, Unicode 14
	for _, p := range fonts {
		f, err := loadFont(p)
		require.NoError(t, err)
		require.False(t, f.has(absent), "%s has U+1FAE0: pick another rune for the test", p)
	}
	d := stampedLab(t)
	d.Lines[0].User = "yoshida-\U0001FAE0"
	d.Warnings = append(d.Warnings, Warning{Code: "input", Message: "odd input: \x01 \U000E0001 \U0010FFFD 𠀋𡈽 end"})
	d.Students = studentTotals(d.Lines, d.Unpriced)
	d.SetNames(map[string]string{"yoshida-\U0001FAE0": "𠮷田 花子", "bob": "Bob 😀 王"})
	pdf := writePDF(t, d, PDFOptions{})
	text := strings.Join(pdfPages(t, pdf, "-layout"), "\n")
	require.Contains(t, text, "𠮷田 花子")
	require.Contains(t, text, "𠀋𡈽")
	require.Contains(t, text, "Bob 😀 王")
	require.Contains(t, text, "yoshida-\uFFFD")
	require.Contains(t, text, "Characters not shown 无法显示的字符")
	require.Contains(t, text, "U+1FAE0")
	require.Contains(t, text, "U+10FFFD")
	require.NotContains(t, text, "U+20BB7", "𠮷 is drawn, not replaced")

	// A statement for a user ID with an emoji.
	st := d.Statement("yoshida-\U0001FAE0")
	require.Contains(t, strings.Join(pdfPages(t, writePDF(t, st, PDFOptions{}), "-layout"), "\n"), "yoshida-\uFFFD")
}

// manyLines is a document long enough for several pages.
func manyLines(d *Document, n int) {
	tmpl := d.Lines[0]
	for i := range n {
		l := tmpl
		l.User = fmt.Sprintf("2026%06d", i)
		d.Lines = append(d.Lines, l)
	}
	d.Students = studentTotals(d.Lines, d.Unpriced)
	d.normalize()
}

// watermarkPixels counts the pixels of a page in the watermark's pink (red
// well above green and blue): none on an unmarked page.
func watermarkPixels(t *testing.T, pdf []byte, page int) int {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "doc.pdf")
	require.NoError(t, os.WriteFile(path, pdf, 0o644))
	n := strconv.Itoa(page)
	out, err := exec.Command("pdftoppm", "-r", "30", "-png", "-f", n, "-l", n, "-singlefile", path,
		filepath.Join(dir, "page")).CombinedOutput()
	require.NoError(t, err, string(out))
	f, err := os.Open(filepath.Join(dir, "page.png"))
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	count := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 > 200 && int(r>>8)-int(g>>8) > 25 && int(r>>8)-int(bl>>8) > 25 {
				count++
			}
		}
	}
	return count
}

// A draft carries 草稿 DRAFT on every page, as its header line and as a
// diagonal watermark; a finalized invoice carries neither.
func TestPDFDraftMarkedOnEveryPage(t *testing.T) {
	needPDFTools(t)
	d := docByProject(t, fixtureDocs(t), "lab")
	require.True(t, d.IsDraft())
	manyLines(d, 120)
	pdf := writePDF(t, d, PDFOptions{})
	pages := pdfPages(t, pdf, "-layout")
	require.GreaterOrEqual(t, len(pages), 3)
	for i, p := range pages {
		require.Contains(t, p, "草稿 DRAFT — not a valid invoice until it is finalized", "page %d", i+1)
		require.Contains(t, p, "DRAFT 草稿", "page %d footer", i+1)
		require.Greater(t, watermarkPixels(t, pdf, i+1), 300, "page %d watermark", i+1)
	}
	final := stampedLab(t)
	manyLines(final, 120)
	fpdf := writePDF(t, final, PDFOptions{})
	for i, p := range pdfPages(t, fpdf, "-layout") {
		require.NotContains(t, p, "DRAFT", "page %d", i+1)
		require.NotContains(t, p, "草稿", "page %d", i+1)
		require.Zero(t, watermarkPixels(t, fpdf, i+1), "page %d", i+1)
	}
}

// A voided invoice's rendering carries 已作废 VOID and the credit note's
// number on every page; the document's stored bytes do not change.
func TestPDFVoidMarkedOnEveryPage(t *testing.T) {
	needPDFTools(t)
	d := stampedLab(t)
	manyLines(d, 120)
	before, err := d.Marshal()
	require.NoError(t, err)
	d.Void = &VoidMark{CreditNote: "2026-000051", VoidedAt: fixtureMeta.GeneratedAt.Add(48 * time.Hour).In(shanghai),
		Reason: "wrong SKU 规格错误"}
	pdf := writePDF(t, d, PDFOptions{})
	after, err := d.Marshal()
	require.NoError(t, err)
	require.Equal(t, before, after, "the mark is not part of the document")
	pages := pdfPages(t, pdf, "-layout")
	require.GreaterOrEqual(t, len(pages), 3)
	for i, p := range pages {
		require.Contains(t, p, "已作废 VOID — voided by credit note 由红字发票 2026-000051 作废", "page %d", i+1)
		require.Contains(t, p, "wrong SKU 规格错误", "page %d", i+1)
		require.Contains(t, p, "2026-000042", "page %d", i+1)
		require.Greater(t, watermarkPixels(t, pdf, i+1), 300, "page %d watermark", i+1)
	}
	require.Contains(t, pages[0], "Voided 已作废")
}

// A credit note says what it is and which invoice it voids; its amounts are
// negative.
func TestPDFCreditNote(t *testing.T) {
	needPDFTools(t)
	d := stampedLab(t)
	d.Number, d.CreditFor = "2026-000051", "2026-000042"
	for i := range d.Lines {
		d.Lines[i].Amount = d.Lines[i].Amount.Neg()
	}
	d.Students = studentTotals(d.Lines, d.Unpriced)
	d.SetNames(map[string]string{"alice": "Alice 李"})
	d.Total = d.Total.Neg()
	text := strings.Join(pdfPages(t, writePDF(t, d, PDFOptions{}), "-layout"), "\n")
	for _, want := range []string{"Credit note 红字发票", "Credit note number 红字发票号", "2026-000051",
		"Voids invoice 冲销发票", "2026-000042", "-855.00", "-859.21", "-0.20"} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "Invoice 账单")
	require.NotContains(t, text, "DRAFT")
}
