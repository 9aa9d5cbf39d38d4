//go:build !collector

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/watch/release"
)

// TestDashboardStudentsHelpThemselves: in English and Chinese, a student
// sees the cost so far of each slice they hold (the API's) and releases one
// with one click and a confirmation: the site's release webhook (the
// watcher's releaser) is asked once, the release is recorded under the
// student's name and the page says released. The student then asks for an
// exemption from the Exemptions page (prefilled from the alert's link); the
// project's lead grants it (English) or refuses it with a reason (Chinese),
// and the student's page shows the decision.
func TestDashboardStudentsHelpThemselves(t *testing.T) {
	chromium := needChromium(t)
	var mu sync.Mutex
	var asked []release.WebhookRequest
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req release.WebhookRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		asked = append(asked, req)
		mu.Unlock()
		_, _ = fmt.Fprintf(w, `{"released":true,"detail":"deleted pod ml/%s"}`, req.Target.User)
	}))
	t.Cleanup(hook.Close)
	// Who holds what at heldAt: two holdings of two students, one per language.
	samples, _, _, _, _, _ := shareSamples(t, heldAt)
	probe := startDashboard(t, samples, heldAt, heldAt, map[string]ledger.NewToken{"finance": {Role: ledger.RoleFinance, TTL: time.Hour}})
	type heldItem struct {
		Instance, Node, Project, User, Cost string
	}
	var held api.Page[heldItem]
	probe.apiGet(t, probe.tokens["finance"], "/api/v1/held", &held)
	picks := map[string]heldItem{}
	var langs []string
	for _, x := range held.Items {
		if x.User == "" || x.Cost == "" || len(picks) == 2 {
			continue
		}
		dup := false
		for _, p := range picks {
			dup = dup || p.User == x.User
		}
		if !dup {
			lang := []string{"en", "zh-CN"}[len(picks)]
			picks[lang], langs = x, append(langs, lang)
		}
	}
	require.Len(t, picks, 2, "two students hold priced slices at heldAt: %+v", held.Items)
	tokens := map[string]ledger.NewToken{}
	for lang, x := range picks {
		tokens["student-"+lang] = ledger.NewToken{Role: ledger.RoleStudent, Project: x.Project, User: x.User, TTL: time.Hour}
		tokens["lead-"+lang] = ledger.NewToken{Role: ledger.RoleLead, Project: x.Project, Name: "lead", TTL: time.Hour}
	}
	// The releasers as a watch file configures them: one webhook for every project.
	set, err := release.NewSet(map[string]release.Releaser{"site": release.NewWebhook(release.WebhookConfig{URL: hook.URL, Secret: "s3cret"})},
		[]string{"site"}, nil)
	require.NoError(t, err)
	ds := startDashboard(t, samples, heldAt, heldAt, tokens, func(s *dashSetup) { s.releaser = set })
	shots := artifactDir(t, "dashboard-self")
	for _, lang := range langs {
		x := picks[lang]
		t.Run(lang, func(t *testing.T) {
			var mine api.Page[heldItem]
			ds.apiGet(t, ds.tokens["student-"+lang], "/api/v1/held", &mine)
			var cost string
			for _, m := range mine.Items {
				require.Equal(t, x.User, m.User, "a student's Now holds only their own")
				if m.Instance == x.Instance {
					cost = m.Cost
				}
			}
			require.NotEmpty(t, cost)
			tb := langTab(t, chromium, shots, lang)
			tb.login(ds.base, ds.tokens["student-"+lang])
			row := fmt.Sprintf(`document.querySelector('[data-release=%q]').closest('tr')`, x.Instance)
			require.Contains(t, eval[string](tb, row+`.innerText`), "¥\u00a0"+groupThousands(cost), "the cost so far is the API's")
			tb.screenshot(lang + "-01-now-release")
			eval[bool](tb, `(window.confirm = (m) => { window.asked = m; return true; }, true)`)
			tb.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-release=%q]`, x.Instance))))
			released := map[string]string{"en": "Released " + x.Instance, "zh-CN": "已释放 " + x.Instance}[lang]
			require.Eventually(t, func() bool { return strings.Contains(eval[string](tb, `document.body.innerText`), released) },
				10*time.Second, 100*time.Millisecond, "the page says released")
			require.Contains(t, eval[string](tb, `window.asked`), x.Instance, "the confirmation names the instance")
			mu.Lock()
			n := 0
			for _, r := range asked {
				if r.Target.InstanceID == x.Instance {
					n++
					require.Equal(t, x.User, r.Target.User)
					require.False(t, r.DryRun)
				}
			}
			mu.Unlock()
			require.Equal(t, 1, n, "the release webhook was asked once")
			var rels api.Page[struct {
				InstanceID string `json:"instance_id"`
				Status     string
				Action     string
			}]
			ds.apiGet(t, ds.tokens["student-"+lang], "/api/v1/releases", &rels)
			require.NotEmpty(t, rels.Items)
			require.Equal(t, x.Instance, rels.Items[0].InstanceID)
			require.Equal(t, "done", rels.Items[0].Status)
			require.Contains(t, rels.Items[0].Action, "deleted pod ml/"+x.User)
			tb.screenshot(lang + "-02-released")

			// An exemption asked for from the alert's link, decided by the lead.
			tb.route("#/exemptions?request="+x.Instance, "exemptions")
			require.Equal(t, x.Instance, eval[string](tb, `document.getElementById('req-instance').value`), "prefilled from the link")
			eval[bool](tb, `(document.getElementById('req-until').value = '2026-11-25T12:00', document.getElementById('req-reason').value = 'thesis deadline', true)`)
			tb.do(chromedp.Click(chromedp.CSS("#request")), chromedp.WaitVisible(chromedp.CSS(`#page-exemptions[data-ready="true"] #exemption-requests`)))
			lead := langTab(t, chromium, shots, lang)
			lead.login(ds.base, ds.tokens["lead-"+lang])
			lead.route("#/exemptions", "exemptions")
			var reqs api.Page[struct {
				ID     int64
				User   string
				Status string
				Answer string
			}]
			ds.apiGet(t, ds.tokens["lead-"+lang], "/api/v1/exemption-requests", &reqs)
			require.NotEmpty(t, reqs.Items)
			id := reqs.Items[0].ID
			require.Equal(t, x.User, reqs.Items[0].User)
			want := "granted"
			if lang == "en" {
				lead.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-grant-request="%d"]`, id))))
			} else {
				want = "refused"
				eval[bool](lead, `(window.prompt = () => '本周机时紧张', true)`)
				lead.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-refuse-request="%d"]`, id))))
			}
			require.Eventually(t, func() bool {
				ds.apiGet(t, ds.tokens["lead-"+lang], "/api/v1/exemption-requests", &reqs)
				return reqs.Items[0].Status == want
			}, 10*time.Second, 100*time.Millisecond)
			lead.screenshot(lang + "-03-lead-decided")
			tb.route("#/exemptions?at=1", "exemptions")
			page := eval[string](tb, `document.getElementById('exemption-requests').innerText`)
			require.Contains(t, page, map[string]string{"en": "granted", "zh-CN": "已拒绝"}[lang])
			if lang == "zh-CN" {
				require.Equal(t, "本周机时紧张", reqs.Items[0].Answer)
				require.Contains(t, page, "本周机时紧张", "the student sees the lead's reason")
			} else {
				var ex api.Page[struct {
					User, Reason string
					Active       bool
				}]
				ds.apiGet(t, ds.tokens["student-"+lang], "/api/v1/exemptions", &ex)
				require.NotEmpty(t, ex.Items)
				require.Equal(t, x.User, ex.Items[0].User)
				require.True(t, ex.Items[0].Active, "the granted exemption is in force")
			}
			tb.screenshot(lang + "-04-student-decision")
		})
	}
}
