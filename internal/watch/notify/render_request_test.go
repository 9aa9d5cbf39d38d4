package notify

import (
	"testing"

	"github.com/cardhour/cardhour/billing"
	"github.com/stretchr/testify/require"
)

// A request tells the lead who asks, for what, until when and why, and
// where to decide; a decision tells the student what was decided, by whom,
// the exemption's end for a grant and the reason for a refusal.
func TestRenderExemptionRequests(t *testing.T) {
	cases := goldenCases(t)
	for _, lang := range Langs {
		s, b, err := Render(cases["exemption_requested"], lang)
		require.NoError(t, err)
		for _, want := range []string{"alice", "nlp-lab", "MIG-2b7e0c44", "2026-12-04 18:00", "a 4-day training run", "#42",
			"https://gpu.example.edu/ui/#/exemptions"} {
			require.Contains(t, s+b, want, lang)
		}
		s, b, err = Render(cases["exemption_granted"], lang)
		require.NoError(t, err)
		for _, want := range []string{"#42", "2026-12-04 18:00", "lead:li", "ok until Friday"} {
			require.Contains(t, s+b, want, lang)
		}
		s, b, err = Render(cases["exemption_refused"], lang)
		require.NoError(t, err)
		for _, want := range []string{"#43", "bob", "the course needs the cards in December", "holidays"} {
			require.Contains(t, s+b, want, lang)
		}
		if lang == LangEN {
			require.Contains(t, s, "refused")
			require.NotContains(t, s+b, "granted")
		} else {
			require.Contains(t, s, "未获批准")
			require.NotContains(t, s+b, "已获批准")
		}
		// Without the dashboard's URL, the lead is told where to go by name.
		m := cases["exemption_requested"]
		m.Facts.Link = ""
		_, b, err = Render(m, lang)
		require.NoError(t, err)
		require.NotContains(t, b, "https://")
		require.Contains(t, b, "#42")
	}
	// An idle message names the request form only when there is a link.
	_, b, err := Render(cases["idle_warning_link"], LangEN)
	require.NoError(t, err)
	require.Contains(t, b, "Request form: https://gpu.example.edu/ui/#/exemptions?request=MIG-2b7e0c44-1f1e-5a3c-9d2b-77aa01c4e8f0")
	_, b, err = Render(cases["idle_warning"], LangEN)
	require.NoError(t, err)
	require.NotContains(t, b, "Request form")
}

func TestRenderRejectsRequests(t *testing.T) {
	m := goldenCases(t)["exemption_requested"]
	bad := m
	bad.Facts.Request = nil
	_, _, err := Render(bad, LangEN)
	require.ErrorContains(t, err, "without request facts")

	bad = m
	q := *m.Facts.Request
	q.Status = "granted"
	bad.Facts.Request = &q
	_, _, err = Render(bad, LangEN)
	require.ErrorContains(t, err, `request "granted" (want pending)`)

	bad = m
	bad.Kind = billing.AlertExemptionDecided
	_, _, err = Render(bad, LangZH)
	require.ErrorContains(t, err, `request "pending" (want granted or refused)`)

	bad = m
	bad.Facts.User = ""
	_, _, err = Render(bad, LangZH)
	require.ErrorContains(t, err, "without the student")
}
