package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// items reads a list answer's items and next cursor.
func items(t *testing.T, r response) ([]map[string]any, string) {
	t.Helper()
	require.Equal(t, 200, r.Status, string(r.Body))
	m := r.json(t)
	var out []map[string]any
	for _, it := range m["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out, m["next_cursor"].(string)
}

func field(rows []map[string]any, name string) []any {
	var out []any
	for _, r := range rows {
		out = append(out, r[name])
	}
	return out
}

func problemType(t *testing.T, r response) string {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), string(r.Body))
	return r.json(t)["type"].(string)
}

func TestAlertsAreScopedByRole(t *testing.T) {
	f := newFixture(t)
	all, _ := items(t, f.do("finance", "GET", "/api/v1/alerts", "", ""))
	require.ElementsMatch(t, []any{"s-alice", "s-bob", "s-carol"}, field(all, "user"))
	lead, _ := items(t, f.do("lead", "GET", "/api/v1/alerts", "", ""))
	require.ElementsMatch(t, []any{"s-alice", "s-bob"}, field(lead, "user"))
	own, _ := items(t, f.do("student", "GET", "/api/v1/alerts", "", ""))
	require.Equal(t, []any{"s-alice"}, field(own, "user"))
	require.Equal(t, "open", own[0]["status"])
	require.Equal(t, "MIG-1", own[0]["facts"].(map[string]any)["instance"])

	// Another student or project is 403, never an empty list.
	r := f.do("student", "GET", "/api/v1/alerts?user=s-bob", "", "")
	require.Equal(t, 403, r.Status)
	require.Equal(t, "https://cardhour.dev/problems/forbidden", problemType(t, r))
	require.Equal(t, 403, f.do("lead", "GET", "/api/v1/alerts?project=nlp-lab", "", "").Status)

	// Filters: project, user, kind, since, and pages of one.
	byProject, _ := items(t, f.do("admin", "GET", "/api/v1/alerts?project=nlp-lab", "", ""))
	require.Equal(t, []any{"s-carol"}, field(byProject, "user"))
	byUser, _ := items(t, f.do("admin", "GET", "/api/v1/alerts?user=s-bob&kind=idle_warning", "", ""))
	require.Equal(t, []any{"s-bob"}, field(byUser, "user"))
	none, _ := items(t, f.do("admin", "GET", "/api/v1/alerts?kind=budget_threshold", "", ""))
	require.Empty(t, none)
	later, _ := items(t, f.do("admin", "GET", "/api/v1/alerts?since=2026-12-11T00:00:00Z", "", ""))
	require.Empty(t, later)
	first, next := items(t, f.do("admin", "GET", "/api/v1/alerts?limit=2", "", ""))
	require.Len(t, first, 2)
	require.NotEmpty(t, next)
	rest, last := items(t, f.do("admin", "GET", "/api/v1/alerts?limit=2&cursor="+next, "", ""))
	require.Len(t, rest, 1)
	require.Empty(t, last)
	require.Equal(t, "https://cardhour.dev/problems/bad-cursor", problemType(t, f.do("admin", "GET", "/api/v1/alerts?cursor=nonsense", "", "")))
	require.Equal(t, 422, f.do("admin", "GET", "/api/v1/alerts?kind=shout", "", "").Status)
}

func TestAcknowledgingAnAlert(t *testing.T) {
	f := newFixture(t)
	bob := f.ids["alert-bob"]
	// A student may not acknowledge another student's alert, a lead not
	// another project's.
	require.Equal(t, 403, f.do("student", "POST", fmt.Sprintf("/api/v1/alerts/%d/ack", bob), "", "").Status)
	require.Equal(t, 403, f.do("lead", "POST", fmt.Sprintf("/api/v1/alerts/%d/ack", f.ids["alert-carol"]), "", "").Status)
	require.Equal(t, 404, f.do("admin", "POST", "/api/v1/alerts/999/ack", "", "").Status)

	r := f.do("lead", "POST", fmt.Sprintf("/api/v1/alerts/%d/ack", bob), "", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	a := r.json(t)
	require.Equal(t, "acked", a["status"])
	require.Regexp(t, `^token:\d+$`, a["acked_by"])
	require.NotEmpty(t, a["acked_at"])

	again := f.do("admin", "POST", fmt.Sprintf("/api/v1/alerts/%d/ack", bob), "", "")
	require.Equal(t, 409, again.Status)
	require.Equal(t, "https://cardhour.dev/problems/invalid-transition", problemType(t, again))

	acked, _ := items(t, f.do("finance", "GET", "/api/v1/alerts?status=acked", "", ""))
	require.Equal(t, []any{"s-bob"}, field(acked, "user"))
	open, _ := items(t, f.do("finance", "GET", "/api/v1/alerts?status=open", "", ""))
	require.ElementsMatch(t, []any{"s-alice", "s-carol"}, field(open, "user"))

	audit, _ := items(t, f.do("admin", "GET", fmt.Sprintf("/api/v1/audit?object=alert/%d", bob), "", ""))
	require.Contains(t, field(audit, "action"), "alert.ack")
}

func TestDeliveriesShowFailures(t *testing.T) {
	f := newFixture(t)
	alice := f.ids["alert-alice"]
	ds, _ := items(t, f.do("lead", "GET", fmt.Sprintf("/api/v1/alerts/%d/deliveries", alice), "", ""))
	require.Len(t, ds, 2)
	failed, _ := items(t, f.do("finance", "GET", fmt.Sprintf("/api/v1/alerts/%d/deliveries?status=failed", alice), "", ""))
	require.Len(t, failed, 1)
	require.Equal(t, "email", failed[0]["channel"])
	require.Equal(t, "s-alice@example.edu", failed[0]["recipient"])
	require.Equal(t, "550 mailbox unavailable", failed[0]["last_error"])
	require.EqualValues(t, 1, failed[0]["attempts"])
	require.NotContains(t, failed[0], "next_attempt_at")
	pending, _ := items(t, f.do("finance", "GET", fmt.Sprintf("/api/v1/alerts/%d/deliveries?status=pending", alice), "", ""))
	require.Equal(t, []any{"webhook"}, field(pending, "channel"))
	require.Contains(t, pending[0], "next_attempt_at")

	require.Equal(t, 403, f.do("lead", "GET", fmt.Sprintf("/api/v1/alerts/%d/deliveries", f.ids["alert-carol"]), "", "").Status)
	require.Equal(t, 403, f.do("student", "GET", fmt.Sprintf("/api/v1/alerts/%d/deliveries", alice), "", "").Status)
	require.Equal(t, 404, f.do("admin", "GET", "/api/v1/alerts/999/deliveries", "", "").Status)
}

// A delivery failed for good is re-sent by an admin: pending again, due
// now; the backlog (API and /healthz) counts it; re-sending it again is 409.
func TestResendAFailedDelivery(t *testing.T) {
	f := newFixture(t)
	failed, _ := items(t, f.do("admin", "GET", "/api/v1/deliveries?status=failed", "", ""))
	require.Len(t, failed, 1)
	var backlog map[string]any
	r := f.do("admin", "GET", "/api/v1/deliveries/backlog", "", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.NoError(t, json.Unmarshal(r.Body, &backlog))
	require.Equal(t, 1.0, backlog["failed"])
	pending := backlog["pending"].(float64)
	id := int64(failed[0]["id"].(float64))
	require.Equal(t, 403, f.do("finance", "POST", fmt.Sprintf("/api/v1/deliveries/%d/resend", id), "", "").Status)
	r = f.do("admin", "POST", fmt.Sprintf("/api/v1/deliveries/%d/resend", id), "", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	var d map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &d))
	require.Equal(t, "pending", d["status"])
	require.Contains(t, d, "next_attempt_at")
	r = f.do("admin", "POST", fmt.Sprintf("/api/v1/deliveries/%d/resend", id), "", "")
	require.Equal(t, 409, r.Status, string(r.Body))
	r = f.do("admin", "GET", "/healthz", "", "")
	require.Equal(t, 200, r.Status)
	require.Contains(t, string(r.Body), fmt.Sprintf(`"deliveries":{"failed":0,"pending":%d}`, int(pending)+1))
}

func TestReleasesAreScopedByRole(t *testing.T) {
	f := newFixture(t)
	rs, _ := items(t, f.do("lead", "GET", "/api/v1/releases", "", ""))
	require.Len(t, rs, 1)
	require.Equal(t, "done", rs[0]["status"])
	require.Equal(t, "deleted pod ml/nb-0", rs[0]["action"])
	require.Equal(t, "MIG-2", rs[0]["instance_id"])
	require.EqualValues(t, 12, rs[0]["evidence"].(map[string]any)["idle_samples"])
	// s-alice had none released; asking for s-bob's is 403.
	own, _ := items(t, f.do("student", "GET", "/api/v1/releases", "", ""))
	require.Empty(t, own)
	require.Equal(t, 403, f.do("student", "GET", "/api/v1/releases?user=s-bob", "", "").Status)
	none, _ := items(t, f.do("finance", "GET", "/api/v1/releases?status=failed", "", ""))
	require.Empty(t, none)
	nlp, _ := items(t, f.do("admin", "GET", "/api/v1/releases?project=nlp-lab", "", ""))
	require.Empty(t, nlp)
}

func TestExemptions(t *testing.T) {
	f := newFixture(t)
	// A student sees the exemptions that apply to it (its own and its
	// project's), not another project's.
	own, _ := items(t, f.do("student", "GET", "/api/v1/exemptions", "", ""))
	require.Equal(t, []any{"s-alice"}, field(own, "user"))
	require.Equal(t, true, own[0]["active"])
	all, _ := items(t, f.do("finance", "GET", "/api/v1/exemptions?active=true", "", ""))
	require.ElementsMatch(t, []any{"ai101", "nlp-lab"}, field(all, "project"))

	// A lead grants for its project only, defaulting to it.
	r := f.do("lead", "POST", "/api/v1/exemptions", `{"user":"s-bob","instance_id":"MIG-2","until":"2026-12-11T18:00:00+08:00","reason":"thesis run until Friday"}`, "application/json")
	require.Equal(t, 201, r.Status, string(r.Body))
	e := r.json(t)
	require.Equal(t, "ai101", e["project"])
	require.Equal(t, "MIG-2", e["instance_id"])
	require.Regexp(t, `^token:\d+$`, e["granted_by"])
	require.Equal(t, 403, f.do("lead", "POST", "/api/v1/exemptions", `{"project":"nlp-lab","until":"2026-12-11T00:00:00Z","reason":"x"}`, "application/json").Status)

	// Bad input: a time not in the future, an unknown project, no project.
	past := f.do("admin", "POST", "/api/v1/exemptions", `{"project":"ai101","until":"2026-12-01T00:00:00Z","reason":"late"}`, "application/json")
	require.Equal(t, 422, past.Status)
	require.Contains(t, string(past.Body), "want a time after now")
	require.Equal(t, 422, f.do("admin", "POST", "/api/v1/exemptions", `{"project":"nope","until":"2026-12-11T00:00:00Z","reason":"x"}`, "application/json").Status)
	require.Equal(t, 422, f.do("finance", "POST", "/api/v1/exemptions", `{"until":"2026-12-11T00:00:00Z","reason":"x"}`, "application/json").Status)

	// Revoking: another project's is 403 for a lead; twice is 409.
	require.Equal(t, 403, f.do("lead", "DELETE", fmt.Sprintf("/api/v1/exemptions/%d", f.ids["exemption-nlp"]), "", "").Status)
	r = f.do("lead", "DELETE", fmt.Sprintf("/api/v1/exemptions/%d", f.ids["exemption-alice"]), "", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, false, r.json(t)["active"])
	again := f.do("lead", "DELETE", fmt.Sprintf("/api/v1/exemptions/%d", f.ids["exemption-alice"]), "", "")
	require.Equal(t, "https://cardhour.dev/problems/invalid-transition", problemType(t, again))
	require.Equal(t, 404, f.do("admin", "DELETE", "/api/v1/exemptions/999", "", "").Status)
	active, _ := items(t, f.do("lead", "GET", "/api/v1/exemptions?active=true", "", ""))
	require.Equal(t, []any{"s-bob"}, field(active, "user"))
}

func TestBudgets(t *testing.T) {
	f := newFixture(t)
	lead, _ := items(t, f.do("lead", "GET", "/api/v1/budgets", "", ""))
	require.Len(t, lead, 2)
	mine, _ := items(t, f.do("student", "GET", "/api/v1/budgets", "", ""))
	require.Empty(t, mine, "s-alice has no budget of her own")
	require.Equal(t, 403, f.do("student", "GET", "/api/v1/budgets?user=s-bob", "", "").Status)

	// A lead shares out the project's ceiling: student budgets of its
	// project, never the project budget, never another project.
	r := f.do("lead", "PUT", "/api/v1/budgets", `{"scope":"student","user":"s-alice","period":"term","unit":"card_hours","limit":"80","thresholds":[100,80],"action":"release"}`, "application/json")
	require.Equal(t, 200, r.Status, string(r.Body))
	b := r.json(t)
	require.Equal(t, "ai101", b["project"])
	require.Equal(t, []any{80.0, 100.0}, b["thresholds"])
	require.Equal(t, "release", b["action"])
	mine, _ = items(t, f.do("student", "GET", "/api/v1/budgets", "", ""))
	require.Equal(t, []any{"80"}, field(mine, "limit"))
	require.Equal(t, 403, f.do("lead", "PUT", "/api/v1/budgets", `{"scope":"project","period":"month","unit":"money","limit":"900"}`, "application/json").Status)
	require.Equal(t, 403, f.do("lead", "PUT", "/api/v1/budgets", `{"scope":"student","project":"nlp-lab","user":"s-carol","period":"month","unit":"money","limit":"9"}`, "application/json").Status)
	require.Equal(t, 403, f.do("lead", "DELETE", fmt.Sprintf("/api/v1/budgets/%d", f.ids["budget-ai101"]), "", "").Status)

	// Finance replaces the project budget in place (same id), defaults
	// filled.
	r = f.do("finance", "PUT", "/api/v1/budgets", `{"scope":"project","project":"ai101","period":"month","unit":"money","limit":"750.00"}`, "application/json")
	require.Equal(t, 200, r.Status, string(r.Body))
	b = r.json(t)
	require.EqualValues(t, f.ids["budget-ai101"], b["id"])
	require.Equal(t, "750.00", b["limit"], "a money limit has the currency's minor digits")
	require.Equal(t, []any{50.0, 80.0, 100.0}, b["thresholds"])
	require.Equal(t, "warn", b["action"])

	// Every problem of a budget is named.
	bad := f.do("finance", "PUT", "/api/v1/budgets", `{"scope":"student","project":"ai101","period":"month","unit":"money","limit":"0","thresholds":[80,80]}`, "application/json")
	require.Equal(t, 422, bad.Status)
	require.Contains(t, string(bad.Body), "scope student needs a user")
	require.Contains(t, string(bad.Body), "want more than 0")
	require.Contains(t, string(bad.Body), "given twice")
	require.Equal(t, 422, f.do("finance", "PUT", "/api/v1/budgets", `{"scope":"project","project":"ai101","period":"month","unit":"money","limit":"1e3"}`, "application/json").Status)
	require.Equal(t, 422, f.do("finance", "PUT", "/api/v1/budgets", `{"scope":"project","project":"nope","period":"month","unit":"money","limit":"1"}`, "application/json").Status)

	// Deleting: the budget as it was; then it is gone.
	r = f.do("lead", "DELETE", fmt.Sprintf("/api/v1/budgets/%d", f.ids["budget-bob"]), "", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, "s-bob", r.json(t)["user"])
	require.Equal(t, 404, f.do("lead", "DELETE", fmt.Sprintf("/api/v1/budgets/%d", f.ids["budget-bob"]), "", "").Status)
	projects, _ := items(t, f.do("admin", "GET", "/api/v1/budgets?scope=project", "", ""))
	require.Equal(t, []any{"ai101"}, field(projects, "project"))
}

// A budget's status is what the watcher last measured in its current
// period, projected by the engine: used, left, percent, forecast and the
// date the limit is reached; a measure of a period that has ended is not
// shown; a student sees only their own budgets' status.
func TestBudgetStatus(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dec := decimal.RequireFromString
	dec2026 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, f.led.RecordBudgetUsage(ctx, map[int64]ledger.BudgetUsage{
		// ai101: 500.00 a month, 400.00 used after 8 of 31 days.
		f.ids["budget-ai101"]: {Period: "2026-12", Start: dec2026, End: dec2026.AddDate(0, 1, 0), Money: dec("400.00"), AsOf: dec2026.AddDate(0, 0, 8)},
		// s-bob: 40 card-hours, 60.5 used: over.
		f.ids["budget-bob"]: {Period: "2026-12", Start: dec2026, End: dec2026.AddDate(0, 1, 0), CardMS: 60*3_600_000 + 1_800_000, AsOf: now},
	}))
	all, _ := items(t, f.do("finance", "GET", "/api/v1/budgets", "", ""))
	byID := map[float64]map[string]any{}
	for _, b := range all {
		byID[b["id"].(float64)] = b
	}
	st := byID[float64(f.ids["budget-ai101"])]["status"].(map[string]any)
	require.Equal(t, map[string]any{"period": "2026-12", "period_start": "2026-12-01T00:00:00Z", "period_end": "2027-01-01T00:00:00Z",
		"as_of": "2026-12-09T00:00:00Z", "used": "400.00", "left": "100.00", "percent": 80.0, "reached": false,
		"forecast":         "1550.00",              // 400 × 31 / 8
		"reaches_limit_at": "2026-12-11T00:00:00Z", // 8 days × 500 / 400
	}, st)
	bob := byID[float64(f.ids["budget-bob"])]["status"].(map[string]any)
	require.Equal(t, "60.5", bob["used"])
	require.Equal(t, "-20.5", bob["left"])
	require.Equal(t, 151.0, bob["percent"])
	require.Equal(t, true, bob["reached"])
	require.NotContains(t, bob, "reaches_limit_at", "reached already")

	// The student sees their own budget and its status, nobody else's.
	alice, err := f.led.PutBudget(ctx, "cli:test", ledger.Budget{Scope: billing.BudgetStudent, Project: "ai101", User: "s-alice",
		Period: billing.BudgetMonth, Unit: billing.BudgetMoney, Limit: "1500"})
	require.NoError(t, err)
	require.NoError(t, f.led.RecordBudgetUsage(ctx, map[int64]ledger.BudgetUsage{
		alice.ID: {Period: "2026-12", Start: dec2026, End: dec2026.AddDate(0, 1, 0), Money: dec("2417.00"), AsOf: now}}))
	mine, _ := items(t, f.do("student", "GET", "/api/v1/budgets", "", ""))
	require.Len(t, mine, 1)
	require.Equal(t, "s-alice", mine[0]["user"])
	require.Equal(t, "2417.00", mine[0]["status"].(map[string]any)["used"])
	require.Equal(t, 161.0, mine[0]["status"].(map[string]any)["percent"])
	require.Equal(t, "-917.00", mine[0]["status"].(map[string]any)["left"])
	// Last month's measure says nothing of this month.
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, f.led.RecordBudgetUsage(ctx, map[int64]ledger.BudgetUsage{
		f.ids["budget-ai101"]: {Period: "2026-11", Start: nov, End: dec2026, Money: dec("9.00"), AsOf: dec2026}}))
	projects, _ := items(t, f.do("finance", "GET", "/api/v1/budgets?scope=project", "", ""))
	require.Len(t, projects, 1)
	require.NotContains(t, projects[0], "status", "a measure of an ended period is not shown")
}
