package spool_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector/spool"
)

func open(t *testing.T, cfg spool.Config) *spool.Spool {
	t.Helper()
	s, err := spool.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func recs(from, n int) []spool.Record {
	out := make([]spool.Record, n)
	for i := range out {
		out[i] = spool.Record{Key: fmt.Appendf(nil, "inst-%d", (from+i)%7), Value: fmt.Appendf(nil, `{"seq":%d,"pad":"%0200d"}`, from+i, 0)}
	}
	return out
}

// drain reads and commits everything, returning the seq numbers in order.
func drain(t *testing.T, s *spool.Spool, batch int) []string {
	t.Helper()
	var got []string
	for {
		rs, cur, err := s.Read(batch, 1<<20)
		require.NoError(t, err)
		if len(rs) == 0 {
			return got
		}
		for _, r := range rs {
			got = append(got, string(r.Value))
		}
		require.NoError(t, s.Commit(cur))
	}
}

func values(rs []spool.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	return out
}

func TestAppendReadCommitInOrder(t *testing.T) {
	dir := t.TempDir()
	s := open(t, spool.Config{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 16 << 10, Fsync: spool.FsyncAlways})
	var want []string
	for i := 0; i < 50; i++ {
		rs := recs(i*10, 10)
		require.NoError(t, s.Append(rs))
		want = append(want, values(rs)...)
	}
	require.EqualValues(t, 500, s.Pending())
	// Read without commit returns the same records again.
	a, _, err := s.Read(3, 1<<20)
	require.NoError(t, err)
	require.Equal(t, want[:3], values(a))
	b, _, err := s.Read(3, 1<<20)
	require.NoError(t, err)
	require.Equal(t, want[:3], values(b))

	require.Equal(t, want, drain(t, s, 37))
	require.Zero(t, s.Pending())
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	require.LessOrEqual(t, len(segs), 2, "acknowledged segments are deleted")
}

func TestReopenResumesAtCursor(t *testing.T) {
	dir := t.TempDir()
	cfg := spool.Config{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 8 << 10}
	s, err := spool.Open(cfg)
	require.NoError(t, err)
	all := recs(0, 200)
	require.NoError(t, s.Append(all))
	rs, cur, err := s.Read(120, 1<<20)
	require.NoError(t, err)
	require.Len(t, rs, 120)
	require.NoError(t, s.Commit(cur))
	require.NoError(t, s.Close())

	s2 := open(t, cfg)
	require.EqualValues(t, 80, s2.Pending())
	require.Equal(t, values(all[120:]), drain(t, s2, 50))
}

func TestTornWriteIsTruncatedOnOpen(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(t *testing.T, path string)
	}{
		{"half a record", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, fi.Size()-100))
		}},
		{"garbage after the last record", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, _ = f.Write([]byte{0xff, 0xff, 0, 0, 1, 2, 3})
			require.NoError(t, f.Close())
		}},
		{"bad CRC in the last record", func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			data[len(data)-5] ^= 0xff
			require.NoError(t, os.WriteFile(path, data, 0o640))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := spool.Config{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 256 << 10}
			s, err := spool.Open(cfg)
			require.NoError(t, err)
			all := recs(0, 20)
			require.NoError(t, s.Append(all))
			require.NoError(t, s.Close())
			segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
			sort.Strings(segs)
			tc.tear(t, segs[len(segs)-1])

			reg := prometheus.NewRegistry()
			s2 := open(t, spool.Config{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 256 << 10, Registerer: reg})
			// The torn last record is gone; every earlier one is intact and in order.
			want := values(all)
			if tc.name != "garbage after the last record" {
				want = want[:19]
			}
			require.EqualValues(t, len(want), s2.Pending())
			// Appending after repair starts on a record boundary.
			more := recs(100, 3)
			require.NoError(t, s2.Append(more))
			require.Equal(t, append(want, values(more)...), drain(t, s2, 1000))
			require.Positive(t, testutil.ToFloat64(counter(t, reg, "cardhour_collector_spool_truncated_bytes_total")))
		})
	}
}

func TestFullSpoolDropsOldestWithCounter(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	s := open(t, spool.Config{Dir: dir, MaxBytes: 64 << 10, SegmentBytes: 8 << 10, Registerer: reg})
	var all []string
	for i := 0; i < 100; i++ { // ~25 KiB per 100 records: 100 batches of 10 overflow 64 KiB
		rs := recs(i*10, 10)
		require.NoError(t, s.Append(rs))
		all = append(all, values(rs)...)
	}
	require.LessOrEqual(t, s.Bytes(), int64(64<<10))
	dropped := testutil.ToFloat64(counter(t, reg, "cardhour_collector_spool_dropped_records_total"))
	require.Positive(t, dropped)
	got := drain(t, s, 100)
	require.Equal(t, len(all)-int(dropped), len(got), "every record is either delivered or counted as dropped")
	require.Equal(t, all[len(all)-len(got):], got, "the oldest are dropped, the rest stay in order")
}

func TestValidate(t *testing.T) {
	cfg := spool.Config{MaxBytes: 10, Fsync: "sometimes", SegmentBytes: -1}
	err := cfg.Validate()
	require.ErrorContains(t, err, "dir is required")
	require.ErrorContains(t, err, "max bytes")
	require.ErrorContains(t, err, "fsync")
}

func counter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "copy"})
			c.Add(mf.GetMetric()[0].GetCounter().GetValue())
			return c
		}
	}
	t.Fatalf("metric %s not found", name)
	return nil
}

// A segment larger than what one Read takes (the window ends inside a record)
// is read to its end before the next segment: nothing is skipped. Records are
// node-tick messages of a few KiB, as the collector writes them.
func TestReadWindowEndingInsideARecordSkipsNothing(t *testing.T) {
	s, err := spool.Open(spool.Config{Dir: t.TempDir(), MaxBytes: 256 << 20, Fsync: spool.FsyncNever})
	require.NoError(t, err)
	defer s.Close()
	var want []string
	for i := range 5000 {
		v := fmt.Sprintf("%06d:%s", i, strings.Repeat("x", 3000+i%1700))
		want = append(want, v)
		require.NoError(t, s.Append([]spool.Record{{Key: []byte("node"), Value: []byte(v)}}))
	}
	// 5 000 records of 3–4.7 KiB: about 19 MiB, more than one 16 MiB segment,
	// read 4 MiB at a time as the publisher does.
	var got []string
	for {
		rs, cur, err := s.Read(5000, 4<<20)
		require.NoError(t, err)
		if len(rs) == 0 {
			break
		}
		for _, r := range rs {
			got = append(got, string(r.Value))
		}
		require.NoError(t, s.Commit(cur))
	}
	require.Equal(t, len(want), len(got))
	require.Equal(t, want, got)
	require.Zero(t, s.Pending())
}

// fakeNow is a settable clock for the spool.
type fakeNow struct{ t time.Time }

func (f *fakeNow) Now() time.Time { return f.t }

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// The spool knows when its oldest unacknowledged record was appended, from the
// record itself: acknowledgements move it forward, and a restart keeps it.
func TestOldestUnackedAgeSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	clk := &fakeNow{t: t0}
	reg := prometheus.NewRegistry()
	cfg := spool.Config{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 8 << 10, Now: clk.Now, Registerer: reg}
	s, err := spool.Open(cfg)
	require.NoError(t, err)
	require.Zero(t, s.OldestUnackedAge(), "an empty spool has nothing waiting")
	require.NoError(t, s.CheckUnackedAge(time.Minute))

	for i := 0; i < 60; i++ { // one batch a minute, over several segments
		clk.t = t0.Add(time.Duration(i) * time.Minute)
		require.NoError(t, s.Append(recs(i*10, 10)))
	}
	clk.t = t0.Add(time.Hour)
	require.Equal(t, time.Hour, s.OldestUnackedAge())
	require.Equal(t, 3600.0, gauge(t, reg, "cardhour_collector_spool_oldest_unacked_age_seconds"))
	require.ErrorContains(t, s.CheckUnackedAge(5*time.Minute), "1h0m0s ago (limit 5m0s); 600 records wait")
	require.NoError(t, s.CheckUnackedAge(0), "0 disables the check")

	// Kafka acknowledges the first 25 batches (and half of the 26th).
	rs, cur, err := s.Read(255, 1<<20)
	require.NoError(t, err)
	require.Len(t, rs, 255)
	require.NoError(t, s.Commit(cur))
	require.True(t, t0.Add(25*time.Minute).Equal(s.OldestUnacked()), "%v", s.OldestUnacked())
	require.NoError(t, s.Close())

	// After a restart, ten minutes later, the age is still that of the record.
	clk.t = t0.Add(70 * time.Minute)
	s2 := open(t, spool.Config{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 8 << 10, Now: clk.Now})
	require.Equal(t, 45*time.Minute, s2.OldestUnackedAge())
	require.Error(t, s2.CheckUnackedAge(30*time.Minute))
	require.NoError(t, s2.CheckUnackedAge(time.Hour))
	require.Len(t, drain(t, s2, 100), 345)
	require.Zero(t, s2.OldestUnackedAge())
	require.True(t, s2.OldestUnacked().IsZero())

	// The next record after an empty spool is the oldest.
	clk.t = t0.Add(71 * time.Minute)
	require.NoError(t, s2.Append(recs(0, 1)))
	clk.t = t0.Add(72 * time.Minute)
	require.Equal(t, time.Minute, s2.OldestUnackedAge())
}

// Records written before records carried their append time are still read,
// and count as appended when their segment file was last written.
func TestRecordsWithoutTimeAgeFromTheirSegment(t *testing.T) {
	dir := t.TempDir()
	var seg []byte
	for i := 0; i < 3; i++ { // the earlier framing: u32 length | u32 CRC-32C | u16 key length | key | value
		key, value := fmt.Appendf(nil, "inst-%d", i), fmt.Appendf(nil, `{"seq":%d}`, i)
		payload := binary.LittleEndian.AppendUint16(nil, uint16(len(key)))
		payload = append(append(payload, key...), value...)
		seg = binary.LittleEndian.AppendUint32(seg, uint32(len(payload)))
		seg = binary.LittleEndian.AppendUint32(seg, crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
		seg = append(seg, payload...)
	}
	path := filepath.Join(dir, "0000000000000001.seg")
	require.NoError(t, os.WriteFile(path, seg, 0o600))
	written := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	require.NoError(t, os.Chtimes(path, written, written))

	clk := &fakeNow{t: written.Add(20 * time.Minute)}
	s := open(t, spool.Config{Dir: dir, MaxBytes: 1 << 20, Now: clk.Now})
	require.EqualValues(t, 3, s.Pending())
	require.Equal(t, 20*time.Minute, s.OldestUnackedAge())
	rs, cur, err := s.Read(2, 1<<20)
	require.NoError(t, err)
	require.Equal(t, []string{`{"seq":0}`, `{"seq":1}`}, values(rs))
	require.Equal(t, "inst-1", string(rs[1].Key))
	require.NoError(t, s.Commit(cur))
	require.NoError(t, s.Append(recs(10, 1))) // a timed record after the old ones
	got := drain(t, s, 10)
	require.Equal(t, `{"seq":2}`, got[0])
	require.Len(t, got, 2)
}

// Dropping the oldest segments of a full spool makes a younger record the
// oldest unacknowledged one.
func TestFullSpoolDropMovesTheOldestRecord(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	clk := &fakeNow{t: t0}
	s := open(t, spool.Config{Dir: t.TempDir(), MaxBytes: 64 << 10, SegmentBytes: 8 << 10, Now: clk.Now})
	for i := 0; i < 100; i++ {
		clk.t = t0.Add(time.Duration(i) * time.Minute)
		require.NoError(t, s.Append(recs(i*10, 10)))
	}
	age := s.OldestUnackedAge()
	require.Positive(t, age)
	// 64 KiB hold about 25 of the 100 minutes.
	require.Less(t, age, 40*time.Minute, "the dropped records no longer count")
	require.Greater(t, age, 15*time.Minute)
}
