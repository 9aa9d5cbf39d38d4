//go:build !collector

package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/catalogs"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/internal/watch"
)

// The dashboard in headless Chromium (Debian's chromium package), driven
// from Go: the API in process on SQLite with the example samples.

// needChromium returns the browser's path, or skips loudly when there is
// none; under CI=true it fails instead, so CI cannot pass by skipping.
// deployments/testenv/services.sh up installs it when run as root.
func needChromium(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("the browser tests are not short")
	}
	candidates := []string{os.Getenv("CARDHOUR_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := "the dashboard browser test needs Chromium: apt-get install -y chromium " +
		"(deployments/testenv/services.sh up does it as root), or set CARDHOUR_CHROMIUM to a Chrome binary"
	switch strings.ToLower(os.Getenv("CI")) {
	case "true", "1", "yes":
		tb.Fatal("FAILED under CI=true: " + msg)
	}
	tb.Skip("SKIPPED: " + msg)
	return ""
}

// artifactDir is where screenshots go: $CARDHOUR_TEST_ARTIFACTS/name, or a
// temporary directory; the path is printed.
func artifactDir(tb testing.TB, name string) string {
	tb.Helper()
	dir := tb.TempDir()
	if base := os.Getenv("CARDHOUR_TEST_ARTIFACTS"); base != "" {
		dir = filepath.Join(base, name)
		require.NoError(tb, os.MkdirAll(dir, 0o755))
	}
	tb.Logf("screenshots in %s", dir)
	return dir
}

type dashServer struct {
	base   string
	tokens map[string]string // finance, student, lead, admin
	led    ledger.Store
	store  string // the usage store's DSN (SQLite)
}

// startDashboard ingests samples into a SQLite store, seeds the example
// catalog and serves the API (with the dashboard) on loopback. Held-now is
// computed at heldAt (the samples' time); the invoice flow's clock is
// invoiceNow, after the samples' month and its grace period.
// dashSetup is what a dashOpt may change: the listen address ("" any
// loopback port), the sign-in, the clock of the usage reads (nil: heldAt),
// the refresh interval the API tells the Now page (0: the API's default)
// and a wrapper of the usage reads.
type dashSetup struct {
	addr    string
	signIn  func(ledger.Store) *api.SignIn
	now     func() time.Time
	refresh time.Duration
	usage   func(api.Usage) api.Usage
	// leadApproval: the invoice flow requires the lead's sign-off.
	leadApproval bool
	// releaser carries out the releases people ask for (nil: none).
	releaser watch.Releaser
	// store, when set, is a usage store already filled (no ingest); the
	// ledger stays a SQLite file of its own.
	store string
}

type dashOpt func(*dashSetup)

func startDashboard(tb testing.TB, samples string, heldAt, invoiceNow time.Time, tokens map[string]ledger.NewToken, opts ...dashOpt) *dashServer {
	tb.Helper()
	dir := tb.TempDir()
	store := "sqlite://" + filepath.Join(dir, "usage.db")
	var setup dashSetup
	for _, o := range opts {
		o(&setup)
	}
	usageStore := store
	if setup.store != "" {
		usageStore = setup.store // filled before; the ledger is the SQLite file
	} else {
		var out, errOut strings.Builder
		code := run([]string{"ingest", "--store", store, "--from-file", samples, "--listen", ""}, &out, &errOut)
		require.Zero(tb, code, out.String()+errOut.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	log := slog.New(slog.DiscardHandler)
	led, err := ledgerdsn.Open(ctx, store, ledgerdsn.Options{Clock: func() time.Time { return invoiceNow }})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = led.Close() })
	require.NoError(tb, seedCatalog(ctx, led, exampleCatalog, io.Discard))
	st, err := storedsn.Open(ctx, usageStore, storedsn.Options{Logger: log, Mode: storedsn.Read})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = st.Close() })
	svc, err := invoicing.New(invoicing.Config{Ledger: led, Usage: st, Clock: func() time.Time { return invoiceNow }, Grace: time.Hour, Logger: log,
		LeadApproval: setup.leadApproval})
	require.NoError(tb, err)
	if setup.now == nil {
		setup.now = func() time.Time { return heldAt }
	}
	var usage api.Usage = &usageReads{cats: catalogs.New(led), st: st, now: setup.now}
	if setup.usage != nil {
		usage = setup.usage(usage)
	}
	cfg := api.Config{
		Ledger:          led,
		Usage:           usage,
		Invoicing:       &flow{svc: svc, led: led, docs: invoicing.ExportDocuments{}},
		UsagePing:       func(context.Context) error { return nil },
		Logger:          log,
		Clock:           func() time.Time { return invoiceNow },
		RefreshInterval: setup.refresh,
		Advice:          adviceReads{st: st, memo: newAdviceMemo(st)},
	}
	if setup.releaser != nil {
		cfg.Releases = newHeldReleases(led, setup.releaser, func() time.Time { return invoiceNow })
	}
	if setup.signIn != nil {
		cfg.SignIn = setup.signIn(led)
	}
	srv, err := api.New(cfg)
	require.NoError(tb, err)
	srv.MarkServing(true)
	hs := httptest.NewUnstartedServer(srv.Handler())
	if setup.addr != "" {
		ln, err := net.Listen("tcp", setup.addr)
		require.NoError(tb, err, "the test listens where the provider redirects to")
		_ = hs.Listener.Close()
		hs.Listener = ln
	}
	hs.Start()
	tb.Cleanup(hs.Close)
	ds := &dashServer{base: hs.URL, tokens: map[string]string{}, led: led, store: store}
	for name, nt := range tokens {
		secret, _, err := led.CreateToken(ctx, "cli:test", nt)
		require.NoError(tb, err)
		ds.tokens[name] = secret
	}
	return ds
}

// apiGet reads a JSON resource with a token.
func (d *dashServer) apiGet(tb testing.TB, token, path string, v any) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, d.base+path, nil)
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer res.Body.Close() //nolint:errcheck // read to the end
	b, err := io.ReadAll(res.Body)
	require.NoError(tb, err)
	require.Equal(tb, 200, res.StatusCode, string(b))
	require.NoError(tb, json.Unmarshal(b, v))
}

// ---------------------------------------------------------------- the browser

type apiResponse struct {
	id     network.RequestID
	url    string
	status int64
}

type tab struct {
	tb       testing.TB
	ctx      context.Context
	shots    string
	mu       sync.Mutex
	apiResps []apiResponse
	bytes    float64 // encoded bytes received since the last reset
	requests int
	dlDir    string
	dlNames  map[string]string
	done     chan string // GUIDs of finished downloads
	dialogs  chan string
}

// tabTimeout bounds everything a tab does (a benchmark over a large store
// sets more).
var tabTimeout = 3 * time.Minute

// newTab starts a headless Chromium with one tab of width × height that
// records the API's responses, the bytes received, downloads, and accepts
// confirm() dialogs.
func newTab(tb testing.TB, chromium string, width, height int, shots string) *tab {
	tb.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(width, height),
		chromedp.Flag("lang", "en-US"), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	tb.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	tb.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, tabTimeout)
	tb.Cleanup(cancel3)
	t := &tab{tb: tb, ctx: ctx, shots: shots, dlDir: tb.TempDir(), dlNames: map[string]string{},
		done: make(chan string, 8), dialogs: make(chan string, 8)}
	require.NoError(tb, chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))))
	require.NoError(tb, chromedp.Listen(ctx, func(ev any) {
		t.mu.Lock()
		defer t.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventResponseReceived:
			t.requests++
			if strings.Contains(ev.Response.URL, "/api/") {
				t.apiResps = append(t.apiResps, apiResponse{ev.RequestID, ev.Response.URL, ev.Response.Status})
			}
		case *network.EventLoadingFinished:
			t.bytes += ev.EncodedDataLength
		case *page.EventJavascriptDialogOpening:
			select {
			case t.dialogs <- ev.Message:
			default:
			}
		}
	}))
	require.NoError(tb, chromedp.ListenBrowser(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *browser.EventDownloadWillBegin:
			t.mu.Lock()
			t.dlNames[ev.GUID] = ev.SuggestedFilename
			t.mu.Unlock()
		case *browser.EventDownloadProgress:
			if ev.State == browser.DownloadProgressStateCompleted {
				t.done <- ev.GUID
			}
		}
	}))
	go func() { // until the tab's cleanup ends ctx (goleak)
		for {
			select {
			case <-t.dialogs:
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			case <-ctx.Done():
				return
			}
		}
	}()
	_, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: t.dlDir, EventsEnabled: new(true)})
	require.NoError(tb, err)
	return t
}

func (t *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	t.tb.Helper()
	require.NoError(t.tb, chromedp.Do(t.ctx, actions...))
}

func eval[T any](t *tab, js string) T {
	t.tb.Helper()
	v, err := chromedp.Run(t.ctx, chromedp.Evaluate[T](js))
	require.NoError(t.tb, err, js)
	return v
}

// ready waits until page name has rendered (its data-ready attribute).
func ready(name string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#page-%s[data-ready="true"]`, name)))
}

// route changes the dashboard's route in the same document and waits.
func (t *tab) route(hash, name string) {
	t.tb.Helper()
	t.do(chromedp.Evaluate[chromedp.Void](`location.hash = `+strconv.Quote(hash)), ready(name))
}

func (t *tab) screenshot(name string) {
	t.tb.Helper()
	b, err := chromedp.Run(t.ctx, chromedp.FullScreenshot(100))
	require.NoError(t.tb, err)
	require.NoError(t.tb, os.WriteFile(filepath.Join(t.shots, name+".png"), b, 0o644))
}

func (t *tab) login(base, token string) {
	t.tb.Helper()
	t.do(chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#login-submit")), ready("now"))
}

// bodies returns the API responses the page received (URL → body).
func (t *tab) bodies() map[string]string {
	t.tb.Helper()
	t.mu.Lock()
	resps := slices.Clone(t.apiResps)
	t.mu.Unlock()
	out := map[string]string{}
	for _, r := range resps {
		res, err := chromedp.Call(t.ctx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: r.id})
		require.NoError(t.tb, err, r.url)
		out[fmt.Sprintf("%s (%d)", r.url, r.status)] = string(res.Body)
	}
	return out
}

// download waits for the next finished download and returns its name and path.
func (t *tab) download() (string, string) {
	t.tb.Helper()
	select {
	case guid := <-t.done:
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.dlNames[guid], filepath.Join(t.dlDir, guid)
	case <-time.After(30 * time.Second):
		t.tb.Fatal("no download finished within 30 s")
	}
	return "", ""
}

// exampleUsers are the user IDs of the example samples.
func exampleUsers(tb testing.TB, path string) []string {
	tb.Helper()
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer f.Close() //nolint:errcheck // read only
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s struct{ User string }
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &s))
		if s.User != "" {
			seen[s.User] = true
		}
	}
	users := make([]string, 0, len(seen))
	for u := range seen {
		users = append(users, u)
	}
	slices.Sort(users)
	return users
}

// withIdleInstance writes the example samples plus half an hour of an idle
// MIG slice (util 1 %) up to at, so that held-now shows a busy and an idle
// instance.
func withIdleInstance(tb testing.TB, at time.Time) string {
	tb.Helper()
	b, err := os.ReadFile(exampleSamples)
	require.NoError(tb, err)
	var sb strings.Builder
	sb.Write(b)
	for ts := at.Add(-30 * time.Minute); ts.Before(at); ts = ts.Add(time.Minute) {
		fmt.Fprintf(&sb, `{"ts":%q,"interval_s":60,"node":"gpu-node-03","gpu_uuid":"GPU-5e1f0a2c-0000-4000-8000-00000000c300",`+
			`"gpu_model":"NVIDIA A100-SXM4-80GB","instance_id":"MIG-77777777-gggg-4000-8000-000000000007","profile":"1g.10gb",`+
			`"project":"nlp-lab","user":"2023110077","util":0.01,"mem_used_bytes":1073741824,"mem_total_bytes":10737418240,"processes":1}`+"\n",
			ts.Format(time.RFC3339))
	}
	path := filepath.Join(tb.TempDir(), "samples.jsonl")
	require.NoError(tb, os.WriteFile(path, []byte(sb.String()), 0o644))
	return path
}

var (
	shanghai, _ = time.LoadLocation("Asia/Shanghai")
	// heldAt: the example fleet's afternoon of 18 November, when gpu-node-06
	// is held (busy) and the idle slice above is held too.
	heldAt = time.Date(2026, 11, 18, 16, 29, 30, 0, shanghai)
	// afterNovember: November's invoices may be finalized.
	afterNovember = time.Date(2026, 12, 5, 10, 0, 0, 0, shanghai)
)

func TestDashboardInBrowser(t *testing.T) {
	chromium := needChromium(t)
	samples := withIdleInstance(t, heldAt)
	ds := startDashboard(t, samples, heldAt, afterNovember, map[string]ledger.NewToken{
		"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
		"admin":   {Role: ledger.RoleAdmin, Name: "browser test", TTL: time.Hour},
		"student": {Role: ledger.RoleStudent, Project: "ai101", User: "2026010203", TTL: time.Hour},
		"lead":    {Role: ledger.RoleLead, Project: "nlp-lab", TTL: time.Hour},
	})
	seedAlert(t, ds.led)
	shots := artifactDir(t, "dashboard")
	t.Run("finance", func(t *testing.T) { dashboardFinance(t, ds, chromium, shots) })
	t.Run("student", func(t *testing.T) { dashboardStudent(t, ds, chromium, shots, samples) })
	t.Run("lead", func(t *testing.T) { dashboardLead(t, ds, chromium, shots) })
}

// seedAlert records what the watcher would have: an idle warning to the
// holder of the idle slice, whose email failed for good.
func seedAlert(tb testing.TB, led ledger.Store) {
	tb.Helper()
	ctx := context.Background()
	start := time.Date(2026, 11, 18, 15, 59, 0, 0, shanghai)
	a, _, err := led.RecordAlert(ctx, "watch", ledger.NewAlert{Key: ledger.IdleAlertKey(billing.AlertIdleWarning, "MIG-idle", start),
		Kind: billing.AlertIdleWarning, Project: "nlp-lab", User: "2023110077", InstanceID: "MIG-idle", StreakStart: start,
		Facts: json.RawMessage(`{"node":"gpu-node-03","gpu_model":"A100","profile":"1g.10gb"}`)},
		[]ledger.NewDelivery{{Channel: "email", Recipient: "2023110077@example.edu", Payload: json.RawMessage(`{}`)}})
	require.NoError(tb, err)
	ds, _, err := led.Deliveries(ctx, ledger.DeliveryFilter{AlertID: a.ID})
	require.NoError(tb, err)
	_, err = led.FinishDelivery(ctx, "watch", ds[0].ID, "550 mailbox unavailable", time.Time{})
	require.NoError(tb, err)
}

func dashboardFinance(t *testing.T, ds *dashServer, chromium, shots string) {
	tb := newTab(t, chromium, 1280, 800, shots)

	// The first focusable element is the skip link; Enter on it moves the
	// focus to the page's content and leaves the route alone.
	tb.do(chromedp.Navigate(ds.base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	require.Equal(t, "skip-link", eval[string](tb, `document.querySelector('a[href], button:not([hidden]), input, select, textarea').id`))
	tb.do(chromedp.Focus(chromedp.CSS("#skip-link")), chromedp.KeyEvent(kb.Enter))
	require.Equal(t, "main", eval[string](tb, `document.activeElement.id`))
	require.Equal(t, "", eval[string](tb, `location.hash`))
	tb.do(chromedp.Focus(chromedp.CSS("#token")), chromedp.KeyEvent(kb.Tab))
	require.Equal(t, "login-submit", eval[string](tb, `document.activeElement.id`), "Tab goes from the token to the button")
	// Before sign-in nobody can log out: the button is not drawn.
	require.Equal(t, "none", eval[string](tb, `getComputedStyle(document.getElementById('logout')).display`), "Log out shown before sign-in")
	tb.screenshot("01-login")
	tb.login(ds.base, ds.tokens["finance"])
	require.NotEqual(t, "none", eval[string](tb, `getComputedStyle(document.getElementById('logout')).display`), "Log out hidden after sign-in")
	require.Equal(t, "finance", eval[string](tb, `JSON.parse(sessionStorage.getItem('cardhour.me')).role`))
	require.Equal(t, "Asia/Shanghai", eval[string](tb, `sessionStorage.getItem('cardhour.tz')`))

	// Now: the busy whole GPU on gpu-node-06 and the idle slice on gpu-node-03.
	held := eval[string](tb, `document.getElementById('page-now').innerText`)
	require.Contains(t, held, "Instances held: 2 · nodes: 2 · idle: 1")
	require.Contains(t, eval[string](tb, `document.getElementById('held-gpu-node-06').innerText`), "2026010204")
	node3 := eval[string](tb, `document.getElementById('held-gpu-node-03').innerText`)
	require.Contains(t, node3, "2023110077")
	require.Contains(t, node3, "idle")
	require.Contains(t, node3, "1g.10gb")
	require.Contains(t, node3, "2026-11-18 15:59", "held since, in the catalog's zone")
	tb.screenshot("02-now")

	// Usage: the charts' series add up to the report's total.
	tb.route("#/usage?period=2026-11&by=project&measure=cost", "usage")
	var rep api.UsagePage
	ds.apiGet(t, ds.tokens["finance"], "/api/v1/usage?period=2026-11", &rep)
	total := rep.Total.Cost.Decimal
	require.True(t, total.IsPositive())
	sums := eval[[]float64](tb, `echarts.getInstanceByDom(document.getElementById('chart-daily')).getOption().series.map(s => s.data.reduce((a, b) => a + b, 0))`)
	require.NotEmpty(t, sums, "a series per project")
	var sum float64
	for _, s := range sums {
		sum += s
	}
	require.InDelta(t, total.InexactFloat64(), sum, 0.01*float64(len(sums))*30, "the daily bars add up to the month")
	require.NotZero(t, eval[int](tb, `echarts.getInstanceByDom(document.getElementById('chart-split')).getOption().series[0].data.length`))
	require.Equal(t, 1, eval[int](tb, `document.querySelectorAll('#chart-daily canvas').length`))
	text := eval[string](tb, `document.getElementById('usage-total').innerText`)
	require.Contains(t, text, "¥\u00a0"+groupThousands(total.StringFixed(2)))
	tb.screenshot("03-usage")
	tb.route("#/usage?period=2026-11&by=user&measure=hours", "usage")
	require.Contains(t, eval[string](tb, `document.getElementById('usage-table').innerText`), "2023110042")

	// A billing run, then its nlp-lab draft.
	tb.route("#/runs?period=2026-11", "runs")
	tb.do(chromedp.Click(chromedp.CSS("#run")), chromedp.WaitVisible(chromedp.CSS("#run-drafts")))
	runText := eval[string](tb, `document.getElementById('run-result').innerText`)
	require.Contains(t, runText, "Data quality")
	require.Contains(t, runText, "Silent nodes (7)")
	require.Contains(t, runText, "Busy usage with no holder (billed to nobody): none")
	tb.screenshot("04-run")
	tb.do(chromedp.Click(chromedp.Search(`//table[@id="run-drafts"]//a[text()="nlp-lab"]`)), ready("invoices"),
		chromedp.WaitVisible(chromedp.CSS("#invoice-lines")))
	id := eval[string](tb, `location.hash.split('/')[2]`)
	var inv api.InvoiceBody
	ds.apiGet(t, ds.tokens["finance"], "/api/v1/invoices/"+id, &inv)
	var doc export.Document
	require.NoError(t, json.Unmarshal(inv.Document, &doc))
	require.Equal(t, "nlp-lab", inv.Project)
	require.Equal(t, "draft", inv.Status)
	require.Equal(t, "¥\u00a0"+groupThousands(doc.Total.StringFixed(2)), eval[string](tb, `document.getElementById('invoice-total').innerText`))
	tb.screenshot("05-invoice-draft")

	// The XLSX through the dashboard's download, read back.
	tb.do(chromedp.Click(chromedp.CSS("#export-xlsx")))
	name, path := tb.download()
	require.Equal(t, fmt.Sprintf("draft-nlp-lab-2026-11-r%d.xlsx", inv.Revision), name)
	x, err := excelize.OpenFile(path)
	require.NoError(t, err)
	defer x.Close() //nolint:errcheck // read only
	require.Contains(t, x.GetSheetList(), export.SheetStudents)
	rows, err := x.GetRows(export.SheetStudents, excelize.Options{RawCellValue: true})
	require.NoError(t, err)
	var flat []string
	for _, r := range rows {
		flat = append(flat, r...)
	}
	for _, s := range doc.Students {
		require.Contains(t, flat, s.User)
	}
	summary, err := x.GetRows(export.SheetSummary, excelize.Options{RawCellValue: true})
	require.NoError(t, err)
	foundTotal := false
	for _, r := range summary {
		for _, c := range r {
			if v, err := decimal.NewFromString(c); err == nil && v.Equal(doc.Total) {
				foundTotal = true
			}
		}
	}
	require.True(t, foundTotal, "the summary sheet carries the invoice total %s: %v", doc.Total, summary)

	// Finalize (the confirm dialog is accepted), then the final invoice.
	tb.do(chromedp.Click(chromedp.CSS("#finalize")), chromedp.WaitVisible(chromedp.CSS(`#page-invoices[data-ready="true"] .badge-finalized`)))
	ds.apiGet(t, ds.tokens["finance"], "/api/v1/invoices/"+id, &inv)
	require.Equal(t, "finalized", inv.Status)
	require.NotEmpty(t, inv.Number)
	require.Contains(t, eval[string](tb, `document.getElementById('page-invoices').innerText`), inv.Number)
	tb.screenshot("06-invoice-final")

	// Void it with a reason: a credit note, and revision 2 opens as a draft.
	tb.do(chromedp.Click(chromedp.CSS("#void")), chromedp.WaitVisible(chromedp.CSS("#void-reason")),
		chromedp.SendKeys(chromedp.CSS("#void-reason"), "wrong reservation"), chromedp.Click(chromedp.CSS("#void-confirm")),
		chromedp.WaitVisible(chromedp.CSS(`#page-invoices[data-ready="true"] #finalize`)))
	require.Contains(t, eval[string](tb, `document.getElementById('status').innerText`), "credit note")
	require.Contains(t, eval[string](tb, `document.querySelector('#page-invoices h1').innerText`), "revision 2")
	ds.apiGet(t, ds.tokens["finance"], "/api/v1/invoices/"+id, &inv)
	require.Equal(t, "void", inv.Status)
	require.Equal(t, "wrong reservation", inv.VoidReason)
	tb.route("#/invoices?period=2026-11", "invoices")
	list := eval[string](tb, `document.getElementById('invoice-list').innerText`)
	require.Contains(t, list, "void")
	require.Contains(t, list, "draft")
	require.Zero(t, eval[int](tb, `document.querySelectorAll('#export-period-xlsx').length`), "no finalized invoice left to export")

	// Alerts: the idle warning, its failed delivery, acknowledged.
	tb.route("#/alerts", "alerts")
	alerts := eval[string](tb, `document.getElementById('alerts').innerText`)
	require.Contains(t, alerts, "2023110077")
	require.Contains(t, alerts, "idle warning")
	require.Contains(t, alerts, "gpu-node-03")
	tb.do(chromedp.Click(chromedp.CSS("[data-deliveries]")), chromedp.WaitVisible(chromedp.CSS("#deliveries-table")))
	require.Contains(t, eval[string](tb, `document.getElementById('deliveries-table').innerText`), "550 mailbox unavailable")
	require.Zero(t, eval[int](tb, `document.querySelectorAll('[data-resend]').length`), "re-sending is for admins")
	// An admin re-sends the failed delivery: pending again, no button left.
	at := newTab(t, chromium, 1280, 800, shots)
	at.login(ds.base, ds.tokens["admin"])
	at.route("#/alerts", "alerts")
	at.do(chromedp.Click(chromedp.CSS("[data-deliveries]")), chromedp.WaitVisible(chromedp.CSS("#deliveries-table")))
	require.Equal(t, 1, eval[int](at, `document.querySelectorAll('#deliveries-table [data-resend]').length`))
	at.screenshot("06c-alerts-resend")
	at.do(chromedp.Click(chromedp.CSS("[data-resend]")), chromedp.WaitNotPresent(chromedp.CSS("[data-resend]")),
		chromedp.WaitVisible(chromedp.CSS("#deliveries-table")))
	require.Zero(t, eval[int](at, `document.querySelectorAll('#deliveries-table .badge-void').length`), "no failed delivery left")
	require.Contains(t, eval[string](at, `document.getElementById('status').innerText`), "will be sent again")
	tb.do(chromedp.Click(chromedp.CSS("[data-ack]")), chromedp.WaitVisible(chromedp.CSS(`#page-alerts[data-ready="true"] #alerts .badge-finalized`)))
	require.Contains(t, eval[string](tb, `document.getElementById('alerts').innerText`), "acknowledged")
	require.NotContains(t, eval[string](tb, `document.getElementById('page-alerts').innerText`), "null")
	tb.screenshot("06b-alerts")
	tb.route("#/releases", "releases")
	tb.route("#/exemptions", "exemptions")
	tb.screenshot("06c-exemptions")
	// A budget set through the form is listed.
	tb.route("#/budgets", "budgets")
	tb.do(chromedp.SetValue(chromedp.CSS("#bud-project"), "nlp-lab"), chromedp.SetValue(chromedp.CSS("#bud-limit"), "1200.50"),
		chromedp.Click(chromedp.CSS("#set-budget")), chromedp.WaitVisible(chromedp.CSS(`#page-budgets[data-ready="true"] #budgets`)))
	budgets := eval[string](tb, `document.getElementById('budgets').innerText`)
	require.Contains(t, budgets, "nlp-lab")
	require.Contains(t, budgets, "¥\u00a01,200.50")
	require.Contains(t, budgets, "50 %, 80 %, 100 %")
	tb.screenshot("06d-budgets")
	tb.route("#/invoices?period=2026-11", "invoices")

	// Chinese, and the phone width: nothing wider than the screen.
	tb.do(chromedp.SetValue(chromedp.CSS("#lang"), "zh-CN"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('lang').dispatchEvent(new Event('change'))`), ready("invoices"))
	require.Contains(t, eval[string](tb, `document.getElementById('nav').innerText`), "用量与费用")
	require.Equal(t, "zh-CN", eval[string](tb, `document.documentElement.lang`))
	require.Contains(t, eval[string](tb, `document.getElementById('invoice-list').innerText`), "已作废")
	tb.screenshot("07-invoices-zh")
	tb.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, r := range [][2]string{{"#/now", "now"}, {"#/usage?period=2026-11", "usage"}, {"#/invoices/" + id, "invoices"}} {
		tb.route(r[0], r[1])
		over := eval[int](tb, `document.documentElement.scrollWidth - window.innerWidth`)
		require.LessOrEqual(t, over, 0, "%s is wider than the phone's screen", r[0])
		tb.screenshot("08-phone-" + r[1])
	}
	tb.do(chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#token")))
	require.Empty(t, eval[string](tb, `sessionStorage.getItem('cardhour.token') || ''`))

	for u, body := range tb.bodies() {
		require.NotContains(t, u, "(4", "the page asked for something it may not read: %s %s", u, body)
	}
}

func dashboardStudent(t *testing.T, ds *dashServer, chromium, shots, samples string) {
	tb := newTab(t, chromium, 1280, 800, shots)
	const me = "2026010203"
	tb.login(ds.base, ds.tokens["student"])
	nav := eval[string](tb, `document.getElementById('nav').innerText`)
	require.Contains(t, nav, "Usage")
	require.NotContains(t, nav, "Invoices")
	require.NotContains(t, nav, "Roster")
	require.Contains(t, eval[string](tb, `document.getElementById('who').innerText`), me)
	tb.screenshot("11-student-now")
	tb.route("#/usage?period=2026-11", "usage")
	require.NotZero(t, eval[int](tb, `echarts.getInstanceByDom(document.getElementById('chart-daily')).getOption().series.length`))
	tb.screenshot("12-student-usage")
	// The watcher's pages: nothing about another student, no writing forms.
	tb.route("#/alerts", "alerts")
	require.Contains(t, eval[string](tb, `document.getElementById('page-alerts').innerText`), "Nothing to show.")
	tb.route("#/exemptions", "exemptions")
	tb.route("#/budgets", "budgets")
	require.Zero(t, eval[int](tb, `document.querySelectorAll('#budget-form, #grant-form, [data-deliveries]').length`))
	// Their statements: the project's invoices with their lines, and one
	// opened with its total and lines.
	tb.route("#/statements", "statements")
	require.NotZero(t, eval[int](tb, `document.querySelectorAll('#statement-list tbody tr').length`), "the billing run's drafts carry the student's lines")
	tb.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('#statement-list tbody a').click()`), chromedp.WaitVisible(chromedp.CSS(`#statement-total`)))
	require.Contains(t, eval[string](tb, `document.getElementById('statement-total').innerText`), "¥")
	require.NotZero(t, eval[int](tb, `document.querySelectorAll('#statement-lines tbody tr').length`))
	tb.screenshot("13-student-statement")
	// A page the role may not read falls back to "now" without asking.
	tb.do(chromedp.Evaluate[chromedp.Void](`location.hash = '#/invoices?period=2026-11'`), ready("now"))

	dom := eval[string](tb, `document.documentElement.outerHTML`)
	bodies := tb.bodies()
	require.NotEmpty(t, bodies)
	others := slices.DeleteFunc(exampleUsers(t, samples), func(u string) bool { return u == me })
	require.Len(t, others, 7)
	for _, o := range others {
		require.NotContains(t, dom, o, "another student's ID in the page")
		for u, b := range bodies {
			require.NotContains(t, b, o, "another student's ID in the response of %s", u)
		}
	}
	for u := range bodies {
		if !strings.Contains(u, "/statements/"+me) {
			require.NotRegexp(t, `/api/v1/(invoices|projects|billing-runs|tokens|audit)`, u, "a student's page asked for %s", u)
		}
		require.NotContains(t, u, "(4", "refused: %s", u)
	}
}

func dashboardLead(t *testing.T, ds *dashServer, chromium, shots string) {
	tb := newTab(t, chromium, 1280, 800, shots)
	tb.login(ds.base, ds.tokens["lead"])
	nav := eval[string](tb, `document.getElementById('nav').innerText`)
	require.Contains(t, nav, "Roster")
	require.Contains(t, nav, "Invoices")
	require.NotContains(t, nav, "Billing runs")
	require.Contains(t, eval[string](tb, `document.getElementById('page-now').innerText`), "Instances held: 1 · nodes: 1 · idle: 1",
		"only nlp-lab's idle slice, not ai101's GPU")

	// The roster: empty, then imported from a CSV file through the page.
	tb.route("#/roster", "roster")
	require.Contains(t, eval[string](tb, `document.getElementById('page-roster').innerText`), "Project: nlp-lab")
	csv := filepath.Join(t.TempDir(), "roster.csv")
	require.NoError(t, os.WriteFile(csv, []byte("学号,姓名,邮箱\n2023110042,王小明,wxm@example.edu\n2023110077,李雷,\n2024210015,韩梅梅,\n"), 0o644))
	tb.do(chromedp.SetUploadFiles(chromedp.CSS("#roster-file"), []string{csv}),
		chromedp.Click(chromedp.Search(`//form[.//input[@id="roster-file"]]//button[@type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#page-roster[data-ready="true"] #roster`)))
	roster := eval[string](tb, `document.getElementById('roster').innerText`)
	require.Contains(t, roster, "王小明")
	require.Contains(t, roster, "wxm@example.edu")
	require.Contains(t, eval[string](tb, `document.getElementById('status').innerText`), "3 added")
	tb.screenshot("21-lead-roster")

	// Invoices: their project's only.
	tb.route("#/invoices?period=2026-11", "invoices")
	list := eval[string](tb, `document.getElementById('invoice-list').innerText`)
	require.Contains(t, list, "nlp-lab")
	for _, other := range []string{"cv-lab", "ai101", "thesis-h100"} {
		require.NotContains(t, list, other)
	}
	require.Zero(t, eval[int](tb, `document.querySelectorAll('#finalize, #void').length`))
	tb.route("#/invoices?period=all", "invoices")
	require.Contains(t, eval[string](tb, `document.getElementById('invoice-list').innerText`), "nlp-lab")
	for u, body := range tb.bodies() {
		require.NotContains(t, u, "(4", "the page asked for something it may not read: %s %s", u, body)
	}
}

var thousandsRE = regexp.MustCompile(`(\d)(\d{3})([,.])`)

// groupThousands writes "1234567.50" as "1,234,567.50".
func groupThousands(s string) string {
	for {
		n := thousandsRE.ReplaceAllString(s, "$1,$2$3")
		if n == s {
			return s
		}
		s = n
	}
}

// ---------------------------------------------------------------- first load

// withServeUsageCache answers usage reads through the report cache, as
// cardhour serve does by default (--usage-cache): concurrent requests for
// one report share its computation. Nothing is computed before a page asks.
func withServeUsageCache(s *dashSetup) {
	s.usage = func(u api.Usage) api.Usage {
		ur := u.(*usageReads)
		if ver, ok := ur.st.(reads.DataVersioner); ok {
			if rows, ok := ur.st.(reads.UsageRows); ok {
				ur.cache = reads.NewUsageCache(rows, ver, reads.UsageCacheConfig{})
			}
		}
		return ur
	}
}

// loadSpans lists, for the last load, when each API response and script
// began and ended (ms from navigation start), the longest first.
const loadSpans = `performance.getEntriesByType('resource')
  .filter((e) => e.name.includes('/api/') || e.name.endsWith('.js'))
  .sort((a, b) => (b.responseEnd - b.startTime) - (a.responseEnd - a.startTime)).slice(0, 6)
  .map((e) => new URL(e.name).pathname.split('/').pop() + ' ' + Math.round(e.startTime) + '-' + Math.round(e.responseEnd))
  .join(', ')`

// BenchmarkDashboardFirstLoad loads each page in a fresh document with the
// browser cache disabled, and reports the time from navigation start to the
// page's data drawn (the cardhour:ready performance mark) and the bytes
// transferred (compressed, API responses included). The data: the example
// fleet, or with CARDHOUR_DASH_BENCH_INSTANCES=N a generated month of N
// instances (hourly samples, `cardhour generate`). CARDHOUR_DASH_BENCH_PAGES
// (now,usage,usage-range,efficiency,invoices,invoice,runs,roster,budgets,
// review) loads only those.
func BenchmarkDashboardFirstLoad(b *testing.B) {
	chromium := needChromium(b)
	samples, at, label := exampleSamples, heldAt, "example"
	var opts []dashOpt
	if dsn := os.Getenv("CARDHOUR_DASH_BENCH_STORE"); dsn != "" {
		// A store filled before (see docs/benchmarks.md): November 2026's
		// month, read half an hour before its end, in its last hour of
		// samples, as a live site reads now (after every sample's start).
		opts = append(opts, func(s *dashSetup) { s.store = dsn })
		tabTimeout = 30 * time.Minute
		b.Cleanup(func() { tabTimeout = 3 * time.Minute })
		at, label = time.Date(2026, 11, 30, 23, 30, 0, 0, shanghai), dsn
	} else if n, _ := strconv.Atoi(os.Getenv("CARDHOUR_DASH_BENCH_INSTANCES")); n > 0 {
		// A month of n instances sampled hourly, held by users per project
		// (5 projects; CARDHOUR_DASH_BENCH_USERS, default 8).
		users := cmp.Or(os.Getenv("CARDHOUR_DASH_BENCH_USERS"), "8")
		samples = filepath.Join(b.TempDir(), "month.jsonl")
		var out, errOut strings.Builder
		start := time.Now()
		code := run([]string{"generate", "--instances", strconv.Itoa(n), "--interval", "3600", "--users", users,
			"--samples", strconv.Itoa(n * 30 * 24), "--until", "2026-12", "--out", samples}, &out, &errOut)
		require.Zero(b, code, errOut.String())
		b.Logf("generated %d samples in %s", n*30*24, time.Since(start).Round(time.Second))
		at, label = time.Date(2026, 11, 30, 23, 30, 0, 0, shanghai), fmt.Sprintf("%d instances, %s users per project", n, users)
	}
	// The clock of what is held moves on from at as the wall clock does,
	// as a server's does: a read of what is held serves the reads within a
	// tick of its clock (reads.HeldShare), not every later one.
	began := time.Now()
	opts = append(opts, func(s *dashSetup) { s.now = func() time.Time { return at.Add(time.Since(began)) } }, withServeUsageCache)
	ds := startDashboard(b, samples, at, afterNovember, map[string]ledger.NewToken{
		"finance": {Role: ledger.RoleFinance, TTL: time.Hour},
	}, opts...)
	start := time.Now()
	var rr invoicing.RunReport
	req, _ := http.NewRequest(http.MethodPost, ds.base+"/api/v1/billing-runs", strings.NewReader(`{"period":"2026-11"}`))
	req.Header.Set("Authorization", "Bearer "+ds.tokens["finance"])
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	require.NoError(b, json.NewDecoder(res.Body).Decode(&rr))
	_ = res.Body.Close()
	require.NotEmpty(b, rr.Drafts)
	b.Logf("the billing run of November: %d drafts in %s", len(rr.Drafts), time.Since(start).Round(time.Millisecond))
	shots := os.Getenv("CARDHOUR_TEST_ARTIFACTS") // a screenshot of each page's last load there
	tb := newTab(b, chromium, 1280, 800, cmp.Or(shots, b.TempDir()))
	tb.login(ds.base, ds.tokens["finance"])
	_, err = chromedp.Call(tb.ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
	require.NoError(b, err)
	pages := [][2]string{
		{"now", "#/now"},
		{"usage", "#/usage?period=2026-11"},
		{"usage-range", "#/usage?from=2026-11-03&to=2026-11-17&top=idle_cost"}, // any days; the trends and top lists on both
		{"efficiency", "#/efficiency?period=2026-11"},
		{"invoices", "#/invoices?period=2026-11"},
		{"invoice", fmt.Sprintf("#/invoices/%d", rr.Drafts[0].InvoiceID)},
		{"runs", "#/runs?period=2026-11"},
		{"roster", "#/roster"},
		{"budgets", "#/budgets"},
		{"review", "#/review?period=2026-11"},
	}
	if only := os.Getenv("CARDHOUR_DASH_BENCH_PAGES"); only != "" { // a comma-separated subset, by name
		pages = slices.DeleteFunc(pages, func(p [2]string) bool { return !slices.Contains(strings.Split(only, ","), p[0]) })
		require.NotEmpty(b, pages, "CARDHOUR_DASH_BENCH_PAGES=%s names none of the pages", only)
	}
	b.ResetTimer()
	worst := map[string][2]float64{}
	for i := 0; i < b.N; i++ {
		for j, p := range pages {
			name := p[0]
			switch name {
			case "invoice":
				name = "invoices"
			case "usage-range":
				name = "usage"
			}
			tb.mu.Lock()
			tb.bytes, tb.requests = 0, 0
			tb.mu.Unlock()
			// No page is served a read of what is held that the one before
			// made (such a read serves the reads of the next tick).
			time.Sleep(reads.DefaultHeldTick)
			// A query string makes it a new document (a fresh load, no cache).
			tb.do(chromedp.Navigate(fmt.Sprintf("%s/ui/?load=%d-%d%s", ds.base, i, j, p[1])), ready(name))
			ms := eval[float64](tb, `performance.getEntriesByName('cardhour:ready').at(-1).startTime`)
			time.Sleep(50 * time.Millisecond) // the last loadingFinished events
			tb.mu.Lock()
			kib := tb.bytes / 1024
			tb.mu.Unlock()
			w := worst[p[0]]
			worst[p[0]] = [2]float64{math.Max(w[0], ms), math.Max(w[1], kib)}
			if shots != "" && i == b.N-1 {
				tb.screenshot("first-load-" + p[0])
			}
			if testing.Verbose() { // progress, as it goes, and where the load's time went
				fmt.Fprintf(os.Stderr, "load %d of %s: %.0f ms, %.0f KiB; %s\n", i+1, p[0], ms, kib, eval[string](tb, loadSpans))
			}
		}
	}
	b.StopTimer()
	for _, p := range pages {
		w := worst[p[0]]
		b.ReportMetric(w[0], p[0]+"-ms")
		b.ReportMetric(w[1], p[0]+"-KiB")
		b.Logf("%s (%s): first load %.0f ms, %.0f KiB transferred", p[0], label, w[0], w[1])
	}
}
