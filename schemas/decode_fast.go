package schemas

import "encoding/binary"

// The fast path: a sample laid out exactly as AppendJSON writes it (the
// collector's and `cardhour generate`'s output: the fields in the format's
// order, no whitespace, plain integers) is decoded in one pass that expects
// each field name in turn, with no loop over keys, no duplicate bookkeeping and
// no error building. Anything else (another order, whitespace, an unknown
// field, an exponent, an escape the fast path does not take, or any invalid
// value) makes it give up, and Decode decodes the line again the general way,
// which reports the error. So the fast path only ever accepts what the general
// decoder accepts, with the same result (FuzzDecodeFast checks it): it can make
// a valid line cheaper, never change what a line means or which error it gets.

// fastKey is a field name as the fast path expects it, with the byte before it
// (`{` or `,`): `,"name":`, at most 24 bytes, kept also as three little-endian
// words and their byte masks.
type fastKey struct {
	lit  string
	w, m [3]uint64
}

func newFastKey(lit string) fastKey {
	k := fastKey{lit: lit}
	for j := 0; j < len(lit); j++ {
		k.w[j/8] |= uint64(lit[j]) << (8 * (j % 8))
		k.m[j/8] |= 0xff << (8 * (j % 8))
	}
	return k
}

var (
	fkSchemaFirst = newFastKey(`{"schema":`)
	fkTSFirst     = newFastKey(`{"ts":`)
	fkTS          = newFastKey(`,"ts":`)
	fkInterval    = newFastKey(`,"interval_s":`)
	fkNode        = newFastKey(`,"node":`)
	fkGPUUUID     = newFastKey(`,"gpu_uuid":`)
	fkGPUModel    = newFastKey(`,"gpu_model":`)
	fkInstance    = newFastKey(`,"instance_id":`)
	fkProfile     = newFastKey(`,"profile":`)
	fkProject     = newFastKey(`,"project":`)
	fkUser        = newFastKey(`,"user":`)
	fkUtil        = newFastKey(`,"util":`)
	fkMemUsed     = newFastKey(`,"mem_used_bytes":`)
	fkMemTotal    = newFastKey(`,"mem_total_bytes":`)
	fkProcesses   = newFastKey(`,"processes":`)
	fkUtilSource  = newFastKey(`,"util_source":`)
	fkHolderRef   = newFastKey(`,"holder_ref":`)
	fkShareKind   = newFastKey(`,"share_kind":`)
	fkShareMem    = newFastKey(`,"share_mem":`)
	fkShareCores  = newFastKey(`,"share_cores":`)
)

// key consumes k at the parser's position if the input has it there: three
// masked word comparisons where 24 bytes are left, else keyShort.
func (p *parser) key(k *fastKey) bool {
	if len(p.data)-p.i < 24 {
		return p.keyShort(k)
	}
	b := (*[24]byte)(p.data[p.i : p.i+24])
	if (binary.LittleEndian.Uint64(b[0:8])&k.m[0]^k.w[0])|(binary.LittleEndian.Uint64(b[8:16])&k.m[1]^k.w[1])|
		(binary.LittleEndian.Uint64(b[16:24])&k.m[2]^k.w[2]) != 0 {
		return false
	}
	p.i += len(k.lit)
	return true
}

func (p *parser) keyShort(k *fastKey) bool {
	if len(p.data)-p.i < len(k.lit) || string(p.data[p.i:p.i+len(k.lit)]) != k.lit {
		return false
	}
	p.i += len(k.lit)
	return true
}

// decodeFast decodes data into s if data is laid out as AppendJSON writes it
// and every value is valid; it reports false otherwise, s then unspecified.
// It does not check the ranges Sample.Validate and the options check.
func (d *Decoder) decodeFast(data []byte, s *Sample) bool {
	*s = Sample{}
	d.cur, d.pred, d.midRaw = nil, nil, nil
	if d.prev != nil {
		d.pred = d.prev.next
	}
	p := parser{data: data}
	var ok bool
	if p.key(&fkSchemaFirst) {
		if s.SchemaField, ok = d.fastText(&p, fSchema); !ok || !p.key(&fkTS) {
			return false
		}
	} else if !p.key(&fkTSFirst) {
		return false
	}
	if !d.fastTS(&p, s) || !p.key(&fkInterval) || !d.fastInterval(&p, s) {
		return false
	}
	if m := d.pred; m != nil && len(m.mid.raw) > 0 && p.eatBytes(m.mid.raw) {
		// The predicted instance's middle, byte for byte: its values.
		d.cur = m
		s.Node, s.GPUUUID, s.GPUModel, s.InstanceID = m.mid.node, m.mid.gpuUUID, m.mid.gpuModel, m.id
		s.Profile, s.Project, s.User = m.mid.profile, m.mid.project, m.mid.user
	} else if !d.fastMiddle(&p, s) {
		return false
	}
	if !p.key(&fkUtil) || !fastUtil(&p, s) || !p.key(&fkMemUsed) {
		return false
	}
	if s.MemUsed, ok = p.plainUint(); !ok || !p.key(&fkMemTotal) {
		return false
	}
	if s.MemTotal, ok = p.plainUint(); !ok || !p.key(&fkProcesses) {
		return false
	}
	if s.Processes, ok = p.plainUint(); !ok {
		return false
	}
	if p.key(&fkUtilSource) {
		if s.UtilSource, ok = d.fastText(&p, fUtilSource); !ok {
			return false
		}
	}
	if p.key(&fkHolderRef) {
		if s.HolderRef, ok = d.fastText(&p, fHolderRef); !ok {
			return false
		}
	}
	if p.i < len(p.data) && p.data[p.i] == ',' && !d.fastShare(&p, s) {
		return false // one byte compared on a line without shares
	}
	return p.i == len(p.data)-1 && p.data[p.i] == '}'
}

// fastShare decodes the share fields that follow the extras, in their order;
// Decode's Validate then checks that they go together.
func (d *Decoder) fastShare(p *parser, s *Sample) bool {
	var ok bool
	if p.key(&fkShareKind) {
		if s.ShareKind, ok = d.fastText(p, fShareKind); !ok || !ValidShareKind(s.ShareKind) {
			return false
		}
	}
	if p.key(&fkShareMem) {
		if s.ShareMem, ok = fastFrac(p); !ok {
			return false
		}
	}
	if p.key(&fkShareCores) {
		if s.ShareCores, ok = fastFrac(p); !ok {
			return false
		}
	}
	return true
}

// fastFrac is a share fraction: a JSON number in (0, 1].
func fastFrac(p *parser) (float64, bool) {
	num, err := p.number()
	if err != nil {
		return 0, false
	}
	return shareFrac(num)
}

// fastMiddle decodes the middle of a line field by field, from `,"node":`
// to the user's value, and keeps its bytes (midRaw) for the instance's memo.
func (d *Decoder) fastMiddle(p *parser, s *Sample) bool {
	start := p.i
	var ok bool
	if !p.key(&fkNode) {
		return false
	}
	if s.Node, ok = d.fastText(p, fNode); !ok || !p.key(&fkGPUUUID) {
		return false
	}
	if s.GPUUUID, ok = d.fastText(p, fGPUUUID); !ok || !p.key(&fkGPUModel) {
		return false
	}
	if s.GPUModel, ok = d.fastText(p, fGPUModel); !ok || !p.key(&fkInstance) || !d.fastInstance(p, s) {
		return false
	}
	if !p.key(&fkProfile) {
		return false
	}
	if s.Profile, ok = d.fastText(p, fProfile); !ok || !p.key(&fkProject) {
		return false
	}
	if s.Project, ok = d.fastText(p, fProject); !ok || !p.key(&fkUser) {
		return false
	}
	if s.User, ok = d.fastText(p, fUser); !ok {
		return false
	}
	d.midRaw = p.data[start:p.i]
	return true
}

// eatBytes consumes b if the input has it at the parser's position.
func (p *parser) eatBytes(b []byte) bool {
	if len(p.data)-p.i < len(b) || string(p.data[p.i:p.i+len(b)]) != string(b) {
		return false
	}
	p.i += len(b)
	return true
}

// fastText is a string field's value: the guess when the input is exactly
// that string, else the string scanned (escapes and all) and interned.
func (d *Decoder) fastText(p *parser, bit int) (string, bool) {
	if v := d.guess(bit); p.eatQuoted(v) {
		return v, true
	}
	if p.peek() != '"' {
		return "", false
	}
	raw, err := p.str(&d.scratch)
	if err != nil {
		return "", false
	}
	return d.text(bit, raw), true
}

func (d *Decoder) fastInstance(p *parser, s *Sample) bool {
	if m := d.pred; m != nil && m.plainID && p.eatQuoted(m.id) {
		d.cur = m
		s.InstanceID = m.id
		return true
	}
	if p.peek() != '"' {
		return false
	}
	raw, err := p.str(&d.scratch)
	if err != nil {
		return false
	}
	d.instance(raw, s)
	return true
}

func (d *Decoder) fastTS(p *parser, s *Sample) bool {
	if p.peek() != '"' {
		return false
	}
	return d.tsField(p, "ts", s) == nil
}

func (d *Decoder) fastInterval(p *parser, s *Sample) bool {
	return d.intervalField(p, "interval_s", s) == nil
}

// fastUtil is utilField for null and for plain decimals of at most 15 digits
// (0.53, 1, 0): their value is the digits as an integer divided by a power of
// ten, both exact in a float64, so the one correctly rounded division gives
// what strconv.ParseFloat gives (which takes the same path for them).
func fastUtil(p *parser, s *Sample) bool {
	if p.eatLiteral("null") {
		return true
	}
	d, i := p.data, p.i
	var mant uint64
	digits, frac := 0, -1
	for ; i < len(d); i++ {
		c := d[i]
		if c >= '0' && c <= '9' {
			mant = mant*10 + uint64(c-'0')
			digits++
			continue
		}
		if c == '.' && frac < 0 {
			frac = digits
			continue
		}
		break
	}
	if digits == 0 || digits > 15 || frac == 0 || frac == digits || (d[p.i] == '0' && frac != 1 && digits > 1) ||
		(i < len(d) && (d[i] == 'e' || d[i] == 'E')) {
		// Not a plain decimal (or a leading zero, a dot without digits):
		// the general way, strconv and its errors.
		return utilField(p, "util", s) == nil
	}
	f := float64(mant)
	if frac > 0 {
		f /= pow10[digits-frac]
	}
	if f > 1 {
		return false
	}
	p.i = i
	s.Util, s.UtilKnown = f, true
	return true
}

var pow10 = [16]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// plainUint scans a non-negative integer written with digits only (no sign,
// fraction or exponent, no leading zero), at most 18 digits; anything else
// reports false.
func (p *parser) plainUint() (int64, bool) {
	d, i := p.data, p.i
	var v int64
	for ; i < len(d); i++ {
		c := d[i] - '0'
		if c > 9 {
			break
		}
		v = v*10 + int64(c)
	}
	n := i - p.i
	if n == 0 || n > 18 || (n > 1 && d[p.i] == '0') || (i < len(d) && (d[i] == '.' || d[i] == 'e' || d[i] == 'E')) {
		return 0, false
	}
	p.i = i
	return v, true
}
