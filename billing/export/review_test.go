package export

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func decp(s string) *decimal.Decimal { d := dec(s); return &d }

// reviewFixture is a November review of three projects in lang: one billed
// with a draft, budgets (one reached) and advice, one with a long Chinese
// name and no invoice yet, one idle.
func reviewFixture(lang string) *Review {
	zh := lang == "zh-CN"
	pick := func(en, z string) string {
		if zh {
			return z
		}
		return en
	}
	gen := time.Date(2026, time.December, 5, 9, 30, 0, 0, shanghai)
	v := &Review{Lang: lang, Period: "2026-11", Currency: "CNY", GeneratedAt: gen,
		From: time.Date(2026, time.November, 1, 0, 0, 0, 0, shanghai), To: time.Date(2026, time.December, 1, 0, 0, 0, 0, shanghai),
		SavingsAssumption: pick("a released instance would otherwise have stayed held, and idle, until its holder's next holding, at most 30 days",
			"若未释放，该实例会一直被占用且空闲，直到持有人的下一次占用，最多 30 天"),
		AdviceAssumption: pick("Assumes the last three months go on as they were.", "假设近三个月的用量照旧延续。"),
		AdviceFrom:       "2026-09",
		Projects: []ReviewRow{
			{Project: "cv-lab", Name: "Computer Vision Lab 视觉组", Funding: "NSFC-62276001", Invoiced: decp("1234.56"), Drafts: 1,
				ListCost: dec("1301.25"), IdleCost: dec("211.40"), HeldSeconds: 123 * 3600, IdleSeconds: 20*3600 + 1800, Efficiency: "83.3",
				SavedSeconds: 7*3600 + 900, SavedCost: dec("38.75"), AdviceSaving: dec("96.00"),
				Budgets: []ReviewBudget{{Unit: string(billing.BudgetMoney), Limit: "1000.00", Used: "1234.56", Percent: 123, Reached: true},
					{Unit: string(billing.BudgetCardHours), Limit: "200", Used: "123.00", Percent: 61}},
				Advice: []ReviewAdvice{{SKU: "a100-1g.10gb", Saving: "96.00",
					Text: pick("Reserve 2 × a100-1g.10gb for a quarter, paid monthly: it would have saved 96.00 CNY over 2026-09 to 2026-11, the steady use of three students.",
						"建议预留 2 个 a100-1g.10gb（包季，按月付）：2026-09 至 2026-11 期间可节省 96.00 元，为三名学生长期稳定的用量。")}},
				Underused: []ReviewUnderused{{SKU: "a100-7g.80gb", Coverage: "0.35", Unused: "412.50"}}},
			{Project: "nlp-lab", Name: "自然语言处理与计算语言学联合实验室（研究生培养与跨学科合作项目专用经费账户）",
				ListCost: dec("88.10"), IdleCost: dec("0.00"), HeldSeconds: 9000, IdleSeconds: 0, Efficiency: "100.0",
				Budgets: []ReviewBudget{{Unit: string(billing.BudgetMoney), Limit: "500.00"}}},
			{Project: "idle-lab", Name: "Idle lab", ListCost: dec("0.00"), IdleCost: dec("0.00")},
		},
	}
	v.Total = ReviewRow{Invoiced: decp("1234.56"), Drafts: 1, ListCost: dec("1389.35"), IdleCost: dec("211.40"),
		HeldSeconds: 123*3600 + 9000, IdleSeconds: 20*3600 + 1800, Efficiency: "84.2", SavedSeconds: 7*3600 + 900,
		SavedCost: dec("38.75"), AdviceSaving: dec("96.00")}
	return v
}

func writeReview(t *testing.T, v *Review) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WritePDFReview(&buf, v, PDFOptions{}))
	checkGlyphs(t, buf.Bytes())
	return buf.Bytes()
}

// The review PDF in English and Chinese: every character drawn has its
// glyph in the embedded font that draws it (no empty box), and the input's
// numbers, texts, budgets, advice, the savings assumption and the
// generated-at line are there; the same review gives the same bytes.
func TestPDFReview(t *testing.T) {
	needPDFTools(t)
	for _, lang := range []string{"en", "zh-CN"} {
		t.Run(lang, func(t *testing.T) {
			v := reviewFixture(lang)
			pdf := writeReview(t, v)
			require.Equal(t, pdf, writeReview(t, v), "the same review gives the same bytes")
			if dir := os.Getenv("CARDHOUR_TEST_ARTIFACTS"); dir != "" {
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "review-"+lang+".pdf"), pdf, 0o644))
			}
			text := pdfText(t, pdf)
			// In the drawing's order, a wrapped cell's lines follow each other.
			flat := strings.Join(strings.Fields(strings.Join(pdfPages(t, pdf, "-raw"), "")), "")
			for _, x := range append(append([]ReviewRow{}, v.Projects...), v.Total) {
				want := []string{billing.FormatMoney(x.ListCost), billing.FormatMoney(x.IdleCost), billing.FormatHours(x.HeldSeconds),
					billing.FormatHours(x.IdleSeconds), billing.FormatHours(x.SavedSeconds), billing.FormatMoney(x.SavedCost), x.Project, x.Efficiency}
				if x.Invoiced != nil {
					want = append(want, billing.FormatMoney(*x.Invoiced))
				}
				for _, w := range want {
					require.Contains(t, text, w, "%s row", x.Project)
				}
				// Long names wrap in their cell: every character is there.
				require.Contains(t, flat, strings.ReplaceAll(x.Name, " ", ""))
				require.Contains(t, flat, x.Funding, "%s row: its funding code", x.Project)
				for _, a := range x.Advice {
					require.Contains(t, flat, strings.ReplaceAll(a.Text, " ", ""))
				}
			}
			for _, w := range []string{"2026-11-01", "2026-11-30", "Asia/Shanghai", "CNY", "1000.00", "123", "412.50", "0.35", "2026-12-05T09:30:00+08:00"} {
				require.Contains(t, text, w)
			}
			words := map[string][]string{
				"en":    {"Monthly review 2026-11", "Saved by releases", "Hours saved by", "Total", "limit reached", "not billed yet", "Releases saved an estimated 38.75 CNY (7.25 card-hours)"},
				"zh-CN": {"2026-11 月度复盘", "释放节省（CNY）", "释放节省小时", "合计", "已达上限", "尚未出账", "释放估计节省了 38.75 CNY（7.25 卡时）"},
			}[lang]
			for _, w := range words {
				require.Contains(t, strings.Join(strings.Fields(text), " "), w)
			}
			require.Contains(t, flat, strings.ReplaceAll(v.SavingsAssumption, " ", ""))
			require.Contains(t, flat, strings.ReplaceAll(v.AdviceAssumption, " ", ""))
			if lang == "zh-CN" {
				require.Contains(t, text, "月度复盘")
				require.Contains(t, text, "释放节省")
				require.NotContains(t, text, "Monthly review")
			} else {
				require.NotContains(t, text, "月度复盘")
			}
			golden(t, "review-"+lang+".pdf.txt", []byte(text))
		})
	}
}

// Page 1 of the review in each language, as poppler draws it, is the stored
// image within a tolerance. Regenerate testdata/review-*.png after an
// intended change with CARDHOUR_UPDATE_GOLDEN=1 go test -run
// TestPDFReviewGoldenImage ./billing/export/, and look at them.
func TestPDFReviewGoldenImage(t *testing.T) {
	needPDFTools(t)
	for _, lang := range []string{"en", "zh-CN"} {
		t.Run(lang, func(t *testing.T) {
			goldenImage(t, writeReview(t, reviewFixture(lang)), "review-"+lang+".png")
		})
	}
}

// A review of many projects continues its table on the next pages under
// its header; an unknown language is refused.
func TestPDFReviewPages(t *testing.T) {
	needPDFTools(t)
	v := reviewFixture("zh-CN")
	row := v.Projects[1]
	for i := range 60 {
		row.Project = fmt.Sprintf("lab-%02d", i)
		v.Projects = append(v.Projects, row)
	}
	pages := pdfPages(t, writeReview(t, v), "-layout")
	require.Greater(t, len(pages), 2)
	for i, p := range pages[:2] {
		require.Contains(t, p, "空闲小时", "page %d repeats the table's header", i+1)
		require.Contains(t, p, fmt.Sprintf("月度复盘 · %d/%d", i+1, len(pages)))
	}
	require.Contains(t, pages[len(pages)-2]+pages[len(pages)-1], "lab-59")
	require.ErrorContains(t, WritePDFReview(&bytes.Buffer{}, &Review{Lang: "fr"}, PDFOptions{}), "fr")
}

// Chinese wraps per character (no closing punctuation at a line's start),
// Latin per word, and a short word stays whole; nothing is lost.
func TestPDFWrapCJK(t *testing.T) {
	fonts, err := PDFOptions{}.FindFonts()
	if err != nil {
		needPDFTools(t)
	}
	dr, err := newPDFDraw("P", PDFOptions{FontPath: fonts[0]}, time.Time{})
	require.NoError(t, err)
	s := "自然语言处理与计算语言学联合实验室，研究生培养与跨学科合作项目 Computer Vision and Natural Language 显存"
	require.NoError(t, dr.prepare(s))
	avail := dr.width("自然语言处理与", 9) + 0.01
	lines := dr.wrap(s, avail, 9)
	require.Greater(t, len(lines), 4)
	var joined strings.Builder
	for _, l := range lines {
		require.LessOrEqual(t, dr.width(l, 9), avail, "%q", l)
		first, _ := utf8.DecodeRuneInString(l)
		require.NotContains(t, noLineStart, string(first), "%q starts with closing punctuation", l)
		joined.WriteString(l)
	}
	require.Equal(t, strings.ReplaceAll(s, " ", ""), strings.ReplaceAll(joined.String(), " ", ""))
	require.Equal(t, "自然语言处理与", lines[0], "a CJK line is filled to the width")
	require.Contains(t, lines, "显存")
	for _, w := range []string{"Computer", "Vision", "Natural", "Language"} {
		found := false
		for _, l := range lines {
			found = found || strings.Contains(l, w)
		}
		require.True(t, found, "%s is not broken", w)
	}
}
