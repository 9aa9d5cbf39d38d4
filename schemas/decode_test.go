package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const validLine = `{"ts":"2026-11-01T08:00:00.250+08:00","interval_s":10,"node":"gpu-01","gpu_uuid":"GPU-1","gpu_model":"NVIDIA A100-SXM4-80GB","instance_id":"MIG-1","profile":"1g.10gb","project":"nlp-lab","user":"2023110042","util":null,"mem_used_bytes":1024,"mem_total_bytes":10737418240,"processes":1}`

func TestDecodeValid(t *testing.T) {
	s, err := DecodeSample([]byte(validLine))
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 11, 1, 0, 0, 0, 250e6, time.UTC).UnixMilli(), s.StartMS)
	require.EqualValues(t, 10_000, s.IntervalMS)
	require.Equal(t, "gpu-01", s.Node)
	require.Equal(t, "MIG-1", s.InstanceID)
	require.Equal(t, "nlp-lab", s.Project)
	require.Equal(t, "2023110042", s.User)
	require.False(t, s.UtilKnown)
	require.EqualValues(t, 1024, s.MemUsed)
	require.EqualValues(t, 10737418240, s.MemTotal)
	require.EqualValues(t, 1, s.Processes)
}

func TestDecodeVariants(t *testing.T) {
	f := func(mod func(string) string, check func(*testing.T, Sample)) {
		t.Helper()
		s, err := DecodeSample([]byte(mod(validLine)))
		require.NoError(t, err)
		check(t, s)
	}
	// Fractional interval, rounded to the millisecond.
	f(func(l string) string { return strings.Replace(l, `"interval_s":10`, `"interval_s":2.5`, 1) },
		func(t *testing.T, s Sample) { require.EqualValues(t, 2500, s.IntervalMS) })
	f(func(l string) string {
		return strings.Replace(l, `"interval_s":10`, `"interval_s":0.30000000000000004`, 1)
	},
		func(t *testing.T, s Sample) { require.EqualValues(t, 300, s.IntervalMS) })
	f(func(l string) string { return strings.Replace(l, `"interval_s":10`, `"interval_s":1e1`, 1) },
		func(t *testing.T, s Sample) { require.EqualValues(t, 10_000, s.IntervalMS) })
	// Known utilisation, UTC "Z", unknown extra fields, schema field, escapes.
	f(func(l string) string {
		l = strings.Replace(l, `"util":null`, `"util":0.75,"util_source":"gpm","extra":{"a":[1,2,{"b":null}]}`, 1)
		l = strings.Replace(l, `"ts":"2026-11-01T08:00:00.250+08:00"`, `"schema":"cardhour.sample.v1","ts":"2026-11-01T00:00:00.25Z"`, 1)
		return strings.Replace(l, `"user":"2023110042"`, `"user":"\u5f20\u4e09 \"zs\""`, 1)
	}, func(t *testing.T, s Sample) {
		require.True(t, s.UtilKnown)
		require.InDelta(t, 0.75, s.Util, 0)
		require.Equal(t, "gpm", s.UtilSource)
		require.Equal(t, `张三 "zs"`, s.User)
		require.Equal(t, time.Date(2026, 11, 1, 0, 0, 0, 250e6, time.UTC).UnixMilli(), s.StartMS)
	})
	// Whitespace around everything, empty project (not held).
	f(func(l string) string {
		return " { " + strings.ReplaceAll(strings.Replace(l[1:len(l)-1], `"project":"nlp-lab"`, `"project":""`, 1), ",", " ,\t") + " } "
	}, func(t *testing.T, s Sample) { require.Empty(t, s.Project) })
}

func TestDecodeInvalid(t *testing.T) {
	f := func(line, wantErr string) {
		t.Helper()
		_, err := DecodeSample([]byte(line))
		require.Error(t, err, line)
		require.Contains(t, err.Error(), wantErr, line)
	}
	r := func(old, new string) string { return strings.Replace(validLine, old, new, 1) }
	f(``, "expected a JSON object")
	f(`[]`, "expected a JSON object")
	f(validLine[:len(validLine)-10], "malformed JSON")
	f(validLine+`x`, "unexpected data after the object")
	f(validLine+validLine, "unexpected data after the object")
	f(r(`"interval_s":10`, `"interval_s":-10`), `field "interval_s": value -10: must be > 0`)
	f(r(`"interval_s":10`, `"interval_s":0`), `field "interval_s": value 0: must be > 0`)
	f(r(`"interval_s":10`, `"interval_s":0.0004`), `field "interval_s"`)
	f(r(`"interval_s":10`, `"interval_s":"10"`), `field "interval_s": value "\"10\"": must be a number`)
	f(r(`"interval_s":10`, `"interval_s":1e300`), `field "interval_s": value 1e300: out of range`)
	f(r(`"interval_s":10,`, ``), `field "interval_s": required field is missing`)
	f(r(`"ts":"2026-11-01T08:00:00.250+08:00",`, ``), `field "ts": required field is missing`)
	f(r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-11-01 08:00:00"`), `field "ts"`)
	f(r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-11-01T08:00:00"`), `missing time zone offset`)
	f(r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-02-30T08:00:00Z"`), `date or time out of range`)
	f(r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-11-01T08:00:00.2501Z"`), `more than millisecond precision`)
	f(r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":1700000000`), `field "ts": must be a string`)
	f(r(`"util":null`, `"util":1.5`), `field "util": value 1.5: must be a number in [0,1] or null`)
	f(r(`"util":null`, `"util":-0.1`), `field "util"`)
	f(r(`"util":null`, `"util":"high"`), `field "util"`)
	f(r(`"util":null,`, ``), `field "util": required field is missing`)
	f(r(`"processes":1`, `"processes":-1`), `field "processes": value -1: must be a non-negative integer`)
	f(r(`"processes":1`, `"processes":1.5`), `field "processes"`)
	f(r(`"mem_used_bytes":1024`, `"mem_used_bytes":99999999999999999999`), `field "mem_used_bytes"`)
	f(r(`"project":"nlp-lab"`, `"project":null`), `field "project": must be a string`)
	f(r(`"project":"nlp-lab"`, `"project":7`), `field "project": must be a string`)
	f(r(`"instance_id":"MIG-1"`, `"instance_id":""`), `field "instance_id": value "": must not be empty`)
	f(r(`"gpu_model":"NVIDIA A100-SXM4-80GB"`, `"gpu_model":""`), `field "gpu_model"`)
	f(r(`"node":"gpu-01"`, `"node":"gpu-01","node":"gpu-02"`), `field "node": appears more than once`)
	f(`{"schema":"cardhour.sample.v2",`+validLine[1:], `unknown sample format version`)
	f(r(`"user":"2023110042"`, "\"user\":\"a\x01b\""), "control character")
	f(r(`"user":"2023110042"`, "\"user\":\"a\xffb\""), "invalid UTF-8")
	f(r(`"user":"2023110042"`, `"user":"a\qb"`), "invalid escape")
	f(r(`"processes":1`, `"processes":01`), "malformed JSON")
	f(r(`"util":null`, `"util":nul`), `field "util"`)
	f(`{"a":`+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`, "nesting too deep")
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	in := Sample{StartMS: 1793491200123, IntervalMS: 2500, Node: "n\"1", GPUUUID: "GPU-x", GPUModel: "NVIDIA H100 80GB HBM3",
		InstanceID: "MIG-y", Profile: "3g.40gb", Project: "课题组", User: "u\n1", Util: 0.125, UtilKnown: true,
		MemUsed: 1 << 40, MemTotal: 1 << 41, Processes: 3, UtilSource: "gpm", HolderRef: "k8s:课题组/nb-0", SchemaField: SampleSchemaV1}
	line := in.AppendJSON(nil)
	out, err := DecodeSample(line)
	require.NoError(t, err)
	require.Equal(t, in, out)
	// encoding/json agrees that it is valid JSON with the same values.
	var m map[string]any
	require.NoError(t, json.Unmarshal(line, &m))
	require.Equal(t, "2026-11-01T00:00:00.123Z", m["ts"])
	require.InDelta(t, 2.5, m["interval_s"], 0)
	require.Equal(t, "k8s:课题组/nb-0", m["holder_ref"])
	// An empty holder_ref is left out.
	in.HolderRef = ""
	require.NotContains(t, string(in.AppendJSON(nil)), "holder_ref")
}

// refSample decodes with encoding/json, applying the format's rules by hand; the
// fuzzer checks that the fast decoder accepts exactly the same documents.
func refDecode(data []byte) (Sample, bool) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return Sample{}, false
	}
	var s Sample
	str := func(k string, dst *string) bool {
		raw, ok := m[k]
		if !ok {
			return false
		}
		return json.Unmarshal(raw, dst) == nil && bytes.HasPrefix(bytes.TrimSpace(raw), []byte(`"`))
	}
	var ts string
	if !str("ts", &ts) || !str("node", &s.Node) || !str("gpu_uuid", &s.GPUUUID) || !str("gpu_model", &s.GPUModel) ||
		!str("instance_id", &s.InstanceID) || !str("profile", &s.Profile) || !str("project", &s.Project) || !str("user", &s.User) {
		return Sample{}, false
	}
	if raw, ok := m["schema"]; ok && !str("schema", &s.SchemaField) {
		_ = raw
		return Sample{}, false
	}
	if _, ok := m["util_source"]; ok && !str("util_source", &s.UtilSource) {
		return Sample{}, false
	}
	if _, ok := m["holder_ref"]; ok && !str("holder_ref", &s.HolderRef) {
		return Sample{}, false
	}
	tm, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || tm.Nanosecond()%1e6 != 0 || !strings.Contains(ts, "T") {
		return Sample{}, false
	}
	s.StartMS = tm.UnixMilli()
	num := func(k string) (float64, bool) {
		var n json.Number
		if json.Unmarshal(m[k], &n) != nil {
			return 0, false
		}
		f, err := n.Float64()
		return f, err == nil
	}
	iv, ok := num("interval_s")
	if !ok || math.Round(iv*1000) < 1 || math.Round(iv*1000) > float64(DefaultMaxInterval.Milliseconds()) {
		return Sample{}, false
	}
	s.IntervalMS = int64(math.Round(iv * 1000))
	if string(bytes.TrimSpace(m["util"])) != "null" {
		u, ok := num("util")
		if !ok || u < 0 || u > 1 {
			return Sample{}, false
		}
		s.Util, s.UtilKnown = u, true
	}
	for _, f := range []struct {
		k   string
		dst *int64
	}{{"mem_used_bytes", &s.MemUsed}, {"mem_total_bytes", &s.MemTotal}, {"processes", &s.Processes}} {
		v, ok := num(f.k)
		if !ok || v < 0 || v != math.Trunc(v) || v >= 1<<53 {
			return Sample{}, false
		}
		*f.dst = int64(v)
	}
	if !refShare(m, &s) || s.Validate() != nil {
		return Sample{}, false
	}
	return s, true
}

// refShare reads the optional share fields the obvious way.
func refShare(m map[string]json.RawMessage, s *Sample) bool {
	if raw, ok := m["share_kind"]; ok {
		if json.Unmarshal(raw, &s.ShareKind) != nil || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte(`"`)) || !ValidShareKind(s.ShareKind) {
			return false
		}
	}
	for _, f := range []struct {
		k   string
		dst *float64
	}{{"share_mem", &s.ShareMem}, {"share_cores", &s.ShareCores}} {
		raw, ok := m[f.k]
		if !ok {
			continue
		}
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return false
		}
		v, err := n.Float64()
		if err != nil || !(v > 0 && v <= 1) {
			return false
		}
		*f.dst = v
	}
	return true
}

func FuzzDecodeSample(f *testing.F) {
	f.Add([]byte(validLine))
	f.Add([]byte(strings.Replace(validLine, `"util":null`, `"util":0.5,"x":[true,false,{}]`, 1)))
	f.Add([]byte(`{"ts":"2026-11-01T00:00:00Z"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(strings.Replace(validLine, `"user":"2023110042"`, `"user":"\ud83d\ude00"`, 1)))
	f.Add([]byte(strings.Replace(validLine, `}`, `,"share_kind":"hami","share_mem":0.05,"share_cores":0.25}`, 1)))
	f.Add([]byte(strings.Replace(validLine, `}`, `,"share_cores":0.3333333333333333,"share_kind":"timeslice"}`, 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeSample(data)
		want, ok := refDecode(data)
		if err == nil {
			// Everything the fast decoder accepts must round-trip.
			again, err2 := DecodeSample(got.AppendJSON(nil))
			if err2 != nil {
				t.Fatalf("re-encoding an accepted sample fails: %v", err2)
			}
			if got.SchemaField == "" {
				again.SchemaField = ""
			}
			if again != got {
				t.Fatalf("round trip changed the sample:\n%+v\n%+v", got, again)
			}
		}
		// Where both decoders accept, they must agree. Differences in what is
		// accepted are allowed only where the fast decoder is stricter by design
		// (invalid UTF-8, duplicate fields, non-integral exponents, huge values).
		if err == nil && ok {
			want.SchemaField, got.SchemaField = "", ""
			if math.Abs(want.Util-got.Util) > 0 || want.IntervalMS != got.IntervalMS {
				t.Fatalf("decoders disagree on numbers:\nfast %+v\nref  %+v", got, want)
			}
			if want != got {
				t.Fatalf("decoders disagree:\nfast %+v\nref  %+v", got, want)
			}
		}
		if err == nil && !ok {
			t.Fatalf("fast decoder accepts what the reference rejects: %q", data)
		}
	})
}

var rfc3339Shape = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3}0*)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$`)

func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2026-11-01T00:00:00Z", "2026-11-01T08:00:00.123+08:00", "1970-01-01T00:00:00.000-00:00",
		"2024-02-29T23:59:59.999Z", "2026-13-01T00:00:00Z", "9999-12-31T23:59:59Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseTimestampMS([]byte(s))
		tm, terr := time.Parse(time.RFC3339Nano, s)
		if err == nil {
			if terr != nil {
				t.Fatalf("%q accepted here, rejected by time.Parse: %v", s, terr)
			}
			if tm.UnixMilli() != ms || tm.Nanosecond()%1e6 != 0 {
				t.Fatalf("%q: got %d, time.Parse says %d", s, ms, tm.UnixMilli())
			}
			return
		}
		// Stricter than time.Parse only where time.Parse is laxer than RFC 3339
		// (one-digit fields, lowercase designators), for sub-millisecond digits and
		// for years before 1970.
		if terr == nil && rfc3339Shape.MatchString(s) && tm.Nanosecond()%1e6 == 0 && tm.Year() >= 1970 {
			t.Fatalf("%q rejected (%v), time.Parse accepts it as %v", s, err, tm)
		}
	})
}

func BenchmarkDecodeSample(b *testing.B) {
	line := []byte(validLine)
	dec := NewDecoder()
	var s Sample
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if err := dec.Decode(line, &s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSampleEncodingJSON(b *testing.B) {
	line := []byte(validLine)
	type wire struct {
		TS         string   `json:"ts"`
		IntervalS  float64  `json:"interval_s"`
		Node       string   `json:"node"`
		GPUUUID    string   `json:"gpu_uuid"`
		GPUModel   string   `json:"gpu_model"`
		InstanceID string   `json:"instance_id"`
		Profile    string   `json:"profile"`
		Project    string   `json:"project"`
		User       string   `json:"user"`
		Util       *float64 `json:"util"`
		MemUsed    int64    `json:"mem_used_bytes"`
		MemTotal   int64    `json:"mem_total_bytes"`
		Processes  int64    `json:"processes"`
	}
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		var w wire
		if err := json.Unmarshal(line, &w); err != nil {
			b.Fatal(err)
		}
		if _, err := time.Parse(time.RFC3339Nano, w.TS); err != nil {
			b.Fatal(err)
		}
	}
}

func TestReadSamplesLineNumbersAndLongLines(t *testing.T) {
	var sb strings.Builder
	for i := 0; i < 5000; i++ {
		sb.WriteString(validLine + "\n")
		if i == 10 {
			sb.WriteString("\n   \n") // blank lines are skipped but counted
		}
	}
	good := sb.String()
	for _, workers := range []int{1, 3} {
		var n int64
		stats, err := ReadSamples(strings.NewReader(good), ReadOptions{Workers: workers}, func(_ int, s []Sample) error {
			n += int64(len(s))
			return nil
		})
		require.NoError(t, err)
		require.EqualValues(t, 5000, stats.Valid)
		require.EqualValues(t, 5000, n)

		bad := good + `{"broken` + "\n" + validLine + "\n"
		_, err = ReadSamples(strings.NewReader(bad), ReadOptions{Workers: workers}, func(int, []Sample) error { return nil })
		var le *LineError
		require.ErrorAs(t, err, &le)
		require.EqualValues(t, 5003, le.Line, "5000 samples + 2 blank lines, then the broken one")
	}
	// A line longer than the limit is an error, not an endless read or a crash —
	// also when it is exactly one chunk long.
	// A line of exactly the limit is read (and here is not JSON).
	_, err := ReadSamples(strings.NewReader(validLine+"\n"+strings.Repeat("x", MaxLineBytes)+"\n"), ReadOptions{}, func(int, []Sample) error { return nil })
	require.ErrorContains(t, err, "line 2: malformed JSON")
	for _, size := range []int{MaxLineBytes + 1, 2*MaxLineBytes - 500, 3 * MaxLineBytes} {
		huge := validLine + "\n" + strings.Repeat("x", size) + "\n" + validLine + "\n"
		var got atomic.Int64 // the sink is called from both workers
		stats, err := ReadSamples(strings.NewReader(huge), ReadOptions{Workers: 2, SkipInvalid: true}, func(_ int, s []Sample) error {
			got.Add(int64(len(s)))
			return nil
		})
		require.NoError(t, err)
		require.EqualValues(t, 1, stats.InvalidCount, "size %d", size)
		require.EqualValues(t, 2, stats.Invalid[0].Line)
		require.Contains(t, stats.Invalid[0].Error(), "line 2: line longer than")
		require.EqualValues(t, 2, got.Load(), "the lines around it are read")
		_, err = ReadSamples(strings.NewReader(huge), ReadOptions{Workers: 2}, func(int, []Sample) error { return nil })
		require.ErrorContains(t, err, "line 2: line longer than")
	}
}

func TestReadSamplesSkipsByteOrderMarkAndCRLF(t *testing.T) {
	in := "\xef\xbb\xbf" + validLine + "\r\n" + validLine + "\r\n"
	stats, err := ReadSamples(strings.NewReader(in), ReadOptions{}, func(int, []Sample) error { return nil })
	require.NoError(t, err)
	require.EqualValues(t, 2, stats.Valid)
}

// One Decoder reused over a stream gives what a fresh Decoder gives for each
// line, whatever the key order, while holders and instances change: its caches
// (the previous sample's values, each instance's last holder, the expected next
// key) only ever save work.
func TestDecoderReuseMatchesFresh(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	dec := NewDecoder()
	for i := range 20_000 {
		s := Sample{StartMS: 1793462400000 + int64(i)*1000, IntervalMS: 10_000, Node: fmt.Sprint("node-", r.IntN(3)),
			GPUUUID: fmt.Sprint("GPU-", r.IntN(4)), GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: fmt.Sprint("MIG-", r.IntN(20)),
			Profile: []string{"1g.10gb", "2g.20gb"}[r.IntN(2)], Project: []string{"", "nlp", "cv"}[r.IntN(3)],
			User: fmt.Sprint("u", r.IntN(4)), MemTotal: 1 << 30, Processes: int64(r.IntN(3))}
		if r.IntN(2) == 0 {
			s.Util, s.UtilKnown = 0.25, true
		}
		if r.IntN(3) == 0 {
			s.UtilSource = "nvml"
		}
		if r.IntN(3) == 0 {
			s.HolderRef = fmt.Sprint("slurm:", r.IntN(5))
		}
		line := s.AppendJSON(nil)
		if r.IntN(4) == 0 { // another key order: encoding/json sorts map keys
			var m map[string]any
			require.NoError(t, json.Unmarshal(line, &m))
			var err error
			line, err = json.Marshal(m)
			require.NoError(t, err)
		}
		want, err := DecodeSample(line)
		require.NoError(t, err, "%s", line)
		var got Sample
		require.NoError(t, dec.Decode(line, &got), "%s", line)
		require.Equal(t, want, got, "line %d: %s", i, line)
	}
}

// interval_s is bounded by the reader (DefaultMaxInterval unless set): one
// line must not be able to claim a month.
func TestDecodeMaxInterval(t *testing.T) {
	line := func(iv string) []byte {
		return []byte(strings.Replace(validLine, `"interval_s":10`, `"interval_s":`+iv, 1))
	}
	var s Sample
	dec := NewDecoder()
	for _, ok := range []string{"3600", "3600.0", "3599.9995", "0.001"} {
		require.NoError(t, dec.Decode(line(ok), &s), ok)
	}
	for _, bad := range []string{"3600.001", "3601", "2592000", "316224000", "3.6001e3"} {
		err := dec.Decode(line(bad), &s)
		require.ErrorIs(t, err, ErrIntervalTooLong, bad)
		var fe *FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "interval_s", fe.Field)
		require.Equal(t, bad, fe.Value)
		require.Contains(t, err.Error(), "3600 s")
		require.Contains(t, err.Error(), "--max-interval", "the error names the setting that changes the bound")
	}
	_, err := DecodeSample(line("2592000"))
	require.ErrorIs(t, err, ErrIntervalTooLong, "DecodeSample has the default bound too")
	// Beyond the format's own range the old message stays.
	require.NotErrorIs(t, dec.Decode(line("1e300"), &s), ErrIntervalTooLong)

	long := NewDecoderWith(DecoderOptions{MaxInterval: 2 * time.Hour})
	require.NoError(t, long.Decode(line("7200"), &s))
	require.EqualValues(t, 7_200_000, s.IntervalMS)
	err = long.Decode(line("7200.001"), &s)
	require.ErrorIs(t, err, ErrIntervalTooLong)
	require.Contains(t, err.Error(), "7200 s (2h0m0s")

	require.NoError(t, DecoderOptions{MaxInterval: MaxIntervalLimit}.Validate())
	require.Error(t, DecoderOptions{MaxInterval: MaxIntervalLimit + time.Millisecond}.Validate())
	require.Error(t, DecoderOptions{MaxInterval: -time.Second}.Validate())
	require.Error(t, DecoderOptions{MaxInterval: time.Microsecond}.Validate())
	require.Error(t, DecoderOptions{MaxClockSkew: -time.Second}.Validate())
}

// With MaxClockSkew, a sample that ends more than the skew after the clock
// given to SetNow is rejected; the clock is the caller's (frozen here).
func TestDecodeFutureSamples(t *testing.T) {
	// validLine covers [2026-11-01T00:00:00.250Z, +10 s).
	end := time.Date(2026, 11, 1, 0, 0, 10, 250e6, time.UTC)
	line := []byte(validLine)
	var s Sample

	dec := NewDecoderWith(DecoderOptions{MaxClockSkew: 5 * time.Minute})
	require.NoError(t, dec.Decode(line, &s), "no clock given yet: no bound")
	dec.SetNow(end.Add(-5 * time.Minute))
	require.NoError(t, dec.Decode(line, &s), "ends exactly at the clock plus the skew")
	dec.SetNow(end.Add(-5*time.Minute - time.Millisecond))
	err := dec.Decode(line, &s)
	require.ErrorIs(t, err, ErrFutureSample)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "ts", fe.Field)
	require.Contains(t, err.Error(), "2026-11-01T00:00:10.25Z")
	require.Contains(t, err.Error(), "5m0.001s after the ingest clock (2026-10-31T23:55:10.249Z)")
	require.Contains(t, err.Error(), "--max-clock-skew")
	dec.SetNow(end.Add(time.Hour))
	require.NoError(t, dec.Decode(line, &s), "a new clock replaces the old one")

	// Far ahead (beyond what a time.Duration holds) still reads well.
	dec.SetNow(end)
	err = dec.Decode([]byte(strings.Replace(validLine, `"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"9999-12-31T00:00:00Z"`, 1)), &s)
	require.ErrorIs(t, err, ErrFutureSample)
	require.Contains(t, err.Error(), "2912138 days after the ingest clock")
	// A sample invalid in itself is reported as such, whatever its time.
	err = dec.Decode([]byte(strings.Replace(strings.Replace(validLine, `"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2099-01-01T00:00:00Z"`, 1), `"node":"gpu-01"`, `"node":""`, 1)), &s)
	require.NotErrorIs(t, err, ErrFutureSample)
	require.ErrorContains(t, err, `field "node"`)

	off := NewDecoder()
	off.SetNow(end.Add(-24 * time.Hour))
	require.NoError(t, off.Decode(line, &s), "MaxClockSkew 0: no check")
}

// ReadSamples applies the bounds to every line, reports each rejected line
// with its number and reason, and reads the clock once per chunk.
func TestReadSamplesBounds(t *testing.T) {
	ok := validLine
	long := strings.Replace(validLine, `"interval_s":10`, `"interval_s":2592000`, 1)
	future := strings.Replace(validLine, `"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-11-01T09:00:00+08:00"`, 1)
	data := strings.Join([]string{ok, long, ok, future, ok}, "\n") + "\n"
	clock := time.Date(2026, 11, 1, 0, 30, 0, 0, time.UTC) // future starts at 01:00Z
	reads := 0
	now := func() time.Time { reads++; return clock }
	var got int
	stats, err := ReadSamples(strings.NewReader(data), ReadOptions{SkipInvalid: true, Workers: 1,
		DecoderOptions: DecoderOptions{MaxClockSkew: 5 * time.Minute}, Now: now},
		func(_ int, s []Sample) error { got += len(s); return nil })
	require.NoError(t, err)
	require.Equal(t, 3, got)
	require.EqualValues(t, 2, stats.InvalidCount)
	require.EqualValues(t, 2, stats.Invalid[0].Line)
	require.ErrorIs(t, stats.Invalid[0], ErrIntervalTooLong)
	require.EqualValues(t, 4, stats.Invalid[1].Line)
	require.ErrorIs(t, stats.Invalid[1], ErrFutureSample)
	require.Equal(t, 1, reads, "one chunk, one clock reading")

	// Without --skip-invalid the first bad line stops the read, with its number.
	_, err = ReadSamples(strings.NewReader(data), ReadOptions{Workers: 1}, func(int, []Sample) error { return nil })
	var le *LineError
	require.ErrorAs(t, err, &le)
	require.EqualValues(t, 2, le.Line)
	require.ErrorIs(t, err, ErrIntervalTooLong)

	// A longer bound accepts the long line; no clock, no future check.
	stats, err = ReadSamples(strings.NewReader(data), ReadOptions{Workers: 1, DecoderOptions: DecoderOptions{MaxInterval: 30 * 24 * time.Hour}},
		func(int, []Sample) error { return nil })
	require.NoError(t, err)
	require.EqualValues(t, 5, stats.Valid)

	_, err = ReadSamples(strings.NewReader(data), ReadOptions{DecoderOptions: DecoderOptions{MaxClockSkew: time.Minute}}, func(int, []Sample) error { return nil })
	require.ErrorContains(t, err, "needs a clock")
	_, err = ReadSamples(strings.NewReader(data), ReadOptions{DecoderOptions: DecoderOptions{MaxInterval: -1}}, func(int, []Sample) error { return nil })
	require.ErrorContains(t, err, "max interval")
}
