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
