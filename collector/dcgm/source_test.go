package dcgm_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/dcgm"
	"github.com/cardhour/cardhour/collector/nvmlmock"
	"github.com/cardhour/cardhour/collector/nvmlsource"
	"github.com/cardhour/cardhour/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// exporter serves a fixture file the way dcgm-exporter serves /metrics; body
// replaces it while the test runs.
type exporter struct {
	srv      *httptest.Server
	body     atomic.Value // string
	status   atomic.Int32
	delay    atomic.Int64 // nanoseconds before answering
	requests atomic.Int32
}

func newExporter(t *testing.T, fixture string) *exporter {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", fixture))
	require.NoError(t, err)
	e := &exporter{}
	e.body.Store(string(b))
	e.status.Store(http.StatusOK)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests.Add(1)
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		if d := time.Duration(e.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.WriteHeader(int(e.status.Load()))
		_, _ = w.Write([]byte(e.body.Load().(string)))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *exporter) url() string { return e.srv.URL + "/metrics" }

// node is the mock A100 node whose UUIDs the fixture a100-mig-node.prom names:
// GPU 0 split 3g.40gb + 2g.20gb + 1g.10gb + 1g.10gb (GPU instance IDs 0..3),
// GPU 1 whole.
func node(t *testing.T) *nvmlmock.Node {
	t.Helper()
	n, err := nvmlmock.New("a100-80gb", []nvmlmock.Layout{{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}, nil}, "dcgm-e2e")
	require.NoError(t, err)
	u, _ := n.GPUs[0].Device.GetUUIDFunc()
	require.Equal(t, migGPU, u, "the fixture names the mock's UUIDs")
	require.Equal(t, wholeGPU, n.GPUs[1].Instances[0].UUID)
	for i, in := range n.GPUs[0].Instances {
		require.Equal(t, i, in.GIID)
	}
	return n
}

type rig struct {
	node *nvmlmock.Node
	src  *dcgm.Source
	reg  *prometheus.Registry
	pub  *collector.MemoryPublisher
}

func newRig(t *testing.T, cfg dcgm.Config) *rig {
	t.Helper()
	n := node(t)
	reg := prometheus.NewRegistry()
	nv, err := nvmlsource.New(nvmlsource.Config{Lib: n.Lib(), Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = nv.Close() })
	cfg.Registerer = reg
	src, err := dcgm.New(nv, cfg)
	require.NoError(t, err)
	t.Cleanup(src.Close)
	return &rig{node: n, src: src, reg: reg, pub: &collector.MemoryPublisher{}}
}

// run runs a collector over the rig for ticks intervals of 10 s on a fast-forward clock.
func (r *rig) run(t *testing.T, ticks int) []schemas.Sample {
	t.Helper()
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	clock := collector.NewFastForwardClock(start)
	c, err := collector.New(collector.Config{Node: "gpu-a100-01", Interval: 10 * time.Second, Clock: clock,
		StopAt: start.Add(time.Duration(ticks) * 10 * time.Second), Source: r.src, Publisher: r.pub, Registerer: r.reg})
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	got := r.pub.Samples()
	require.Len(t, got, ticks*5, "every tick publishes all five instances")
	return got
}

func byInstance(ss []schemas.Sample) map[string]schemas.Sample {
	m := map[string]schemas.Sample{}
	for _, s := range ss {
		m[s.InstanceID] = s // the latest
	}
	return m
}

func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabel(m, label, value) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	if name == "" {
		return len(m.GetLabel()) == 0
	}
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func TestMIGInstanceWithoutNVMLUtilGetsDCGM(t *testing.T) {
	ex := newExporter(t, "a100-mig-node.prom")
	r := newRig(t, dcgm.Config{URL: ex.url()})
	gpu0 := r.node.GPUs[0].Instances
	// A notebook holds a CUDA context on the 3g.40gb slice and does nothing;
	// NVML sees the process and the memory, and no utilisation.
	gpu0[0].Set(nvmlmock.State{MemUsed: 2 << 30, Processes: []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 2 << 30}}})
	gpu0[1].Set(nvmlmock.State{MemUsed: 17 << 30, Processes: []nvml.ProcessInfo{{Pid: 5151, UsedGpuMemory: 17 << 30}}})
	r.node.GPUs[1].Instances[0].Set(nvmlmock.State{Util: 0.42, Processes: []nvml.ProcessInfo{{Pid: 6000}}})

	got := byInstance(r.run(t, 2))
	notebook := got[gpu0[0].UUID]
	require.True(t, notebook.UtilKnown)
	require.Zero(t, notebook.Util)
	require.Equal(t, "dcgm", notebook.UtilSource)
	require.EqualValues(t, 1, notebook.Processes)

	trainer := got[gpu0[1].UUID]
	require.Equal(t, "dcgm", trainer.UtilSource)
	require.InDelta(t, 0.873214, trainer.Util, 1e-12)
	require.Equal(t, "dcgm", got[gpu0[2].UUID].UtilSource)

	missing := got[gpu0[3].UUID]
	require.False(t, missing.UtilKnown, "no series for GI 3: util stays null")
	require.Equal(t, "none", missing.UtilSource)

	whole := got[r.node.GPUs[1].Instances[0].UUID]
	require.Equal(t, "nvml", whole.UtilSource, "NVML's value wins by default")
	require.InDelta(t, 0.42, whole.Util, 1e-9)

	// What changes for idleness: with util null and a process, the notebook
	// was never idle; with DCGM's 0 it is idle under the threshold.
	cat, err := schemas.LoadCatalog("../../schemas/examples/catalog.yaml")
	require.NoError(t, err)
	notebook.Project = "nlp-lab"
	require.True(t, billing.IsIdle(cat, &notebook))
	notebook.Util, notebook.UtilKnown = 0, false
	require.False(t, billing.IsIdle(cat, &notebook), "without DCGM: util unknown and a process = not idle")
	require.False(t, billing.IsIdle(cat, &trainer))

	require.EqualValues(t, 2*3, counter(t, r.reg, "cardhour_collector_dcgm_instances_total", "result", "filled"))
	require.EqualValues(t, 2*1, counter(t, r.reg, "cardhour_collector_dcgm_instances_total", "result", "kept"))
	require.EqualValues(t, 2*1, counter(t, r.reg, "cardhour_collector_dcgm_instances_total", "result", "no_series"))
	require.Zero(t, counter(t, r.reg, "cardhour_collector_dcgm_scrape_errors_total", "reason", "request"))
	require.EqualValues(t, 2, ex.requests.Load(), "one scrape per tick")
}

func TestOverrideLetsDCGMReplaceNVML(t *testing.T) {
	ex := newExporter(t, "a100-mig-node.prom")
	r := newRig(t, dcgm.Config{URL: ex.url(), Override: true})
	r.node.GPUs[1].Instances[0].Set(nvmlmock.State{Util: 0.42})
	got := byInstance(r.run(t, 1))
	whole := got[r.node.GPUs[1].Instances[0].UUID]
	require.Equal(t, "dcgm", whole.UtilSource)
	require.InDelta(t, 0.412577, whole.Util, 1e-12)
}

func TestExporterDownKeepsUtilNullAndCounts(t *testing.T) {
	ex := newExporter(t, "a100-mig-node.prom")
	url := ex.url()
	ex.srv.Close() // nothing listens there any more
	r := newRig(t, dcgm.Config{URL: url})
	got := r.run(t, 3)
	for _, s := range got {
		if s.Profile == "full" {
			continue // NVML measures the whole card
		}
		require.False(t, s.UtilKnown, s.InstanceID)
		require.Equal(t, "none", s.UtilSource)
	}
	require.EqualValues(t, 3, counter(t, r.reg, "cardhour_collector_dcgm_scrape_errors_total", "reason", "request"))
	require.EqualValues(t, 3*5, counter(t, r.reg, "cardhour_collector_dcgm_instances_total", "result", "no_scrape"))
	require.Zero(t, counter(t, r.reg, "cardhour_collector_source_errors_total", "", ""),
		"a scrape failure is not a device error")
}

func TestScrapeFailuresByReasonAndRecovery(t *testing.T) {
	ex := newExporter(t, "a100-mig-node.prom")
	r := newRig(t, dcgm.Config{URL: ex.url(), Timeout: 200 * time.Millisecond})
	ctx := context.Background()
	gi0 := r.node.GPUs[0].Instances[0].UUID
	utilOf := func() schemas.Sample {
		insts, err := r.src.Sample(ctx)
		require.NoError(t, err)
		for _, in := range insts {
			if in.InstanceID == gi0 {
				return schemas.Sample{Util: in.Util, UtilKnown: in.UtilKnown, UtilSource: in.UtilSource}
			}
		}
		t.Fatal("instance missing")
		return schemas.Sample{}
	}

	ex.status.Store(http.StatusServiceUnavailable)
	require.False(t, utilOf().UtilKnown)
	require.EqualValues(t, 1, counter(t, r.reg, "cardhour_collector_dcgm_scrape_errors_total", "reason", "status"))

	ex.status.Store(http.StatusOK)
	ex.body.Store("<html><body>502 Bad Gateway</body></html>\n")
	require.False(t, utilOf().UtilKnown)
	require.EqualValues(t, 1, counter(t, r.reg, "cardhour_collector_dcgm_scrape_errors_total", "reason", "parse"))

	b, err := os.ReadFile("testdata/a100-mig-node.prom")
	require.NoError(t, err)
	ex.body.Store(string(b))
	ex.delay.Store(int64(5 * time.Second))
	t0 := time.Now()
	require.False(t, utilOf().UtilKnown)
	require.Less(t, time.Since(t0), 3*time.Second, "the scrape is cut at its timeout, not at the exporter's pace")
	require.EqualValues(t, 1, counter(t, r.reg, "cardhour_collector_dcgm_scrape_errors_total", "reason", "timeout"))

	ex.delay.Store(0)
	s := utilOf()
	require.True(t, s.UtilKnown, "the next good scrape fills util again")
	require.Equal(t, "dcgm", s.UtilSource)
}

func TestProfileMismatchIsNotUsed(t *testing.T) {
	ex := newExporter(t, "a100-mig-node.prom")
	// The exporter still lists the layout from before a reconfiguration.
	ex.body.Store(strings.Replace(ex.body.Load().(string), `GPU_I_PROFILE="1g.10gb",GPU_I_ID="2"`, `GPU_I_PROFILE="2g.20gb",GPU_I_ID="2"`, -1))
	r := newRig(t, dcgm.Config{URL: ex.url()})
	got := byInstance(r.run(t, 1))
	require.False(t, got[r.node.GPUs[0].Instances[2].UUID].UtilKnown)
	require.Equal(t, "dcgm", got[r.node.GPUs[0].Instances[1].UUID].UtilSource)
	require.EqualValues(t, 1, counter(t, r.reg, "cardhour_collector_dcgm_instances_total", "result", "profile_mismatch"))
}

func TestIgnoredSeriesAreCounted(t *testing.T) {
	ex := newExporter(t, "stale-nan-duplicates.prom")
	r := newRig(t, dcgm.Config{URL: ex.url(), Now: func() time.Time { return fixtureNow }})
	_, err := r.src.Sample(context.Background())
	require.NoError(t, err)
	for reason, want := range map[string]float64{"stale": 1, "nan": 2, "out_of_range": 2, "duplicate": 1, "conflict": 2, "bad_labels": 2} {
		require.Equal(t, want, counter(t, r.reg, "cardhour_collector_dcgm_series_ignored_total", "reason", reason), reason)
	}
}

func TestConfigValidate(t *testing.T) {
	src := &nvmlsource.Source{}
	for _, tc := range []struct {
		cfg  dcgm.Config
		want string
	}{
		{dcgm.Config{}, "URL is required"},
		{dcgm.Config{URL: "localhost:9400/metrics"}, "want http://host:port/path"},
		{dcgm.Config{URL: "ftp://n1:9400/metrics"}, "want http://host:port/path"},
		{dcgm.Config{URL: "http://n1:9400/metrics", Timeout: -time.Second}, "timeout -1s must not be negative"},
	} {
		_, err := dcgm.New(src, tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
	_, err := dcgm.New(nil, dcgm.Config{URL: "http://n1:9400/metrics"})
	require.ErrorContains(t, err, "inner source is required")
}

// BenchmarkScrapeNode scrapes an exporter on loopback that serves an 8-GPU
// node split 7 × 1g.10gb (what Sample adds to a tick, besides matching).
func BenchmarkScrapeNode(b *testing.B) {
	text := nodeExposition(8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(text) }))
	defer srv.Close()
	src, err := dcgm.New(&nvmlsource.Source{}, dcgm.Config{URL: srv.URL + "/metrics"})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := src.Scrape(context.Background())
		if err != nil || len(res.Values) != 56 {
			b.Fatal(err)
		}
	}
}
