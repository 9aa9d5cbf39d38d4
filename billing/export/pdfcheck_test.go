package export

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// This file reads the PDFs WritePDF makes as a viewer does, independently of
// how WritePDF chose its fonts: for every character drawn (every 2-byte code
// of every Tj of every page), it follows the font selected at that point to its
// CIDToGIDMap and its embedded TrueType file and checks that the glyph is not
// .notdef (glyph 0) and has an outline. An empty box in the printed invoice is
// exactly a code whose glyph is 0 or empty.

// writePDF renders d and checks every drawn character's glyph.
func writePDF(t *testing.T, d *Document, opt PDFOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WritePDF(&buf, d, opt))
	checkGlyphs(t, buf.Bytes())
	return buf.Bytes()
}

// checkGlyphs fails the test for a character drawn in a font without its glyph
// and returns how many characters it checked.
func checkGlyphs(t *testing.T, pdf []byte) int {
	t.Helper()
	n, err := drawnGlyphs(pdf)
	require.NoError(t, err)
	require.Positive(t, n, "no character was drawn")
	return n
}

type pdfFile struct {
	raw  []byte
	objs map[int]int // object number → offset
}

var xrefEntry = regexp.MustCompile(`(\d{10}) (\d{5}) ([nf])`)

func readPDF(b []byte) (*pdfFile, error) {
	i := bytes.LastIndex(b, []byte("\nxref\n"))
	if i < 0 {
		return nil, fmt.Errorf("no xref table")
	}
	rest := b[i+6:]
	nl := bytes.IndexByte(rest, '\n')
	var first, count int
	if _, err := fmt.Sscanf(string(rest[:nl]), "%d %d", &first, &count); err != nil {
		return nil, fmt.Errorf("xref header: %w", err)
	}
	f := &pdfFile{raw: b, objs: map[int]int{}}
	for k, m := range xrefEntry.FindAllSubmatch(rest[nl:], count) {
		if string(m[3]) == "n" {
			off, _ := strconv.Atoi(string(m[1]))
			f.objs[first+k] = off
		}
	}
	return f, nil
}

// obj returns an object's dictionary text and its stream, decompressed.
func (f *pdfFile) obj(n int) (string, []byte, error) {
	off, ok := f.objs[n]
	if !ok {
		return "", nil, fmt.Errorf("object %d: not in the xref table", n)
	}
	body := f.raw[off:]
	end := bytes.Index(body, []byte("endobj"))
	if end < 0 {
		return "", nil, fmt.Errorf("object %d: no endobj", n)
	}
	s := bytes.Index(body[:end], []byte("stream\n"))
	if s < 0 {
		return string(body[:end]), nil, nil
	}
	dict := string(body[:s])
	m := regexp.MustCompile(`/Length (\d+)`).FindStringSubmatch(dict)
	if m == nil {
		return "", nil, fmt.Errorf("object %d: a stream without /Length", n)
	}
	ln, _ := strconv.Atoi(m[1])
	data := body[s+7 : s+7+ln]
	if regexp.MustCompile(`/Filter\s*/FlateDecode`).MatchString(dict) {
		zr, err := zlib.NewReader(bytes.NewReader(data))
		if err != nil {
			return "", nil, fmt.Errorf("object %d: %w", n, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return "", nil, fmt.Errorf("object %d: %w", n, err)
		}
	}
	return dict, data, nil
}

func ref(dict, key string) (int, error) {
	m := regexp.MustCompile(`/` + key + `\s*\[?\s*(\d+) 0 R`).FindStringSubmatch(dict)
	if m == nil {
		return 0, fmt.Errorf("no /%s in %q", key, dict)
	}
	return strconv.Atoi(m[1])
}

// embeddedFont is what a viewer draws a code of a Type0 font with.
type embeddedFont struct {
	name      string
	cidToGID  []byte
	loca      []int // glyph g's outline is glyf[loca[g]:loca[g+1]]
	numGlyphs int
}

func (e *embeddedFont) hasGlyph(cid int) bool {
	if 2*cid+2 > len(e.cidToGID) {
		return false
	}
	g := int(binary.BigEndian.Uint16(e.cidToGID[2*cid:]))
	return g != 0 && g < e.numGlyphs && e.loca[g+1] > e.loca[g]
}

func (f *pdfFile) font(n int) (*embeddedFont, error) {
	dict, _, err := f.obj(n)
	if err != nil {
		return nil, err
	}
	name := regexp.MustCompile(`/BaseFont /(\S+)`).FindStringSubmatch(dict)
	if name == nil || !regexp.MustCompile(`/Subtype /Type0`).MatchString(dict) {
		return nil, fmt.Errorf("font %d is not a Type0 font: %q", n, dict)
	}
	dn, err := ref(dict, "DescendantFonts")
	if err != nil {
		return nil, err
	}
	desc, _, err := f.obj(dn)
	if err != nil {
		return nil, err
	}
	mapN, err := ref(desc, "CIDToGIDMap")
	if err != nil {
		return nil, err
	}
	_, cidToGID, err := f.obj(mapN)
	if err != nil {
		return nil, err
	}
	fdN, err := ref(desc, "FontDescriptor")
	if err != nil {
		return nil, err
	}
	fd, _, err := f.obj(fdN)
	if err != nil {
		return nil, err
	}
	ffN, err := ref(fd, "FontFile2")
	if err != nil {
		return nil, err
	}
	_, ttf, err := f.obj(ffN)
	if err != nil {
		return nil, err
	}
	e := &embeddedFont{name: name[1], cidToGID: cidToGID}
	tables := map[string][]byte{}
	nt := int(binary.BigEndian.Uint16(ttf[4:]))
	for i := range nt {
		rec := ttf[12+16*i:]
		off, ln := binary.BigEndian.Uint32(rec[8:]), binary.BigEndian.Uint32(rec[12:])
		tables[string(rec[:4])] = ttf[off : off+ln]
	}
	head, loca, maxp := tables["head"], tables["loca"], tables["maxp"]
	if head == nil || loca == nil || maxp == nil || tables["glyf"] == nil {
		return nil, fmt.Errorf("font %s: the embedded font has no head, loca, maxp or glyf table", e.name)
	}
	e.numGlyphs = int(binary.BigEndian.Uint16(maxp[4:]))
	long := binary.BigEndian.Uint16(head[50:]) == 1
	for g := 0; g <= e.numGlyphs; g++ {
		if long {
			e.loca = append(e.loca, int(binary.BigEndian.Uint32(loca[4*g:])))
		} else {
			e.loca = append(e.loca, 2*int(binary.BigEndian.Uint16(loca[2*g:])))
		}
	}
	return e, nil
}

// drawnGlyphs checks every code drawn on every page and returns how many.
func drawnGlyphs(pdf []byte) (int, error) {
	f, err := readPDF(pdf)
	if err != nil {
		return 0, err
	}
	fonts := map[string]*embeddedFont{}
	checked, page := 0, 0
	for n := 1; n <= len(f.objs)+1; n++ {
		dict, _, err := f.obj(n)
		if err != nil || !regexp.MustCompile(`/Type /Page\b[^s]`).MatchString(dict) {
			continue
		}
		page++
		resN, err := ref(dict, "Resources")
		if err != nil {
			return 0, err
		}
		res, _, err := f.obj(resN)
		if err != nil {
			return 0, err
		}
		byName := map[string]int{}
		if fm := regexp.MustCompile(`(?s)/Font\s*<<(.*?)>>`).FindStringSubmatch(res); fm != nil {
			for _, m := range regexp.MustCompile(`/(\S+) (\d+) 0 R`).FindAllStringSubmatch(fm[1], -1) {
				byName[m[1]], _ = strconv.Atoi(m[2])
			}
		}
		cN, err := ref(dict, "Contents")
		if err != nil {
			return 0, err
		}
		_, content, err := f.obj(cN)
		if err != nil {
			return 0, err
		}
		var cur *embeddedFont
		var operands []any
		for tok := range pdfTokens(content) {
			switch v := tok.(type) {
			case pdfOp:
				switch v {
				case "Tf":
					if len(operands) < 2 {
						return 0, fmt.Errorf("page %d: Tf without a font", page)
					}
					name, _ := operands[len(operands)-2].(pdfName)
					fn, ok := byName[string(name)]
					if !ok {
						return 0, fmt.Errorf("page %d: font /%s not in the resources", page, name)
					}
					if cur = fonts[string(name)]; cur == nil {
						if cur, err = f.font(fn); err != nil {
							return 0, err
						}
						fonts[string(name)] = cur
					}
				case "Tj", "TJ", "'", "\"":
					for _, o := range operands {
						s, ok := o.(pdfString)
						if !ok {
							continue
						}
						if cur == nil {
							return 0, fmt.Errorf("page %d: text drawn before any font", page)
						}
						for i := 0; i+1 < len(s); i += 2 {
							cid := int(binary.BigEndian.Uint16([]byte(s[i:])))
							if cid == ' ' || cid == 0xA0 || cid == 0x3000 {
								continue
							}
							if !cur.hasGlyph(cid) {
								return 0, fmt.Errorf("page %d: U+%04X (%q) is drawn in %s, which has no glyph for it",
									page, cid, rune(cid), cur.name)
							}
							checked++
						}
					}
				}
				operands = operands[:0]
			default:
				operands = append(operands, tok)
			}
		}
	}
	if page == 0 {
		return 0, fmt.Errorf("no page found")
	}
	return checked, nil
}

type (
	pdfOp     string
	pdfName   string
	pdfString string
)

// pdfTokens yields the operators, names and strings of a content stream
// (numbers as operators' operands are yielded as pdfOp too and ignored).
func pdfTokens(b []byte) func(func(any) bool) {
	return func(yield func(any) bool) {
		i := 0
		delim := func(c byte) bool { return bytes.IndexByte([]byte("()<>[]{}/% \t\r\n\f"), c) >= 0 }
		for i < len(b) {
			c := b[i]
			switch {
			case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '[' || c == ']':
				i++
			case c == '(':
				var s []byte
				depth := 1
				i++
				for i < len(b) && depth > 0 {
					c := b[i]
					switch c {
					case '\\':
						i++
						if i >= len(b) {
							return
						}
						switch e := b[i]; e {
						case 'n':
							s = append(s, '\n')
						case 'r':
							s = append(s, '\r')
						case 't':
							s = append(s, '\t')
						case 'b':
							s = append(s, '\b')
						case 'f':
							s = append(s, '\f')
						case '\n':
						default:
							if e >= '0' && e <= '7' {
								v, k := 0, 0
								for k < 3 && i < len(b) && b[i] >= '0' && b[i] <= '7' {
									v = v*8 + int(b[i]-'0')
									i++
									k++
								}
								s = append(s, byte(v))
								continue
							}
							s = append(s, e)
						}
					case '(':
						depth++
						s = append(s, c)
					case ')':
						depth--
						if depth > 0 {
							s = append(s, c)
						}
					default:
						s = append(s, c)
					}
					i++
				}
				if !yield(pdfString(s)) {
					return
				}
			case c == '<' && i+1 < len(b) && b[i+1] == '<', c == '>' && i+1 < len(b) && b[i+1] == '>':
				i += 2
			case c == '<':
				j := bytes.IndexByte(b[i:], '>')
				if j < 0 {
					return
				}
				i += j + 1 // hex strings only carry /ActualText here
				if !yield(pdfName("")) {
					return
				}
			case c == '/':
				j := i + 1
				for j < len(b) && !delim(b[j]) {
					j++
				}
				if !yield(pdfName(b[i+1 : j])) {
					return
				}
				i = j
			default:
				j := i
				for j < len(b) && !delim(b[j]) {
					j++
				}
				if j == i {
					j++
				}
				tok := string(b[i:j])
				i = j
				if _, err := strconv.ParseFloat(tok, 64); err == nil {
					if !yield(pdfName("#" + tok)) {
						return
					}
					continue
				}
				if !yield(pdfOp(tok)) {
					return
				}
			}
		}
	}
}
