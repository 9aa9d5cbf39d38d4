package ingest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// The Kafka worker dead-letters, line by line, a sample whose interval is over
// the bound and one that ends beyond the clock skew, with a reason each; the
// clock is the worker's (frozen here), read per message.
func TestWorkerDeadLettersLongAndFutureSamples(t *testing.T) {
	line := `{"ts":"2026-11-01T08:00:00+08:00","interval_s":10,"node":"n","gpu_uuid":"g","gpu_model":"m","instance_id":"i","profile":"full","project":"p","user":"u","util":null,"mem_used_bytes":0,"mem_total_bytes":1,"processes":0}`
	long := strings.Replace(line, `"interval_s":10`, `"interval_s":2592000`, 1)
	future := strings.Replace(line, `08:00:00+08:00`, `09:00:00+08:00`, 1)
	clock := time.Date(2026, 11, 1, 0, 30, 0, 0, time.UTC)
	w, err := NewWorker(WorkerConfig{Brokers: []string{"127.0.0.1:1"}, Store: NewMemStore(), Logger: slog.New(slog.DiscardHandler),
		DLQ: nopWriter{}, DecoderOptions: schemas.DecoderOptions{MaxClockSkew: 5 * time.Minute}, Now: func() time.Time { return clock }})
	require.NoError(t, err)
	c := &consumer{w: w, dec: schemas.NewDecoderWith(w.cfg.DecoderOptions), cur: make([]schemas.Sample, 0, 8)}
	b := &batch{last: map[int]int{}}
	msg := kafka.Message{Topic: "t", Partition: 0, Offset: 7, Value: []byte(line + "\n" + long + "\n" + future + "\n" + line + "\n")}
	c.decodeMessage(&msg, b, func() { t.Fatal("the piece of 8 samples cannot fill") })
	require.Len(t, c.cur, 2, "the valid lines are kept")
	require.Equal(t, 4, b.lines)
	require.Len(t, b.dead, 2)
	for i, want := range []struct{ reason, line, value, text string }{
		{"interval_too_long", "2", long, "--max-interval"},
		{"future_ts", "3", future, "--max-clock-skew"},
	} {
		d := &b.dead[i]
		require.Equal(t, want.reason, headerValue(d, HeaderReason))
		require.Equal(t, want.line, headerValue(d, HeaderSourceLine))
		require.Equal(t, want.value, string(d.Value))
		require.Contains(t, headerValue(d, HeaderError), want.text)
	}

	// The clock moves on: the same message is on time an hour later.
	clock = clock.Add(time.Hour)
	c.cur, b.dead, b.lines = c.cur[:0], nil, 0
	c.decodeMessage(&msg, b, func() { t.Fatal("the piece of 8 samples cannot fill") })
	require.Len(t, c.cur, 3)
	require.Len(t, b.dead, 1)

	// A negative skew or interval bound is a configuration error.
	_, err = NewWorker(WorkerConfig{Brokers: []string{"x"}, Store: NewMemStore(), Logger: slog.New(slog.DiscardHandler),
		DecoderOptions: schemas.DecoderOptions{MaxClockSkew: -time.Second, MaxInterval: -time.Second}})
	require.ErrorContains(t, err, "max clock skew")
	require.ErrorContains(t, err, "max interval")
}

type nopWriter struct{}

func (nopWriter) WriteMessages(_ context.Context, _ ...kafka.Message) error { return nil }
func (nopWriter) Close() error                                              { return nil }
