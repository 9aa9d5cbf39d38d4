package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// messageSize bounds what kafka-go counts for a message (Message.totalSize):
// sizes as varints of at most 5 bytes, a timestamp, attributes.
func messageSize(m kafka.Message) int {
	n := 4 + 1 + 1 + 8 + 5 + len(m.Key) + 5 + len(m.Value) + 5
	for _, h := range m.Headers {
		n += 5 + len(h.Key) + 5 + len(h.Value)
	}
	return n
}

func header(m kafka.Message, key string) string { return headerValue(&m, key) }

func TestSplitPartsKeepsEveryByteAndCutsAtLineEnds(t *testing.T) {
	lines := strings.Repeat("0123456789abcdef0123456789abcdef\n", 100) // 33 bytes a line
	for _, tc := range []struct {
		name  string
		value string
		room  int
		parts int
	}{
		{"fits", lines, len(lines), 1},
		{"lines", lines, 1000, 4}, // 30 lines (990 bytes) a part
		{"one long line", strings.Repeat("x", 2500), 1000, 3},
		{"long line among short ones", "a\n" + strings.Repeat("y", 1500) + "\nb\n", 1000, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts := splitParts([]byte(tc.value), tc.room)
			require.Len(t, parts, tc.parts)
			require.Equal(t, tc.value, string(bytes.Join(parts, nil)))
			for _, p := range parts {
				require.LessOrEqual(t, len(p), tc.room)
				require.NotEmpty(t, p)
			}
			if tc.name == "lines" {
				for _, p := range parts {
					require.True(t, bytes.HasSuffix(p, []byte("\n")), "a part ends at a line end")
				}
			}
		})
	}
}

// A dead letter larger than the dead-letter topic takes goes there in parts,
// each small enough for kafka-go and the broker, each saying where it came
// from and which part it is; together they are the original bytes.
func TestDeadLetterPartsFitTheTopicAndRebuildTheMessage(t *testing.T) {
	var value []byte
	for i := range 3000 {
		value = fmt.Appendf(value, `{"schema":"cardhour.sample.v2","n":%d,"pad":"%0300d"}`+"\n", i, 0)
	}
	msg := &kafka.Message{Topic: "samples", Partition: 2, Offset: 4711, Key: []byte("node-7"), Value: value,
		Headers: []kafka.Header{{Key: HeaderSchema, Value: []byte("cardhour.sample.v2")}, {Key: HeaderPart, Value: []byte("forged")}}}
	const limit = 64 << 10
	err := fmt.Errorf("%w: header schema v2", errUnknownSchema)
	dead := appendDeadLetters(nil, msg, msg.Value, 0, err, limit)
	require.Greater(t, len(dead), len(value)/limit, "split into parts")
	var rebuilt []byte
	for i, d := range dead {
		// At least what kafka-go counts against BatchBytes: a batch of one fits.
		require.LessOrEqual(t, messageSize(d), limit, "part %d", i+1)
		require.Equal(t, strconv.Itoa(i+1), header(d, HeaderPart))
		require.Equal(t, strconv.Itoa(len(dead)), header(d, HeaderParts))
		require.Equal(t, "2", header(d, HeaderSourcePartition))
		require.Equal(t, "4711", header(d, HeaderSourceOffset))
		require.Equal(t, "unknown_schema", header(d, HeaderReason))
		require.Equal(t, "cardhour.sample.v2", header(d, HeaderSchema), "the original headers travel along")
		require.Equal(t, "node-7", string(d.Key))
		require.True(t, bytes.HasSuffix(d.Value, []byte("\n")), "cut at line ends")
		rebuilt = append(rebuilt, d.Value...)
	}
	require.Equal(t, value, rebuilt)

	// A small dead letter stays one message, without part headers.
	one := appendDeadLetters(nil, msg, value[:500], 3, errors.Join(schemas.ErrSyntax), limit)
	require.Len(t, one, 1)
	require.Equal(t, value[:500], one[0].Value)
	require.Empty(t, header(one[0], HeaderPart), "the forged header is dropped")
	require.Equal(t, "3", header(one[0], HeaderSourceLine))
}
