package ingest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cardhour/cardhour/schemas"
)

// maxRejectError bounds the error text kept per reject.
const maxRejectError = 512

// NewReject describes input rejected with err: line is the rejected line (or
// message), whose "ts" is the reject's time when it can be read; otherwise
// the reject is dated now.
func NewReject(source string, line []byte, err error, now time.Time) Reject {
	return Reject{TimeMS: rejectTime(line, now), Source: source, Reason: Reason(err), Error: clipError(err.Error())}
}

// clipError bounds msg to maxRejectError bytes, on a character boundary.
func clipError(msg string) string {
	if len(msg) <= maxRejectError {
		return msg
	}
	msg = msg[:maxRejectError]
	for !utf8.ValidString(msg) {
		msg = msg[:len(msg)-1]
	}
	return msg
}

// rejectTime is the value of the first "ts" string of line when it is a
// timestamp cardhour reads, else now. The line is invalid, so it is searched,
// not decoded.
func rejectTime(line []byte, now time.Time) int64 {
	const key = `"ts"`
	rest := line
	for {
		i := bytes.Index(rest, []byte(key))
		if i < 0 {
			return now.UnixMilli()
		}
		rest = bytes.TrimLeft(rest[i+len(key):], " \t")
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		v := bytes.TrimLeft(rest[1:], " \t")
		if len(v) == 0 || v[0] != '"' {
			continue
		}
		end := bytes.IndexByte(v[1:], '"')
		if end < 0 {
			return now.UnixMilli()
		}
		if ms, err := schemas.ParseTimestampMS(v[1 : 1+end]); err == nil {
			return ms
		}
		return now.UnixMilli()
	}
}

// RejectWarning is the billing warning for the rejects of period p, or "" when
// there are none.
func RejectWarning(p fmt.Stringer, sum RejectSummary) string {
	if sum.Count == 0 {
		return ""
	}
	var reasons []string
	for _, r := range sum.First {
		reasons = append(reasons, fmt.Sprintf("%s at %s: %s", r.Reason, r.Source, r.Error))
	}
	// A reject is a line, or a whole message a Kafka worker could not read
	// line by line (unknown schema header, no sample at all).
	noun := "samples or messages were"
	if sum.Count == 1 {
		noun = "sample or message was"
	}
	return fmt.Sprintf("period %s: %d %s rejected at ingest and are not billed (first reasons: %s)", p, sum.Count, noun, strings.Join(reasons, "; "))
}

// WriteRejects stores rs when the store keeps rejects, retrying like a batch
// write.
func (w *Writer) WriteRejects(ctx context.Context, rs []Reject) error {
	st, ok := w.cfg.Store.(Rejects)
	if !ok || len(rs) == 0 {
		return nil
	}
	return Retry(ctx, w.cfg.Logger, w.cfg.RetryMin, w.cfg.RetryMax, w.cfg.Metrics, w.cfg.OnPause, "reject write", func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, w.cfg.AttemptTimeout)
		defer cancel()
		if err := st.WriteRejects(actx, rs); err != nil {
			w.cfg.Metrics.WriteErrors.Inc()
			return err
		}
		return nil
	})
}
