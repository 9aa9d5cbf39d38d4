package api_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/reads"
)

// savingUsage is the fake usage with what releases saved on every row: a
// tenth of its held time and of its cost, and the assumption stated.
type savingUsage struct{ *fakeUsage }

func (s savingUsage) Savings(ctx context.Context, q reads.UsageQuery, rep *reads.UsageReport, rels []reads.Released) (*reads.UsageReport, error) {
	out, err := s.fakeUsage.Savings(ctx, q, rep, rels)
	if err != nil {
		return nil, err
	}
	out.Rows = append([]reads.UsageGroup(nil), out.Rows...)
	for i := range out.Rows {
		r := &out.Rows[i]
		r.SavedSeconds = r.HeldSeconds / 10
		r.SavedCost = billing.Money{Decimal: r.Cost.Div(decimal.NewFromInt(10)).Round(2)}
	}
	out.SavingsAssumption, out.SavingsHorizonSeconds = reads.SavingsAssumption, int64(reads.SavingsHorizon/time.Second)
	return out, nil
}

// withSavings is the fixture served over savingUsage.
func withSavings(t *testing.T) *fixture {
	f := newFixture(t)
	srv, err := api.New(api.Config{Ledger: f.led, Usage: savingUsage{f.usage}, UsagePing: f.usage.ping, Invoicing: f.flow, Advice: fakeAdvisor{},
		Clock: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxBodyBytes: 1 << 20})
	require.NoError(t, err)
	srv.MarkServing(true)
	f.srv, f.h = srv, srv.Handler()
	return f
}

// needReviewPDF skips loudly (fails under CI=true) where the PDF font set or
// pdftotext is missing.
func needReviewPDF(t *testing.T) {
	t.Helper()
	_, err := export.PDFOptions{}.FindFonts()
	if _, lerr := exec.LookPath("pdftotext"); lerr != nil && err == nil {
		err = lerr
	}
	if err == nil {
		return
	}
	msg := "the review PDF test needs the PDF font set and pdftotext (apt-get install -y poppler-utils " +
		strings.Join(export.FontPackages(), " ") + "): " + err.Error()
	if os.Getenv("CI") == "true" {
		t.Fatal("FAILED under CI=true: " + msg)
	}
	t.Skip("SKIPPED: " + msg)
}

func pdfToText(t *testing.T, pdf []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "review.pdf")
	require.NoError(t, os.WriteFile(path, pdf, 0o644))
	out, err := exec.Command("pdftotext", "-layout", "-enc", "UTF-8", path, "-").Output()
	require.NoError(t, err)
	return string(out)
}

// The review export as a PDF: refused and allowed as its CSV is, for every
// role; a PDF file named after the month asked for, in the language asked
// for, with the review's numbers (what releases saved included) and a lead's
// project alone.
func TestReviewExportPDF(t *testing.T) {
	needReviewPDF(t)
	f := withSavings(t)
	for _, role := range roles {
		csvR := f.do(role, http.MethodGet, "/api/v1/review/export?period=2026-11&format=csv", "", "")
		r := f.do(role, http.MethodGet, "/api/v1/review/export?period=2026-11&format=pdf&lang=zh-CN", "", "")
		require.Equal(t, csvR.Status, r.Status, "%s: the PDF is scoped as the CSV: %s", role, r.Body)
		if r.Status != http.StatusOK {
			continue
		}
		require.Equal(t, "application/pdf", r.Header.Get("Content-Type"))
		require.Equal(t, `attachment; filename="review-2026-11.pdf"`, r.Header.Get("Content-Disposition"))
		require.True(t, bytes.HasPrefix(r.Body, []byte("%PDF-")))
		text := pdfToText(t, r.Body)
		require.Contains(t, text, "2026-11 月度复盘")
		require.Contains(t, text, "释放节省")
		require.Contains(t, text, "估算假设")
		require.Contains(t, text, "ai101")
		if role == "lead" {
			require.NotContains(t, text, "nlp-lab", "a lead's review is its project's")
		} else {
			require.Contains(t, text, "nlp-lab")
		}
	}

	// The numbers are the review's, in English too.
	var rev api.ReviewBody
	r := f.do("admin", http.MethodGet, "/api/v1/review?period=2026-11", "", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.NoError(t, json.Unmarshal(r.Body, &rev))
	require.Equal(t, reads.SavingsAssumption, rev.SavingsAssumption)
	require.Positive(t, rev.Total.SavedSeconds)
	r = f.do("admin", http.MethodGet, "/api/v1/review/export?period=2026-11&format=pdf&lang=en", "", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	text := pdfToText(t, r.Body)
	require.Contains(t, text, "Monthly review 2026-11")
	require.NotContains(t, text, "月度复盘")
	for _, x := range append(rev.Projects, rev.Total) {
		for _, w := range []string{billing.FormatMoney(x.ListCost.Decimal), billing.FormatHours(x.HeldSeconds),
			billing.FormatHours(x.SavedSeconds), billing.FormatMoney(x.SavedCost.Decimal)} {
			require.Contains(t, text, w, "project %q", x.Project)
		}
	}

	// The period asked for is the one exported.
	r = f.do("admin", http.MethodGet, "/api/v1/review/export?period=2026-10&format=pdf&lang=en", "", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, `attachment; filename="review-2026-10.pdf"`, r.Header.Get("Content-Disposition"))
	oct := pdfToText(t, r.Body)
	require.Contains(t, oct, "Monthly review 2026-10")
	require.Contains(t, oct, "2026-10-01")
	require.NotContains(t, oct, "2026-11-01")
	r = f.do("admin", http.MethodGet, "/api/v1/review/export?period=2026-13&format=pdf", "", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
}

// The CSV and XLSX exports carry what releases saved, headed in the
// language asked for, with the review's numbers.
func TestReviewExportSavedColumns(t *testing.T) {
	f := withSavings(t)
	var rev api.ReviewBody
	r := f.do("finance", http.MethodGet, "/api/v1/review?period=2026-11", "", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.NoError(t, json.Unmarshal(r.Body, &rev))
	for lang, heads := range map[string][2]string{"en": {"Hours saved by releases", "Saved by releases (CNY)"}, "zh-CN": {"释放节省小时", "释放节省（CNY）"}} {
		r := f.do("finance", http.MethodGet, "/api/v1/review/export?period=2026-11&format=csv&lang="+lang, "", "")
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		rows, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(string(r.Body), "\uFEFF"))).ReadAll()
		require.NoError(t, err)
		require.Equal(t, heads[0], rows[0][9], lang)
		require.Equal(t, heads[1], rows[0][10], lang)
		all := append(rev.Projects, rev.Total)
		require.Len(t, rows, 1+len(all))
		for i, x := range all {
			require.Equal(t, billing.FormatHours(x.SavedSeconds), rows[1+i][9], "row %d", i)
			require.Equal(t, billing.FormatMoney(x.SavedCost.Decimal), rows[1+i][10], "row %d", i)
		}
	}
	require.NotEqual(t, "0.00", billing.FormatMoney(rev.Total.SavedCost.Decimal), "the fixture saved something")
}
