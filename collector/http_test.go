package collector_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/kafkapub"
	"github.com/cardhour/cardhour/collector/spool"
	"github.com/cardhour/cardhour/schemas"
)

type settableNow struct {
	mu sync.Mutex
	t  time.Time
}

func (s *settableNow) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

func (s *settableNow) set(t time.Time) {
	s.mu.Lock()
	s.t = t
	s.mu.Unlock()
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, string(body)
}

// While Kafka does not acknowledge, the collector keeps sampling into the spool:
// it stays alive (/healthz 200, a restart would not help) but, once the oldest
// unacknowledged sample is older than the limit, it is degraded: /healthz says
// so and /readyz fails, until Kafka has taken the backlog.
func TestKafkaOutageMakesTheCollectorDegradedNotDead(t *testing.T) {
	t0 := time.Now().Truncate(time.Second)
	clk := &settableNow{t: t0}
	reg := prometheus.NewRegistry()
	sp, err := spool.Open(spool.Config{Dir: t.TempDir(), MaxBytes: 1 << 20, Now: clk.Now, Registerer: reg})
	require.NoError(t, err)
	defer sp.Close()
	sink := &kafkapub.MemorySink{Fail: errors.New("broker unreachable")}
	p, err := kafkapub.New(kafkapub.Config{Spool: sp, Sink: sink, BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond})
	require.NoError(t, err)
	c, err := collector.New(collector.Config{Node: "n1", Interval: time.Hour, Source: &fakeSource{insts: []collector.Instance{inst("MIG-1")}}, Publisher: p})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.Run(ctx) })
	wg.Go(func() { _ = c.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	h := collector.HTTPHandler(reg, []func() error{func() error { return sp.CheckUnackedAge(5 * time.Minute) }}, c)

	require.Eventually(t, func() bool { code, _ := get(t, h, "/healthz"); return code == http.StatusOK }, 5*time.Second, time.Millisecond)
	s := schemas.Sample{StartMS: t0.UnixMilli(), IntervalMS: 10_000, Node: "n1", GPUUUID: "GPU-1", GPUModel: "m",
		InstanceID: "MIG-1", Profile: "1g.10gb", MemTotal: 1, UtilSource: "none"}
	require.NoError(t, p.Publish(ctx, []schemas.Sample{s}))

	clk.set(t0.Add(4 * time.Minute))
	code, body := get(t, h, "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	code, _ = get(t, h, "/readyz")
	require.Equal(t, http.StatusOK, code)

	clk.set(t0.Add(6 * time.Minute))
	code, body = get(t, h, "/healthz")
	require.Equal(t, http.StatusOK, code, "liveness holds: the collector samples and spools")
	require.True(t, strings.HasPrefix(body, "degraded: "), body)
	require.Contains(t, body, "spooled 6m0s ago (limit 5m0s)")
	code, body = get(t, h, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "degraded: ")
	_, metrics := get(t, h, "/metrics")
	require.Contains(t, metrics, "cardhour_collector_spool_oldest_unacked_age_seconds 360\n")

	sink.SetFail(nil)
	require.Eventually(t, func() bool { return sp.Pending() == 0 }, 10*time.Second, time.Millisecond)
	code, body = get(t, h, "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	_, metrics = get(t, h, "/metrics")
	require.Contains(t, metrics, "cardhour_collector_spool_oldest_unacked_age_seconds 0\n")
}

// A collector that stopped handing samples to its publisher fails both probes.
func TestStalledCollectorFailsLiveness(t *testing.T) {
	c, err := collector.New(collector.Config{Node: "n1", Source: &fakeSource{}, Publisher: &collector.MemoryPublisher{}})
	require.NoError(t, err)
	h := collector.HTTPHandler(prometheus.NewRegistry(), nil, c)
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := get(t, h, path)
		require.Equal(t, http.StatusServiceUnavailable, code, path)
		require.Equal(t, "n1: collector not started\n", body)
	}
}
