package notify

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func shanghai(t testing.TB) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	return loc
}

// idleFacts: alice's MIG slice, held since Friday afternoon, idle since
// Sunday night, looked at on Monday morning (Shanghai time).
func idleFacts(t testing.TB) alert.Facts {
	loc := shanghai(t)
	return alert.Facts{
		Project: "nlp-lab", User: "alice", Node: "gpu-node-07",
		GPUUUID: "GPU-5f1c2e8a-93b4-4c1d-8e2f-0a1b2c3d4e5f", GPUModel: "A100-SXM4-40GB", Profile: "1g.5gb",
		InstanceID: "MIG-2b7e0c44-1f1e-5a3c-9d2b-77aa01c4e8f0",
		HeldSince:  time.Date(2026, 11, 27, 14, 5, 0, 0, loc),
		IdleSince:  time.Date(2026, 11, 29, 22, 40, 0, 0, loc),
		At:         time.Date(2026, 11, 30, 8, 40, 0, 0, loc),
		NextAction: "release", NextAt: time.Date(2026, 11, 30, 22, 40, 0, 0, loc),
		Cost: billing.Money{Decimal: decimal.RequireFromString("1234.5")}, Currency: "CNY", TZ: loc,
		ExemptionHint: "cardhour exemptions request --instance <id> --until <date>",
	}
}

func goldenCases(t testing.TB) map[string]alert.Message {
	loc := shanghai(t)
	warn := idleFacts(t)

	remind := idleFacts(t)
	remind.At = time.Date(2026, 11, 30, 18, 40, 0, 0, loc)
	remind.Cost = billing.Money{Decimal: decimal.RequireFromString("1302.75")}

	released := idleFacts(t)
	released.At = time.Date(2026, 11, 30, 22, 40, 0, 0, loc)
	released.NextAction, released.NextAt = "", time.Time{}
	released.Cost = billing.Money{Decimal: decimal.RequireFromString("1331.25")}
	released.Outcome = "deleted pod nlp-lab/alice-notebook-0"

	dry := released
	dry.Outcome = "delete pod nlp-lab/alice-notebook-0"

	failed := released
	failed.Outcome = `pods "alice-notebook-0" is forbidden: namespace nlp-lab is not in the allowed namespaces`
	failed.NextAction, failed.NextAt = "release", time.Date(2026, 11, 30, 23, 40, 0, 0, loc)

	noAuto := alert.Facts{
		Project: "vision", User: "", Node: "node-3", GPUUUID: "GPU-0001", GPUModel: "H100-80GB",
		InstanceID: "GPU-0001", HeldSince: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		IdleSince: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), At: time.Date(2026, 12, 3, 3, 30, 0, 0, time.UTC),
		Cost: billing.Money{Decimal: decimal.RequireFromString("98765.4")}, Currency: "USD",
	}

	projBudget := alert.Facts{
		Project: "nlp-lab", At: time.Date(2026, 12, 20, 9, 0, 0, 0, loc), Currency: "CNY", TZ: loc,
		Budget: &alert.BudgetFacts{Scope: "project", Period: "2026-12", Unit: "money",
			Limit: decimal.RequireFromString("20000"), Used: decimal.RequireFromString("16012.3"),
			Percent: 80},
		ExemptionHint: "write to gpu-admin@example.edu",
	}
	studentBudget := alert.Facts{
		Project: "nlp-lab", User: "bob", At: time.Date(2027, 1, 5, 9, 0, 0, 0, loc), TZ: loc,
		NextAction: "release", NextAt: time.Date(2027, 1, 5, 9, 10, 0, 0, loc),
		Budget: &alert.BudgetFacts{Scope: "student", Period: "2026 autumn term", Unit: "card_hours",
			Limit: decimal.NewFromInt(1500), Used: decimal.RequireFromString("1503.25"),
			Percent: 100},
	}
	linked := idleFacts(t)
	linked.Link = "https://gpu.example.edu/ui/#/exemptions?request=" + linked.InstanceID

	asked := alert.Facts{Project: "nlp-lab", User: "alice", InstanceID: linked.InstanceID, At: time.Date(2026, 11, 30, 9, 5, 0, 0, loc), TZ: loc,
		Request: &alert.RequestFacts{ID: 42, Status: "pending", Until: time.Date(2026, 12, 4, 18, 0, 0, 0, loc), Reason: "a 4-day training run"},
		Link:    "https://gpu.example.edu/ui/#/exemptions"}
	granted := asked
	granted.At = time.Date(2026, 11, 30, 10, 15, 0, 0, loc)
	granted.Request = &alert.RequestFacts{ID: 42, Status: "granted", Until: asked.Request.Until, Reason: asked.Request.Reason,
		DecidedBy: "lead:li", Answer: "ok until Friday", ExemptionID: 7}
	refused := alert.Facts{Project: "nlp-lab", User: "bob", At: time.Date(2026, 11, 30, 10, 20, 0, 0, loc), TZ: loc,
		Request: &alert.RequestFacts{ID: 43, Status: "refused", Until: time.Date(2026, 12, 25, 0, 0, 0, 0, loc), Reason: "holidays",
			DecidedBy: "lead:li", Answer: "the course needs the cards in December"}}
	return map[string]alert.Message{
		"idle_warning_link":      {Kind: billing.AlertIdleWarning, Key: "k1l", Facts: linked},
		"exemption_requested":    {Kind: billing.AlertExemptionRequested, Key: "k8", Facts: asked},
		"exemption_granted":      {Kind: billing.AlertExemptionDecided, Key: "k9", Facts: granted},
		"exemption_refused":      {Kind: billing.AlertExemptionDecided, Key: "k10", Facts: refused},
		"idle_warning":           {Kind: billing.AlertIdleWarning, Key: "k1", Facts: warn},
		"idle_warning_no_policy": {Kind: billing.AlertIdleWarning, Key: "k1b", Facts: noAuto},
		"idle_reminder":          {Kind: billing.AlertIdleReminder, Key: "k2", Facts: remind},
		"idle_release":           {Kind: billing.AlertIdleRelease, Key: "k3", Facts: released},
		"idle_release_dry_run":   {Kind: billing.AlertIdleReleaseDryRun, Key: "k4", Facts: dry},
		"idle_release_failed":    {Kind: billing.AlertIdleReleaseFailed, Key: "k5", Facts: failed},
		"budget_project":         {Kind: billing.AlertBudgetThreshold, Key: "k6", Facts: projBudget},
		"budget_student_release": {Kind: billing.AlertBudgetThreshold, Key: "k7", Facts: studentBudget},
	}
}

func TestRenderGolden(t *testing.T) {
	for name, m := range goldenCases(t) {
		for _, lang := range Langs {
			t.Run(name+"/"+lang, func(t *testing.T) {
				subject, body, err := Render(m, lang)
				require.NoError(t, err)
				got := "Subject: " + subject + "\n\n" + body
				path := filepath.Join("testdata", "golden", name+"."+lang+".txt")
				if *update {
					require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
				}
				want, err := os.ReadFile(path)
				require.NoError(t, err, "golden file missing: run go test -run TestRenderGolden -update")
				require.Equal(t, string(want), got)
			})
		}
	}
}

// The texts say only what happened.
func TestRenderWordsMatchDeeds(t *testing.T) {
	cases := goldenCases(t)
	render := func(name, lang string) string {
		s, b, err := Render(cases[name], lang)
		require.NoError(t, err)
		return s + "\n" + b
	}
	for _, lang := range Langs {
		rel := render("idle_release", lang)
		dry := render("idle_release_dry_run", lang)
		failed := render("idle_release_failed", lang)
		warn := render("idle_warning", lang)
		if lang == LangEN {
			require.Contains(t, rel, "was released")
			require.Contains(t, rel, "deleted pod nlp-lab/alice-notebook-0")
			for _, s := range []string{dry, failed, warn} {
				require.NotContains(t, s, "was released")
			}
			require.Contains(t, dry, "would have been released")
			require.Contains(t, dry, "nothing was done")
			require.Contains(t, failed, "could not be released")
			require.Contains(t, failed, "billing continues")
		} else {
			require.Contains(t, rel, "已被释放")
			for _, s := range []string{dry, failed, warn} {
				require.NotContains(t, s, "已被释放")
				require.NotContains(t, s, "已释放")
			}
			require.Contains(t, dry, "本应")
			require.Contains(t, dry, "未执行任何操作")
			require.Contains(t, failed, "未能释放")
			require.Contains(t, failed, "继续计费")
		}
	}
}

// Every idle text names the instance, node, GPU, profile, both times, the
// cost and what comes next, in the catalog's zone.
func TestRenderSaysWhatAndWhen(t *testing.T) {
	m := goldenCases(t)["idle_warning"]
	for _, lang := range Langs {
		_, b, err := Render(m, lang)
		require.NoError(t, err)
		for _, want := range []string{m.Facts.InstanceID, "gpu-node-07", m.Facts.GPUUUID, "1g.5gb",
			"2026-11-27 14:05", "2026-11-29 22:40", "2026-11-30 22:40", "¥ 1,234.50", "Asia/Shanghai", m.Facts.ExemptionHint} {
			require.Contains(t, b, want, lang)
		}
	}
	// The same instants in another zone read differently: times follow Facts.TZ.
	m.Facts.TZ = time.UTC
	_, b, err := Render(m, LangEN)
	require.NoError(t, err)
	require.Contains(t, b, "2026-11-29 14:40")
	require.Contains(t, b, "Times are in UTC.")
}

func TestRenderRejects(t *testing.T) {
	good := goldenCases(t)["idle_warning"]
	_, _, err := Render(good, "fr")
	require.ErrorContains(t, err, `no templates for language "fr"`)

	bad := good
	bad.Kind = "idle_nap"
	_, _, err = Render(bad, LangEN)
	require.ErrorContains(t, err, `unknown message kind "idle_nap"`)

	bad = good
	bad.Facts.NextAction = "explode"
	_, _, err = Render(bad, LangEN)
	require.ErrorContains(t, err, `unknown next action "explode"`)

	bad = good
	bad.Facts.NextAt = time.Time{}
	_, _, err = Render(bad, LangEN)
	require.ErrorContains(t, err, "without a time")

	bad = good
	bad.Facts.InstanceID = ""
	_, _, err = Render(bad, LangEN)
	require.ErrorContains(t, err, "without an instance id")

	bad = goldenCases(t)["budget_project"]
	bad.Facts.Budget = nil
	_, _, err = Render(bad, LangZH)
	require.ErrorContains(t, err, "without budget facts")

	bad = goldenCases(t)["budget_project"]
	b := *bad.Facts.Budget
	b.Unit = "gpus"
	bad.Facts.Budget = &b
	_, _, err = Render(bad, LangZH)
	require.ErrorContains(t, err, `budget unit "gpus"`)

	bad = goldenCases(t)["budget_project"]
	b = *bad.Facts.Budget
	b.Percent = 0
	bad.Facts.Budget = &b
	_, _, err = Render(bad, LangEN)
	require.ErrorContains(t, err, "budget threshold 0 %")

	for _, tag := range []string{"zh", "zh_CN", "ZH-cn", "zh-Hans"} {
		l, ok := NormalizeLang(tag)
		require.True(t, ok, tag)
		require.Equal(t, LangZH, l)
	}
	l, ok := NormalizeLang("en-GB")
	require.True(t, ok)
	require.Equal(t, LangEN, l)
}

func TestFormatMoney(t *testing.T) {
	for _, c := range []struct{ in, cur, want string }{
		{"1234.5", "CNY", "¥ 1,234.50"},
		{"0", "CNY", "¥ 0.00"},
		{"999.99", "CNY", "¥ 999.99"},
		{"1000", "USD", "$ 1,000.00"},
		{"1234567.891", "CNY", "¥ 1,234,567.891"}, // not rounded here
		{"-12.3", "EUR", "€ -12.30"},
		{"100", "CHF", "CHF 100.00"},
		{"12345", "", "12,345.00"},
	} {
		require.Equal(t, c.want, FormatMoney(decimal.RequireFromString(c.in), c.cur), c.in)
	}
	require.Equal(t, "1,500", groupDigits("1500"))
	require.Equal(t, "150", groupDigits("150"))
	require.Equal(t, "-1,234,567.5", groupDigits("-1234567.5"))
	require.False(t, strings.Contains(groupDigits("100000"), ",,"))
}

// Every language says every sentence, with placeholders the renderer
// fills: a missing text or a misspelt {name} would be sent as it is.
func TestTextsComplete(t *testing.T) {
	f := idleFacts(t) // every fact, a budget's too
	f.Budget = goldenCases(t)["budget_project"].Facts.Budget
	r := renderer{lang: LangEN, f: f, loc: time.UTC}
	r.setVars()
	known := map[string]bool{"n": true, "dur": true}
	for name := range r.v {
		known[name] = true
	}
	var all []text
	v := reflect.ValueOf(words)
	for i := range v.NumField() {
		switch x := v.Field(i).Interface().(type) {
		case text:
			all = append(all, x)
		case map[billing.AlertKind]text:
			for _, e := range x {
				all = append(all, e)
			}
		case map[billing.AlertKind][]text:
			for _, e := range x {
				all = append(all, e...)
			}
		default:
			t.Fatalf("texts.%s: a %T", v.Type().Field(i).Name, x)
		}
	}
	require.Greater(t, len(all), 50)
	require.Contains(t, known, "link")
	for _, k := range billing.AlertKinds {
		if k != billing.AlertBudgetThreshold {
			require.NotEmpty(t, words.Subject[k], "subject of %s", k)
			require.NotEmpty(t, words.Opening[k], "opening of %s", k)
		}
	}
	for _, x := range all {
		require.Len(t, x, len(Langs), "%q", x)
		for _, lang := range Langs {
			s := x[lang]
			require.NotEmpty(t, s, "%s of %q", lang, x)
			for rest := s; ; {
				i := strings.IndexByte(rest, '{')
				if i < 0 {
					break
				}
				j := strings.IndexByte(rest[i:], '}')
				require.Positive(t, j, "unclosed { in %q", s)
				require.True(t, known[rest[i+1:i+j]], "unknown placeholder %s in %q", rest[i:i+j+1], s)
				rest = rest[i+j+1:]
			}
		}
	}
}

// Facts are written as they are, even when they look like placeholders.
func TestRenderFactsWithBraces(t *testing.T) {
	m := goldenCases(t)["idle_release"]
	m.Facts.Outcome = "deleted pod {inst}/{at}"
	m.Facts.ExemptionHint = "see {hint}"
	for _, lang := range Langs {
		_, b, err := Render(m, lang)
		require.NoError(t, err)
		require.Contains(t, b, "deleted pod {inst}/{at}", lang)
		require.Contains(t, b, "see {hint}", lang)
	}
}
