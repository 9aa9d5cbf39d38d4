// Package spool is a bounded, crash-safe, append-only on-disk queue of records
// (encoded samples) for the collector's publisher.
//
// Layout: a directory of segment files named by a 16-digit hex sequence number
// ("000000000000002a.seg") and a "cursor" file with the position of the first
// record not yet acknowledged. A record is framed as
//
//	u32 length of payload | timed flag (bit 31, little endian) | u32 CRC-32C of payload | payload
//	payload = [i64 append time, Unix ms, when timed] | u16 key length | key | value
//
// Every record written now is timed: the spool knows when its oldest
// unacknowledged record was appended, across restarts (OldestUnacked). Records
// without a time (written before records carried one) count as appended when
// their segment file was last modified.
//
// On open every segment is scanned; a record whose length or CRC does not check
// out (a torn write at a crash) ends the segment, which is truncated there. When
// the spool would grow past MaxBytes the oldest segments are deleted: the records
// lost that way are logged and counted, never dropped silently.
package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Fsync policies.
const (
	FsyncAlways   = "always"   // fsync after every Append: nothing acknowledged is lost
	FsyncInterval = "interval" // fsync at most once per FsyncInterval (default)
	FsyncNever    = "never"    // leave it to the OS
)

const (
	headerLen      = 8
	timeLen        = 8       // the append time at the start of a timed payload
	flagTimed      = 1 << 31 // in the length word: the payload starts with the append time
	maxRecordBytes = 4 << 20
	segSuffix      = ".seg"
	cursorFile     = "cursor"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Record is one queued message.
type Record struct {
	Key   []byte
	Value []byte
}

// Config configures a Spool.
type Config struct {
	Dir           string
	MaxBytes      int64         // total size bound (default 256 MiB)
	SegmentBytes  int64         // size of one segment file (default MaxBytes/16, at most 64 MiB)
	Fsync         string        // always | interval | never (default interval)
	FsyncInterval time.Duration // default 1 s
	// Now stamps appended records and measures their age (default time.Now).
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("spool: dir is required"))
	}
	if c.MaxBytes < 0 || (c.MaxBytes > 0 && c.MaxBytes < 64<<10) {
		errs = append(errs, fmt.Errorf("spool: max bytes %d: want at least 64 KiB", c.MaxBytes))
	}
	if c.SegmentBytes < 0 || (c.MaxBytes > 0 && c.SegmentBytes > c.MaxBytes/2) {
		errs = append(errs, fmt.Errorf("spool: segment bytes %d: want at most half of max bytes", c.SegmentBytes))
	}
	switch c.Fsync {
	case "", FsyncAlways, FsyncInterval, FsyncNever:
	default:
		errs = append(errs, fmt.Errorf("spool: fsync %q: want always, interval or never", c.Fsync))
	}
	if c.FsyncInterval < 0 {
		errs = append(errs, errors.New("spool: fsync interval must not be negative"))
	}
	return errors.Join(errs...)
}

type segment struct {
	seq     uint64
	size    int64
	records int64
	offsets []int64 // record start offsets, for counting records after a cursor
}

// Cursor is a position in the spool: segment, byte offset, records before it in
// that segment.
type Cursor struct {
	Seq uint64
	Off int64
	Rec int64
}

func (c Cursor) less(o Cursor) bool { return c.Seq < o.Seq || (c.Seq == o.Seq && c.Off < o.Off) }

// Spool is the queue. Append and Read/Commit may be called from different
// goroutines.
type Spool struct {
	cfg      Config
	log      *slog.Logger
	m        *metrics
	mu       sync.Mutex
	segs     []*segment
	active   *os.File // last segment, open for append
	cursor   Cursor
	total    int64
	lastSync time.Time
	dirty    bool
	notify   chan struct{}
	readers  map[uint64]*os.File
	closed   bool
	buf      []byte
	// oldest is when the oldest unacknowledged record was appended (zero when
	// every record is acknowledged).
	oldest time.Time
}

type metrics struct {
	bytes, pending           prometheus.Gauge
	droppedRecs, droppedSegs prometheus.Counter
	truncated, appendErrs    prometheus.Counter
	oldestAge                prometheus.GaugeFunc
}

func newMetrics(reg prometheus.Registerer, oldestAge func() float64) (*metrics, error) {
	m := &metrics{
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cardhour_collector_spool_bytes",
			Help: "Bytes in the on-disk spool (acknowledged records are removed segment by segment)."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cardhour_collector_spool_pending_records",
			Help: "Records in the spool not yet acknowledged by Kafka."}),
		droppedRecs: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_spool_dropped_records_total",
			Help: "Records lost because the spool was full and its oldest segments were deleted."}),
		droppedSegs: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_spool_dropped_segments_total",
			Help: "Segments deleted unsent because the spool was full."}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_spool_truncated_bytes_total",
			Help: "Bytes cut from segments at open because of a torn or corrupt record."}),
		appendErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "cardhour_collector_spool_append_errors_total",
			Help: "Appends that failed (disk full, I/O error)."}),
		oldestAge: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cardhour_collector_spool_oldest_unacked_age_seconds",
			Help: "Age of the oldest record in the spool not yet acknowledged by Kafka (0 when all are)."}, oldestAge),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.bytes, m.pending, m.droppedRecs, m.droppedSegs, m.truncated, m.appendErrs, m.oldestAge} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Open opens (or creates) the spool in cfg.Dir, repairing torn records.
func Open(cfg Config) (*Spool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 256 << 20
	}
	if cfg.SegmentBytes == 0 {
		cfg.SegmentBytes = min(cfg.MaxBytes/16, 64<<20)
	}
	if cfg.Fsync == "" {
		cfg.Fsync = FsyncInterval
	}
	if cfg.FsyncInterval == 0 {
		cfg.FsyncInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Spool{cfg: cfg, log: cfg.Logger.With("component", "spool", "dir", cfg.Dir),
		notify: make(chan struct{}, 1), readers: map[uint64]*os.File{}}
	m, err := newMetrics(cfg.Registerer, func() float64 { return s.OldestUnackedAge().Seconds() })
	if err != nil {
		return nil, err
	}
	s.m = m
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create spool directory: %w", err)
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	s.oldest = s.headTime()
	s.updateGauges()
	return s, nil
}

func (s *Spool) segPath(seq uint64) string {
	return filepath.Join(s.cfg.Dir, fmt.Sprintf("%016x%s", seq, segSuffix))
}

func (s *Spool) load() error {
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("cannot read spool directory: %w", err)
	}
	var seqs []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), segSuffix)
		if !ok || e.IsDir() {
			continue
		}
		seq, err := strconv.ParseUint(name, 16, 64)
		if err != nil {
			s.log.Warn("ignoring a stray file in the spool directory", "file", e.Name())
			continue
		}
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, seq := range seqs {
		seg, err := s.scan(seq)
		if err != nil {
			return err
		}
		s.segs = append(s.segs, seg)
		s.total += seg.size
	}
	if len(s.segs) == 0 {
		s.segs = append(s.segs, &segment{seq: 1})
	}
	last := s.segs[len(s.segs)-1]
	f, err := os.OpenFile(s.segPath(last.seq), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cannot open spool segment: %w", err)
	}
	s.active = f
	s.cursor = s.readCursor()
	return nil
}

// scan reads a segment, counts its records and truncates it at the first bad one.
func (s *Spool) scan(seq uint64) (*segment, error) {
	path := s.segPath(seq)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read spool segment: %w", err)
	}
	seg := &segment{seq: seq}
	off := int64(0)
	for off < int64(len(data)) {
		n, ok := checkRecord(data[off:])
		if !ok {
			break
		}
		seg.offsets = append(seg.offsets, off)
		off += n
	}
	seg.size, seg.records = off, int64(len(seg.offsets))
	if cut := int64(len(data)) - off; cut > 0 {
		s.log.Warn("truncating a torn or corrupt record at the end of a spool segment",
			"segment", filepath.Base(path), "offset", off, "bytes_cut", cut)
		s.m.truncated.Add(float64(cut))
		if err := os.Truncate(path, off); err != nil {
			return nil, fmt.Errorf("cannot truncate spool segment: %w", err)
		}
	}
	return seg, nil
}

// checkRecord returns the framed length of the record at the start of b, or
// false when it is short or corrupt.
func checkRecord(b []byte) (int64, bool) {
	if len(b) < headerLen {
		return 0, false
	}
	word := binary.LittleEndian.Uint32(b)
	n, timed := word&^flagTimed, word&flagTimed != 0
	least := uint32(2)
	if timed {
		least += timeLen
	}
	if n < least || n > maxRecordBytes || int64(len(b)) < headerLen+int64(n) {
		return 0, false
	}
	payload := b[headerLen : headerLen+int(n)]
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return 0, false
	}
	if timed {
		payload = payload[timeLen:]
	}
	if int(binary.LittleEndian.Uint16(payload))+2 > len(payload) {
		return 0, false
	}
	return headerLen + int64(n), true
}

// framedLen is the framed length of a record from its header's length word.
func framedLen(b []byte) int64 {
	return headerLen + int64(binary.LittleEndian.Uint32(b)&^flagTimed)
}

// parseRecord splits a checked record (header included) into its parts;
// appended is zero for a record written without a time.
func parseRecord(b []byte) (rec Record, appended time.Time) {
	timed := binary.LittleEndian.Uint32(b)&flagTimed != 0
	p := b[headerLen:framedLen(b)]
	if timed {
		appended = time.UnixMilli(int64(binary.LittleEndian.Uint64(p)))
		p = p[timeLen:]
	}
	kl := int(binary.LittleEndian.Uint16(p))
	return Record{Key: p[2 : 2+kl], Value: p[2+kl:]}, appended
}

func (s *Spool) readCursor() Cursor {
	first := Cursor{Seq: s.segs[0].seq}
	b, err := os.ReadFile(filepath.Join(s.cfg.Dir, cursorFile))
	if err != nil || len(b) != 20 || crc32.Checksum(b[:16], crcTable) != binary.LittleEndian.Uint32(b[16:]) {
		if err == nil || !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("spool cursor unreadable: replaying from the oldest segment (duplicates are harmless)")
		}
		return first
	}
	c := Cursor{Seq: binary.LittleEndian.Uint64(b), Off: int64(binary.LittleEndian.Uint64(b[8:]))}
	for _, seg := range s.segs {
		if seg.seq != c.Seq {
			continue
		}
		// Snap to a record boundary at or before the offset.
		i := sort.Search(len(seg.offsets), func(i int) bool { return seg.offsets[i] >= c.Off })
		if i < len(seg.offsets) && seg.offsets[i] == c.Off {
			return Cursor{Seq: c.Seq, Off: c.Off, Rec: int64(i)}
		}
		if c.Off >= seg.size {
			return Cursor{Seq: c.Seq, Off: seg.size, Rec: seg.records}
		}
		return Cursor{Seq: c.Seq, Off: seg.offsets[max(0, i-1)], Rec: int64(max(0, i-1))}
	}
	if c.Seq > s.segs[len(s.segs)-1].seq {
		return first // cursor ahead of every segment: spool was wiped; start over
	}
	return first
}

func (s *Spool) writeCursor() error {
	var b [20]byte
	binary.LittleEndian.PutUint64(b[:], s.cursor.Seq)
	binary.LittleEndian.PutUint64(b[8:], uint64(s.cursor.Off))
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], crcTable))
	tmp := filepath.Join(s.cfg.Dir, cursorFile+".tmp")
	if err := os.WriteFile(tmp, b[:], 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.cfg.Dir, cursorFile))
}

// Notify returns a channel that receives after an Append.
func (s *Spool) Notify() <-chan struct{} { return s.notify }

// Append adds records at the end of the spool, making room by dropping the
// oldest segments when it is full.
func (s *Spool) Append(recs []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("spool is closed")
	}
	buf := s.buf[:0]
	var offs []int64
	now := s.cfg.Now()
	for _, r := range recs {
		if len(r.Key) > 0xffff || timeLen+len(r.Key)+len(r.Value)+2 > maxRecordBytes {
			return fmt.Errorf("spool: record too large (key %d, value %d bytes)", len(r.Key), len(r.Value))
		}
		offs = append(offs, int64(len(buf)))
		n := timeLen + 2 + len(r.Key) + len(r.Value)
		start := len(buf)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(n)|flagTimed)
		buf = append(buf, 0, 0, 0, 0)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(now.UnixMilli()))
		buf = binary.LittleEndian.AppendUint16(buf, uint16(len(r.Key)))
		buf = append(buf, r.Key...)
		buf = append(buf, r.Value...)
		binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+headerLen:], crcTable))
	}
	s.buf = buf
	if len(buf) == 0 {
		return nil
	}
	act := s.segs[len(s.segs)-1]
	if act.size > 0 && act.size+int64(len(buf)) > s.cfg.SegmentBytes {
		if err := s.roll(); err != nil {
			s.m.appendErrs.Inc()
			return err
		}
		act = s.segs[len(s.segs)-1]
	}
	s.makeRoom(int64(len(buf)))
	if _, err := s.active.Write(buf); err != nil {
		s.m.appendErrs.Inc()
		// Cut off a partial write so the next append starts on a record boundary.
		_ = s.active.Truncate(act.size)
		return fmt.Errorf("cannot append to spool: %w", err)
	}
	for _, o := range offs {
		act.offsets = append(act.offsets, act.size+o)
	}
	act.size += int64(len(buf))
	act.records += int64(len(recs))
	s.total += int64(len(buf))
	s.dirty = true
	if s.oldest.IsZero() { // nothing was pending: this is the oldest now
		s.oldest = now.Truncate(time.Millisecond)
	}
	if err := s.maybeSync(false); err != nil {
		s.m.appendErrs.Inc()
		return err
	}
	s.updateGauges()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return nil
}

func (s *Spool) maybeSync(force bool) error {
	if !s.dirty {
		return nil
	}
	switch {
	case force, s.cfg.Fsync == FsyncAlways,
		s.cfg.Fsync == FsyncInterval && time.Since(s.lastSync) >= s.cfg.FsyncInterval:
		if err := s.active.Sync(); err != nil {
			return fmt.Errorf("cannot fsync spool: %w", err)
		}
		s.lastSync, s.dirty = time.Now(), false
	}
	return nil
}

func (s *Spool) roll() error {
	if err := s.maybeSync(s.cfg.Fsync != FsyncNever); err != nil {
		return err
	}
	if err := s.active.Close(); err != nil {
		return fmt.Errorf("cannot close spool segment: %w", err)
	}
	seq := s.segs[len(s.segs)-1].seq + 1
	f, err := os.OpenFile(s.segPath(seq), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("cannot create spool segment: %w", err)
	}
	s.active = f
	s.segs = append(s.segs, &segment{seq: seq})
	return nil
}

// makeRoom deletes the oldest segments (never the active one) until need more
// bytes fit.
func (s *Spool) makeRoom(need int64) {
	for s.total+need > s.cfg.MaxBytes && len(s.segs) > 1 {
		old := s.segs[0]
		lost := int64(0)
		switch {
		case s.cursor.Seq == old.seq:
			lost = old.records - s.cursor.Rec
		case s.cursor.Seq < old.seq:
			lost = old.records
		}
		s.removeSeg(old)
		s.segs = s.segs[1:]
		if s.cursor.Seq < s.segs[0].seq {
			s.cursor = Cursor{Seq: s.segs[0].seq}
		}
		if lost > 0 {
			s.oldest = s.headTime()
			s.m.droppedRecs.Add(float64(lost))
			s.m.droppedSegs.Inc()
			s.log.Error("spool full: dropped the oldest unsent segment", "segment", filepath.Base(s.segPath(old.seq)),
				"records_lost", lost, "max_bytes", s.cfg.MaxBytes)
		}
	}
}

func (s *Spool) removeSeg(seg *segment) {
	if f := s.readers[seg.seq]; f != nil {
		_ = f.Close()
		delete(s.readers, seg.seq)
	}
	if err := os.Remove(s.segPath(seg.seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("cannot remove spool segment", "err", err)
	}
	s.total -= seg.size
}

// Read returns up to maxRecs records (and about maxBytes) from the oldest
// unacknowledged one, and the cursor after them. It does not move the spool's
// cursor: call Commit once they are delivered. The records alias an internal
// buffer that is valid until the next Read.
func (s *Spool) Read(maxRecs int, maxBytes int) ([]Record, Cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cursor
	var out []Record
	read := 0
	for _, seg := range s.segs {
		if seg.seq < c.Seq {
			continue
		}
		if seg.seq > c.Seq {
			c = Cursor{Seq: seg.seq}
		}
		if c.Off >= seg.size {
			continue
		}
		want := min(seg.size-c.Off, int64(max(maxBytes-read, 64<<10)))
		f, err := s.reader(seg.seq)
		if err != nil {
			return nil, c, err
		}
		data := make([]byte, want)
		if _, err := f.ReadAt(data, c.Off); err != nil && !errors.Is(err, io.EOF) {
			return nil, c, fmt.Errorf("cannot read spool segment: %w", err)
		}
		off := 0
		for off < len(data) && len(out) < maxRecs && read < maxBytes {
			n, ok := checkRecord(data[off:])
			if !ok {
				if off == 0 && len(data) >= headerLen && len(out) == 0 {
					// A record longer than the read window: read exactly it.
					if l := framedLen(data); l > int64(len(data)) && l <= seg.size-c.Off {
						data = make([]byte, l)
						if _, err := f.ReadAt(data, c.Off); err != nil && !errors.Is(err, io.EOF) {
							return nil, c, fmt.Errorf("cannot read spool segment: %w", err)
						}
						continue
					}
					return out, c, fmt.Errorf("spool: corrupt record in segment %d at offset %d", seg.seq, c.Off)
				}
				break
			}
			r, _ := parseRecord(data[off : off+int(n)])
			out = append(out, r)
			off += int(n)
			read += int(n)
			c.Off += n
			c.Rec++
		}
		// Go on to the next segment only once this one is read to its end: a
		// window that ended inside a record (or at a record boundary before the
		// segment's end) leaves the rest for the next Read.
		if len(out) >= maxRecs || read >= maxBytes || c.Off < seg.size {
			break
		}
	}
	return out, c, nil
}

func (s *Spool) reader(seq uint64) (*os.File, error) {
	if f := s.readers[seq]; f != nil {
		return f, nil
	}
	f, err := os.Open(s.segPath(seq))
	if err != nil {
		return nil, fmt.Errorf("cannot open spool segment: %w", err)
	}
	s.readers[seq] = f
	return f, nil
}

// Commit acknowledges every record before c: fully read segments are deleted
// and the cursor is persisted.
func (s *Spool) Commit(c Cursor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cursor.less(c) {
		return nil // already there (or the segment was dropped meanwhile)
	}
	s.cursor = c
	for len(s.segs) > 1 && s.segs[0].seq < c.Seq {
		s.removeSeg(s.segs[0])
		s.segs = s.segs[1:]
	}
	// The active segment, fully read: start a fresh one so it can be deleted.
	if act := s.segs[len(s.segs)-1]; len(s.segs) == 1 && c.Seq == act.seq && c.Off >= act.size && act.size >= s.cfg.SegmentBytes/4 {
		if err := s.roll(); err == nil {
			s.removeSeg(act)
			s.segs = s.segs[1:]
			s.cursor = Cursor{Seq: s.segs[0].seq}
		}
	}
	s.oldest = s.headTime()
	s.updateGauges()
	return s.writeCursor()
}

// headTime returns when the oldest unacknowledged record was appended (zero
// when there is none): read from its header, or, for a record written without a
// time, the modification time of its segment file.
func (s *Spool) headTime() time.Time {
	c := s.cursor
	for _, seg := range s.segs {
		if seg.seq < c.Seq {
			continue
		}
		off := int64(0)
		if seg.seq == c.Seq {
			off = c.Off
		}
		if off >= seg.size {
			continue
		}
		fallback := func() time.Time {
			if fi, err := os.Stat(s.segPath(seg.seq)); err == nil {
				return fi.ModTime()
			}
			return s.cfg.Now() // unknown: it is at least not older than now
		}
		f, err := s.reader(seg.seq)
		if err != nil {
			return fallback()
		}
		var hdr [headerLen + timeLen]byte
		if _, err := f.ReadAt(hdr[:], off); err != nil && !errors.Is(err, io.EOF) {
			return fallback()
		}
		if binary.LittleEndian.Uint32(hdr[:])&flagTimed == 0 {
			return fallback()
		}
		return time.UnixMilli(int64(binary.LittleEndian.Uint64(hdr[headerLen:])))
	}
	return time.Time{}
}

// OldestUnacked returns when the oldest record Kafka has not acknowledged was
// appended; zero when every record is acknowledged.
func (s *Spool) OldestUnacked() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.oldest
}

// OldestUnackedAge returns how long the oldest unacknowledged record has waited
// (0 when there is none).
func (s *Spool) OldestUnackedAge() time.Duration {
	s.mu.Lock()
	oldest := s.oldest
	s.mu.Unlock()
	if oldest.IsZero() {
		return 0
	}
	return max(0, s.cfg.Now().Sub(oldest))
}

// CheckUnackedAge returns an error saying how long samples have waited when the
// oldest unacknowledged record is older than limit (limit <= 0: never).
func (s *Spool) CheckUnackedAge(limit time.Duration) error {
	if limit <= 0 {
		return nil
	}
	if age := s.OldestUnackedAge(); age > limit {
		return fmt.Errorf("the oldest record not yet acknowledged by Kafka was spooled %v ago (limit %v); %d records wait in the spool",
			age.Round(time.Second), limit, s.Pending())
	}
	return nil
}

// Pending returns the number of unacknowledged records.
func (s *Spool) Pending() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pendingLocked()
}

func (s *Spool) pendingLocked() int64 {
	var n int64
	for _, seg := range s.segs {
		switch {
		case seg.seq == s.cursor.Seq:
			n += seg.records - s.cursor.Rec
		case seg.seq > s.cursor.Seq:
			n += seg.records
		}
	}
	return n
}

// Bytes returns the size of the spool on disk.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func (s *Spool) updateGauges() {
	s.m.bytes.Set(float64(s.total))
	s.m.pending.Set(float64(s.pendingLocked()))
}

// Close syncs and closes the files.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.maybeSync(s.cfg.Fsync != FsyncNever)
	for seq, f := range s.readers {
		_ = f.Close()
		delete(s.readers, seq)
	}
	if cerr := s.active.Close(); err == nil {
		err = cerr
	}
	return err
}
