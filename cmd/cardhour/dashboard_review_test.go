//go:build !collector

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// reviewDoc is GET /api/v1/review as the test reads it.
type reviewDoc struct {
	Period                string
	Currency              string
	Projects              []reviewRow
	Total                 reviewRow
	SavingsAssumption     string `json:"savings_assumption"`
	SavingsHorizonSeconds int64  `json:"savings_horizon_seconds"`
}

type reviewRow struct {
	Project, Funding, Efficiency string
	Invoiced                     *string
	Drafts                       int
	ListCost                     string `json:"list_cost"`
	IdleCost                     string `json:"idle_cost"`
	HeldSeconds                  int64  `json:"held_seconds"`
	IdleSeconds                  int64  `json:"idle_seconds"`
	AdviceSaving                 string `json:"advice_saving"`
	SavedSeconds                 int64  `json:"saved_seconds"`
	SavedCost                    string `json:"saved_cost"`
	Budgets                      []struct {
		ID                int64
		Unit, Limit, Used string
		Percent           int64
		Reached           bool
	}
}

// TestDashboardMonthlyReview: the review of November (the last closed month
// on 5 December) in English and Chinese: per project the invoiced total, list
// price, idle cost, card-hours, idle hours, efficiency, budgets at the
// month's end, what releases saved (with the assumption) and the advised
// saving are the API's numbers, formatted; a lead sees its own project only;
// the XLSX export a lead forwards holds the same numbers, and the PDF button
// downloads the review as a PDF in the page's language.
func TestDashboardMonthlyReview(t *testing.T) {
	chromium := needChromium(t)
	ds := startDashboard(t, exampleSamples, heldAt, afterNovember, map[string]ledger.NewToken{
		"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
		"lead":    {Role: ledger.RoleLead, Project: "cv-lab", Name: "cv lead", TTL: time.Hour},
	})
	code, body := ds.apiDo(t, ds.tokens["finance"], "POST", "/api/v1/billing-runs", `{"period":"2026-11"}`)
	require.Equal(t, 200, code, string(body))
	for _, b := range []string{
		`{"scope":"project","project":"cv-lab","period":"month","unit":"money","limit":"800"}`,
		`{"scope":"project","project":"nlp-lab","period":"month","unit":"card_hours","limit":"20"}`,
	} {
		code, body := ds.apiDo(t, ds.tokens["finance"], "PUT", "/api/v1/budgets", b)
		require.Equal(t, 200, code, string(body))
	}
	releaseAt(t, ds, releasedSlice, time.Date(2026, 11, 18, 15, 0, 0, 0, shanghai))
	var r reviewDoc
	ds.apiGet(t, ds.tokens["finance"], "/api/v1/review", &r)
	require.Equal(t, int64(5370), r.Total.SavedSeconds, "the release of ai101's slice saved 15:00 to 16:29:30")
	require.Equal(t, "2.69", r.Total.SavedCost)
	require.Equal(t, int64(30*24*3600), r.SavingsHorizonSeconds)
	require.Equal(t, "2026-11", r.Period, "the last closed month")
	require.GreaterOrEqual(t, len(r.Projects), 3)
	budgets := 0
	for _, x := range r.Projects {
		budgets += len(x.Budgets)
	}
	require.Equal(t, 2, budgets)

	// A month without usage or invoices: no project, an empty list, a zero total.
	code, body = ds.apiDo(t, ds.tokens["finance"], "GET", "/api/v1/review?period=2026-01", "")
	require.Equal(t, 200, code, string(body))
	var empty map[string]any
	require.NoError(t, json.Unmarshal(body, &empty))
	require.Equal(t, []any{}, empty["projects"])
	require.Equal(t, "0.00", empty["total"].(map[string]any)["list_cost"])

	shots := artifactDir(t, "dashboard-review")
	for _, lang := range []string{"en", "zh-CN"} {
		t.Run(lang, func(t *testing.T) {
			tb := langTab(t, chromium, shots, lang)
			tb.login(ds.base, ds.tokens["finance"])
			tb.route("#/review", "review")
			raw := eval[string](tb, `JSON.stringify([...document.querySelectorAll('#review-table tbody tr')].map((tr) => [...tr.children].map((c) => c.innerText)))`)
			var rows [][]string
			require.NoError(t, json.Unmarshal([]byte(raw), &rows))
			all := append(append([]reviewRow{}, r.Projects...), r.Total)
			require.Len(t, rows, len(all))
			m := func(v string) string { return "¥\u00a0" + groupThousands(v) }
			for i, x := range all {
				row := rows[i]
				if x.Project != "" {
					require.True(t, strings.HasPrefix(row[0], x.Project), "row %d: %q", i, row[0])
				}
				if x.Invoiced != nil {
					require.True(t, strings.HasPrefix(row[2], m(*x.Invoiced)), "invoiced %q vs %s", row[2], *x.Invoiced)
				}
				require.Equal(t, m(x.ListCost), row[3])
				require.Equal(t, m(x.IdleCost), row[4])
				require.Equal(t, groupThousands(billing.FormatHours(x.HeldSeconds)), row[5])
				require.Equal(t, groupThousands(billing.FormatHours(x.IdleSeconds)), row[6])
				if x.Efficiency != "" {
					require.Equal(t, x.Efficiency+" %", row[7])
				}
				saved := strings.Split(row[8], "\n")
				require.Equal(t, m(x.SavedCost), saved[0], "saved by releases, row %d", i)
				require.Contains(t, row[8], groupThousands(billing.FormatHours(x.SavedSeconds)))
				for _, b := range x.Budgets {
					used := map[string]string{"money": m(b.Used), "card_hours": b.Used}[b.Unit]
					require.Contains(t, row[9], used, "budget %d", b.ID)
					require.Contains(t, row[9], fmt.Sprint(b.Percent))
				}
				require.Equal(t, m(x.AdviceSaving), row[10])
			}
			head := eval[string](tb, `document.querySelector('#review-table thead').innerText`)
			require.Contains(t, head, map[string]string{"en": "Saved by releases", "zh-CN": "释放节省"}[lang])
			savings := eval[string](tb, `document.getElementById('review-savings').innerText`)
			require.Contains(t, savings, m(r.Total.SavedCost))
			require.Contains(t, savings, groupThousands(billing.FormatHours(r.Total.SavedSeconds)))
			require.Contains(t, savings, "30", "the horizon in days")
			tb.screenshot(lang + "-review")

			// The PDF button: the review as a PDF, in the page's language.
			tb.do(chromedp.Click(chromedp.CSS("#review-export-pdf")))
			name, path := tb.download()
			require.Equal(t, "review-2026-11.pdf", name)
			pdf, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(pdf, []byte("%PDF-")), "a PDF")
			require.NoError(t, os.WriteFile(filepath.Join(shots, lang+"-review.pdf"), pdf, 0o644))
			if _, err := exec.LookPath("pdftotext"); err == nil {
				out, err := exec.Command("pdftotext", "-layout", "-enc", "UTF-8", path, "-").Output()
				require.NoError(t, err)
				require.Contains(t, string(out), map[string]string{"en": "Monthly review 2026-11", "zh-CN": "2026-11 月度复盘"}[lang])
				require.Contains(t, string(out), r.Total.SavedCost)
			}

			// The export a lead forwards: the same numbers, its project only.
			lead := langTab(t, chromium, shots, lang)
			lead.login(ds.base, ds.tokens["lead"])
			lead.route("#/review", "review")
			require.Equal(t, 2, eval[int](lead, `document.querySelectorAll('#review-table tbody tr').length`), "cv-lab and the total")
			code, body := ds.apiDo(t, ds.tokens["lead"], "GET", "/api/v1/review/export?format=xlsx&lang="+lang, "")
			require.Equal(t, 200, code, string(body))
			f, err := excelize.OpenReader(strings.NewReader(string(body)))
			require.NoError(t, err)
			sheet := map[string]string{"en": "Review", "zh-CN": "月度复盘"}[lang]
			cells, err := f.GetRows(sheet)
			require.NoError(t, err)
			require.Len(t, cells, 3, "header, cv-lab, total")
			var cv reviewRow
			for _, x := range r.Projects {
				if x.Project == "cv-lab" {
					cv = x
				}
			}
			require.Equal(t, "cv-lab", cells[1][0])
			require.Equal(t, *cv.Invoiced, cells[1][3])
			require.Equal(t, cv.ListCost, cells[1][4])
			require.Equal(t, cv.IdleCost, cells[1][5])
			require.Equal(t, cv.Efficiency, cells[1][8])
			require.Equal(t, billing.FormatHours(cv.SavedSeconds), cells[1][9])
			require.Equal(t, cv.SavedCost, cells[1][10])
			require.Equal(t, map[string]string{"en": "Saved by releases (CNY)", "zh-CN": "释放节省（CNY）"}[lang], cells[0][10])
			require.Contains(t, cells[1][11], cv.Budgets[0].Used+" / "+cv.Budgets[0].Limit)
			lead.screenshot(lang + "-review-lead")
		})
	}
}
