//go:build !collector

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/ingest/storedsn"
	"github.com/cardhour/cardhour/internal/catalogs"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/watch"
)

// TestDashboardBudgetStatus: the watcher measures the budgets (one cycle
// on the example November), the API projects them, and the budgets page
// shows, in English and Chinese, each budget's used of its limit with the
// percent, what is left (or how far over), the forecast to the period's
// end and when the limit is reached: the API's numbers, formatted. A
// student sees their own budget and its state.
func TestDashboardBudgetStatus(t *testing.T) {
	chromium := needChromium(t)
	ds := startDashboard(t, exampleSamples, heldAt, heldAt, map[string]ledger.NewToken{
		"finance": {Role: ledger.RoleFinance, Name: "browser test", TTL: time.Hour},
		"student": {Role: ledger.RoleStudent, Project: "nlp-lab", User: "2023110042", TTL: time.Hour},
	})
	for _, b := range []string{
		`{"scope":"project","project":"nlp-lab","period":"month","unit":"money","limit":"5.00"}`, // over
		`{"scope":"project","project":"cv-lab","period":"month","unit":"money","limit":"1000"}`,  // reached before the month ends
		`{"scope":"student","project":"nlp-lab","user":"2023110042","period":"month","unit":"card_hours","limit":"9"}`,
		`{"scope":"project","project":"thesis-h100","period":"term","unit":"money","limit":"5"}`, // no term in the catalog: not measured
	} {
		code, body := ds.apiDo(t, ds.tokens["finance"], "PUT", "/api/v1/budgets", b)
		require.Equal(t, 200, code, string(body))
	}
	measureBudgets(t, ds, heldAt)

	type status struct {
		Used, Left, Forecast, Period string
		Percent                      int64
		Reached                      bool
		AsOf                         time.Time `json:"as_of"`
		ReachesAt                    time.Time `json:"reaches_limit_at"`
	}
	type budget struct {
		ID                          int64
		Scope, Project, Unit, Limit string
		Status                      *status
	}
	var all api.Page[budget]
	ds.apiGet(t, ds.tokens["finance"], "/api/v1/budgets", &all)
	require.Len(t, all.Items, 4)
	cases := map[string]bool{}
	for _, b := range all.Items {
		if b.Status != nil {
			require.Equal(t, "2026-11", b.Status.Period)
			require.True(t, b.Status.AsOf.Equal(heldAt), "measured at the cycle: %v", b.Status.AsOf)
		}
		switch {
		case b.Status == nil:
			cases["unmeasured"] = true
		case b.Status.Reached:
			cases["reached"] = true
		case !b.Status.ReachesAt.IsZero():
			cases["reaches"] = true
		default:
			cases["within"] = true
		}
	}
	require.Len(t, cases, 4, "each state of a budget is shown: %v", cases)

	shots := artifactDir(t, "dashboard-budgets")
	for _, lang := range []string{"en", "zh-CN"} {
		t.Run(lang, func(t *testing.T) {
			tb := langTab(t, chromium, shots, lang)
			tb.login(ds.base, ds.tokens["finance"])
			tb.route("#/budgets", "budgets")
			rows := budgetRows(t, tb)
			require.Len(t, rows, 4)
			for _, b := range all.Items {
				row := rows[fmt.Sprint(b.ID)]
				require.NotEmpty(t, row, "budget %d shown", b.ID)
				if b.Status == nil {
					require.Equal(t, map[string]string{"en": "not measured in this period yet", "zh-CN": "本周期尚未统计"}[lang], row["used"])
					continue
				}
				want := expectBudget(lang, b.Unit, b.Limit, b.Status.Used, b.Status.Left, b.Status.Forecast, b.Status.Percent, b.Status.Reached, b.Status.ReachesAt)
				require.Equal(t, want["used"], row["used"], "budget %d (%s)", b.ID, b.Project)
				require.Equal(t, want["left"], row["left"], "budget %d", b.ID)
				require.Equal(t, want["forecast"], row["forecast"], "budget %d", b.ID)
				require.Equal(t, want["reach"], row["reach"], "budget %d", b.ID)
			}
			tb.screenshot(lang + "-budgets-status")

			st := langTab(t, chromium, shots, lang)
			st.login(ds.base, ds.tokens["student"])
			st.route("#/budgets", "budgets")
			mine := budgetRows(t, st)
			require.Len(t, mine, 1, "the student's own budget only")
			var own api.Page[budget]
			ds.apiGet(t, ds.tokens["student"], "/api/v1/budgets", &own)
			require.Len(t, own.Items, 1)
			b := own.Items[0]
			require.NotNil(t, b.Status)
			want := expectBudget(lang, b.Unit, b.Limit, b.Status.Used, b.Status.Left, b.Status.Forecast, b.Status.Percent, b.Status.Reached, b.Status.ReachesAt)
			require.Equal(t, want["used"], mine[fmt.Sprint(b.ID)]["used"])
			require.Equal(t, want["forecast"], mine[fmt.Sprint(b.ID)]["forecast"])
			st.screenshot(lang + "-budgets-student")
		})
	}
}

// measureBudgets runs one watcher cycle over the dashboard's stores at now:
// what `cardhour serve` does every cycle.
func measureBudgets(tb testing.TB, ds *dashServer, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	st, err := storedsn.Open(ctx, ds.store, storedsn.Options{Logger: slog.New(slog.DiscardHandler), Mode: storedsn.Read})
	require.NoError(tb, err)
	defer st.Close() //nolint:errcheck // read only
	w, err := watch.New(watch.Config{Ledger: ds.led, Usage: st, Catalog: catalogs.New(ds.led).Current})
	require.NoError(tb, err)
	rep, err := w.Cycle(ctx, now)
	require.NoError(tb, err)
	require.Equal(tb, 4, rep.Budgets)
}

// budgetRows reads the budgets table: by budget ID, the text of the used,
// left, forecast and limit-reached cells.
func budgetRows(t *testing.T, tb *tab) map[string]map[string]string {
	t.Helper()
	raw := eval[string](tb, `JSON.stringify([...document.querySelectorAll('#budgets [data-budget]')].map((el) => {
  const tr = el.closest('tr'), cells = [...tr.children], i = cells.indexOf(el.closest('td'));
  const fc = cells[i + 2];
  return { id: el.dataset.budget, used: el.firstChild.innerText ?? el.innerText, left: cells[i + 1].innerText,
    forecast: fc.querySelector('div > div')?.innerText ?? fc.innerText, reach: fc.querySelector('[data-reach]')?.innerText ?? '' };
}))`)
	var rows []map[string]string
	require.NoError(t, json.Unmarshal([]byte(raw), &rows))
	out := map[string]map[string]string{}
	for _, r := range rows {
		out[r["id"]] = r
	}
	return out
}

// expectBudget is what the page should show for the API's numbers.
func expectBudget(lang, unit, limit, used, left, forecast string, percent int64, reached bool, reachesAt time.Time) map[string]string {
	amount := func(v string) string {
		if unit == "money" {
			neg := strings.HasPrefix(v, "-")
			s := "¥\u00a0" + groupThousands(strings.TrimPrefix(v, "-"))
			if neg {
				s = "-" + s
			}
			return s
		}
		if lang == "zh-CN" {
			return v + " 卡时"
		}
		return v + " card-hours"
	}
	out := map[string]string{"forecast": amount(forecast)}
	if lang == "zh-CN" {
		out["used"] = fmt.Sprintf("已用 %s / 上限 %s · %d%%", amount(used), amount(limit), percent)
	} else {
		out["used"] = fmt.Sprintf("%s of %s · %d %%", amount(used), amount(limit), percent)
	}
	over := strings.HasPrefix(left, "-")
	switch {
	case over && lang == "zh-CN":
		out["left"] = "超出 " + amount(strings.TrimPrefix(left, "-"))
	case over:
		out["left"] = "over by " + amount(strings.TrimPrefix(left, "-"))
	default:
		out["left"] = amount(left)
	}
	at := reachesAt.In(shanghai).Format("2006-01-02 15:04")
	switch {
	case reached:
		out["reach"] = map[string]string{"en": "limit reached", "zh-CN": "已达上限"}[lang]
	case !reachesAt.IsZero():
		out["reach"] = map[string]string{"en": "limit reached on " + at, "zh-CN": "预计 " + at + " 达到上限"}[lang]
	default:
		out["reach"] = map[string]string{"en": "stays within the limit", "zh-CN": "预计不超上限"}[lang]
	}
	return out
}
