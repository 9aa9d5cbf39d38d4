// Package storetest is the conformance suite every usage store passes: a sample
// trace with the hard cases (month boundaries, gaps near the tolerance, idle
// signatures, replays), catalog variants, and the check that a store bills
// byte-identically to the file path.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// WriteStreamed writes samples through w in batches of batch samples, each
// streamed in pieces of piece samples as the Kafka worker hands them over, the
// runs flushed after each batch, and returns the number of batches.
func WriteStreamed(t testing.TB, w *ingest.Writer, samples []schemas.Sample, batch, piece int) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for i := 0; i < len(samples); i += batch {
		b := samples[i:min(i+batch, len(samples))]
		st := w.BeginStream(ctx, 0)
		for j := 0; j < len(b); j += piece {
			require.NoError(t, st.Write(ctx, b[j:min(j+piece, len(b))]))
		}
		require.NoError(t, st.Close())
		require.NoError(t, w.FlushRuns(ctx))
		n++
	}
	return n
}

// WriteStreamedTo writes samples to each store through a fresh Writer, as
// WriteStreamed does, and returns the number of batches each got.
func WriteStreamedTo(t testing.TB, samples []schemas.Sample, batch, piece int, stores ...ingest.Store) int {
	t.Helper()
	n := 0
	for _, s := range stores {
		w, err := ingest.NewWriter(ingest.WriterConfig{Store: s, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		n = WriteStreamed(t, w, samples, batch, piece)
	}
	return n
}

// Shanghai is the example catalog's zone.
func Shanghai(t testing.TB) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	return loc
}

// Periods are the billing months the trace touches.
var Periods = []string{"2026-10", "2026-11"}

// Trace returns JSON Lines of about n samples that start two hours before
// 2026-11 in Asia/Shanghai (so the trace crosses a billing month and, eight
// hours later, a UTC month), with replays, plus hand-made edge cases.
func Trace(t testing.TB, n int64, seed uint64) []byte {
	t.Helper()
	start := billing.NewPeriod(2026, time.November, Shanghai(t)).StartMS() - 2*3600_000
	var buf bytes.Buffer
	_, err := gen.Write(&buf, gen.Config{Samples: n, StartMS: start, IntervalMS: 10_000, Instances: 48, Seed: seed, DuplicateEvery: 37})
	require.NoError(t, err)
	p0 := start + 2*3600_000
	edge := func(startMS, intervalMS int64, util float64, known bool, procs int64, inst string) {
		s := schemas.Sample{StartMS: startMS, IntervalMS: intervalMS, Node: "edge-node", GPUUUID: "GPU-edge",
			GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: inst, Profile: "1g.10gb", Project: "nlp-lab", User: "edge-user",
			Util: util, UtilKnown: known, Processes: procs, MemTotal: 1 << 30}
		buf.Write(s.AppendJSON(nil))
		buf.WriteByte('\n')
	}
	// A session ending 20 s before the month, resuming 20 s after it: bridged
	// into the month under a 30 s tolerance, not under 0 s.
	edge(p0-600_000, 580_000, 0, false, 0, "MIG-edge-1")
	edge(p0+20_000, 600_000, 0, false, 1, "MIG-edge-1")
	// A late, out-of-order sample overlapping an earlier one; a fractional one.
	edge(p0+3_600_000, 10_000, 0.01, true, 1, "MIG-edge-2")
	edge(p0+3_590_000, 30_000, 0.30, true, 1, "MIG-edge-2")
	edge(p0+3_595_000, 1_234, 0.01, true, 1, "MIG-edge-2")
	// An hour-long sample (the longest readers accept by default) crossing the
	// UTC month boundary (8 h after p0).
	edge(p0+7*3_600_000+1_800_000, 3_600_000, 0.02, true, 0, "MIG-edge-3")
	// Unheld sample: stored raw, never billed.
	s := schemas.Sample{StartMS: p0, IntervalMS: 10_000, Node: "n", GPUUUID: "g", GPUModel: "m", InstanceID: "i", Profile: "full", MemTotal: 1}
	buf.Write(s.AppendJSON(nil))
	buf.WriteByte('\n')
	return buf.Bytes()
}

// Samples decodes JSON Lines.
func Samples(t testing.TB, data []byte) []schemas.Sample {
	t.Helper()
	var out []schemas.Sample
	var mu sync.Mutex
	_, err := schemas.ReadSamples(bytes.NewReader(data), schemas.ReadOptions{Workers: 1}, func(_ int, s []schemas.Sample) error {
		mu.Lock()
		out = append(out, s...)
		mu.Unlock()
		return nil
	})
	require.NoError(t, err)
	return out
}

// Catalogs returns the example catalog (schemas/examples/catalog.yaml) and variants that change what ingest
// cannot know: the gap tolerance, the rounding and the idle thresholds (on and
// between the idle class bounds, 0 and 1, and one high enough that busy samples
// count as idle).
func Catalogs(t testing.TB) map[string]*schemas.Catalog {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	exampleYAML, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "schemas", "examples", "catalog.yaml"))
	require.NoError(t, err)
	base := string(exampleYAML)
	variants := map[string]string{
		"example": base,
		"tol0-thr": strings.NewReplacer("gap_tolerance_s: 30 ", "gap_tolerance_s: 0 ",
			"      warn_after: 10m", "      threshold: 0.015\n      warn_after: 10m").Replace(base),
		"tol15m-hour-busyidle": strings.NewReplacer("gap_tolerance_s: 30 ", "gap_tolerance_s: 900 ",
			"  rounding: second ", "  rounding: hour ", "threshold: 0.05 ", "threshold: 0.75 ").Replace(base),
		// Thresholds on idle class bounds (ingest.IdleClassBounds()): decided from
		// idle runs alone.
		"thr-bounds": strings.NewReplacer("threshold: 0.05 ", "threshold: 0.10 ",
			"      warn_after: 10m", "      threshold: 0.5\n      warn_after: 10m").Replace(base),
		// Thresholds inside classes: runs with utils on both sides are decided
		// from their raw samples; 0 and 1 are the extremes.
		"thr-cuts": strings.NewReplacer("threshold: 0.05 ", "threshold: 0.02 ",
			"      warn_after: 10m", "      threshold: 0.3\n      warn_after: 10m").Replace(base),
		"thr-extremes": strings.NewReplacer("threshold: 0.05 ", "threshold: 0 ", "gap_tolerance_s: 30 ", "gap_tolerance_s: 300 ",
			"      warn_after: 10m", "      threshold: 1\n      warn_after: 10m").Replace(base),
	}
	out := map[string]*schemas.Catalog{}
	for name, y := range variants {
		if name != "example" {
			require.NotEqual(t, base, y, "variant %s changed nothing", name)
		}
		cat, err := schemas.ParseCatalog([]byte(y), name+".yaml")
		require.NoError(t, err, name)
		out[name] = cat
	}
	return out
}

// InvoiceJSON renders a result the way `cardhour bill --format json` does.
func InvoiceJSON(t testing.TB, res *billing.Result) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, billing.WriteJSON(&b, res))
	return b.Bytes()
}

// BillFile bills samples from JSON Lines, the reference path.
func BillFile(t testing.TB, data []byte, cat *schemas.Catalog, period string) []byte {
	t.Helper()
	p, err := billing.ParsePeriod(period, cat.Location)
	require.NoError(t, err)
	res, _, err := billing.BillStream(bytes.NewReader(data), cat, p, schemas.ReadOptions{})
	require.NoError(t, err)
	return InvoiceJSON(t, res)
}

// RequireSameInvoices checks, for every catalog variant and period, that src
// bills byte-identically to the file path on data.
func RequireSameInvoices(t testing.TB, data []byte, cats map[string]*schemas.Catalog, src reads.UsageSource) {
	t.Helper()
	for name, cat := range cats {
		for _, period := range Periods {
			want := BillFile(t, data, cat, period)
			p, err := billing.ParsePeriod(period, cat.Location)
			require.NoError(t, err)
			res, err := reads.BillFrom(context.Background(), src, cat, p)
			require.NoError(t, err)
			got := InvoiceJSON(t, res)
			require.Equal(t, string(want), string(got), "catalog %s, period %s", name, period)
			require.Contains(t, string(want), `"invoices"`)
		}
	}
}

// Proxy is a loopback TCP proxy that a test can pause: while paused it closes
// every connection and refuses new ones, as a server that went away would. It
// can also stall: connections stay open but no byte moves, as with a server
// that hangs or a network that drops packets.
type Proxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	paused  bool
	stalled bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	sent    atomic.Int64 // bytes forwarded from clients to the target
}

// Sent is the number of bytes forwarded from clients to the target so far.
func (p *Proxy) Sent() int64 { return p.sent.Load() }

// NewProxy listens on 127.0.0.1 and forwards to target until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Pause()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pause drops every connection and refuses new ones until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Stall holds every byte in both directions, on open and new connections,
// until Resume.
func (p *Proxy) Stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

// Resume accepts connections again and lets held bytes through.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.paused, p.stalled = false, false
	p.mu.Unlock()
}

// waitStall blocks while the proxy is stalled; false when the proxy paused.
func (p *Proxy) waitStall() bool {
	for {
		p.mu.Lock()
		stalled, paused := p.stalled, p.paused
		p.mu.Unlock()
		if paused {
			return false
		}
		if !stalled {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.paused {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn, count *atomic.Int64) {
			buf := make([]byte, 64<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					if !p.waitStall() {
						break
					}
					if _, werr := dst.Write(buf[:n]); werr != nil {
						break
					}
					if count != nil {
						count.Add(int64(n))
					}
				}
				if err != nil {
					break
				}
			}
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(up, c, &p.sent)
		go pipe(c, up, nil)
	}
}

// StraddlingInstances returns samples of n instances of nlp-lab, each one idle
// run of class 1 with utils on both sides of 0.02 (the nlp-lab threshold of
// the "thr-cuts" catalog), so that billing reads every instance's raw samples;
// and the bytes their ids take as a quoted, comma-separated list.
func StraddlingInstances(t testing.TB, n int) (data []byte, idBytes int) {
	t.Helper()
	p0 := billing.NewPeriod(2026, time.November, Shanghai(t)).StartMS()
	for i := range n {
		id := fmt.Sprintf("MIG-%08x-aaaa-4000-8000-%012x", i, i*7919)
		idBytes += len(id) + 3
		for j, util := range []float64{0.01, 0.03, 0.01, 0.04} {
			s := schemas.Sample{StartMS: p0 + 3600_000 + int64(i%60)*1000 + int64(j)*60_000, IntervalMS: 60_000, Node: "node-" + strconv.Itoa(i/7),
				GPUUUID: fmt.Sprintf("GPU-%08x", i/7), GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: id, Profile: "1g.10gb",
				Project: "nlp-lab", User: "u" + strconv.Itoa(i%50), Util: util, UtilKnown: true, Processes: 1, MemTotal: 10 << 30}
			data = append(s.AppendJSON(data), '\n')
		}
	}
	return data, idBytes
}

var (
	idleClassCase = regexp.MustCompile(`util < ([0-9.]+)(?:\s*,\s*|\s+THEN\s+)(\d+)`)
	idleClassElse = regexp.MustCompile(`^(?:\s*,\s*|\s+ELSE\s+)(\d+)`)
	idleClassOnly = regexp.MustCompile(`OR util < ([0-9.]+)`)
)

// RequireIdleClassSQL checks that a migration classifying utilisations into idle
// classes in SQL (CASE WHEN util < b THEN c … ELSE c END, or multiIf(…, util <
// b, c, …, c)) and keeping only util below the last bound uses exactly
// ingest.IdleClassBounds. Shipped migrations never change: the Go bounds must
// not either.
func RequireIdleClassSQL(t testing.TB, sql string) {
	t.Helper()
	bounds := ingest.IdleClassBounds()
	m := idleClassCase.FindAllStringSubmatchIndex(sql, -1)
	require.Len(t, m, len(bounds)-1, "class bounds in %s", sql)
	for i, loc := range m {
		b, err := strconv.ParseFloat(sql[loc[2]:loc[3]], 64)
		require.NoError(t, err)
		require.Equal(t, bounds[i], b, "bound of class %d", i+1)
		require.Equal(t, strconv.Itoa(i+1), sql[loc[4]:loc[5]], "class below %g", b)
	}
	last := idleClassElse.FindStringSubmatch(sql[m[len(m)-1][1]:])
	require.NotNil(t, last, "the class of the utilisations above the last bound")
	require.Equal(t, strconv.Itoa(len(bounds)), last[1])
	only := idleClassOnly.FindStringSubmatch(sql)
	require.NotNil(t, only, "the filter on the last bound")
	b, err := strconv.ParseFloat(only[1], 64)
	require.NoError(t, err)
	require.Equal(t, bounds[len(bounds)-1], b, "upper bound of the last class")
}
