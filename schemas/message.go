package schemas

import "bytes"

// DefaultMessageBytes bounds one Kafka message value of the sample topic as the
// collector writes it. Ingest decodes messages of any size the topic takes
// (its max.message.bytes), so a producer may use more.
const DefaultMessageBytes = 64 << 10

// A message of the sample topic holds one or more cardhour.sample.v1 JSON
// objects, one per line (JSON Lines as in a file, read with NextLine; every line
// ends in '\n', blank lines are ignored). A message with a single object and no newline, as earlier
// collectors wrote, is the same thing with one line. The collector writes one
// message per node and tick (all of the node's instances), keyed by the node, so
// that each instance's samples stay in order in one partition while the consumer
// handles a few large messages instead of many small ones.

// MessageSpan is one framed message: its key and the bytes [Start:End] of the
// buffer AppendMessages returned.
type MessageSpan struct {
	Key        string
	Start, End int
}

// AppendMessages encodes samples as message values of the sample topic and
// appends them to buf. Consecutive samples of one node share a message until it
// would exceed maxBytes (a sample longer than that alone gets a message of its
// own); maxBytes <= 0 means DefaultMessageBytes. It returns the grown buffer and
// spans with one entry per message; slice the returned buffer with them.
func AppendMessages(buf []byte, spans []MessageSpan, samples []Sample, maxBytes int) ([]byte, []MessageSpan) {
	if maxBytes <= 0 {
		maxBytes = DefaultMessageBytes
	}
	open := false
	for i := range samples {
		s := &samples[i]
		start := len(buf)
		buf = s.AppendJSON(buf)
		buf = append(buf, '\n')
		if open {
			m := &spans[len(spans)-1]
			if m.Key == s.Node && len(buf)-m.Start <= maxBytes {
				m.End = len(buf)
				continue
			}
		}
		spans = append(spans, MessageSpan{Key: s.Node, Start: start, End: len(buf)})
		open = true
	}
	return buf, spans
}

// NextLine splits a message value at its first newline: the line (without the
// newline or a trailing '\r') and the rest. Callers loop while len(rest) > 0.
func NextLine(value []byte) (line, rest []byte) {
	if k := bytes.IndexByte(value, '\n'); k >= 0 {
		line, rest = value[:k], value[k+1:]
	} else {
		line = value
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, rest
}
