//go:build !collector

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/ledger"
)

// inGrace is half an hour after November ends: its invoices are drafts
// that may not be finalized before 01:00 (startDashboard's grace: 1 h).
var inGrace = time.Date(2026, 12, 1, 0, 30, 0, 0, shanghai)

// browserNow is the browser's clock in these tests: December 2026, a month
// without samples (the example samples are November's).
const browserNow = "2026-12-10T02:00:00Z"

// langTab is a tab in lang whose clock reads browserNow (ticking on).
func langTab(t *testing.T, chromium, shots, lang string) *tab {
	tb := newTab(t, chromium, 1280, 900, shots)
	script := fmt.Sprintf(`(() => {
  localStorage.setItem('cardhour.lang', %q);
  const Real = Date, offset = Real.parse(%q) - Real.now();
  class Shifted extends Real {
    constructor(...a) { if (a.length === 0) super(Real.now() + offset); else super(...a); }
    static now() { return Real.now() + offset; }
  }
  globalThis.Date = Shifted;
})();`, lang, browserNow)
	_, err := chromedp.Call(tb.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: script})
	require.NoError(t, err)
	return tb
}

// novemberSamples are the example samples of November only (they reach
// into 1 December), so that December has no usage.
func novemberSamples(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(exampleSamples)
	require.NoError(tb, err)
	var out []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if strings.Contains(l, `"ts":"2026-11-`) {
			out = append(out, l)
		}
	}
	require.NotEmpty(tb, out)
	path := filepath.Join(tb.TempDir(), "november.jsonl")
	require.NoError(tb, os.WriteFile(path, []byte(strings.Join(out, "")), 0o644))
	return path
}

// apiDo sends a request with a token and returns the status and body.
func (d *dashServer) apiDo(tb testing.TB, token, method, path, body string) (int, []byte) {
	tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, d.base+path, rd)
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer res.Body.Close() //nolint:errcheck // read to the end
	b, err := io.ReadAll(res.Body)
	require.NoError(tb, err)
	return res.StatusCode, b
}

// TestDashboardMonthsGraceAndErrors: in English and Chinese, the pages open
// on the data's month (not the browser's), usage says it is list price and
// shows the invoiced amount beside it, the invoice list has totals, an
// invoice shows its project name, funding code and reservation terms and
// discounts (as the document records them), and
// finalizing is not offered during the grace period but says when it opens;
// errors are in the page's language with the request ID; the student's
// exemptions page prints no "null".
func TestDashboardMonthsGraceAndErrors(t *testing.T) {
	chromium := needChromium(t)
	ds := startDashboard(t, novemberSamples(t), heldAt, inGrace, map[string]ledger.NewToken{
		"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
		"student": {Role: ledger.RoleStudent, Project: "ai101", User: "2026010203", TTL: time.Hour},
	})
	fin := ds.tokens["finance"]
	code, body := ds.apiDo(t, fin, http.MethodPost, "/api/v1/billing-runs", `{"period":"2026-11"}`)
	require.Equal(t, http.StatusOK, code, string(body))

	// What the API says: the drafts, their documents and totals.
	var list api.Page[api.InvoiceBody]
	ds.apiGet(t, fin, "/api/v1/invoices?period=2026-11&limit=100", &list)
	require.NotEmpty(t, list.Items)
	docs := map[string]export.Document{}
	ids, shas := map[string]int64{}, map[string]string{}
	var sum []decimal.Decimal
	for _, inv := range list.Items {
		var one api.InvoiceBody
		ds.apiGet(t, fin, "/api/v1/invoices/"+strconv.FormatInt(inv.ID, 10), &one)
		require.Equal(t, "draft", one.Status)
		require.False(t, one.Finalizable, "November's grace period runs")
		require.True(t, one.FinalizableFrom.Equal(time.Date(2026, 12, 1, 1, 0, 0, 0, shanghai)), "finalizable from %s", one.FinalizableFrom)
		var doc export.Document
		require.NoError(t, json.Unmarshal(one.Document, &doc))
		docs[inv.Project], ids[inv.Project], shas[inv.Project] = doc, inv.ID, one.SHA256
		sum = append(sum, doc.Total)
	}
	total := decimal.Sum(decimal.Zero, sum...)
	var rep api.UsagePage
	ds.apiGet(t, fin, "/api/v1/usage?period=2026-11", &rep)
	listPrice := rep.Total.Cost.Decimal
	require.False(t, listPrice.Equal(total), "the example's invoices differ from the list price (reservations, hourly rounding)")

	// The finalize refusal says its reason once.
	nlp := strconv.FormatInt(ids["nlp-lab"], 10)
	code, body = ds.apiDo(t, fin, http.MethodPost, "/api/v1/invoices/"+nlp+"/finalize", `{"if_sha256":"`+shas["nlp-lab"]+`"}`)
	require.Equal(t, http.StatusConflict, code, string(body))
	var prob api.Problem
	require.NoError(t, json.Unmarshal(body, &prob))
	require.Equal(t, api.ProblemGracePeriod, prob.Type)
	require.Equal(t, 1, strings.Count(prob.Detail, "grace period not over"), "the detail: %s", prob.Detail)

	shots := artifactDir(t, "dashboard-ui")
	money := func(d decimal.Decimal) string { return "¥\u00a0" + groupThousands(d.StringFixed(2)) }
	// The reservation lines' discounts as the documents record them:
	// nlp-lab's year (8 折) was prepaid on September's invoice, cv-lab's
	// quarter (95 折) is paid monthly, ¥900 a month: 900.00 − 45.00.
	resv := func(project string) export.Line {
		for _, l := range docs[project].Lines {
			if l.Kind == "reservation" {
				require.True(t, l.HasDiscount(), "%s's reservation line records its discount", project)
				return l
			}
		}
		t.Fatalf("%s has no reservation line", project)
		return export.Line{}
	}
	nlpResv, cvResv := resv("nlp-lab"), resv("cv-lab")
	require.Equal(t, "2026-09", nlpResv.PrepaidIn)
	require.Equal(t, "0.00", nlpResv.DiscountAmount.StringFixed(2))
	require.Equal(t, "900.00", cvResv.ListAmount.StringFixed(2))
	require.Equal(t, "45.00", cvResv.DiscountAmount.StringFixed(2))
	type texts struct {
		listPrice, invoiced, finalizeFrom, yearly, upfrontPaid, yearDiscount, quarterly, quarterList, discount, notFound, rid, grace, projectName string
	}
	for _, lang := range []string{"en", "zh-CN"} {
		x := texts{"List price", "Invoiced for 2026-11", "Finalizing opens 2026-12-01 01:00", "yearly (包年) × 2, paid upfront, from 2026-09 to 2027-08",
			"prepaid on the 2026-09 invoice", "20 % off the monthly price: discount " + money(*nlpResv.DiscountAmount),
			"quarterly (包季) × 1, paid monthly, from 2026-10 to 2026-12",
			"list price " + money(*cvResv.ListAmount) + " (" + money(cvResv.UnitPrice) + " × 1 month(s) × 1)",
			"5 % off the monthly price: discount " + money(*cvResv.DiscountAmount),
			"not found", "(request ID ", "the invoice may be finalized from 2026-12-01 01:00", "Project name"}
		if lang == "zh-CN" {
			x = texts{"按目录价", "2026-11 账单金额", "定稿将于 2026-12-01 01:00 开放", "包年 × 2，预付，2026-09 至 2027-08",
				"已于 2026-09 账单预付", "月价 8 折（优惠 20%），折扣 " + money(*nlpResv.DiscountAmount),
				"包季 × 1，按月付，2026-10 至 2026-12",
				"标价 " + money(*cvResv.ListAmount) + "（" + money(cvResv.UnitPrice) + " × 1 个月 × 1）",
				"月价 95 折（优惠 5%），折扣 " + money(*cvResv.DiscountAmount),
				"未找到", "（请求编号 ", "账单可于 2026-12-01 01:00 起定稿", "项目名称"}
		}
		t.Run(lang, func(t *testing.T) {
			tb := langTab(t, chromium, shots, lang)
			tb.login(ds.base, fin)
			require.Equal(t, lang, eval[string](tb, `document.documentElement.lang`))
			require.Equal(t, "2026-12", eval[string](tb, `new Date().toISOString().slice(0, 7)`), "the browser's month")

			// Usage opens on November (the data's month), at list price
			// and said so, with the invoiced amount beside it.
			tb.route("#/usage", "usage")
			require.Contains(t, eval[string](tb, `location.hash`), "period=2026-11")
			usage := eval[string](tb, `document.getElementById('page-usage').innerText`)
			require.Contains(t, eval[string](tb, `document.getElementById('usage-total').innerText`), x.listPrice)
			require.Contains(t, eval[string](tb, `document.getElementById('usage-total').innerText`), money(listPrice))
			inv := eval[string](tb, `document.getElementById('usage-invoiced').innerText`)
			require.Contains(t, inv, x.invoiced)
			require.Contains(t, inv, money(total))
			require.Contains(t, inv, money(total.Sub(listPrice)))
			require.Contains(t, eval[string](tb, `document.getElementById('usage-table').innerText`), money(docs["nlp-lab"].Total))
			require.NotZero(t, eval[int](tb, `echarts.getInstanceByDom(document.getElementById('chart-daily')).getOption().series.length`))
			require.NotContains(t, usage, "null")
			tb.screenshot(lang + "-01-usage")

			// The invoice list: November, a total per invoice and in all.
			tb.route("#/invoices", "invoices")
			require.Contains(t, eval[string](tb, `location.hash`), "period=2026-11")
			invList := eval[string](tb, `document.getElementById('invoice-list').innerText`)
			for p, d := range docs {
				require.Contains(t, invList, p)
				require.Contains(t, invList, money(d.Total))
			}
			require.Contains(t, eval[string](tb, `document.getElementById('invoice-list-total').innerText`), money(total))
			tb.screenshot(lang + "-02-invoices")

			// An invoice in the grace period: its name and funding code,
			// the reservation's term, no finalize button but when it opens.
			tb.route("#/invoices/"+nlp, "invoices")
			page := eval[string](tb, `document.getElementById('page-invoices').innerText`)
			require.Contains(t, page, x.projectName)
			require.Equal(t, docs["nlp-lab"].Name, eval[string](tb, `document.getElementById('invoice-project-name').innerText`))
			require.Equal(t, docs["nlp-lab"].Funding, eval[string](tb, `document.getElementById('invoice-funding').innerText`))
			require.Zero(t, eval[int](tb, `document.querySelectorAll('#finalize').length`), "no finalize during the grace period")
			require.Contains(t, eval[string](tb, `document.getElementById('finalize-wait').innerText`), x.finalizeFrom)
			lines := eval[string](tb, `document.getElementById('invoice-lines').innerText`)
			require.Contains(t, lines, x.yearly)
			require.Contains(t, lines, x.upfrontPaid)
			require.Contains(t, lines, x.yearDiscount)
			tb.screenshot(lang + "-03-invoice-grace")
			// Finalizing anyway (as a stale page would): the refusal in
			// the page's language, once, with the request ID.
			msg, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`(async () => {
  const a = await import('/ui/api.js'), f = await import('/ui/format.js');
  try { await a.post('/api/v1/invoices/`+nlp+`/finalize', { if_sha256: '`+shas["nlp-lab"]+`' }); return 'finalized'; } catch (e) { return f.errorText(e); }
})()`, chromedp.EvalAwaitPromise))
			require.NoError(t, err)
			require.Contains(t, msg, x.grace)
			require.Contains(t, msg, x.rid)
			require.LessOrEqual(t, strings.Count(msg, "grace period not over"), 1, msg)
			if lang == "zh-CN" {
				require.NotContains(t, msg, "grace period", "no English in the Chinese page: %s", msg)
			}
			tb.route("#/invoices/"+strconv.FormatInt(ids["cv-lab"], 10), "invoices")
			lines = eval[string](tb, `document.getElementById('invoice-lines').innerText`)
			require.Contains(t, lines, x.quarterly)
			require.Contains(t, lines, x.quarterList)
			require.Contains(t, lines, x.discount)
			tb.screenshot(lang + "-04-invoice-reservation")

			// An invoice that does not exist: the page's error, translated,
			// with the request ID.
			tb.route("#/invoices/999999", "invoices")
			errText := eval[string](tb, `document.getElementById('page-error').innerText`)
			require.Contains(t, errText, x.notFound)
			require.Regexp(t, `[0-9a-f]{24}`, errText)
			if lang == "zh-CN" {
				require.NotContains(t, errText, "invoice 999999", "the server's English detail stays out of the Chinese page")
			}
			tb.screenshot(lang + "-05-error")

			// The billing runs page opens on November too.
			tb.route("#/runs", "runs")
			require.Equal(t, "2026-11", eval[string](tb, `document.getElementById('run-period').value`))

			// The student: usage on November with their invoiced amount,
			// and an exemptions page without "null".
			st := langTab(t, chromium, shots, lang)
			st.login(ds.base, ds.tokens["student"])
			st.route("#/usage", "usage")
			require.Contains(t, eval[string](st, `location.hash`), "period=2026-11")
			require.Contains(t, eval[string](st, `document.getElementById('usage-invoiced').innerText`), x.invoiced)
			st.screenshot(lang + "-11-student-usage")
			st.route("#/exemptions", "exemptions")
			ex := eval[string](st, `document.getElementById('page-exemptions').innerText`)
			require.NotContains(t, ex, "null")
			require.Zero(t, eval[int](st, `document.querySelectorAll('#grant-form').length`))
			st.screenshot(lang + "-12-student-exemptions")
		})
	}
}

// shareSamples writes half an hour up to at of a node with one A100 split
// into eight HAMi shares of 1/20 (one of them idle), one cut into two MIG
// slices and one held whole; an A16 vGPU host with three A16-1Q instances;
// and a T4 time-sliced between two pods (1/4 each). It returns the file
// and the cards' UUIDs.
func shareSamples(tb testing.TB, at time.Time) (path string, hami, mig, whole, a16, t4 string) {
	tb.Helper()
	hami, mig, whole = "GPU-5a4e0c11-0000-4000-8000-0000000a1001", "GPU-5a4e0c11-0000-4000-8000-0000000a1002", "GPU-5a4e0c11-0000-4000-8000-0000000a1003"
	a16, t4 = "GPU-a16a16a1-0000-4000-8000-0000000a1601", "GPU-7474a4a4-0000-4000-8000-0000000a7401"
	const a100 = "NVIDIA A100-SXM4-80GB"
	var sb strings.Builder
	line := func(ts time.Time, node, gpu, model, inst, profile, project, user string, util float64, extra string) {
		fmt.Fprintf(&sb, `{"ts":%q,"interval_s":60,"node":%q,"gpu_uuid":%q,"gpu_model":%q,"instance_id":%q,"profile":%q,`+
			`"project":%q,"user":%q,"util":%v,"mem_used_bytes":1073741824,"mem_total_bytes":4294967296,"processes":1%s}`+"\n",
			ts.Format(time.RFC3339), node, gpu, model, inst, profile, project, user, util, extra)
	}
	for ts := at.Add(-30 * time.Minute); ts.Before(at); ts = ts.Add(time.Minute) {
		for i := range 8 {
			util := 0.4
			if i == 7 {
				util = 0.01 // a notebook left open on its share
			}
			line(ts, "gpu-mixed-01", hami, a100, fmt.Sprintf("%s/share/ai101/nb-%d/main", hami, i), "1/20", "ai101",
				fmt.Sprintf("20260102%02d", i), util, `,"share_kind":"hami","share_mem":0.05,"share_cores":0.05`)
		}
		for i := range 2 {
			line(ts, "gpu-mixed-01", mig, a100, fmt.Sprintf("MIG-5a4e0c11-0000-4000-8000-00000000b10%d", i), "1g.10gb", "nlp-lab",
				fmt.Sprintf("20231100%02d", 50+i), 0.9, "")
		}
		line(ts, "gpu-mixed-01", whole, a100, whole, "full", "cv-lab", "2022110399", 0.8, "")
		for i := range 3 {
			line(ts, "vgpu-a16-01", a16, "NVIDIA A16", fmt.Sprintf("a16a16a1-0000-4000-8000-00000000c10%d", i), "A16-1Q", "ai101",
				fmt.Sprintf("20260103%02d", i), 0.5, fmt.Sprintf(`,"holder_ref":"vm:vm-%d","share_kind":"vgpu","share_mem":0.0625`, i))
		}
		for i := range 2 {
			line(ts, "ts-t4-01", t4, "Tesla T4", fmt.Sprintf("%s/share/cv-lab/ts-%d/main", t4, i), "1/4", "cv-lab",
				fmt.Sprintf("20221104%02d", i), 0.2, `,"share_kind":"timeslice","share_cores":0.25`)
		}
	}
	path = filepath.Join(tb.TempDir(), "shares.jsonl")
	require.NoError(tb, os.WriteFile(path, []byte(sb.String()), 0o644))
	return path, hami, mig, whole, a16, t4
}

// TestDashboardNowShares: in English and Chinese, the Now page shows the
// rows of a card split into shares under the card's heading (its model,
// short UUID, how many shares are held and their sum of the card), MIG
// slices likewise under their GPU, whole cards in the node's table; a
// share's row says its fraction of the card.
func TestDashboardNowShares(t *testing.T) {
	chromium := needChromium(t)
	samples, hami, mig, whole, a16, t4 := shareSamples(t, heldAt)
	ds := startDashboard(t, samples, heldAt, afterNovember, map[string]ledger.NewToken{
		"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
	})
	// What the API says of them: the card, and a share's fraction.
	var held api.Page[struct {
		Instance, GPU, Share, SKU string
	}]
	ds.apiGet(t, ds.tokens["finance"], "/api/v1/held", &held)
	require.Len(t, held.Items, 16)
	for _, x := range held.Items {
		require.NotEmpty(t, x.SKU, "priced: %+v", x)
		switch x.GPU {
		case hami:
			require.Equal(t, "0.05", x.Share)
		case t4:
			require.Equal(t, "0.25", x.Share)
		default: // a vGPU type, a MIG slice, a whole card
			require.Empty(t, x.Share, "%+v", x)
		}
	}

	shots := artifactDir(t, "dashboard-shares")
	type group struct {
		GPU  string   `json:"gpu"`
		Head string   `json:"head"`
		Rows []string `json:"rows"`
		IDs  []string `json:"ids"`
	}
	short := func(id string) string { return id[:12] + "…" + id[len(id)-4:] }
	for _, lang := range []string{"en", "zh-CN"} {
		x := map[string]string{"summary": "Instances held: 16 · nodes: 3 · idle: 1", "hami": "8 shares · 40 % of the card",
			"mig": "2 MIG slices", "a16": "3 shares", "t4": "2 shares · 50 % of the card", "row": "1/20 · 5 % of the card", "whole": "whole GPU"}
		if lang == "zh-CN" {
			x = map[string]string{"summary": "3 个节点上共占用 16 个实例，其中 1 个空闲。", "hami": "8 个共享切片 · 共占整卡 40%",
				"mig": "2 个 MIG 切片", "a16": "3 个共享切片", "t4": "2 个共享切片 · 共占整卡 50%", "row": "1/20 · 占整卡 5%", "whole": "整卡"}
		}
		t.Run(lang, func(t *testing.T) {
			tb := langTab(t, chromium, shots, lang)
			tb.login(ds.base, ds.tokens["finance"])
			require.Contains(t, eval[string](tb, `document.getElementById('held-summary').innerText`), x["summary"])
			groups := func(node string) map[string]group {
				t.Helper()
				raw := eval[string](tb, `JSON.stringify([...document.querySelectorAll('#held-`+node+` .gpu-group')].map((g) => ({
  gpu: g.dataset.gpu, head: g.querySelector('h3').innerText,
  rows: [...g.querySelectorAll('tbody tr')].map((r) => r.innerText),
  ids: [...g.querySelectorAll('tbody code')].map((c) => c.title) })))`)
				var gs []group
				require.NoError(t, json.Unmarshal([]byte(raw), &gs))
				out := map[string]group{}
				for _, g := range gs {
					out[g.GPU] = g
				}
				return out
			}
			mixed := groups("gpu-mixed-01")
			require.Len(t, mixed, 2, "the shared card and the MIG card are grouped; the whole card is not")
			require.Equal(t, "NVIDIA A100-SXM4-80GB · "+short(hami)+" · "+x["hami"], mixed[hami].Head)
			require.Len(t, mixed[hami].Rows, 8)
			for i, id := range mixed[hami].IDs {
				require.Equal(t, fmt.Sprintf("%s/share/ai101/nb-%d/main", hami, i), id, "the card's shares, in order")
				require.Contains(t, mixed[hami].Rows[i], x["row"])
				require.Contains(t, mixed[hami].Rows[i], fmt.Sprintf("ai101/nb-%d/main", i), "a share by its pod")
				require.NotContains(t, mixed[hami].Rows[i], "NVIDIA A100", "the model is the heading's")
			}
			require.Contains(t, mixed[hami].Rows[7], map[string]string{"en": "idle", "zh-CN": "空闲"}[lang], "the forgotten notebook")
			require.Equal(t, "NVIDIA A100-SXM4-80GB · "+short(mig)+" · "+x["mig"], mixed[mig].Head)
			require.Len(t, mixed[mig].Rows, 2)
			require.Contains(t, mixed[mig].Rows[0], "1g.10gb")
			wholeRows := eval[string](tb, `document.getElementById('held-gpu-mixed-01-whole').innerText`)
			require.Contains(t, wholeRows, "2022110399")
			require.Contains(t, wholeRows, x["whole"])
			require.Contains(t, wholeRows, short(whole))
			require.Equal(t, 1, eval[int](tb, `document.querySelectorAll('#held-gpu-mixed-01-whole tbody tr').length`), "only the whole card in the node's table")
			vgpu := groups("vgpu-a16-01")
			require.Equal(t, "NVIDIA A16 · "+short(a16)+" · "+x["a16"], vgpu[a16].Head, "a vGPU type states no fraction")
			require.Len(t, vgpu[a16].Rows, 3)
			require.Contains(t, vgpu[a16].Rows[0], "A16-1Q")
			ts := groups("ts-t4-01")
			require.Equal(t, "Tesla T4 · "+short(t4)+" · "+x["t4"], ts[t4].Head)
			require.Len(t, ts[t4].Rows, 2)
			if lang == "zh-CN" {
				page := eval[string](tb, `document.getElementById('page-now').innerText`)
				require.NotContains(t, page, "shares")
				require.NotContains(t, page, "of the card")
			}
			tb.screenshot(lang + "-21-now-shares")
		})
	}
}
