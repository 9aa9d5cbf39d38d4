package export

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// FontRole is one font of the PDF's font set: the paths where Debian installs
// it, in the order they are tried, and the package that provides it.
type FontRole struct {
	Role    string   // what it covers, for errors
	Package string   // the Debian package
	Paths   []string // candidate TrueType files
}

// DefaultFonts is the PDF's font set, tried per rune in this order: a Latin
// font (digits, Latin letters, punctuation and symbols), a CJK font (Chinese,
// Japanese and Korean in the BMP) and a CJK Extension B font (ideographs
// outside the BMP such as 𠮷). PDFOptions.FontPath, when set, is tried first.
var DefaultFonts = []FontRole{
	{Role: "Latin", Package: "fonts-dejavu-core", Paths: []string{
		"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
	}},
	{Role: "CJK", Package: "fonts-droid-fallback", Paths: []string{
		"/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
		"/usr/share/fonts/truetype/droid/DroidSansFallback.ttf",
	}},
	{Role: "CJK Extension B", Package: "fonts-hanazono", Paths: []string{
		"/usr/share/fonts/truetype/hanazono/HanaMinB.ttf",
	}},
}

// FontPackages are the Debian packages of DefaultFonts.
func FontPackages() []string {
	var out []string
	for _, r := range DefaultFonts {
		out = append(out, r.Package)
	}
	return out
}

// ErrNoFont is returned (wrapped) when a font of DefaultFonts is missing.
var ErrNoFont = errors.New("a TrueType font of the PDF font set is missing")

// FindFonts returns the font files WritePDF uses, in the order they are tried
// per rune: opt.FontPath when set (it must exist and be a TrueType font), then
// the first existing path of each role of DefaultFonts. A missing role is an
// error naming its package, unless opt.FontPath is set (then it is skipped).
func (opt PDFOptions) FindFonts() ([]string, error) {
	var paths []string
	if opt.FontPath != "" {
		if _, err := loadFont(opt.FontPath); err != nil {
			return nil, err
		}
		paths = append(paths, opt.FontPath)
	}
	var missing []string
	var pkgs []string
	for _, role := range DefaultFonts {
		found := ""
		for _, p := range role.Paths {
			if _, err := os.Stat(p); err == nil {
				found = p
				break
			}
		}
		if found == "" {
			missing = append(missing, fmt.Sprintf("%s (looked in %s; Debian package %s)", role.Role,
				strings.Join(role.Paths, ", "), role.Package))
			pkgs = append(pkgs, role.Package)
			continue
		}
		if !slices.Contains(paths, found) { // FontPath may name a default font
			paths = append(paths, found)
		}
	}
	if len(missing) > 0 && opt.FontPath == "" { // with FontPath, a missing default font is skipped
		return nil, fmt.Errorf("pdf font: %w: %s: install them (apt-get install -y %s)", ErrNoFont,
			strings.Join(missing, "; "), strings.Join(pkgs, " "))
	}
	return paths, nil
}

// fontFile is a parsed TrueType font: its bytes, its tables, which glyph each
// rune maps to, and the glyphs' advance widths in thousandths of an em (as fpdf
// rounds them, so that measured and drawn widths agree).
type fontFile struct {
	path    string
	data    []byte
	tables  map[string][]byte
	glyphs  map[rune]uint16
	advance []int // per glyph, 1/1000 em
	// format4: the font has a format 4 (BMP) Unicode cmap, the only one fpdf
	// reads; without it every rune is drawn through a remapped copy.
	format4 bool
	size    int64
	mod     time.Time
}

var fontCache = struct {
	sync.Mutex
	m map[string]*fontFile
}{m: map[string]*fontFile{}}

// loadFont reads and parses a TrueType font, cached by path while its size
// and modification time stay the same.
func loadFont(path string) (*fontFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("pdf font: %w", err)
	}
	fontCache.Lock()
	defer fontCache.Unlock()
	if f := fontCache.m[path]; f != nil && f.size == st.Size() && f.mod.Equal(st.ModTime()) {
		return f, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pdf font: %w", err)
	}
	f, err := parseFont(data)
	if err != nil {
		return nil, fmt.Errorf("pdf font %s: %w", path, err)
	}
	f.path, f.size, f.mod = path, st.Size(), st.ModTime()
	fontCache.m[path] = f
	return f, nil
}

// parseFont reads the table directory, the cmap (formats 4 and 12) and the
// horizontal metrics of a TrueType font. Collections (.ttc) and CFF-flavoured
// OpenType fonts (.otf) are refused: fpdf embeds TrueType outlines only.
func parseFont(data []byte) (*fontFile, error) {
	if len(data) < 12 {
		return nil, errors.New("not a TrueType font: too short")
	}
	switch tag := string(data[:4]); tag {
	case "\x00\x01\x00\x00", "true":
	case "ttcf":
		return nil, errors.New("a TrueType collection (.ttc) is not supported: give a single .ttf font")
	case "OTTO":
		return nil, errors.New("an OpenType font with CFF outlines is not supported: give a TrueType (.ttf, glyf outlines) font")
	default:
		return nil, fmt.Errorf("not a TrueType font (starts with %q)", tag)
	}
	n := int(binary.BigEndian.Uint16(data[4:]))
	if len(data) < 12+16*n {
		return nil, errors.New("truncated table directory")
	}
	f := &fontFile{data: data, tables: map[string][]byte{}}
	for i := range n {
		rec := data[12+16*i:]
		tag := string(rec[:4])
		off, ln := binary.BigEndian.Uint32(rec[8:]), binary.BigEndian.Uint32(rec[12:])
		if uint64(off)+uint64(ln) > uint64(len(data)) {
			return nil, fmt.Errorf("table %q beyond the end of the file", tag)
		}
		f.tables[tag] = data[off : off+ln]
	}
	for _, t := range []string{"cmap", "head", "hhea", "hmtx", "maxp", "glyf", "loca"} {
		if f.tables[t] == nil {
			return nil, fmt.Errorf("no %q table (TrueType outlines are needed)", t)
		}
	}
	glyphs, format4, err := parseCmap(f.tables["cmap"])
	if err != nil {
		return nil, err
	}
	f.glyphs, f.format4 = glyphs, format4
	head, hhea, hmtx, maxp := f.tables["head"], f.tables["hhea"], f.tables["hmtx"], f.tables["maxp"]
	if len(head) < 54 || len(hhea) < 36 || len(maxp) < 6 {
		return nil, errors.New("truncated head, hhea or maxp table")
	}
	upem := float64(binary.BigEndian.Uint16(head[18:]))
	if upem == 0 {
		return nil, errors.New("unitsPerEm is 0")
	}
	numGlyphs := int(binary.BigEndian.Uint16(maxp[4:]))
	numMetrics := int(binary.BigEndian.Uint16(hhea[34:]))
	if numMetrics == 0 || len(hmtx) < 4*numMetrics {
		return nil, errors.New("truncated hmtx table")
	}
	f.advance = make([]int, max(numGlyphs, numMetrics))
	for g := range f.advance {
		adv := binary.BigEndian.Uint16(hmtx[4*min(g, numMetrics-1):])
		f.advance[g] = int(math.Round(float64(adv) * 1000 / upem))
	}
	return f, nil
}

// parseCmap maps runes to glyphs from the best Unicode subtable: format 12
// (every plane) when there is one, else format 4 (the BMP). Runes that map to
// glyph 0 (.notdef) are left out. format4 reports whether there is a format 4
// Unicode subtable.
func parseCmap(cmap []byte) (glyphs map[rune]uint16, format4 bool, err error) {
	best, bestFormat, format4, err := bestCmapSubtable(cmap)
	if err != nil {
		return nil, false, err
	}
	out := map[rune]uint16{}
	switch bestFormat {
	case 12:
		err = cmapFormat12(best, out)
	case 4:
		err = cmapFormat4(best, out)
	default:
		err = errors.New("no Unicode cmap (format 4 or 12)")
	}
	if err != nil {
		return nil, false, err
	}
	return out, format4, nil
}

// bestCmapSubtable is the best Unicode subtable of cmap and its format
// (format 12 over format 4; 0 when there is neither), and whether there is a
// format 4 Unicode subtable.
func bestCmapSubtable(cmap []byte) (best []byte, bestFormat int, format4 bool, err error) {
	if len(cmap) < 4 {
		return nil, 0, false, errors.New("truncated cmap table")
	}
	n := int(binary.BigEndian.Uint16(cmap[2:]))
	for i := range n {
		if 4+8*i+8 > len(cmap) {
			return nil, 0, false, errors.New("truncated cmap table")
		}
		rec := cmap[4+8*i:]
		platform, encoding := binary.BigEndian.Uint16(rec), binary.BigEndian.Uint16(rec[2:])
		off := int(binary.BigEndian.Uint32(rec[4:]))
		unicode := platform == 0 || (platform == 3 && (encoding == 1 || encoding == 10))
		if !unicode || off+4 > len(cmap) {
			continue
		}
		format := int(binary.BigEndian.Uint16(cmap[off:]))
		if format == 4 && (platform == 0 || encoding == 1) {
			format4 = true
		}
		if (format == 12 && bestFormat != 12) || (format == 4 && bestFormat == 0) {
			best, bestFormat = cmap[off:], format
		}
	}
	return best, bestFormat, format4, nil
}

// cmapFormat12 adds the runes of a format 12 subtable (segmented coverage,
// every plane) to out.
func cmapFormat12(sub []byte, out map[rune]uint16) error {
	if len(sub) < 16 {
		return errors.New("truncated cmap format 12")
	}
	groups := int(binary.BigEndian.Uint32(sub[12:]))
	if len(sub) < 16+12*groups {
		return errors.New("truncated cmap format 12")
	}
	for g := range groups {
		rec := sub[16+12*g:]
		start, end, gid := binary.BigEndian.Uint32(rec), binary.BigEndian.Uint32(rec[4:]), binary.BigEndian.Uint32(rec[8:])
		if end < start || end > 0x10FFFF {
			continue
		}
		for c := start; c <= end; c++ {
			if g := gid + c - start; g != 0 && g <= 0xFFFF {
				out[rune(c)] = uint16(g)
			}
		}
	}
	return nil
}

// cmapFormat4 adds the runes of a format 4 subtable (segment mapping to delta
// values, the BMP) to out.
func cmapFormat4(sub []byte, out map[rune]uint16) error {
	if len(sub) < 14 {
		return errors.New("truncated cmap format 4")
	}
	segs := int(binary.BigEndian.Uint16(sub[6:])) / 2
	if len(sub) < 16+8*segs {
		return errors.New("truncated cmap format 4")
	}
	ends, starts := sub[14:], sub[16+2*segs:]
	deltas, ranges := sub[16+4*segs:], sub[16+6*segs:]
	for s := range segs {
		end, start := binary.BigEndian.Uint16(ends[2*s:]), binary.BigEndian.Uint16(starts[2*s:])
		delta, ro := binary.BigEndian.Uint16(deltas[2*s:]), int(binary.BigEndian.Uint16(ranges[2*s:]))
		for c := int(start); c <= int(end) && c != 0xFFFF; c++ {
			var g uint16
			if ro == 0 {
				g = uint16(c) + delta
			} else {
				at := 16 + 6*segs + 2*s + ro + 2*(c-int(start))
				if at+2 > len(sub) {
					continue
				}
				if g = binary.BigEndian.Uint16(sub[at:]); g != 0 {
					g += delta
				}
			}
			if g != 0 {
				out[rune(c)] = g
			}
		}
	}
	return nil
}

// has reports whether the font has a glyph for r.
func (f *fontFile) has(r rune) bool {
	_, ok := f.glyphs[r]
	return ok
}

// width is the advance of r in thousandths of an em (0 when it has no glyph).
func (f *fontFile) width(r rune) int {
	g, ok := f.glyphs[r]
	if !ok || int(g) >= len(f.advance) {
		return 0
	}
	return f.advance[g]
}

// remapBMP returns a copy of the font whose only cmap is a format 4 subtable
// mapping pua[i] to the glyph of runes[i]: fpdf's UTF-8 fonts are limited to
// the BMP, so runes of other planes (CJK Extension B) are drawn through
// private-use code points of this copy. The copy keeps only the glyphs it maps
// (and those their composites use) in glyf, so that it is small.
func (f *fontFile) remapBMP(runes []rune, pua []rune) ([]byte, error) {
	if len(runes) != len(pua) || len(runes) == 0 {
		return nil, errors.New("remap: nothing to map")
	}
	type seg struct {
		code rune
		gid  uint16
	}
	segs := make([]seg, 0, len(runes))
	keep := map[uint16]bool{0: true}
	for i, r := range runes {
		g, ok := f.glyphs[r]
		if !ok {
			return nil, fmt.Errorf("remap: no glyph for U+%04X", r)
		}
		segs = append(segs, seg{pua[i], g})
		keep[g] = true
	}
	slices.SortFunc(segs, func(a, b seg) int { return int(a.code) - int(b.code) })
	// cmap: one format 4 subtable (3,1), a segment per code, then 0xFFFF.
	nseg := len(segs) + 1
	sub := make([]byte, 16+8*nseg)
	be := binary.BigEndian
	be.PutUint16(sub[0:], 4)
	be.PutUint16(sub[2:], uint16(len(sub)))
	be.PutUint16(sub[6:], uint16(2*nseg))
	sr := 2
	for sr*2 <= nseg {
		sr *= 2
	}
	be.PutUint16(sub[8:], uint16(2*sr))
	be.PutUint16(sub[10:], uint16(math.Log2(float64(sr))))
	be.PutUint16(sub[12:], uint16(2*nseg-2*sr))
	for i := range nseg {
		code, delta := uint16(0xFFFF), uint16(1)
		if i < len(segs) {
			code, delta = uint16(segs[i].code), segs[i].gid-uint16(segs[i].code)
		}
		be.PutUint16(sub[14+2*i:], code)
		be.PutUint16(sub[16+2*nseg+2*i:], code)
		be.PutUint16(sub[16+4*nseg+2*i:], delta)
	}
	cmap := make([]byte, 12, 12+len(sub))
	be.PutUint16(cmap[2:], 1)
	be.PutUint16(cmap[4:], 3)
	be.PutUint16(cmap[6:], 1)
	be.PutUint32(cmap[8:], 12)
	cmap = append(cmap, sub...)

	glyf, loca, longLoca, err := f.subsetGlyf(keep)
	if err != nil {
		return nil, err
	}
	tables := map[string][]byte{}
	for tag, t := range f.tables {
		switch tag {
		case "cmap", "glyf", "loca", "GSUB", "GPOS", "GDEF", "DSIG", "vhea", "vmtx", "VORG":
		default:
			tables[tag] = t
		}
	}
	head := slices.Clone(f.tables["head"])
	be.PutUint32(head[8:], 0) // checkSumAdjustment: not checked by readers
	if longLoca {
		be.PutUint16(head[50:], 1)
	} else {
		be.PutUint16(head[50:], 0)
	}
	tables["head"], tables["cmap"], tables["glyf"], tables["loca"] = head, cmap, glyf, loca
	return writeSFNT(tables), nil
}

// subsetGlyf returns glyf and loca tables with the same glyph IDs where every
// glyph not in keep (after adding the components of kept composites) is empty.
func (f *fontFile) subsetGlyf(keep map[uint16]bool) (glyf, loca []byte, long bool, err error) {
	head, oldLoca, oldGlyf := f.tables["head"], f.tables["loca"], f.tables["glyf"]
	numGlyphs := int(binary.BigEndian.Uint16(f.tables["maxp"][4:]))
	oldLong := binary.BigEndian.Uint16(head[50:]) == 1
	at := func(g int) (int, int, bool) {
		if oldLong {
			if 4*g+8 > len(oldLoca) {
				return 0, 0, false
			}
			return int(binary.BigEndian.Uint32(oldLoca[4*g:])), int(binary.BigEndian.Uint32(oldLoca[4*g+4:])), true
		}
		if 2*g+4 > len(oldLoca) {
			return 0, 0, false
		}
		return 2 * int(binary.BigEndian.Uint16(oldLoca[2*g:])), 2 * int(binary.BigEndian.Uint16(oldLoca[2*g+2:])), true
	}
	// Composites: add their components until nothing is added.
	queue := make([]uint16, 0, len(keep))
	for g := range keep {
		queue = append(queue, g)
	}
	for len(queue) > 0 {
		g := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		s, e, ok := at(int(g))
		if !ok || e > len(oldGlyf) || e-s < 10 || int16(binary.BigEndian.Uint16(oldGlyf[s:])) >= 0 {
			continue
		}
		p := s + 10
		for p+4 <= e {
			flags, comp := binary.BigEndian.Uint16(oldGlyf[p:]), binary.BigEndian.Uint16(oldGlyf[p+2:])
			if !keep[comp] {
				keep[comp] = true
				queue = append(queue, comp)
			}
			p += 4
			if flags&1 != 0 { // ARG_1_AND_2_ARE_WORDS
				p += 4
			} else {
				p += 2
			}
			switch {
			case flags&8 != 0: // WE_HAVE_A_SCALE
				p += 2
			case flags&0x40 != 0: // X_AND_Y_SCALE
				p += 4
			case flags&0x80 != 0: // TWO_BY_TWO
				p += 8
			}
			if flags&0x20 == 0 { // MORE_COMPONENTS
				break
			}
		}
	}
	offsets := make([]int, numGlyphs+1)
	for g := range numGlyphs {
		offsets[g] = len(glyf)
		if keep[uint16(g)] {
			if s, e, ok := at(g); ok && s <= e && e <= len(oldGlyf) {
				glyf = append(glyf, oldGlyf[s:e]...)
				for len(glyf)%4 != 0 {
					glyf = append(glyf, 0)
				}
			}
		}
	}
	offsets[numGlyphs] = len(glyf)
	long = len(glyf) > 0x1FFFE
	for _, o := range offsets {
		if long {
			loca = binary.BigEndian.AppendUint32(loca, uint32(o))
		} else {
			loca = binary.BigEndian.AppendUint16(loca, uint16(o/2))
		}
	}
	return glyf, loca, long, nil
}

// writeSFNT writes a TrueType file with the tables in tag order.
func writeSFNT(tables map[string][]byte) []byte {
	tags := make([]string, 0, len(tables))
	for t := range tables {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	be := binary.BigEndian
	n := len(tags)
	out := make([]byte, 12+16*n)
	be.PutUint32(out, 0x00010000)
	be.PutUint16(out[4:], uint16(n))
	sr := 1
	for sr*2 <= n {
		sr *= 2
	}
	be.PutUint16(out[6:], uint16(16*sr))
	be.PutUint16(out[8:], uint16(math.Log2(float64(sr))))
	be.PutUint16(out[10:], uint16(16*n-16*sr))
	for i, tag := range tags {
		t := tables[tag]
		for len(out)%4 != 0 {
			out = append(out, 0)
		}
		rec := out[12+16*i:]
		copy(rec, tag)
		var sum uint32
		for j := 0; j < len(t); j += 4 {
			var w [4]byte
			copy(w[:], t[j:])
			sum += be.Uint32(w[:])
		}
		be.PutUint32(rec[4:], sum)
		be.PutUint32(rec[8:], uint32(len(out)))
		be.PutUint32(rec[12:], uint32(len(t)))
		out = append(out, t...)
	}
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}
