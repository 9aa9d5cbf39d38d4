//go:build !collector

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/ledger"
)

// TestDemoWeek runs `cardhour demo` for a simulated week at high speed (about
// 30 s) and reads through the API what the week left: held instances, idle
// alerts, releases carried out by the simulated fleet, budget alerts, and a
// billing run whose invoices equal `cardhour bill` over the samples the demo
// ingested.
func TestDemoWeek(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated week takes about 30 s")
	}
	dir := t.TempDir()
	checked := false
	demoAfterRun = func(ctx context.Context, d demoRun) error {
		defer func() { checked = true }()
		checkDemoWeek(t, d)
		return nil
	}
	defer func() { demoAfterRun = nil }()
	var out, errOut bytes.Buffer
	code := run([]string{"demo", "--addr", "127.0.0.1:0", "--speed", "20000", "--for", "168h",
		"--start", "2026-11-23T08:00:00+08:00", "--interval", "15m", "--state", dir}, &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", tail(errOut.String(), 4000))
	require.True(t, checked, "the run reached its stop time")
	require.Contains(t, out.String(), "admin token cht_")
	require.Contains(t, out.String(), "/ui/")
	require.Contains(t, errOut.String(), "alert received by the demo's webhook sink", "alerts go to the log")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func checkDemoWeek(t *testing.T, d demoRun) {
	t.Helper()
	call := func(method, path, token string, body any, into any) int {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			require.NoError(t, err)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, d.URL+path, rd)
		require.NoError(t, err)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close() //nolint:errcheck // test
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		if into != nil && resp.StatusCode < 300 {
			require.NoError(t, json.Unmarshal(raw, into), "%s %s: %s", method, path, raw)
		}
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, call("GET", "/healthz", "", nil, nil))
	require.Equal(t, 2026, d.To.Year())
	require.Equal(t, 168*time.Hour, d.To.Sub(d.From))

	// Held now (at the end of the week): the NLP Lab's reserved slice trains all month.
	var held struct {
		Items []struct {
			Instance, Project, User, SKU string
		} `json:"items"`
	}
	require.Equal(t, http.StatusOK, call("GET", "/api/v1/held", d.Token, nil, &held))
	require.NotEmpty(t, held.Items)
	users := map[string]bool{}
	for _, h := range held.Items {
		users[h.User] = true
		require.NotEmpty(t, h.SKU, "every held instance is priced: %+v", h)
	}
	require.True(t, users["2023110042"], "bert-pretrain holds its slice: %+v", held.Items)

	// What the webhook sink received, admin only.
	require.Equal(t, http.StatusUnauthorized, call("GET", "/demo/api/webhooks", "", nil, nil))
	var sink struct {
		Notifications []struct {
			Kind    string `json:"kind"`
			Lang    string `json:"lang"`
			Subject string `json:"subject"`
			Body    string `json:"body"`
			To      struct {
				Role, Project string
			} `json:"to"`
			Facts struct {
				Project, User, Outcome string
				InstanceID             string `json:"instance_id"`
				Budget                 *struct {
					Scope   string `json:"scope"`
					Percent int    `json:"percent"`
				} `json:"budget"`
			} `json:"facts"`
		} `json:"notifications"`
		Releases []demoRelease `json:"releases"`
	}
	require.Equal(t, http.StatusOK, call("GET", "/demo/api/webhooks", d.Token, nil, &sink))
	kinds := map[string]int{}
	released := map[string]bool{} // instances the fleet freed
	for _, r := range sink.Releases {
		if r.Released {
			released[r.Request.Target.InstanceID] = true
			require.Contains(t, r.Detail, "the simulated fleet freed")
		}
	}
	budgetAt := map[int]bool{}
	for _, n := range sink.Notifications {
		kinds[n.Kind]++
		switch n.Kind {
		case "idle_release":
			require.True(t, released[n.Facts.InstanceID], "an idle_release message only for an instance the fleet freed: %s", n.Subject)
			require.Contains(t, n.Facts.Outcome, "released")
		case "budget_threshold":
			require.NotNil(t, n.Facts.Budget)
			if n.Facts.Budget.Scope == "student" && n.Facts.User == "2022150001" {
				budgetAt[n.Facts.Budget.Percent] = true
			}
		}
	}
	// Each person's alerts are in their language: the admin's and Bio
	// Lab's lead's in English, the DL course lead's and the holders' (no
	// language in the roster: the default) in Chinese.
	langs := map[string]map[string]int{}
	for _, n := range sink.Notifications {
		who := n.To.Role
		if who == "lead" {
			who += ":" + n.To.Project
		}
		want := map[string]string{"admin": "en", "lead:bio-lab": "en", "lead:dl-course": "zh-CN", "holder": "zh-CN"}[who]
		require.NotEmpty(t, want, "an alert to %s", who)
		require.Equal(t, want, n.Lang, "the language of an alert to %s: %s", who, n.Subject)
		if want == "en" {
			require.True(t, strings.HasPrefix(n.Subject, "[cardhour]"), "an English subject to %s: %s", who, n.Subject)
			require.NotRegexp(t, `\p{Han}`, strings.NewReplacer(demoLeads["bio-lab"][0].Name, "").Replace(n.Body[:min(len(n.Body), 200)]), "English first lines to %s", who)
		} else {
			require.True(t, strings.HasPrefix(n.Subject, "【cardhour】"), "a Chinese subject to %s: %s", who, n.Subject)
			require.NotContains(t, n.Body, "ask the course lead", "the exemption hint in Chinese too")
		}
		if langs[who] == nil {
			langs[who] = map[string]int{}
		}
		langs[who][n.Lang]++
	}
	for _, who := range []string{"admin", "holder", "lead:dl-course", "lead:bio-lab"} {
		require.NotEmpty(t, langs[who], "alerts reached %s: %v", who, langs)
	}
	t.Logf("alert languages by recipient: %v", langs)

	require.Positive(t, kinds["idle_warning"], "idle warnings: %v", kinds)
	require.Positive(t, kinds["idle_release"], "releases told: %v", kinds)
	require.True(t, budgetAt[100], "the thesis student passed the budget: %v", budgetAt)
	var projects []string
	for _, r := range sink.Releases {
		if r.Released {
			projects = append(projects, r.Request.Target.Project)
		}
	}
	// Which instances are released depends on the watcher's cycles, which at
	// this speed fall every half hour of simulated time or so; some are.
	require.NotEmpty(t, projects, "releases carried out by the simulated fleet")
	t.Logf("released in projects %v; messages %v", projects, kinds)

	// The month's invoices from the API equal `cardhour bill` over the
	// samples the demo ingested, project by project, to the cent.
	require.Equal(t, http.StatusOK, call("POST", "/api/v1/billing-runs", d.Token, map[string]string{"period": "2026-11"}, nil))
	var invs struct {
		Items []struct {
			ID      int64  `json:"id"`
			Project string `json:"project"`
		} `json:"items"`
	}
	require.Equal(t, http.StatusOK, call("GET", "/api/v1/invoices?period=2026-11&limit=100", d.Token, nil, &invs))
	api := map[string]decimal.Decimal{}
	for _, inv := range invs.Items {
		var one struct {
			Document json.RawMessage `json:"document"`
		}
		require.Equal(t, http.StatusOK, call("GET", "/api/v1/invoices/"+strconv.FormatInt(inv.ID, 10), d.Token, nil, &one))
		doc := one.Document
		var body struct {
			Total decimal.Decimal `json:"total"`
		}
		require.NoError(t, json.Unmarshal(doc, &body), "invoice of %s: %s", inv.Project, doc)
		api[inv.Project] = body.Total
	}
	code, stdout, stderr := runCLI(t, "", "bill", "--catalog", filepath.Join(d.Dir, "catalog.yaml"),
		"--samples", filepath.Join(d.Dir, "samples.jsonl"), "--period", "2026-11", "--format", "json")
	require.Equal(t, 0, code, stderr)
	var bill struct {
		Invoices []struct {
			Project string          `json:"project"`
			Total   decimal.Decimal `json:"total"`
		} `json:"invoices"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &bill))
	want := map[string]decimal.Decimal{}
	for _, inv := range bill.Invoices {
		want[inv.Project] = inv.Total
	}
	require.Len(t, api, len(want), "API %v, bill %v", api, want)
	var names []string
	for p, tot := range want {
		names = append(names, p)
		require.True(t, tot.Equal(api[p]), "project %s: API %s, bill %s", p, api[p], tot)
	}
	slices.Sort(names)
	for _, p := range []string{"bio-lab", "dl-course", "robotics-lab", "thesis-h100", "nlp-lab"} {
		require.Contains(t, names, p)
		require.True(t, want[p].IsPositive(), "project %s billed %s", p, want[p])
	}
	t.Logf("invoices %s", strings.Join(names, ", "))
}

// TestDemoFirstHours runs the demo's first 15 simulated hours (15 minutes
// of wall time at the default --speed 60) at --speed 1500: the story of the
// README happens in them, the teaching pool's slices left allocated after
// the Monday session are warned about and released.
func TestDemoFirstHours(t *testing.T) {
	if testing.Short() {
		t.Skip("15 simulated hours take about 36 s")
	}
	checked := false
	demoAfterRun = func(ctx context.Context, d demoRun) error {
		defer func() { checked = true }()
		call := func(method, path, token string, _ any, into any) int {
			t.Helper()
			req, err := http.NewRequest(method, d.URL+path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close() //nolint:errcheck // test
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(raw, into), "%s: %s", path, raw)
			return resp.StatusCode
		}
		// The teaching pool's story happens on Monday, within the first 15
		// simulated hours (15 minutes of wall time at the default --speed 60):
		// an idle warning and a release of a slice left allocated.
		firstAlert := func(kind string) time.Duration {
			t.Helper()
			first := time.Duration(-1)
			cursor := ""
			for {
				var page struct {
					Items []struct {
						Kind       string    `json:"kind"`
						Project    string    `json:"project"`
						InstanceID string    `json:"instance_id"`
						CreatedAt  time.Time `json:"created_at"`
					} `json:"items"`
					Next string `json:"next_cursor"`
				}
				require.Equal(t, http.StatusOK, call("GET", "/api/v1/alerts?limit=100&kind="+kind+"&cursor="+cursor, d.Token, nil, &page))
				for _, a := range page.Items {
					if a.Project == "dl-course" && !strings.Contains(a.InstanceID, "/share/") { // the pool's slices, not the course's shares
						if at := a.CreatedAt.Sub(d.From); first < 0 || at < first {
							first = at
						}
					}
				}
				if cursor = page.Next; cursor == "" {
					return first
				}
			}
		}
		for _, kind := range []string{"idle_warning", "idle_release"} {
			at := firstAlert(kind)
			require.GreaterOrEqual(t, at, time.Duration(0), "the teaching pool had a %s", kind)
			require.Less(t, at, 15*time.Hour, "the teaching pool's first %s came %s after the start", kind, at)
			t.Logf("the teaching pool's first %s: %s after the start", kind, at)
		}

		var rel struct {
			Items []struct {
				Project, Status string
				InstanceID      string `json:"instance_id"`
			} `json:"items"`
		}
		require.Equal(t, http.StatusOK, call("GET", "/api/v1/releases?status=done&limit=100", d.Token, nil, &rel))
		done := 0
		for _, r := range rel.Items {
			if r.Project == "dl-course" && !strings.Contains(r.InstanceID, "/share/") {
				done++
			}
		}
		require.Positive(t, done, "the simulated fleet freed teaching-pool slices: %+v", rel.Items)
		checkDemoShareReleased(t, d)
		checkDemoSignIn(t, d)
		checkDemoBudgets(t, d)
		checkDemoSavingsAndSignOff(t, d)
		return nil
	}
	defer func() { demoAfterRun = nil }()
	var out, errOut bytes.Buffer
	// At --speed 1500 a watcher cycle runs every 2.5 simulated minutes and
	// samples reach the store about 10 simulated minutes late: the 15
	// minutes between the warning (15 min idle) and the release (30 min)
	// hold several cycles. (A cycle that first sees a streak past 30 min
	// releases without warning.)
	code := run([]string{"demo", "--addr", "127.0.0.1:0", "--speed", "1500", "--for", "15h",
		"--start", "2026-11-23T08:00:00+08:00", "--interval", "2m", "--state", t.TempDir()}, &out, &errOut)
	require.Equal(t, 0, code, "stderr: %s", tail(errOut.String(), 4000))
	require.True(t, checked, "the run reached its stop time")
}

// demoForgottenShare is the pod of the notebook left on a 1/20 HAMi share
// of hami-a100-01 on Monday (idle from 10:00): its share is the instance
// <gpu_uuid>/share/dl-course/dl-nb-forgotten/main.
const demoForgottenShare = "/share/dl-course/dl-nb-forgotten/main"

// checkDemoShareReleased: in the first 15 hours, the notebook forgotten on a
// 1/20 HAMi share is warned about and released by the watcher through the
// release webhook, the simulated fleet frees it, and it is no longer held;
// the card's other shares are held, each named with its card and fraction.
func checkDemoShareReleased(t *testing.T, d demoRun) {
	t.Helper()
	get := func(path string, into any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, d.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+d.Token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close() //nolint:errcheck // test
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, raw)
		require.NoError(t, json.Unmarshal(raw, into), "%s: %s", path, raw)
	}
	var sink struct {
		Notifications []struct {
			Kind  string `json:"kind"`
			To    struct{ Role string }
			Facts struct {
				InstanceID string `json:"instance_id"`
				Profile    string `json:"profile"`
				Outcome    string `json:"outcome"`
			} `json:"facts"`
		} `json:"notifications"`
		Releases []demoRelease `json:"releases"`
	}
	get("/demo/api/webhooks", &sink)
	share := ""
	for _, r := range sink.Releases {
		if strings.HasSuffix(r.Request.Target.InstanceID, demoForgottenShare) {
			require.True(t, r.Released, "the release hook freed the forgotten share: %s", r.Detail)
			require.False(t, r.Request.DryRun)
			require.Contains(t, r.Detail, "the simulated fleet freed "+r.Request.Target.InstanceID+" on hami-a100-01 (dl-nb-forgotten)")
			require.Equal(t, "2025030199", r.Request.Target.User)
			require.Empty(t, share, "one release of the forgotten share")
			share = r.Request.Target.InstanceID
		}
	}
	require.NotEmpty(t, share, "the watcher asked the release hook to free the forgotten share: %+v", sink.Releases)
	require.Regexp(t, `^GPU-[0-9a-f-]+`+demoForgottenShare+`$`, share)
	told := map[string]int{}
	for _, n := range sink.Notifications {
		if n.Facts.InstanceID == share && n.To.Role == "holder" {
			told[n.Kind]++
			require.Equal(t, "1/20", n.Facts.Profile)
			if n.Kind == "idle_release" {
				require.Contains(t, n.Facts.Outcome, "released")
			}
		}
	}
	require.Positive(t, told["idle_warning"], "the holder of the forgotten share was warned: %v", told)
	require.Positive(t, told["idle_release"], "and told of its release: %v", told)

	var held struct {
		Items []struct {
			Instance, Node, GPU, Share, User, SKU, Profile string
		} `json:"items"`
	}
	get("/api/v1/held", &held)
	card := strings.TrimSuffix(share, demoForgottenShare)
	onCard := 0
	for _, h := range held.Items {
		require.NotEqual(t, share, h.Instance, "the released share is no longer held")
		if h.GPU == card {
			onCard++
			require.True(t, strings.HasPrefix(h.Instance, card+"/share/"), "a share of the card: %+v", h)
			require.Equal(t, "0.05", h.Share, "a 1/20 share: %+v", h)
			require.Equal(t, "a100-80g-1-20", h.SKU)
		}
	}
	require.Positive(t, onCard, "the card's other shares are held (the NLP Lab's fine-tuning): %+v", held.Items)
}

func TestDemoFlags(t *testing.T) {
	code, _, stderr := runCLI(t, "", "demo", "--speed", "0", "--start", "yesterday", "--interval", "2h")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--speed 0: want 1..1000000")
	require.Contains(t, stderr, `--start "yesterday": want RFC 3339`)
	require.Contains(t, stderr, "--interval: want 1s..1h")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "usage.db"), nil, 0o600))
	code, _, stderr = runCLI(t, "", "demo", "--addr", "127.0.0.1:0", "--state", dir, "--for", "1h")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "already holds an earlier run's stores")

	mon := lastMonday8(time.Date(2026, 12, 1, 12, 30, 0, 0, time.FixedZone("CST", 8*3600)))
	require.Equal(t, "2026-11-30T08:00:00+08:00", mon.Format(time.RFC3339))
	mon = lastMonday8(time.Date(2026, 11, 30, 7, 59, 0, 0, time.FixedZone("CST", 8*3600)))
	require.Equal(t, "2026-11-23T08:00:00+08:00", mon.Format(time.RFC3339))
}

// --pprof serves Go's profiles beside the API (a heap profile of a long run);
// without it there are none.
func TestDemoPprof(t *testing.T) {
	for _, on := range []bool{true, false} {
		var status int
		var body []byte
		demoAfterRun = func(ctx context.Context, d demoRun) error {
			resp, err := http.Get(d.URL + "/debug/pprof/heap?debug=1")
			require.NoError(t, err)
			defer resp.Body.Close() //nolint:errcheck // test
			status = resp.StatusCode
			body, err = io.ReadAll(resp.Body)
			return err
		}
		args := []string{"demo", "--addr", "127.0.0.1:0", "--speed", "20000", "--for", "1h",
			"--start", "2026-11-23T08:00:00+08:00", "--state", t.TempDir()}
		if on {
			args = append(args, "--pprof")
		}
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		demoAfterRun = nil
		require.Equal(t, 0, code, "stderr: %s", tail(errOut.String(), 4000))
		if on {
			require.Equal(t, http.StatusOK, status)
			require.Contains(t, string(body), "heap profile:", "a heap profile in pprof's text form")
		} else {
			require.Equal(t, http.StatusNotFound, status, "no profiles without --pprof: %s", body)
		}
	}
}

// checkDemoSignIn: each of the demo's one-click people opens a session of
// their role in the simulated lab (the lead of two projects has both).
func checkDemoSignIn(t *testing.T, d demoRun) {
	t.Helper()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, want := range []struct {
		role, project, user string
		grants              int
	}{
		{"student", "cv-lab", "2022110315", 1},
		{"student", "ai101", "2025010104", 1},
		{"lead", "cv-lab", "", 1},
		{"lead", "ai101", "", 2},
		{"finance", "", "", 1},
	} {
		resp, err := noRedirect.Get(fmt.Sprintf("%s/auth/demo?as=%d", d.URL, i))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "demo person %d", i)
		var cookie *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "cardhour_session" {
				cookie = c
			}
		}
		require.NotNil(t, cookie, "demo person %d: a session", i)
		require.Positive(t, cookie.MaxAge, "the cookie's lifetime is relative, whatever the simulated clock says")
		get := func(path string, into any) {
			req, err := http.NewRequest("GET", d.URL+path, nil)
			require.NoError(t, err)
			req.AddCookie(cookie)
			r, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer r.Body.Close() //nolint:errcheck // decoded
			require.Equal(t, http.StatusOK, r.StatusCode, path)
			require.NoError(t, json.NewDecoder(r.Body).Decode(into))
		}
		var me ledger.Token
		get("/api/v1/me", &me)
		require.Equal(t, want.role, string(me.Role), "demo person %d", i)
		require.Equal(t, want.project, me.Project, "demo person %d", i)
		require.Equal(t, want.user, me.User, "demo person %d", i)
		var sess struct {
			Grants []ledger.Grant `json:"grants"`
		}
		get("/auth/session", &sess)
		require.Len(t, sess.Grants, want.grants, "demo person %d", i)
	}
}

// checkDemoBudgets: within the first hours the watcher has measured every
// month budget of the demo: the budgets page has their use, percent and
// forecast for November.
func checkDemoBudgets(t *testing.T, d demoRun) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, d.URL+"/api/v1/budgets", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close() //nolint:errcheck // test
	var page struct {
		Items []struct {
			ID     int64
			Period string
			Status *struct {
				Period, Used, Forecast string
				Percent                int64
			}
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
	months := 0
	for _, b := range page.Items {
		if b.Period != "month" {
			continue
		}
		months++
		require.NotNil(t, b.Status, "budget %d measured", b.ID)
		require.Equal(t, "2026-11", b.Status.Period)
		require.NotEmpty(t, b.Status.Forecast)
	}
	require.Positive(t, months, "the demo has month budgets")
}

// checkDemoSavingsAndSignOff: the teaching pool's releases saved money
// within the first hours (usage's saved_cost), and the demo's invoice flow
// waits for the lead's sign-off: a billing run's draft says so, and the
// admin (who may approve) approves it.
func checkDemoSavingsAndSignOff(t *testing.T, d demoRun) {
	t.Helper()
	send := func(method, path string, body string, into any) int {
		t.Helper()
		req, err := http.NewRequest(method, d.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+d.Token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close() //nolint:errcheck // test
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, into), "%s: %s", path, raw)
		return resp.StatusCode
	}
	var usage struct {
		Rows []struct {
			Project   string `json:"project"`
			SavedCost string `json:"saved_cost"`
		} `json:"rows"`
		Assumption string `json:"savings_assumption"`
	}
	q := url.Values{"from": {d.From.Format(time.RFC3339)}, "to": {d.To.Format(time.RFC3339)}, "group_by": {"project"}}
	require.Equal(t, http.StatusOK, send("GET", "/api/v1/usage?"+q.Encode(), "", &usage))
	require.NotEmpty(t, usage.Assumption)
	saved := decimal.Zero
	for _, r := range usage.Rows {
		if r.Project == "dl-course" {
			saved = decimal.RequireFromString(r.SavedCost)
		}
	}
	require.True(t, saved.IsPositive(), "the teaching pool's releases saved money: %+v", usage.Rows)

	var run struct {
		Drafts []struct {
			InvoiceID int64  `json:"invoice_id"`
			SHA256    string `json:"sha256"`
		} `json:"drafts"`
	}
	period := d.From.Format("2006-01")
	require.Equal(t, http.StatusOK, send("POST", "/api/v1/billing-runs", `{"period":"`+period+`"}`, &run))
	require.NotEmpty(t, run.Drafts)
	var inv struct {
		ApprovalRequired bool   `json:"approval_required"`
		ApprovedBy       string `json:"approved_by"`
	}
	id := strconv.FormatInt(run.Drafts[0].InvoiceID, 10)
	require.Equal(t, http.StatusOK, send("GET", "/api/v1/invoices/"+id, "", &inv))
	require.True(t, inv.ApprovalRequired, "the demo's drafts wait for the lead's sign-off")
	require.Equal(t, http.StatusOK, send("POST", "/api/v1/invoices/"+id+"/approve", `{"if_sha256":"`+run.Drafts[0].SHA256+`"}`, &inv))
	require.NotEmpty(t, inv.ApprovedBy)
}
