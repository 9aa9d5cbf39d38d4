//go:build !collector

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/ledger"
)

// periodSummary is GET /api/v1/periods/{p}/summary as the test reads it.
type periodSummary struct {
	Invoices []struct {
		ID                               int64
		Project, Funding, Status, SHA256 string
		Number, Total                    string
	}
	ByFunding []fundingTotal `json:"by_funding"`
	Totals    []fundingTotal
}

type fundingTotal struct {
	Funding, Currency string
	Drafts, Finalized int
	DraftTotal        string `json:"draft_total"`
	FinalTotal        string `json:"finalized_total"`
	Total             string
}

// TestDashboardInvoicesForFinance: in English and Chinese, a month's
// invoice list names each invoice's funding code and the page adds the
// month up by funding source (the summary's numbers, formatted); finance
// finalizes several drafts at once: the selected ones are finalized, one
// finalized meanwhile elsewhere is refused on its own and says why, and
// the summary then counts them as finalized.
func TestDashboardInvoicesForFinance(t *testing.T) {
	chromium := needChromium(t)
	ds := startDashboard(t, exampleSamples, heldAt, afterNovember, map[string]ledger.NewToken{
		"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
	})
	code, body := ds.apiDo(t, ds.tokens["finance"], "POST", "/api/v1/billing-runs", `{"period":"2026-11"}`)
	require.Equal(t, 200, code, string(body))
	summary := func() periodSummary {
		var s periodSummary
		ds.apiGet(t, ds.tokens["finance"], "/api/v1/periods/2026-11/summary", &s)
		return s
	}
	s := summary()
	require.GreaterOrEqual(t, len(s.Invoices), 4)
	require.GreaterOrEqual(t, len(s.ByFunding), 3, "several funding sources")

	shots := artifactDir(t, "dashboard-finance")
	for _, lang := range []string{"en", "zh-CN"} {
		t.Run(lang, func(t *testing.T) {
			s := summary()
			tb := langTab(t, chromium, shots, lang)
			tb.login(ds.base, ds.tokens["finance"])
			tb.route("#/invoices?period=2026-11", "invoices")
			checkFundingTable(t, tb, lang, s)
			list := eval[string](tb, `document.getElementById('invoice-list').innerText`)
			for _, it := range s.Invoices {
				if it.Funding != "" {
					require.Contains(t, list, it.Funding, "the list names invoice %d's funding", it.ID)
				}
			}
			// Select two drafts; one of them is finalized elsewhere before the click.
			var drafts []int64
			for _, it := range s.Invoices {
				if it.Status == "draft" {
					drafts = append(drafts, it.ID)
				}
			}
			require.GreaterOrEqual(t, len(drafts), 2)
			pick, elsewhere := drafts[0], drafts[1]
			tb.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-finalize="%d"]`, pick))),
				chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-finalize="%d"]`, elsewhere))))
			var sha string
			for _, it := range s.Invoices {
				if it.ID == elsewhere {
					sha = it.SHA256
				}
			}
			code, body := ds.apiDo(t, ds.tokens["finance"], "POST", fmt.Sprintf("/api/v1/invoices/%d/finalize", elsewhere), fmt.Sprintf(`{"if_sha256":%q}`, sha))
			require.Equal(t, 200, code, string(body))
			tb.screenshot(lang + "-invoices-funding")
			eval[bool](tb, `(window.confirm = () => true, true)`)
			tb.do(chromedp.Click(chromedp.CSS("#finalize-selected")),
				chromedp.WaitVisible(chromedp.CSS(`#page-invoices[data-ready="true"] #finalize-results li`)))
			results := eval[string](tb, `JSON.stringify(Object.fromEntries([...document.querySelectorAll('#finalize-results li')].map((li) => [li.dataset.id, [li.dataset.result, li.innerText]])))`)
			var got map[string][2]string
			require.NoError(t, json.Unmarshal([]byte(results), &got))
			require.Len(t, got, 2, "%v", got)
			after := summary()
			number := ""
			for _, it := range after.Invoices {
				if it.ID == pick {
					require.Equal(t, "finalized", it.Status)
					number = it.Number
				}
			}
			ok, refused := got[fmt.Sprint(pick)], got[fmt.Sprint(elsewhere)]
			require.Equal(t, "ok", ok[0])
			require.Contains(t, ok[1], number, "the page names the number it got")
			require.Equal(t, "refused", refused[0])
			require.Contains(t, refused[1], map[string]string{"en": "refused", "zh-CN": "被拒绝"}[lang])
			checkFundingTable(t, tb, lang, after)
			require.Equal(t, s.Totals[0].Finalized+2, after.Totals[0].Finalized)
			tb.screenshot(lang + "-invoices-batch-finalized")
		})
	}
}

// checkFundingTable compares the page's table by funding source with the
// summary's numbers, formatted.
func checkFundingTable(t *testing.T, tb *tab, lang string, s periodSummary) {
	t.Helper()
	raw := eval[string](tb, `JSON.stringify([...document.querySelectorAll('#funding-table tbody tr')].map((tr) => [...tr.children].map((c) => c.innerText)))`)
	var rows [][]string
	require.NoError(t, json.Unmarshal([]byte(raw), &rows))
	want := append(append([]fundingTotal{}, s.ByFunding...), s.Totals...)
	require.Len(t, rows, len(want))
	m := func(v string) string { return "¥\u00a0" + groupThousands(v) }
	for i, f := range want {
		name := f.Funding
		switch {
		case i >= len(s.ByFunding):
			name = map[string]string{"en": "Period total", "zh-CN": "本期合计"}[lang]
		case name == "":
			name = map[string]string{"en": "(no funding code)", "zh-CN": "（无经费代码）"}[lang]
		}
		require.Equal(t, []string{name, fmt.Sprintf("%d · %s", f.Drafts, m(f.DraftTotal)), fmt.Sprintf("%d · %s", f.Finalized, m(f.FinalTotal)), m(f.Total)},
			rows[i], "row %d", i)
	}
	require.False(t, strings.Contains(raw, "NaN") || strings.Contains(raw, "undefined"))
}

// TestDashboardLeadSignOff: with the lead's sign-off required, in English
// and Chinese, finance is not offered Finalize for a draft its lead has not
// approved (the page says it awaits the approval); the lead approves it
// with one click and a confirmation; the page then names who approved it
// and when, and finance finalizes it.
func TestDashboardLeadSignOff(t *testing.T) {
	chromium := needChromium(t)
	ds := startDashboard(t, exampleSamples, heldAt, afterNovember, map[string]ledger.NewToken{
		"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
		"lead":    {Role: ledger.RoleLead, Project: "nlp-lab", Name: "nlp lead", TTL: time.Hour},
		"cvlead":  {Role: ledger.RoleLead, Project: "cv-lab", Name: "cv lead", TTL: time.Hour},
		"admin":   {Role: ledger.RoleAdmin, Name: "browser test", TTL: time.Hour},
	}, func(s *dashSetup) { s.leadApproval = true })
	code, body := ds.apiDo(t, ds.tokens["finance"], "POST", "/api/v1/billing-runs", `{"period":"2026-11"}`)
	require.Equal(t, 200, code, string(body))
	var sum periodSummary
	ds.apiGet(t, ds.tokens["finance"], "/api/v1/periods/2026-11/summary", &sum)
	ids := map[string]int64{}
	sha := map[string]string{}
	for _, it := range sum.Invoices {
		ids[it.Project], sha[it.Project] = it.ID, it.SHA256
	}
	// Finalizing before the approval is refused by the API too.
	code, body = ds.apiDo(t, ds.tokens["finance"], "POST", fmt.Sprintf("/api/v1/invoices/%d/finalize", ids["nlp-lab"]), fmt.Sprintf(`{"if_sha256":%q}`, sha["nlp-lab"]))
	require.Equal(t, 409, code, string(body))
	require.Contains(t, string(body), "awaits the approval of its project's lead")
	// A lead approves only its own project's draft.
	code, _ = ds.apiDo(t, ds.tokens["lead"], "POST", fmt.Sprintf("/api/v1/invoices/%d/approve", ids["cv-lab"]), fmt.Sprintf(`{"if_sha256":%q}`, sha["cv-lab"]))
	require.Equal(t, 403, code)

	shots := artifactDir(t, "dashboard-signoff")
	for lang, project := range map[string]string{"en": "nlp-lab", "zh-CN": "cv-lab"} {
		t.Run(lang, func(t *testing.T) {
			lead := map[string]string{"nlp-lab": "lead", "cv-lab": "cvlead"}[project]
			page := fmt.Sprintf("#/invoices/%d", ids[project])
			fin := langTab(t, chromium, shots, lang)
			fin.login(ds.base, ds.tokens["finance"])
			fin.route(page, "invoices")
			require.Zero(t, eval[int](fin, `document.querySelectorAll('#finalize').length`), "no Finalize before the approval")
			awaiting := map[string]string{"en": "awaiting the lead's approval", "zh-CN": "等待负责人审核"}[lang]
			require.Contains(t, eval[string](fin, `document.getElementById('finalize-wait-approval').innerText`), awaiting)

			ld := langTab(t, chromium, shots, lang)
			ld.login(ds.base, ds.tokens[lead])
			ld.route(page, "invoices")
			eval[bool](ld, `(window.confirm = () => true, true)`)
			ld.do(chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(`#page-invoices[data-ready="true"] #invoice-approval`)))
			require.Eventually(t, func() bool {
				txt := eval[string](ld, `document.getElementById('invoice-approval')?.innerText ?? ''`)
				return txt != "" && !strings.Contains(txt, awaiting)
			}, 10*time.Second, 100*time.Millisecond, "the page says the draft is approved")
			require.Zero(t, eval[int](ld, `document.querySelectorAll('#approve').length`), "approved: no second Approve")
			ld.screenshot(lang + "-signoff-approved")

			var inv struct {
				ApprovedBy string    `json:"approved_by"`
				ApprovedAt time.Time `json:"approved_at"`
			}
			ds.apiGet(t, ds.tokens["finance"], fmt.Sprintf("/api/v1/invoices/%d", ids[project]), &inv)
			require.NotEmpty(t, inv.ApprovedBy)
			require.Contains(t, eval[string](ld, `document.getElementById('invoice-approval').innerText`),
				inv.ApprovedAt.In(shanghai).Format("2006-01-02 15:04")+" · "+inv.ApprovedBy)

			fin.route(page+"?r=1", "invoices")
			fin.do(chromedp.WaitVisible(chromedp.CSS("#finalize")))
			eval[bool](fin, `(window.confirm = () => true, true)`)
			fin.do(chromedp.Click(chromedp.CSS("#finalize")))
			require.Eventually(t, func() bool {
				var got struct{ Status string }
				ds.apiGet(t, ds.tokens["finance"], fmt.Sprintf("/api/v1/invoices/%d", ids[project]), &got)
				return got.Status == "finalized"
			}, 10*time.Second, 100*time.Millisecond)
			fin.screenshot(lang + "-signoff-finalized")
		})
	}
	entries := 0
	var audit struct {
		Items []struct{ Action, Object string }
	}
	ds.apiGet(t, ds.tokens["admin"], "/api/v1/audit?action=invoice.approve", &audit)
	for _, e := range audit.Items {
		if e.Action == "invoice.approve" {
			entries++
		}
	}
	require.Equal(t, 2, entries, "each approval audited once")
}
