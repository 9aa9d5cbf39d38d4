package schemas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unsafe"

	"github.com/shopspring/decimal"
)

// Decoder parses cardhour.sample.v1 JSON objects. It is strict (every field of the
// format must be present with the right type and range, the whole input must be one
// JSON object) and fast: it does not build an intermediate map, and it interns the
// low-cardinality strings (node, model, project, …) so that decoding millions of
// samples does not allocate a string per field.
//
// Most text of a sample repeats a value the decoder has seen: the instance's
// own node, GPU, profile, project and user, the timestamp of the previous
// sample (one tick's samples share it). For each string field the decoder
// first guesses that value and compares the input with it, quotes included, in
// one comparison; only a wrong guess scans the string and looks it up. A
// guess is only ever a value without quote, backslash or control character,
// so input equal to it is exactly that JSON string: the shortcut accepts and
// rejects what the scan does.
//
// A Decoder is not safe for concurrent use; give each goroutine its own.
type Decoder struct {
	scratch []byte
	intern  map[string]string
	last    [numFields]string // per field: the value of the previous sample, checked first (a guess: plain only)
	// Per instance, the values of its last sample: samples of one message are
	// of different instances, so the previous sample's values (last) rarely
	// match, but an instance's own previous ones do.
	insts map[string]*instMemo
	cur   *instMemo // the instance of the object being decoded, once known
	// prev is the instance of the previous sample, and pred the one that
	// followed prev last time: collectors write a node's instances in the same
	// order every tick, so pred is most often the instance being decoded, and
	// its values are the guesses for the fields before instance_id.
	prev, pred *instMemo
	tsText     []byte // the last timestamp parsed (plain) and its value
	tsMS       int64
	midRaw     []byte // the middle of the line being decoded, when the fast path decoded it field by field

	opt           DecoderOptions
	maxIntervalMS int64 // interval_s above this is rejected
	maxEndMS      int64 // samples ending after this are rejected (math.MaxInt64: no bound)
	clockMS       int64 // the clock SetNow was given, for the error message
}

// DefaultMaxInterval is the longest interval_s a Decoder accepts unless its
// options say otherwise. The collector samples every 1 s to 1 h, so a longer
// interval is corrupt or forged input: one such line could bill a month.
const DefaultMaxInterval = time.Hour

// MaxIntervalLimit is the largest bound DecoderOptions.MaxInterval may set: the
// longest interval the wire format can express (ten years).
const MaxIntervalLimit = time.Duration(maxIntMS) * time.Millisecond

// DecoderOptions bound what a Decoder accepts beyond the ranges of the format.
type DecoderOptions struct {
	// MaxInterval is the longest interval_s accepted (0: DefaultMaxInterval;
	// at most MaxIntervalLimit). The command-line flag that sets it is
	// --max-interval.
	MaxInterval time.Duration
	// MaxClockSkew, when > 0, rejects samples that end more than MaxClockSkew
	// after the clock last given to SetNow: a sample describes time that has
	// passed. The command-line flag that sets it is --max-clock-skew.
	MaxClockSkew time.Duration
}

// Validate reports options out of range.
func (o DecoderOptions) Validate() error {
	var errs []error
	if o.MaxInterval < 0 || o.MaxInterval > MaxIntervalLimit || o.MaxInterval%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("max interval %v: want a whole number of milliseconds in (0, %v]", o.MaxInterval, MaxIntervalLimit))
	}
	if o.MaxClockSkew < 0 {
		errs = append(errs, fmt.Errorf("max clock skew %v: must not be negative (0 disables the check)", o.MaxClockSkew))
	}
	return errors.Join(errs...)
}

// instMemo is what the decoder remembers of one instance. Every field but id
// is a guess, so holds only plain strings (see plainString); plainID says
// whether id may be guessed.
type instMemo struct {
	id                      string
	plainID                 bool
	node, gpuUUID, gpuModel string
	profile, project, user  string
	next                    *instMemo // the instance that followed this one last time
	mid                     midMemo
}

// midMemo is the middle of the instance's last line taken by the fast path,
// from `,"node":` to the end of the user's value, as it was on the wire, and
// the seven values decoded from it. The same bytes decode to the same values,
// so a line whose middle is these bytes has these values.
type midMemo struct {
	raw                     []byte
	node, gpuUUID, gpuModel string
	profile, project, user  string
}

// plainString reports whether s can stand for itself between quotes in JSON:
// no quote, backslash or control character. Input equal to `"` + s + `"` is
// then exactly the JSON string s.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
			return false
		}
	}
	return true
}

// plainOr returns s if it is plain, else "" (a guess that matches only the
// empty string, whose value is then right).
func plainOr(s string) string {
	if plainString(s) {
		return s
	}
	return ""
}

// canonicalNext is, per field bit, the index in canonicalKeys of the field
// that follows it.
var canonicalNext = func() (t [numFields]int) {
	for i, k := range canonicalKeys {
		t[bits.TrailingZeros(uint(k.bit))] = i + 1
	}
	return t
}()

// canonicalKeys are the field names in the order AppendJSON writes them, each
// as it appears on the wire with its colon: the decoder tries the next one
// first, with one comparison, before parsing a key the general way.
var canonicalKeys = func() (keys [numFields]canonKey) {
	for i, name := range []string{"schema", "ts", "interval_s", "node", "gpu_uuid", "gpu_model", "instance_id",
		"profile", "project", "user", "util", "mem_used_bytes", "mem_total_bytes", "processes", "util_source", "holder_ref",
		"share_kind", "share_mem", "share_cores"} {
		bit, _ := fieldBit([]byte(name))
		k := canonKey{lit: `"` + name + `":`, bit: bit, name: name}
		for j := 0; j < len(k.lit); j++ {
			k.w[j/8] |= uint64(k.lit[j]) << (8 * (j % 8))
			k.m[j/8] |= 0xff << (8 * (j % 8))
		}
		keys[i] = k
	}
	return keys
}()

// canonKey is a field name as it appears on the wire, `"name":` (at most 24
// bytes), and the same as three little-endian words and their byte masks.
type canonKey struct {
	lit  string
	bit  int
	name string
	w, m [3]uint64
}

// at reports whether d[i:] starts with the key: three word comparisons where
// 24 bytes are left, else a string comparison.
func (k *canonKey) at(d []byte, i int) bool {
	if len(d)-i < 24 {
		return len(d)-i >= len(k.lit) && string(d[i:i+len(k.lit)]) == k.lit
	}
	return binary.LittleEndian.Uint64(d[i:])&k.m[0] == k.w[0] &&
		binary.LittleEndian.Uint64(d[i+8:])&k.m[1] == k.w[1] &&
		binary.LittleEndian.Uint64(d[i+16:])&k.m[2] == k.w[2]
}

// maxInterned bounds the intern table; past it the table starts again empty so a
// stream of unique strings cannot grow memory without limit.
const maxInterned = 1 << 16

// NewDecoder returns a Decoder ready for use, with the default options.
func NewDecoder() *Decoder {
	return NewDecoderWith(DecoderOptions{})
}

// NewDecoderWith returns a Decoder with options opt, which the caller has
// validated (out-of-range values are clamped).
func NewDecoderWith(opt DecoderOptions) *Decoder {
	if opt.MaxInterval <= 0 {
		opt.MaxInterval = DefaultMaxInterval
	}
	opt.MaxInterval = min(opt.MaxInterval, MaxIntervalLimit)
	return &Decoder{intern: make(map[string]string, 1024), insts: make(map[string]*instMemo, 1024),
		opt: opt, maxIntervalMS: opt.MaxInterval.Milliseconds(), maxEndMS: math.MaxInt64}
}

// SetNow sets the clock against which MaxClockSkew is checked: from now on,
// samples that end after now + MaxClockSkew are rejected. It does nothing when
// MaxClockSkew is 0. Readers call it once per message or chunk, not per sample.
func (d *Decoder) SetNow(now time.Time) {
	if d.opt.MaxClockSkew <= 0 {
		return
	}
	d.clockMS = now.UnixMilli()
	d.maxEndMS = d.clockMS + d.opt.MaxClockSkew.Milliseconds()
}

// DecodeSample is a convenience for one-off decoding.
func DecodeSample(data []byte) (Sample, error) {
	var s Sample
	err := NewDecoder().Decode(data, &s)
	return s, err
}

const (
	fTS = 1 << iota
	fInterval
	fNode
	fGPUUUID
	fGPUModel
	fInstance
	fProfile
	fProject
	fUser
	fUtil
	fMemUsed
	fMemTotal
	fProcesses
	fSchema
	fUtilSource
	fHolderRef
	fShareKind
	fShareMem
	fShareCores

	// numFields is the number of fields the decoder knows (one bit each).
	numFields = iota

	fRequired = fTS | fInterval | fNode | fGPUUUID | fGPUModel | fInstance | fProfile |
		fProject | fUser | fUtil | fMemUsed | fMemTotal | fProcesses
)

var requiredOrder = []struct {
	bit  int
	name string
}{
	{fTS, "ts"}, {fInterval, "interval_s"}, {fNode, "node"}, {fGPUUUID, "gpu_uuid"},
	{fGPUModel, "gpu_model"}, {fInstance, "instance_id"}, {fProfile, "profile"},
	{fProject, "project"}, {fUser, "user"}, {fUtil, "util"},
	{fMemUsed, "mem_used_bytes"}, {fMemTotal, "mem_total_bytes"}, {fProcesses, "processes"},
}

func fieldBit(key []byte) (int, string) {
	switch string(key) {
	case "ts":
		return fTS, "ts"
	case "interval_s":
		return fInterval, "interval_s"
	case "node":
		return fNode, "node"
	case "gpu_uuid":
		return fGPUUUID, "gpu_uuid"
	case "gpu_model":
		return fGPUModel, "gpu_model"
	case "instance_id":
		return fInstance, "instance_id"
	case "profile":
		return fProfile, "profile"
	case "project":
		return fProject, "project"
	case "user":
		return fUser, "user"
	case "util":
		return fUtil, "util"
	case "mem_used_bytes":
		return fMemUsed, "mem_used_bytes"
	case "mem_total_bytes":
		return fMemTotal, "mem_total_bytes"
	case "processes":
		return fProcesses, "processes"
	case "schema":
		return fSchema, "schema"
	case "util_source":
		return fUtilSource, "util_source"
	case "holder_ref":
		return fHolderRef, "holder_ref"
	case "share_kind":
		return fShareKind, "share_kind"
	case "share_mem":
		return fShareMem, "share_mem"
	case "share_cores":
		return fShareCores, "share_cores"
	}
	return 0, ""
}

// ErrSyntax marks malformed JSON (as opposed to a well-formed sample out of range).
var ErrSyntax = errors.New("malformed JSON")

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("malformed JSON at byte %d: %s", e.off+1, e.msg)
}
func (e *syntaxError) Unwrap() error { return ErrSyntax }

// Decode parses one JSON object into s. On error s is left in an unspecified state.
func (d *Decoder) Decode(data []byte, s *Sample) error {
	if d.decodeFast(data, s) && s.Validate() == nil && s.StartMS+s.IntervalMS <= d.maxEndMS {
		if m := d.cur; d.midRaw != nil && m != nil {
			m.mid = midMemo{raw: append(m.mid.raw[:0], d.midRaw...), node: s.Node, gpuUUID: s.GPUUUID, gpuModel: s.GPUModel,
				profile: s.Profile, project: s.Project, user: s.User}
		}
		d.remember(s)
		return nil
	}
	return d.decode(data, s)
}

// decode is Decode the general way: any order of fields, whitespace, unknown
// fields, and the error that names what is wrong.
func (d *Decoder) decode(data []byte, s *Sample) error {
	*s = Sample{}
	d.cur, d.pred = nil, nil
	if d.prev != nil {
		d.pred = d.prev.next
	}
	p := parser{data: data}
	p.ws()
	if !p.eat('{') {
		return p.fail("expected a JSON object")
	}
	seen := 0
	next := 0 // index in canonicalKeys of the key expected next
	p.ws()
	if !p.eat('}') {
		for {
			p.ws()
			if p.peek() != '"' {
				return p.fail("expected a field name")
			}
			var bit int
			var name string
			if k := &canonicalKeys[next%numFields]; k.at(p.data, p.i) {
				p.i += len(k.lit)
				bit, name = k.bit, k.name
				next++
			} else {
				key, err := p.str(&d.scratch)
				if err != nil {
					return err
				}
				bit, name = fieldBit(key)
				if bit != 0 {
					next = canonicalNext[bits.TrailingZeros(uint(bit))] // resynchronise
				}
				p.ws()
				if !p.eat(':') {
					return p.fail("expected ':' after field name")
				}
			}
			p.ws()
			if bit != 0 {
				if seen&bit != 0 {
					return &FieldError{Field: name, Reason: "appears more than once"}
				}
				seen |= bit
				if err := d.field(&p, bit, name, s); err != nil {
					if se := (*syntaxError)(nil); errors.As(err, &se) {
						return fmt.Errorf("field %q: %w", name, err)
					}
					return err
				}
			} else if err := p.skipValue(0); err != nil {
				return err
			}
			p.ws()
			if p.eat(',') {
				continue
			}
			if p.eat('}') {
				break
			}
			return p.fail("expected ',' or '}'")
		}
	}
	p.ws()
	if p.i != len(p.data) {
		return p.fail("unexpected data after the object")
	}
	return d.check(seen, s)
}

// check finishes a sample decoded the general way, with the fields seen: the
// first required one missing, else the sample's ranges and the clock.
func (d *Decoder) check(seen int, s *Sample) error {
	if missing := fRequired &^ seen; missing != 0 {
		for _, r := range requiredOrder {
			if missing&r.bit != 0 {
				return &FieldError{Field: r.name, Reason: "required field is missing"}
			}
		}
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if s.StartMS+s.IntervalMS > d.maxEndMS {
		return d.futureErr(s)
	}
	d.remember(s)
	return nil
}

// remember keeps the values of a decoded sample as the guesses for the next
// sample of its instance, and links the previous sample's instance to it.
func (d *Decoder) remember(s *Sample) {
	m := d.cur
	if m == nil {
		return
	}
	if m.node != s.Node {
		m.node = plainOr(s.Node)
	}
	if m.gpuUUID != s.GPUUUID {
		m.gpuUUID = plainOr(s.GPUUUID)
	}
	if m.gpuModel != s.GPUModel {
		m.gpuModel = plainOr(s.GPUModel)
	}
	if d.prev != nil {
		d.prev.next = m
	}
	d.prev = m
}

// guess is the value that string field bit most likely has: the current
// instance's (or, before instance_id, the predicted instance's), else the
// previous sample's. It is plain.
func (d *Decoder) guess(bit int) string {
	m := d.cur
	if m == nil {
		m = d.pred
	}
	if m != nil {
		switch bit {
		case fNode:
			return m.node
		case fGPUUUID:
			return m.gpuUUID
		case fGPUModel:
			return m.gpuModel
		case fProfile:
			return m.profile
		case fProject:
			return m.project
		case fUser:
			return m.user
		}
	}
	return d.last[bits.TrailingZeros(uint(bit))]
}

// eatQuoted consumes the JSON string `"` + v + `"` if the input is exactly
// that there; v must be plain.
func (p *parser) eatQuoted(v string) bool {
	n := len(v)
	if len(p.data)-p.i < n+2 || p.data[p.i] != '"' || p.data[p.i+n+1] != '"' || string(p.data[p.i+1:p.i+1+n]) != v {
		return false
	}
	p.i += n + 2
	return true
}

// futureErr describes a sample that ends after the clock plus the skew allowed.
func (d *Decoder) futureErr(s *Sample) error {
	end := time.UnixMilli(s.EndMS()).UTC()
	aheadMS := s.EndMS() - d.clockMS
	ahead := fmt.Sprintf("%.0f days", float64(aheadMS)/86_400_000)
	if aheadMS < 100*366*86_400_000 { // a time.Duration holds about 292 years
		ahead = (time.Duration(aheadMS) * time.Millisecond).String()
	}
	return &FieldError{Field: "ts", Value: strconv.Quote(s.Time().Format(time.RFC3339Nano)), Err: ErrFutureSample,
		Reason: fmt.Sprintf("the sample ends at %s, %s after the ingest clock (%s): more than the clock skew allowed, %v (set with --max-clock-skew)",
			end.Format(time.RFC3339Nano), ahead, time.UnixMilli(d.clockMS).UTC().Format(time.RFC3339Nano), d.opt.MaxClockSkew)}
}

// field decodes the value of field bit (named name) into s: one step per
// kind of value.
func (d *Decoder) field(p *parser, bit int, name string, s *Sample) error {
	switch bit {
	case fTS:
		return d.tsField(p, name, s)
	case fInterval:
		return d.intervalField(p, name, s)
	case fUtil:
		return utilField(p, name, s)
	case fMemUsed, fMemTotal, fProcesses:
		return intField(p, bit, name, s)
	case fShareMem, fShareCores:
		return shareField(p, bit, name, s)
	case fInstance:
		if m := d.pred; m != nil && m.plainID && p.eatQuoted(m.id) {
			d.cur = m
			s.InstanceID = m.id
			return nil
		}
		raw, err := d.strField(p, name)
		if err != nil {
			return err
		}
		d.instance(raw, s)
	default:
		v := d.guess(bit)
		if !p.eatQuoted(v) {
			raw, err := d.strField(p, name)
			if err != nil {
				return err
			}
			v = d.text(bit, raw)
		}
		switch bit {
		case fNode:
			s.Node = v
		case fGPUUUID:
			s.GPUUUID = v
		case fGPUModel:
			s.GPUModel = v
		case fProfile:
			s.Profile = v
		case fProject:
			s.Project = v
		case fUser:
			s.User = v
		case fSchema:
			s.SchemaField = v
		case fUtilSource:
			s.UtilSource = v
		case fHolderRef:
			s.HolderRef = v
		case fShareKind:
			if !ValidShareKind(v) {
				return &FieldError{Field: name, Value: quoteString(v), Reason: "unknown kind of share (want vgpu, hami or timeslice)"}
			}
			s.ShareKind = v
		}
	}
	return nil
}

func (d *Decoder) tsField(p *parser, name string, s *Sample) error {
	// The guess: the last timestamp parsed (plain: a timestamp
	// ParseTimestampMS accepts has only digits, '-', ':', '.', 'T', 'Z', '+').
	if n := len(d.tsText); n > 0 && len(p.data)-p.i >= n+2 && p.data[p.i] == '"' && p.data[p.i+n+1] == '"' &&
		string(p.data[p.i+1:p.i+1+n]) == string(d.tsText) {
		p.i += n + 2
		s.StartMS = d.tsMS
		return nil
	}
	raw, err := d.strField(p, name)
	if err != nil {
		return err
	}
	ms, err := ParseTimestampMS(raw)
	if err != nil {
		return &FieldError{Field: name, Value: quote(raw), Reason: err.Error()}
	}
	s.StartMS = ms
	d.tsText, d.tsMS = append(d.tsText[:0], raw...), ms
	return nil
}

func (d *Decoder) intervalField(p *parser, name string, s *Sample) error {
	num, err := p.number()
	if err != nil {
		return typeErr(p, err, name, "a number of seconds")
	}
	ms, err := secondsToMS(num)
	if err != nil {
		return &FieldError{Field: name, Value: string(num), Reason: err.Error()}
	}
	if ms > d.maxIntervalMS {
		return &FieldError{Field: name, Value: string(num), Err: ErrIntervalTooLong, Reason: fmt.Sprintf(
			"longer than the longest interval accepted, %s s (%v; set with --max-interval)",
			strconv.FormatFloat(float64(d.maxIntervalMS)/1000, 'f', -1, 64), d.opt.MaxInterval)}
	}
	s.IntervalMS = ms
	return nil
}

func utilField(p *parser, name string, s *Sample) error {
	if p.eatLiteral("null") {
		return nil
	}
	num, err := p.number()
	if err != nil {
		return typeErr(p, err, name, "a number in [0,1] or null")
	}
	// The string does not outlive this call, so it may alias the input.
	f, perr := strconv.ParseFloat(unsafe.String(&num[0], len(num)), 64) //nolint:gosec // G103: see above

	if perr != nil || !(f >= 0 && f <= 1) {
		return &FieldError{Field: name, Value: string(num), Reason: "must be a number in [0,1] or null"}
	}
	s.Util, s.UtilKnown = f, true
	return nil
}

// shareField decodes share_mem and share_cores: a number in (0, 1] (absent
// is 0 in Go, so 0 on the wire is out of range, not absent).
func shareField(p *parser, bit int, name string, s *Sample) error {
	num, err := p.number()
	if err != nil {
		return typeErr(p, err, name, "a number in (0,1]")
	}
	f, ok := shareFrac(num)
	if !ok {
		return &FieldError{Field: name, Value: string(num), Reason: "must be a number in (0,1]"}
	}
	if bit == fShareMem {
		s.ShareMem = f
	} else {
		s.ShareCores = f
	}
	return nil
}

// shareFrac parses a JSON number that must lie in (0, 1].
func shareFrac(num []byte) (float64, bool) {
	// The string does not outlive this call, so it may alias the input.
	f, err := strconv.ParseFloat(unsafe.String(&num[0], len(num)), 64) //nolint:gosec // G103: see above
	return f, err == nil && f > 0 && f <= 1
}

// intField decodes the non-negative integer fields (memory, processes).
func intField(p *parser, bit int, name string, s *Sample) error {
	num, err := p.number()
	if err != nil {
		return typeErr(p, err, name, "an integer")
	}
	v, ok := parseInt(num)
	if !ok {
		return &FieldError{Field: name, Value: string(num), Reason: "must be a non-negative integer"}
	}
	switch bit {
	case fMemUsed:
		s.MemUsed = v
	case fMemTotal:
		s.MemTotal = v
	default:
		s.Processes = v
	}
	return nil
}

// instance sets s's instance and makes its memo the current one: the
// instance's profile, project and user are most often those of its last
// sample.
func (d *Decoder) instance(raw []byte, s *Sample) {
	m := d.insts[string(raw)]
	if m == nil {
		if len(d.insts) >= maxInterned {
			clear(d.insts)
		}
		m = &instMemo{id: string(raw)}
		m.plainID = plainString(m.id)
		d.insts[m.id] = m
	}
	d.cur = m
	s.InstanceID = m.id
}

// text returns the string of text field bit without allocating when it
// repeats: the current instance's memo, then the field's last value, then
// the intern table.
func (d *Decoder) text(bit int, raw []byte) string {
	var memo *string
	if m := d.cur; m != nil {
		switch bit {
		case fProfile:
			memo = &m.profile
		case fProject:
			memo = &m.project
		case fUser:
			memo = &m.user
		}
	}
	if memo != nil && *memo == string(raw) {
		return *memo
	}
	slot := &d.last[bits.TrailingZeros(uint(bit))]
	v := *slot
	if v != string(raw) {
		v = d.internBytes(raw)
		*slot = plainOr(v)
	}
	if memo != nil {
		*memo = plainOr(v)
	}
	return v
}

func (d *Decoder) strField(p *parser, name string) ([]byte, error) {
	if p.peek() != '"' {
		if err := p.skipValue(0); err != nil {
			return nil, err
		}
		return nil, &FieldError{Field: name, Reason: "must be a string"}
	}
	return p.str(&d.scratch)
}

func typeErr(p *parser, err error, name, want string) error {
	if errors.Is(err, errNotNumber) {
		start := p.i
		if serr := p.skipValue(0); serr != nil {
			return serr
		}
		return &FieldError{Field: name, Value: quote(p.data[start:p.i]), Reason: "must be " + want}
	}
	return err
}

func (d *Decoder) internBytes(b []byte) string {
	if s, ok := d.intern[string(b)]; ok {
		return s
	}
	if len(d.intern) >= maxInterned {
		clear(d.intern)
	}
	s := string(b)
	d.intern[s] = s
	return s
}

func quote(b []byte) string {
	const limit = 64
	if len(b) > limit {
		return strconv.Quote(string(b[:limit])) + "…"
	}
	return strconv.Quote(string(b))
}

// secondsToMS converts a JSON number of seconds to whole milliseconds. The wire
// format carries at most millisecond precision; finer values are rounded to the
// nearest millisecond (half away from zero), and a result below 1 ms is rejected.
func secondsToMS(num []byte) (int64, error) {
	// Fast path: plain decimal with at most 3 fractional digits.
	var ip, frac int64
	i, n := 0, len(num)
	for i < n && num[i] >= '0' && num[i] <= '9' && i < 15 {
		ip = ip*10 + int64(num[i]-'0')
		i++
	}
	fast := i > 0 && (i == n || num[i] == '.')
	if fast && i < n {
		j, digits := i+1, 0
		for j < n && num[j] >= '0' && num[j] <= '9' && digits < 3 {
			frac = frac*10 + int64(num[j]-'0')
			j++
			digits++
		}
		if j != n || digits == 0 {
			fast = false
		}
		for ; digits < 3; digits++ {
			frac *= 10
		}
	}
	var ms int64
	if fast {
		ms = ip*1000 + frac
	} else {
		dv, err := decimal.NewFromString(string(num))
		if err != nil {
			return 0, fmt.Errorf("not a number")
		}
		dv = dv.Shift(3).Round(0)
		if !dv.IsInteger() || dv.GreaterThan(decimal.NewFromInt(maxIntMS)) || dv.LessThan(decimal.NewFromInt(-maxIntMS)) {
			return 0, fmt.Errorf("out of range (at most %d s)", maxIntMS/1000)
		}
		ms = dv.IntPart()
	}
	if ms <= 0 {
		return 0, fmt.Errorf("must be > 0 (at least 0.001)")
	}
	if ms > maxIntMS {
		return 0, fmt.Errorf("out of range (at most %d s)", maxIntMS/1000)
	}
	return ms, nil
}

// parseInt accepts a JSON number that is a non-negative integer (1, 1e3, 2.0).
func parseInt(num []byte) (int64, bool) {
	var v int64
	plain := true
	for _, c := range num {
		if c < '0' || c > '9' {
			plain = false
			break
		}
		if v > (math.MaxInt64-9)/10 {
			plain = false
			break
		}
		v = v*10 + int64(c-'0')
	}
	if plain {
		return v, true
	}
	dv, err := decimal.NewFromString(string(num))
	if err != nil || dv.Sign() < 0 || !dv.IsInteger() || dv.GreaterThan(decimal.NewFromInt(math.MaxInt64)) {
		return 0, false
	}
	return dv.IntPart(), true
}

// parser is a minimal strict JSON scanner over one value.
type parser struct {
	data []byte
	i    int
}

var errNotNumber = errors.New("not a number")

// strSpecial marks the bytes that end the fast path of string scanning: the
// closing quote, escapes, control characters and non-ASCII bytes.
var strSpecial = func() (t [256]bool) {
	for c := range t {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= 0x80
	}
	return t
}()

func (p *parser) fail(msg string) error { return &syntaxError{off: p.i, msg: msg} }

func (p *parser) ws() {
	if p.i < len(p.data) && p.data[p.i] > ' ' {
		return // the common case, inlined: no whitespace
	}
	p.wsSlow()
}

func (p *parser) wsSlow() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) peek() byte {
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) eatLiteral(lit string) bool {
	if len(p.data)-p.i >= len(lit) && string(p.data[p.i:p.i+len(lit)]) == lit {
		p.i += len(lit)
		return true
	}
	return false
}

// number scans a JSON number and returns its text.
func (p *parser) number() ([]byte, error) {
	start := p.i
	d := p.data
	i := p.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	if i >= len(d) {
		if i > start {
			p.i = i
			return nil, p.fail("incomplete number")
		}
		return nil, errNotNumber
	}
	switch {
	case d[i] == '0':
		i++
	case d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		if i > start {
			p.i = i
			return nil, p.fail("invalid number")
		}
		return nil, errNotNumber
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.i = i
			return nil, p.fail("invalid number: digit expected after '.'")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.i = i
			return nil, p.fail("invalid number: digit expected in exponent")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	p.i = i
	return d[start:i], nil
}

// str scans a JSON string starting at '"' and returns its decoded bytes. The
// result aliases the input when the string has no escapes, else *scratch.
func (p *parser) str(scratch *[]byte) ([]byte, error) {
	p.i++ // opening quote
	start := p.i
	d := p.data
	i := start
	// Eight bytes at a time while none of them is special (SWAR: a byte below
	// 0x20, a quote, a backslash or a high bit sets that byte's top bit).
	for ; i+8 <= len(d); i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		const lo, hi = 0x0101010101010101, 0x8080808080808080
		q := x ^ (lo * '"')
		bs := x ^ (lo * '\\')
		if ((x-lo*0x20)|(q-lo)|(bs-lo)|x)&hi != 0 {
			break
		}
	}
	for ; i < len(d); i++ {
		c := d[i]
		if !strSpecial[c] {
			continue
		}
		if c == '"' {
			p.i = i + 1
			return d[start:i], nil
		}
		if c < 0x20 {
			p.i = i
			return nil, p.fail("control character in string")
		}
		// An escape or a multi-byte character: decode and validate the slow way.
		return p.strSlow(start, scratch)
	}
	p.i = len(d)
	return nil, p.fail("unterminated string")
}

func (p *parser) strSlow(start int, scratch *[]byte) ([]byte, error) {
	buf := (*scratch)[:0]
	d := p.data
	i := start
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			p.i = i + 1
			*scratch = buf
			return buf, nil
		case c < 0x20:
			p.i = i
			return nil, p.fail("control character in string")
		case c == '\\':
			if i+1 >= len(d) {
				p.i = i
				return nil, p.fail("unterminated escape")
			}
			e := d[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(d, i)
				if !ok {
					p.i = i
					return nil, p.fail("invalid \\u escape")
				}
				i += 4
				if r >= 0xD800 && r < 0xDC00 {
					// High surrogate: a low one must follow to form a pair.
					if r2, ok := hex4(d, i+2); ok && i+1 < len(d) && d[i] == '\\' && d[i+1] == 'u' && r2 >= 0xDC00 && r2 < 0xE000 {
						r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
						i += 6
					} else {
						r = 0xFFFD
					}
				} else if r >= 0xDC00 && r < 0xE000 {
					r = 0xFFFD
				}
				buf = appendRune(buf, r)
			default:
				p.i = i - 1
				return nil, p.fail("invalid escape")
			}
		case c < 0x80:
			buf = append(buf, c)
			i++
		default:
			r, size := decodeRune(d[i:])
			if r == badRune {
				p.i = i
				return nil, p.fail("invalid UTF-8 in string")
			}
			buf = append(buf, d[i:i+size]...)
			i += size
		}
	}
	p.i = len(d)
	return nil, p.fail("unterminated string")
}

// skipValue validates and skips any JSON value (for unknown fields).
func (p *parser) skipValue(depth int) error {
	if depth > 64 {
		return p.fail("nesting too deep")
	}
	switch c := p.peek(); {
	case c == '"':
		var tmp []byte
		_, err := p.str(&tmp)
		return err
	case c == '{':
		p.i++
		p.ws()
		if p.eat('}') {
			return nil
		}
		for {
			p.ws()
			if p.peek() != '"' {
				return p.fail("expected a field name")
			}
			var tmp []byte
			if _, err := p.str(&tmp); err != nil {
				return err
			}
			p.ws()
			if !p.eat(':') {
				return p.fail("expected ':'")
			}
			p.ws()
			if err := p.skipValue(depth + 1); err != nil {
				return err
			}
			p.ws()
			if p.eat(',') {
				continue
			}
			if p.eat('}') {
				return nil
			}
			return p.fail("expected ',' or '}'")
		}
	case c == '[':
		p.i++
		p.ws()
		if p.eat(']') {
			return nil
		}
		for {
			p.ws()
			if err := p.skipValue(depth + 1); err != nil {
				return err
			}
			p.ws()
			if p.eat(',') {
				continue
			}
			if p.eat(']') {
				return nil
			}
			return p.fail("expected ',' or ']'")
		}
	case c == 't':
		if p.eatLiteral("true") {
			return nil
		}
	case c == 'f':
		if p.eatLiteral("false") {
			return nil
		}
	case c == 'n':
		if p.eatLiteral("null") {
			return nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := p.number()
		return err
	}
	return p.fail("invalid value")
}

func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
