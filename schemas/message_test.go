package schemas_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

func TestAppendMessages(t *testing.T) {
	mk := func(node string, i int, user string) schemas.Sample {
		return schemas.Sample{StartMS: 1793462400000, IntervalMS: 10000, Node: node, GPUUUID: "GPU-1",
			GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: fmt.Sprintf("MIG-%d", i), Profile: "1g.10gb",
			Project: "p", User: user, MemTotal: 1 << 30}
	}
	samples := []schemas.Sample{mk("n1", 0, "u"), mk("n1", 1, "u"), mk("n2", 2, "u"), mk("n2", 3, "u"), mk("n2", 4, "u")}
	one := len(samples[0].AppendJSON(nil)) + 1
	// Room for two samples per message: n1 fits one, n2 is split 2 + 1.
	buf, spans := schemas.AppendMessages(nil, nil, samples, 2*one+1)
	require.Len(t, spans, 3)
	require.Equal(t, []string{"n1", "n2", "n2"}, []string{spans[0].Key, spans[1].Key, spans[2].Key})
	dec := schemas.NewDecoder()
	var got []schemas.Sample
	var perMessage []int
	for _, m := range spans {
		v := buf[m.Start:m.End]
		require.Equal(t, byte('\n'), v[len(v)-1], "every line ends in a newline")
		n := 0
		for rest := v; len(rest) > 0; n++ {
			var line []byte
			line, rest = schemas.NextLine(rest)
			var s schemas.Sample
			require.NoError(t, dec.Decode(line, &s))
			require.Equal(t, m.Key, s.Node)
			got = append(got, s)
		}
		perMessage = append(perMessage, n)
	}
	require.Equal(t, []int{2, 2, 1}, perMessage)
	require.Len(t, got, len(samples))
	for i := range samples {
		require.Equal(t, samples[i].InstanceID, got[i].InstanceID)
	}

	// A sample longer than the bound gets a message of its own; the default bound
	// keeps a tick of 56 instances in one message.
	long := mk("n1", 9, strings.Repeat("x", 300))
	_, spans = schemas.AppendMessages(nil, nil, []schemas.Sample{samples[0], long, samples[1]}, one+10)
	require.Len(t, spans, 3)
	var tick []schemas.Sample
	for i := range 56 {
		tick = append(tick, mk("n1", i, "2025020004"))
	}
	buf, spans = schemas.AppendMessages(nil, nil, tick, 0)
	require.Len(t, spans, 1)
	require.Equal(t, 56, strings.Count(string(buf[spans[0].Start:spans[0].End]), "\n"))
}

func TestNextLine(t *testing.T) {
	var lines []string
	for rest := []byte("a\r\n\nb\n  \nc"); len(rest) > 0; {
		var line []byte
		line, rest = schemas.NextLine(rest)
		lines = append(lines, string(line))
	}
	require.Equal(t, []string{"a", "", "b", "  ", "c"}, lines)
}
