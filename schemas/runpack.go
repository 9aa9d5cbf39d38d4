package schemas

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// A run pack mirrors, in one compact binary value, the occupancy runs and
// idle runs of one project whose start falls on one UTC day, as one write
// (one batch) stored them: the stores keep one pack row per (project, day,
// write) next to their run rows, so that a read of one project decodes a few
// dozen packs instead of reading thousands of run rows. Packs hold the same
// runs as the run rows, duplicates and all: a replay adds a pack, and the
// readers' unions make the repeats harmless, as they do for run rows.
//
// The format, every integer a varint (encoding/binary):
//
//	uvarint version (1)
//	string project
//	uvarint keys; per key: string user, instance_id, gpu_model, profile
//	uvarint runs; per run (sorted by key, start): uvarint key, varint start - previous start, uvarint end - start
//	uvarint idle runs; per idle run (sorted by key, start): uvarint key, byte class,
//	  varint start - previous start, uvarint end - start, 8 bytes min util, 8 bytes max util (IEEE 754, little endian)
//
// where a string is its uvarint length and bytes, and "previous start" is
// the previous run's of the same list (0 for the first).
//
// A pack the writer could shrink is stored sealed, as version 2:
//
//	uvarint version (2)
//	uvarint length of the version-1 pack
//	the version-1 pack as one LZ4 block
//
// Keys and runs repeat from pack to pack and day to day, so a sealed pack is
// about a fifth of its version-1 bytes: a store reads, and sends to its
// reader, a fifth as much for one read (docs/benchmarks.md). Readers take
// both versions, so packs written before version 2 stay as they are.
const (
	runPackVersion = 1
	sealedVersion  = 2
)

// DayMS is the length of a UTC day, the span of a run pack.
const DayMS = 86_400_000

// RunPack is one pack: its project, the UTC day its runs start on (DayMS is
// the day's first millisecond), the smallest start and largest end of its
// runs (the stores' row filters), and the encoded runs.
type RunPack struct {
	Project      string
	DayMS        int64
	MinMS, MaxMS int64
	Data         []byte
}

// PackRuns returns the packs of a batch's runs: one per project and UTC day
// of a run's start, runs of project "" (unheld) left out, in (project, day)
// order.
func PackRuns(occ []Run, idle []IdleRun) []RunPack {
	type pd struct {
		project string
		day     int64
	}
	groups := map[pd]*packBuilder{}
	var order []pd
	get := func(k *Key, start int64) *packBuilder {
		g := pd{k.Project, start - floorMod(start, DayMS)}
		b := groups[g]
		if b == nil {
			b = &packBuilder{keys: map[Key]uint32{}, min: math.MaxInt64, max: math.MinInt64}
			groups[g] = b
			order = append(order, g)
		}
		b.min, b.max = min(b.min, start), max(b.max, start)
		return b
	}
	for i := range occ {
		if r := &occ[i]; r.Key.Project != "" {
			b := get(&r.Key, r.StartMS)
			b.max = max(b.max, r.EndMS)
			b.occ = append(b.occ, packedRun{key: b.key(r.Key), start: r.StartMS, end: r.EndMS})
		}
	}
	for i := range idle {
		if r := &idle[i]; r.Key.Project != "" {
			b := get(&r.Key, r.StartMS)
			b.max = max(b.max, r.EndMS)
			b.idle = append(b.idle, packedIdle{packedRun: packedRun{key: b.key(r.Key), start: r.StartMS, end: r.EndMS},
				class: r.Class, minUtil: r.MinUtil, maxUtil: r.MaxUtil})
		}
	}
	slices.SortFunc(order, func(a, b pd) int { return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.day, b.day)) })
	out := make([]RunPack, 0, len(order))
	for _, g := range order {
		b := groups[g]
		out = append(out, RunPack{Project: g.project, DayMS: g.day, MinMS: b.min, MaxMS: b.max, Data: seal(b.encode(g.project))})
	}
	return out
}

type packedRun struct {
	key        uint32
	start, end int64
}

type packedIdle struct {
	packedRun
	class            uint8
	minUtil, maxUtil float64
}

// packBuilder collects one pack's keys and runs.
type packBuilder struct {
	keys     map[Key]uint32
	keyList  []Key
	occ      []packedRun
	idle     []packedIdle
	min, max int64
}

func (b *packBuilder) key(k Key) uint32 {
	i, ok := b.keys[k]
	if !ok {
		i = uint32(len(b.keyList))
		b.keys[k] = i
		b.keyList = append(b.keyList, k)
	}
	return i
}

func byKeyStart(a, b packedRun) int {
	return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
}

func (b *packBuilder) encode(project string) []byte {
	slices.SortFunc(b.occ, byKeyStart)
	slices.SortFunc(b.idle, func(x, y packedIdle) int {
		return cmp.Or(byKeyStart(x.packedRun, y.packedRun), cmp.Compare(x.class, y.class),
			cmp.Compare(x.minUtil, y.minUtil), cmp.Compare(x.maxUtil, y.maxUtil))
	})
	buf := make([]byte, 0, 16+len(b.keyList)*48+len(b.occ)*8+len(b.idle)*26)
	str := func(s string) { buf = binary.AppendUvarint(buf, uint64(len(s))); buf = append(buf, s...) }
	buf = binary.AppendUvarint(buf, runPackVersion)
	str(project)
	buf = binary.AppendUvarint(buf, uint64(len(b.keyList)))
	for _, k := range b.keyList {
		str(k.User)
		str(k.InstanceID)
		str(k.GPUModel)
		str(k.Profile)
	}
	buf = binary.AppendUvarint(buf, uint64(len(b.occ)))
	var prev int64
	for _, r := range b.occ {
		buf = appendRun(buf, r, &prev)
	}
	buf = binary.AppendUvarint(buf, uint64(len(b.idle)))
	prev = 0
	for _, r := range b.idle {
		buf = binary.AppendUvarint(buf, uint64(r.key))
		buf = append(buf, r.class)
		buf = binary.AppendVarint(buf, r.start-prev)
		buf = binary.AppendUvarint(buf, uint64(max(r.end-r.start, 0)))
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(r.minUtil))
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(r.maxUtil))
		prev = r.start
	}
	return buf
}

var compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

// seal returns pack (version 1) as a sealed pack (version 2), or pack itself
// when LZ4 cannot make it smaller.
func seal(pack []byte) []byte {
	out := make([]byte, 0, 2*binary.MaxVarintLen64+lz4.CompressBlockBound(len(pack)))
	out = binary.AppendUvarint(out, sealedVersion)
	out = binary.AppendUvarint(out, uint64(len(pack)))
	c := compressors.Get().(*lz4.Compressor)
	n, err := c.CompressBlock(pack, out[len(out):cap(out)])
	compressors.Put(c)
	if err != nil || n == 0 || len(out)+n >= len(pack) {
		return pack // incompressible (n 0) or no smaller
	}
	return out[:len(out)+n]
}

// Reseal returns pack sealed, and true, when it is a version-1 pack that
// decodes and that LZ4 makes smaller; otherwise pack itself and false (a
// sealed pack, a small one, or one that is corrupt and stays as it is for
// its readers to report). The stores' migrations reseal the packs written
// before version 2.
func Reseal(pack []byte) ([]byte, bool) {
	if v, _ := binary.Uvarint(pack); v != runPackVersion {
		return pack, false
	}
	var d DecodedPack
	if d.Decode(pack) != nil {
		return pack, false
	}
	if s := seal(pack); len(s) < len(pack) {
		return s, true
	}
	return pack, false
}

// Unseal returns the version-1 bytes of a sealed pack, or pack itself when
// it is not sealed.
func Unseal(pack []byte) ([]byte, error) {
	if v, _ := binary.Uvarint(pack); v != sealedVersion {
		return pack, nil
	}
	return unseal(pack, nil)
}

// unseal returns the version-1 pack inside sealed (version 2), decompressed
// into buf (grown as needed). The declared length is bounded by what LZ4 can
// expand the block to, so a corrupt header allocates nothing unreasonable.
func unseal(sealed, buf []byte) ([]byte, error) {
	r := &packReader{b: sealed}
	r.uvarint() // the version, known to be sealedVersion
	n := r.uvarint()
	if r.err != nil || n == 0 || n > 255*uint64(len(sealed)-r.i)+16 {
		return buf, errPack
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	got, err := lz4.UncompressBlock(sealed[r.i:], buf)
	if err != nil || uint64(got) != n {
		return buf, errPack
	}
	if v, _ := binary.Uvarint(buf); v != runPackVersion {
		return buf, fmt.Errorf("run pack: a sealed pack holds version %d, want %d", v, runPackVersion)
	}
	return buf, nil
}

// appendRun appends r's key, start delta and length. A run whose end is
// before its start (never written by the compactor) is stored with length
// 0: readers skip empty runs either way.
func appendRun(buf []byte, r packedRun, prev *int64) []byte {
	buf = binary.AppendUvarint(buf, uint64(r.key))
	buf = binary.AppendVarint(buf, r.start-*prev)
	buf = binary.AppendUvarint(buf, uint64(max(r.end-r.start, 0)))
	*prev = r.start
	return buf
}

// PackRun is a decoded occupancy run: its key's index in the pack's Keys.
type PackRun struct {
	Key            uint32
	StartMS, EndMS int64
}

// PackIdleRun is a decoded idle run.
type PackIdleRun struct {
	PackRun
	Class            uint8
	MinUtil, MaxUtil float64
}

// DecodedPack is a decoded run pack; Decode reuses its slices. Its keys are
// kept as their encoded bytes (KeyBytes: a map key that costs no
// allocation) and built only when asked for (Key): a reader looks each key
// up once per read, not once per pack.
type DecodedPack struct {
	Occ  []PackRun
	Idle []PackIdleRun

	pack    []byte
	raw     []byte   // a sealed pack's version-1 bytes, reused by the next Decode
	project [2]int   // the project's bytes in pack
	keys    [][2]int // each key's encoded bytes in pack
}

// Keys is the number of keys of the pack.
func (d *DecodedPack) Keys() int { return len(d.keys) }

// ProjectBytes returns the project's bytes (valid while the pack is).
func (d *DecodedPack) ProjectBytes() []byte { return d.pack[d.project[0]:d.project[1]] }

// KeyBytes returns key i's encoded bytes (user, instance, model, profile):
// equal bytes are an equal key within one project. Valid while the pack is.
func (d *DecodedPack) KeyBytes(i int) []byte { return d.pack[d.keys[i][0]:d.keys[i][1]] }

// Key returns key i, its strings copied out of the pack.
func (d *DecodedPack) Key(i int) Key {
	r := &packReader{s: string(d.pack[d.keys[i][0]:d.keys[i][1]])}
	return Key{Project: string(d.ProjectBytes()), User: r.str(), InstanceID: r.str(), GPUModel: r.str(), Profile: r.str()}
}

var errPack = errors.New("run pack: truncated or corrupt")

// packReader reads a pack's varints; the first error sticks.
type packReader struct {
	s   string // or b: the pack
	b   []byte
	i   int
	err error
}

func (r *packReader) len() int { return max(len(r.s), len(r.b)) }

func (r *packReader) at(i int) byte {
	if r.b != nil {
		return r.b[i]
	}
	return r.s[i]
}

func (r *packReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	var v uint64
	var shift uint
	for r.i < r.len() {
		b := r.at(r.i)
		r.i++
		if b < 0x80 {
			if shift >= 63 && b > 1 {
				break
			}
			return v | uint64(b)<<shift
		}
		v |= uint64(b&0x7f) << shift
		shift += 7
		if shift > 63 {
			break
		}
	}
	r.err = errPack
	return 0
}

func (r *packReader) varint() int64 {
	u := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *packReader) str() string {
	n := r.skipStr()
	return r.s[r.i-n : r.i]
}

// skipStr steps over a string and returns its length.
func (r *packReader) skipStr() int {
	n := r.uvarint()
	if r.err != nil || n > uint64(r.len()-r.i) {
		r.err = errPack
		return 0
	}
	r.i += int(n)
	return int(n)
}

func (r *packReader) float() float64 {
	if r.err != nil || r.len()-r.i < 8 {
		r.err = errPack
		return 0
	}
	var v uint64
	for j := 7; j >= 0; j-- {
		v = v<<8 | uint64(r.at(r.i+j))
	}
	r.i += 8
	return math.Float64frombits(v)
}

// count reads a list's length, bounded by the bytes left (each element
// takes at least min bytes), so that a corrupt length allocates nothing.
func (r *packReader) count(minBytes int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64((r.len()-r.i)/minBytes) {
		r.err = errPack
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// Decode decodes pack (version 1 or sealed) into d, which refers to pack
// until the next Decode.
func (d *DecodedPack) Decode(pack []byte) error {
	if v, _ := binary.Uvarint(pack); v == sealedVersion {
		var err error
		if d.raw, err = unseal(pack, d.raw); err != nil {
			d.pack, d.keys, d.Occ, d.Idle = nil, d.keys[:0], d.Occ[:0], d.Idle[:0]
			return err
		}
		pack = d.raw
	}
	d.pack = pack
	r := &packReader{b: pack}
	if v := r.uvarint(); r.err == nil && v != runPackVersion {
		return fmt.Errorf("run pack: version %d, this build reads %d and %d (sealed)", v, runPackVersion, sealedVersion)
	}
	n := r.skipStr()
	d.project = [2]int{r.i - n, r.i}
	d.keys = d.keys[:0]
	for range r.count(4) {
		a := r.i
		for range 4 {
			r.skipStr()
		}
		d.keys = append(d.keys, [2]int{a, r.i})
	}
	d.Occ = d.Occ[:0]
	var prev int64
	for range r.count(3) {
		k, s := uint32(r.uvarint()), prev+r.varint()
		d.Occ = append(d.Occ, PackRun{Key: k, StartMS: s, EndMS: s + int64(r.uvarint())})
		prev = s
	}
	d.Idle = d.Idle[:0]
	prev = 0
	for range r.count(20) {
		var x PackIdleRun
		x.Key = uint32(r.uvarint())
		if r.err == nil && r.i < len(pack) {
			x.Class = pack[r.i]
			r.i++
		}
		x.StartMS = prev + r.varint()
		x.EndMS = x.StartMS + int64(r.uvarint())
		x.MinUtil, x.MaxUtil = r.float(), r.float()
		prev = x.StartMS
		d.Idle = append(d.Idle, x)
	}
	if r.err == nil && r.i != len(pack) {
		r.err = errPack
	}
	if r.err != nil {
		return r.err
	}
	return d.checkKeys()
}

// checkKeys fails when a run names a key the pack does not have.
func (d *DecodedPack) checkKeys() error {
	for _, x := range d.Occ {
		if x.Key >= uint32(len(d.keys)) {
			return errPack
		}
	}
	for _, x := range d.Idle {
		if x.Key >= uint32(len(d.keys)) {
			return errPack
		}
	}
	return nil
}

// Runs returns the pack's occupancy runs and idle runs as stored rows.
func (d *DecodedPack) Runs() ([]Run, []IdleRun) {
	keys := make([]Key, len(d.keys))
	for i := range keys {
		keys[i] = d.Key(i)
	}
	occ := make([]Run, len(d.Occ))
	for i, x := range d.Occ {
		occ[i] = Run{Key: keys[x.Key], StartMS: x.StartMS, EndMS: x.EndMS}
	}
	idle := make([]IdleRun, len(d.Idle))
	for i, x := range d.Idle {
		idle[i] = IdleRun{Run: Run{Key: keys[x.Key], StartMS: x.StartMS, EndMS: x.EndMS}, Class: x.Class, MinUtil: x.MinUtil, MaxUtil: x.MaxUtil}
	}
	return occ, idle
}

// MergePacks returns the runs of packs as packs again, merged as the run
// tables merge a run written twice: an occupancy run by key and start, an
// idle run by key, class, start and utilisation bounds, each keeping the
// latest end. Packs of one project and day give one pack; reads of it give
// what reads of the packs gave (the unions absorbed the repeats).
func MergePacks(packs [][]byte) ([]RunPack, error) {
	type occAt struct {
		k     Key
		start int64
	}
	type idleAt struct {
		k                Key
		class            uint8
		start            int64
		minUtil, maxUtil uint64 // the bits: NaN merges with NaN
	}
	var occ []Run
	var idle []IdleRun
	occOf, idleOf := map[occAt]int{}, map[idleAt]int{}
	var d DecodedPack
	for _, p := range packs {
		if err := d.Decode(p); err != nil {
			return nil, err
		}
		o, id := d.Runs()
		for _, r := range o {
			at := occAt{r.Key, r.StartMS}
			if i, ok := occOf[at]; ok {
				occ[i].EndMS = max(occ[i].EndMS, r.EndMS)
				continue
			}
			occOf[at] = len(occ)
			occ = append(occ, r)
		}
		for _, r := range id {
			at := idleAt{r.Key, r.Class, r.StartMS, math.Float64bits(r.MinUtil), math.Float64bits(r.MaxUtil)}
			if i, ok := idleOf[at]; ok {
				idle[i].EndMS = max(idle[i].EndMS, r.EndMS)
				continue
			}
			idleOf[at] = len(idle)
			idle = append(idle, r)
		}
	}
	return PackRuns(occ, idle), nil
}
