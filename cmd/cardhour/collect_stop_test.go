package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector/kafkapub"
)

const exampleFleet = "../../collector/testdata/fleet.example.yaml"

// openUnder lists this process's open files under dir.
func openUnder(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var out []string
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			out = append(out, target)
		}
	}
	return out
}

// spooled is a spool directory that the spool created its segment in.
func spooled(t *testing.T, dir string) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	require.NotEmpty(t, segs, "the spool was opened")
}

// A Kafka writer that cannot be made at start (its CA file is missing):
// the error is said and the spool, already open, is closed.
func TestCollectKafkaWriterFailsAtStartClosesTheSpool(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	code, _, errOut := runCLI(t, "", "collect", "--simulate", exampleFleet, "--interval", "1s", "--dcgm-timeout", "500ms", "--listen", "",
		"--brokers", "127.0.0.1:1", "--spool-dir", dir, "--kafka-tls", "--kafka-tls-ca", filepath.Join(dir, "missing-ca.pem"))
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "cannot read CA file")
	spooled(t, dir)
	require.Empty(t, openUnder(t, dir), "the spool is closed")
}

// closeCounted is the Kafka writer with its Close counted (and failing
// when fail is set).
type closeCounted struct {
	*kafkapub.MemorySink
	closed *atomic.Int32
	fail   error
}

func (c closeCounted) Close() error {
	c.closed.Add(1)
	return c.fail
}

func fakeKafka(t *testing.T, fail error) (*kafkapub.MemorySink, *atomic.Int32) {
	t.Helper()
	sink, closed := &kafkapub.MemorySink{}, &atomic.Int32{}
	old := newKafkaSink
	newKafkaSink = func(kafkapub.KafkaConfig) (kafkaWriter, error) { return closeCounted{sink, closed, fail}, nil }
	t.Cleanup(func() { newKafkaSink = old })
	return sink, closed
}

// A start that fails after the Kafka writer was made (the metrics address
// is taken) closes the writer and the spool.
func TestCollectFailedStartClosesTheKafkaWriterAndTheSpool(t *testing.T) {
	_, closed := fakeKafka(t, nil)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close() //nolint:errcheck // the test's listener
	dir := filepath.Join(t.TempDir(), "spool")
	code, _, errOut := runCLI(t, "", "collect", "--simulate", exampleFleet, "--interval", "1s", "--dcgm-timeout", "500ms", "--listen", taken.Addr().String(),
		"--brokers", "127.0.0.1:1", "--spool-dir", dir)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "cannot listen for metrics")
	spooled(t, dir)
	require.Empty(t, openUnder(t, dir), "the spool is closed")
	require.EqualValues(t, 1, closed.Load(), "the Kafka writer is closed")
}

// On SIGTERM the collectors take their last sample, the spool is drained
// into Kafka and closed, and an error of the shutdown (the Kafka writer's
// close) is returned, not dropped.
func TestCollectStopDrainsClosesAndReturnsErrors(t *testing.T) {
	sink, closed := fakeKafka(t, errors.New("broker connection reset"))
	dir := filepath.Join(t.TempDir(), "spool")
	type result struct {
		code   int
		errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, _, errOut := runCLI(t, "", "collect", "--simulate", exampleFleet, "--interval", "1s", "--dcgm-timeout", "500ms", "--listen", "",
			"--brokers", "127.0.0.1:1", "--spool-dir", dir, "--kafka-linger", "10ms")
		done <- result{code, errOut}
	}()
	require.Eventually(t, func() bool { return len(sink.Records()) > 0 }, 20*time.Second, 20*time.Millisecond, "samples reach Kafka")
	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGTERM))
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("collect did not stop on SIGTERM")
	}
	require.Equal(t, 1, r.code, r.errOut)
	require.Contains(t, r.errOut, "kafka writer: broker connection reset")
	require.Contains(t, r.errOut, `"msg":"collector shut down"`)
	require.EqualValues(t, 1, closed.Load(), "the Kafka writer is closed once")
	require.Empty(t, openUnder(t, dir), "the spool is closed")
}
