//go:build !collector

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
)

// flakyUsage is the usage reads with an outage the test switches on.
type flakyUsage struct {
	inner api.Usage
	down  atomic.Bool
}

func (f *flakyUsage) Usage(ctx context.Context, q reads.UsageQuery) (*reads.UsageReport, error) {
	return f.inner.Usage(ctx, q)
}

func (f *flakyUsage) Savings(ctx context.Context, q reads.UsageQuery, rep *reads.UsageReport, rels []reads.Released) (*reads.UsageReport, error) {
	return f.inner.Savings(ctx, q, rep, rels)
}

func (f *flakyUsage) outage() error {
	if f.down.Load() {
		return fmt.Errorf("%w: the test's usage store is down", api.ErrUnavailable)
	}
	return nil
}

func (f *flakyUsage) HeldNow(ctx context.Context) ([]reads.Held, error) {
	if err := f.outage(); err != nil {
		return nil, err
	}
	return f.inner.HeldNow(ctx)
}

func (f *flakyUsage) Nodes(ctx context.Context, q reads.NodeQuery) (*reads.NodeReport, error) {
	if err := f.outage(); err != nil {
		return nil, err
	}
	return f.inner.Nodes(ctx, q)
}

// liveSamples writes one-minute samples of node from from (inclusive) to
// to (exclusive): held by project/user (busy) or, with project "", unheld
// and idle.
func liveSamples(tb testing.TB, sb *strings.Builder, node, project, user string, from, to time.Time) {
	tb.Helper()
	util, procs := "0.6", 1
	if project == "" {
		util, procs = "0", 0
	}
	for ts := from; ts.Before(to); ts = ts.Add(time.Minute) {
		fmt.Fprintf(sb, `{"ts":%q,"interval_s":60,"node":%q,"gpu_uuid":"GPU-%s","gpu_model":"NVIDIA A100-SXM4-80GB","instance_id":"MIG-%s-0",`+
			`"profile":"1g.10gb","project":%q,"user":%q,"util":%s,"mem_used_bytes":1073741824,"mem_total_bytes":10737418240,"processes":%d}`+"\n",
			ts.Format(time.RFC3339), node, node, node, project, user, util, procs)
	}
}

// waitFor evaluates js (a boolean) until it is true or within is over, and
// returns how long it took.
func waitFor(tb *tab, js string, within time.Duration) time.Duration {
	tb.tb.Helper()
	start := time.Now()
	for !eval[bool](tb, js) {
		if time.Since(start) > within {
			tb.tb.Fatalf("not within %s: %s", within, js)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// apiCount is how many responses of the API path the tab has received.
func (t *tab) apiCount(path string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, r := range t.apiResps {
		if strings.Contains(r.url, path) {
			n++
		}
	}
	return n
}

// TestDashboardNowIsLive: in English and Chinese, the Now page shows what
// GET /api/v1/held and /api/v1/nodes return (each node with when its data
// was last updated, silent ones marked, the threshold said); then, new
// samples stored and the clock moved on, the same document (a marker on
// window and one on the page survive, the scroll too) shows within a
// couple of poll intervals the new sample times, a new node, and a node
// that stopped reporting marked silent. A failed read says so quietly and
// the next one retries; nothing is read while the tab is hidden or after
// the page is left. A lead and a student read only their nodes.
func TestDashboardNowIsLive(t *testing.T) {
	chromium := needChromium(t)
	const every = time.Second // the server's refresh interval in this test
	// T0: 10:00:30 in Shanghai; live-a (held) and live-b (unheld) sampled
	// each minute up to it, live-c's holder stopped at 09:45.
	t0 := time.Date(2026, 11, 20, 10, 0, 30, 0, shanghai)
	t1 := t0.Add(12 * time.Minute) // live-b's newest minute then ended 12.5 min before: silent
	var before strings.Builder
	liveSamples(t, &before, "live-a", "nlp-lab", "2023110042", t0.Add(-30*time.Minute), t0)
	liveSamples(t, &before, "live-b", "", "", t0.Add(-30*time.Minute), t0)
	liveSamples(t, &before, "live-c", "ai101", "2026010203", t0.Add(-45*time.Minute), t0.Add(-15*time.Minute))
	var after strings.Builder
	liveSamples(t, &after, "live-a", "nlp-lab", "2023110042", t0, t1)
	liveSamples(t, &after, "live-d", "cv-lab", "2022110399", t1.Add(-5*time.Minute), t1)
	beforePath, afterPath := writeSamples(t, strings.TrimSuffix(before.String(), "\n")), writeSamples(t, strings.TrimSuffix(after.String(), "\n"))
	shots := artifactDir(t, "dashboard-live")
	hm := func(ts time.Time) string { return ts.In(shanghai).Format("2006-01-02 15:04") }

	type texts struct{ summary0, summary1, nodes0, nodes1, silent, reporting, stale, rule, ago string }
	for _, lang := range []string{"en", "zh-CN"} {
		x := texts{"Instances held: 1 · nodes: 1 · idle: 0", "Instances held: 2 · nodes: 2 · idle: 0",
			"Nodes reporting: 2 · silent: 1 (live-c)", "Nodes reporting: 2 · silent: 2 (live-b, live-c)", "silent", "reporting",
			"Not refreshed: the data below is of " + hm(t1), "10 min old or more", "1 min ago"}
		if lang == "zh-CN" {
			x = texts{"1 个节点上共占用 1 个实例，其中 0 个空闲。", "2 个节点上共占用 2 个实例，其中 0 个空闲。",
				"正常上报的节点 2 个 · 静默 1 个（live-c）", "正常上报的节点 2 个 · 静默 2 个（live-b, live-c）", "静默", "正常上报",
				"未能刷新：下方为 " + hm(t1) + " 的数据", "距今达到 10 分钟", "1 分钟前"}
		}
		t.Run(lang, func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(t0.UnixMilli())
			flaky := &flakyUsage{}
			ds := startDashboard(t, beforePath, t0, afterNovember, map[string]ledger.NewToken{
				"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
				"lead":    {Role: ledger.RoleLead, Project: "nlp-lab", TTL: time.Hour},
				"student": {Role: ledger.RoleStudent, Project: "ai101", User: "2026010203", TTL: time.Hour},
			}, func(s *dashSetup) {
				s.now = func() time.Time { return time.UnixMilli(clock.Load()) }
				s.refresh = every
				s.usage = func(u api.Usage) api.Usage { flaky.inner = u; return flaky }
			})
			fin := ds.tokens["finance"]
			tb := langTab(t, chromium, shots, lang)
			tb.do(chromedp.EmulateViewport(1280, 520))
			tb.login(ds.base, fin)

			// The page shows what the API returns.
			requirePageIsAPI := func() api.NodesBody {
				t.Helper()
				var nodes api.NodesBody
				ds.apiGet(t, fin, "/api/v1/nodes", &nodes)
				require.Equal(t, int64(1), nodes.RefreshS)
				require.Equal(t, int64(600), nodes.SilentAfterS)
				for _, n := range nodes.Items {
					sel := `document.querySelector('#node-freshness tr[data-node="` + n.Node + `"]')`
					row := eval[string](tb, sel+`.innerText`)
					require.Contains(t, row, hm(n.LastSample), n.Node)
					require.Contains(t, row, strconv.Itoa(n.Held), n.Node)
					require.Equal(t, n.Silent, eval[bool](tb, sel+`.classList.contains('silent')`), n.Node)
					if n.Silent {
						require.Contains(t, row, x.silent, n.Node)
					} else {
						require.Contains(t, row, x.reporting, n.Node)
					}
				}
				require.Equal(t, len(nodes.Items), eval[int](tb, `document.querySelectorAll('#node-freshness tbody tr').length`))
				var held api.HeldPage
				ds.apiGet(t, fin, "/api/v1/held", &held)
				for _, h := range held.Items {
					require.Contains(t, eval[string](tb, `document.getElementById('held-`+h.Node+`').innerText`), h.User)
				}
				return nodes
			}
			nodes := requirePageIsAPI()
			require.Equal(t, []string{"live-a", "live-b", "live-c"}, nodeNames(nodes))
			require.Equal(t, []bool{false, false, true}, silentFlags(nodes))
			require.Contains(t, eval[string](tb, `document.getElementById('held-summary').innerText`), x.summary0)
			require.Contains(t, eval[string](tb, `document.getElementById('nodes-summary').innerText`), x.nodes0)
			require.Contains(t, eval[string](tb, `document.getElementById('silent-rule').innerText`), x.rule)
			tb.screenshot(lang + "-live-01-before")

			// It reads again by itself, in the same document.
			tb.do(chromedp.Evaluate[chromedp.Void](`window.__liveMarker = 'kept'; document.getElementById('page-now').dataset.marker = 'kept'; window.scrollTo(0, 120)`))
			require.Equal(t, 120, eval[int](tb, `Math.round(window.scrollY)`), "the page scrolls at this height")
			polls := eval[int](tb, `Number(document.getElementById('page-now').dataset.polls || 0)`)
			waitFor(tb, fmt.Sprintf(`Number(document.getElementById('page-now').dataset.polls || 0) > %d`, polls), 3*every)

			// New samples arrive and the clock moves on: live-a's newer
			// sample, live-d's holder, live-b silent.
			var out, errOut strings.Builder
			require.Zero(t, run([]string{"ingest", "--store", ds.store, "--from-file", afterPath, "--listen", ""}, &out, &errOut), errOut.String())
			clock.Store(t1.UnixMilli())
			took := waitFor(tb, `!!document.querySelector('#node-freshness tr[data-node="live-d"]') && document.querySelector('#node-freshness tr[data-node="live-b"]').classList.contains('silent')`, 5*every)
			t.Logf("the page showed the new state %s after it was stored (polling every %s)", took.Round(10*time.Millisecond), every)
			require.Equal(t, "kept", eval[string](tb, `window.__liveMarker`), "no reload")
			require.Equal(t, "kept", eval[string](tb, `document.getElementById('page-now').dataset.marker`), "the page itself stays; its tables are replaced")
			require.Equal(t, 120, eval[int](tb, `Math.round(window.scrollY)`), "the scroll is kept")
			nodes = requirePageIsAPI()
			require.Equal(t, []string{"live-a", "live-b", "live-c", "live-d"}, nodeNames(nodes))
			require.Equal(t, []bool{false, true, true, false}, silentFlags(nodes))
			require.True(t, nodes.Items[0].LastSample.Equal(t1.Add(-time.Minute)), "live-a's newest sample, exactly: %s", nodes.Items[0].LastSample)
			require.Contains(t, eval[string](tb, `document.querySelector('#node-freshness tr[data-node="live-a"]').innerText`), x.ago)
			require.Contains(t, eval[string](tb, `document.getElementById('held-summary').innerText`), x.summary1)
			require.Contains(t, eval[string](tb, `document.getElementById('nodes-summary').innerText`), x.nodes1)
			require.Contains(t, eval[string](tb, `document.getElementById('held-live-d').innerText`), "2022110399")
			tb.do(chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
			tb.screenshot(lang + "-live-02-after")

			// A failed read: a quiet notice, the tables kept; the next read
			// that succeeds takes it away.
			flaky.down.Store(true)
			waitFor(tb, `!document.getElementById('now-notice').hidden`, 3*every)
			require.Contains(t, eval[string](tb, `document.getElementById('now-notice').innerText`), x.stale)
			require.Equal(t, 4, eval[int](tb, `document.querySelectorAll('#node-freshness tbody tr').length`), "the last data stays")
			require.Equal(t, "kept", eval[string](tb, `window.__liveMarker`))
			tb.screenshot(lang + "-live-03-failed-read")
			flaky.down.Store(false)
			waitFor(tb, `document.getElementById('now-notice').hidden`, 3*every)

			// Hidden tab: no read; visible again: reading resumes (the page
			// reads at once; the wait allows for a loaded machine).
			tb.do(chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, 'hidden', { configurable: true, get: () => true }); document.dispatchEvent(new Event('visibilitychange'))`))
			time.Sleep(every / 2) // a read in flight ends
			n := tb.apiCount("/api/v1/nodes")
			time.Sleep(3 * every)
			require.Equal(t, n, tb.apiCount("/api/v1/nodes"), "no read while the tab is hidden")
			tb.do(chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, 'hidden', { configurable: true, get: () => false }); document.dispatchEvent(new Event('visibilitychange'))`))
			waitFor(tb, fmt.Sprintf(`performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/v1/nodes')).length > %d`,
				eval[int](tb, `performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/v1/nodes')).length`)), 3*every)

			// Another page: no more reads.
			tb.route("#/alerts", "alerts")
			time.Sleep(every / 2)
			n, nh := tb.apiCount("/api/v1/nodes"), tb.apiCount("/api/v1/held")
			time.Sleep(3 * every)
			require.Equal(t, n, tb.apiCount("/api/v1/nodes"), "only the Now page reads")
			require.Equal(t, nh, tb.apiCount("/api/v1/held"), "only the Now page reads")
			require.Equal(t, "kept", eval[string](tb, `window.__liveMarker`))

			// A lead reads its project's nodes, a student its own.
			var lead, student api.NodesBody
			ds.apiGet(t, ds.tokens["lead"], "/api/v1/nodes", &lead)
			require.Equal(t, []string{"live-a"}, nodeNames(lead))
			require.Equal(t, 1, lead.Items[0].Held)
			ds.apiGet(t, ds.tokens["student"], "/api/v1/nodes", &student)
			require.Equal(t, []string{"live-c"}, nodeNames(student), "the node of the student's instance, silent since it stopped")
			require.True(t, student.Items[0].Silent)
			require.Zero(t, student.Items[0].Held)
		})
	}
}

func nodeNames(b api.NodesBody) []string {
	out := []string{}
	for _, n := range b.Items {
		out = append(out, n.Node)
	}
	return out
}

func silentFlags(b api.NodesBody) []bool {
	out := []bool{}
	for _, n := range b.Items {
		out = append(out, n.Silent)
	}
	return out
}
