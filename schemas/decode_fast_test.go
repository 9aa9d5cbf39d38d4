package schemas

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// canonicalLine is a sample as AppendJSON writes it (what the collector and
// `cardhour generate` write): the layout the fast path takes.
var canonicalLine = func() string {
	s := Sample{StartMS: 1793491200000, IntervalMS: 10_000, Node: "gpu-node-00", GPUUUID: "GPU-00000000-0000-4000-8000-000000000001",
		GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: "MIG-00000000-0001-4000-8000-000000000001", Profile: "1g.10gb",
		Project: "ai101", User: "2025020004", Util: 0.53, UtilKnown: true, MemUsed: 6135667565, MemTotal: 12271335131,
		Processes: 1, SchemaField: SampleSchemaV1}
	return string(s.AppendJSON(nil))
}()

// decodeBoth decodes line with a decoder that has seen warm (so that its
// guesses are set) and with the general path of a fresh decoder, and checks
// that both give the same sample or the same error.
func decodeBoth(t *testing.T, warm []string, line string) (Sample, error) {
	t.Helper()
	fast, general := NewDecoder(), NewDecoder()
	var got, want Sample
	for _, w := range warm {
		_ = fast.Decode([]byte(w), &got)
	}
	err := fast.Decode([]byte(line), &got)
	if len(warm) > 0 { // again, after the last warm-up line: the order predicts the line's instance
		_ = fast.Decode([]byte(warm[len(warm)-1]), &got)
		err = fast.Decode([]byte(line), &got)
	}
	wantErr := general.decode([]byte(line), &want)
	if wantErr != nil {
		require.Error(t, err, line)
		require.Equal(t, wantErr.Error(), err.Error(), line)
		return got, err
	}
	require.NoError(t, err, line)
	require.Equal(t, want, got, line)
	return got, nil
}

func TestDecodeFastTakesCanonicalLines(t *testing.T) {
	d := NewDecoder()
	var s Sample
	for _, line := range []string{canonicalLine, validLine,
		strings.Replace(canonicalLine, `}`, `,"util_source":"gpm","holder_ref":"k8s:ai101/nb-0"}`, 1),
		strings.Replace(canonicalLine, `"user":"2025020004"`, `"user":"张三"`, 1), // UTF-8: scanned, not a fallback
	} {
		require.True(t, d.decodeFast([]byte(line), &s), line)
		decodeBoth(t, nil, line)
		decodeBoth(t, []string{line}, line)
	}
	for _, line := range []string{
		" " + canonicalLine,
		strings.Replace(canonicalLine, `,"ts":`, `, "ts":`, 1),
		strings.Replace(canonicalLine, `"processes":1`, `"processes":1e0`, 1),
		strings.Replace(canonicalLine, `,"util":0.53,`, `,"util":0.53 ,`, 1),
		strings.Replace(canonicalLine, `}`, `,"extra":1}`, 1),
		canonicalLine + " ",
	} {
		require.False(t, d.decodeFast([]byte(line), &s), line)
		got, err := decodeBoth(t, []string{canonicalLine}, line)
		require.NoError(t, err, line) // the general way takes them
		require.Equal(t, "ai101", got.Project)
	}
}

// TestDecodeFastSameErrors: a line laid out canonically but with a wrong
// value gets, through the fast path's fallback, exactly the general error.
func TestDecodeFastSameErrors(t *testing.T) {
	r := func(old, new string) string {
		require.Contains(t, canonicalLine, old)
		return strings.Replace(canonicalLine, old, new, 1)
	}
	cases := map[string]string{
		r(`"util":0.53`, `"util":1.5`):                                                    `field "util": value 1.5: must be a number in [0,1] or null`,
		r(`"util":0.53`, `"util":1.0000000000000001`):                                     "",
		r(`"util":0.53`, `"util":-0`):                                                     "",
		r(`"util":0.53`, `"util":-0.1`):                                                   `field "util"`,
		r(`"util":0.53`, `"util":00.5`):                                                   "malformed JSON",
		r(`"util":0.53`, `"util":.5`):                                                     `field "util"`,
		r(`"util":0.53`, `"util":1.`):                                                     "malformed JSON",
		r(`"util":0.53`, `"util":0.1234567890123456789`):                                  "",
		r(`"util":0.53`, `"util":1e0`):                                                    "",
		r(`"util":0.53`, `"util":1.00`):                                                   "",
		r(`"processes":1`, `"processes":01`):                                              "malformed JSON",
		r(`"processes":1`, `"processes":-1`):                                              `field "processes": value -1: must be a non-negative integer`,
		r(`"processes":1`, `"processes":2.0`):                                             "",
		r(`"processes":1`, `"processes":1e3`):                                             "",
		r(`"mem_used_bytes":6135667565`, `"mem_used_bytes":9223372036854775807`):          "",
		r(`"mem_used_bytes":6135667565`, `"mem_used_bytes":9223372036854775808`):          `field "mem_used_bytes"`,
		r(`"mem_used_bytes":6135667565`, `"mem_used_bytes":123456789012345678`):           "",
		r(`"interval_s":10`, `"interval_s":0`):                                            `field "interval_s": value 0: must be > 0`,
		r(`"interval_s":10`, `"interval_s":3601`):                                         `longer than the longest interval accepted`,
		r(`"interval_s":10`, `"interval_s":2.5`):                                          "",
		r(`"interval_s":10`, `"interval_s":010`):                                          `field "interval_s": value 0: must be > 0`,
		r(`"ts":"2026-11-01T00:00:00Z"`, `"ts":"2026-02-30T08:00:00Z"`):                   `date or time out of range`,
		r(`"ts":"2026-11-01T00:00:00Z"`, `"ts":"2026-11-01T00:00:00\u005a"`):              "",
		r(`"ts":"2026-11-01T00:00:00Z"`, `"ts":1700000000`):                               `field "ts": must be a string`,
		r(`"project":"ai101"`, `"project":null`):                                          `field "project": must be a string`,
		r(`"project":"ai101"`, `"project":"ai\u0031\u00301"`):                             "",
		r(`"project":"ai101"`, `"project":""`):                                            "",
		r(`"user":"2025020004"`, "\"user\":\"a\x01b\""):                                   "control character",
		r(`"user":"2025020004"`, "\"user\":\"a\xffb\""):                                   "invalid UTF-8",
		r(`"user":"2025020004"`, `"user":"2025020004\""`):                                 "", // an escaped quote: a longer string than the guess
		r(`"user":"2025020004"`, `"user":"2025020004`):                                    "malformed JSON",
		r(`"instance_id":"MIG-00000000-0001-4000-8000-000000000001"`, `"instance_id":""`): `field "instance_id": value "": must not be empty`,
		r(`"node":"gpu-node-00"`, `"node":"gpu-node-00","node":"x"`):                      `field "node": appears more than once`,
		r(`"schema":"cardhour.sample.v1"`, `"schema":"cardhour.sample.v2"`):               `unknown sample format version`,
		canonicalLine[:len(canonicalLine)-1]:                                              "malformed JSON",
		canonicalLine + "x":                                                               "unexpected data after the object",
	}
	warm := []string{canonicalLine, r(`"util":0.53`, `"util":null`)}
	for line, want := range cases {
		_, err := decodeBoth(t, warm, line)
		if want == "" {
			require.NoError(t, err, line)
			continue
		}
		require.ErrorContains(t, err, want, line)
	}
}

// TestDecodeFastGuesses: instances in changing order, values that change
// under an instance, escapes that must not become guesses.
func TestDecodeFastGuesses(t *testing.T) {
	line := func(inst, node, project, user string) string {
		return strings.NewReplacer(`"instance_id":"MIG-00000000-0001-4000-8000-000000000001"`, `"instance_id":"`+inst+`"`,
			`"node":"gpu-node-00"`, `"node":"`+node+`"`, `"project":"ai101"`, `"project":"`+project+`"`,
			`"user":"2025020004"`, `"user":"`+user+`"`).Replace(canonicalLine)
	}
	var seq []string
	for round := 0; round < 4; round++ {
		order := []string{"A", "B", "C"}
		if round%2 == 1 {
			order = []string{"A", "C", "B"}
		}
		for _, inst := range order {
			user := fmt.Sprintf("u-%s-%d", inst, round/2)
			seq = append(seq, line(inst, "n-"+inst, "p-"+inst, user))
		}
	}
	seq = append(seq, line("A", `n\"A`, `p-A`, `\u0041`), line("A", `n\"A`, `p-A`, `\u0041`), line("A", `nA`, `p-A`, `A`))
	d := NewDecoder()
	for i, l := range seq {
		var got, want Sample
		require.NoError(t, d.Decode([]byte(l), &got), l)
		require.NoError(t, NewDecoder().decode([]byte(l), &want), l)
		require.Equal(t, want, got, "line %d: %s", i, l)
	}
	// A value decoded from escapes is never a guess: the input equal to its
	// bytes is another (here invalid) JSON text.
	for _, c := range []struct{ escaped, raw, err string }{
		{`a\"b`, `a"b`, "malformed JSON"},
		{`a\nb`, "a\nb", "control character in string"},
		{`a\\`, `a\`, "malformed JSON"},
	} {
		for _, field := range []string{"node", "user"} {
			first, second := line("A", "n", "p", c.escaped), line("A", "n", "p", c.raw)
			if field == "node" {
				first, second = line("A", c.escaped, "p", "u"), line("A", c.raw, "p", "u")
			}
			_, err := decodeBoth(t, []string{first, first}, second)
			require.ErrorContains(t, err, c.err, second)
		}
	}
}

// FuzzDecodeFast: whatever the input, Decode (the fast path and its
// fallback, with guesses set by earlier lines) and the general path agree
// on the sample or the error.
func FuzzDecodeFast(f *testing.F) {
	f.Add([]byte(canonicalLine))
	f.Add([]byte(validLine))
	f.Add([]byte(strings.Replace(canonicalLine, `}`, `,"util_source":"gpm","holder_ref":"k8s:ai101/nb-0"}`, 1)))
	f.Add([]byte(strings.Replace(canonicalLine, `"util":0.53`, `"util":null`, 1)))
	f.Add([]byte(strings.Replace(canonicalLine, `"user":"2025020004"`, `"user":"\u5f20\u4e09"`, 1)))
	for _, share := range shareTails {
		f.Add([]byte(strings.Replace(canonicalLine, `}`, share+`}`, 1)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, general := NewDecoder(), NewDecoder()
		var got, want Sample
		for range 3 { // cold for this line's values, then warm: the second time the order predicts it
			_ = fast.Decode([]byte(canonicalLine), &got)
			err := fast.Decode(data, &got)
			wantErr := general.decode(data, &want)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("%q: fast path %v, general %v", data, err, wantErr)
			}
			if err == nil && got != want {
				t.Fatalf("%q: fast path %+v, general %+v", data, got, want)
			}
		}
	})
}
