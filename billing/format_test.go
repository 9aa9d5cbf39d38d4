package billing

import (
	"bytes"
	"encoding/csv"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const writersCatalog = `
currency: CNY
timezone: Asia/Shanghai
defaults: {rounding: second, gap_tolerance_s: 30}
skus:
  - {id: a1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "1.80", monthly_price: "900"}
projects:
  - id: lab
    name: Lab 课题组
    funding: F-1
    reservations:
      - {sku: a1g, quantity: 1, term: quarter, start: "2026-10", billing: monthly}
`

// writersResult is a month with a bit of everything the writers render: a
// reservation, usage lines, a holder conflict, unpriced usage, a project that is
// not in the catalog with IDs a spreadsheet would take for formulas, and skipped
// input lines.
func writersResult(t *testing.T) *Result {
	t.Helper()
	cat, err := schemas.ParseCatalog([]byte(writersCatalog), "writers")
	require.NoError(t, err)
	t0 := at(3, 10, 0, 0)
	samples := heldSamples(t,
		held{project: "lab", user: "alice", inst: "MIG-1", start: t0, end: t0 + 3_600_000},
		held{project: "lab", user: "bob", inst: "MIG-1", start: t0 + 1_800_000, end: t0 + 2_700_000},
		held{project: "lab", user: "bob", inst: "MIG-2", start: t0, end: t0 + 5_400_000},
		held{project: "-lab", user: "=1+2", inst: "MIG-3", start: t0, end: t0 + 600_500},
	)
	unpriced := heldSamples(t, held{project: "lab", user: "carol", inst: "GPU-9", start: t0, end: t0 + 1_200_000})
	unpriced[0].GPUModel, unpriced[0].Profile = "NVIDIA L40S", "full"
	r := billSamples(cat, nov, append(samples, unpriced...))
	r.SkippedLines = 3
	r.AddWarning(WarnInput, "3 of 9 sample line(s) were invalid and skipped")
	return r
}

func emptyResult(t *testing.T) *Result {
	t.Helper()
	cat, err := schemas.ParseCatalog([]byte(conflictCatalog), "empty")
	require.NoError(t, err)
	return billSamples(cat, nov, nil)
}

type writer struct {
	ext   string
	write func(*bytes.Buffer, *Result) error
}

var writers = []writer{
	{"json", func(b *bytes.Buffer, r *Result) error { return WriteJSON(b, r) }},
	{"csv", func(b *bytes.Buffer, r *Result) error { return WriteCSV(b, r) }},
	{"txt", func(b *bytes.Buffer, r *Result) error { return WriteTable(b, r) }},
}

func renderAs(t *testing.T, w writer, r *Result) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, w.write(&buf, r))
	return buf.String()
}

func goldenFile(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run 'go test ./billing -update' to create it")
	require.Equal(t, string(want), got, "output differs from %s (rerun with -update if the change is intended)", path)
}

// Every writer, on a full month, on one user's statement and on an empty month.
func TestWritersGolden(t *testing.T) {
	full := writersResult(t)
	results := map[string]*Result{
		"writers":           full,
		"writers-alice":     full.StatementFor("alice"),
		"writers-nobody":    full.StatementFor("nobody"),
		"writers-empty":     emptyResult(t),
		"writers-empty-bob": emptyResult(t).StatementFor("bob"),
	}
	for name, r := range results {
		for _, w := range writers {
			t.Run(name+"."+w.ext, func(t *testing.T) { goldenFile(t, name+"."+w.ext, renderAs(t, w, r)) })
		}
	}
}

func TestWritersSayWhenThereIsNoUsage(t *testing.T) {
	for _, w := range writers {
		out := renderAs(t, w, emptyResult(t))
		require.Contains(t, out, "no usage in 2026-11: no GPU instance was held in this period (本期无用量)", w.ext)
		out = renderAs(t, w, writersResult(t).StatementFor("nobody"))
		require.Contains(t, out, "no usage by user", w.ext)
	}
	require.Contains(t, renderAs(t, writers[2], emptyResult(t)), "no invoices for this period (本期无账单)")
}

// A statement names no other user, in any format: not in its lines, its warnings or
// its conflicts.
func TestStatementNamesNoOtherUser(t *testing.T) {
	full := writersResult(t)
	users := []string{"alice", "bob", "carol", "=1+2"}
	for _, user := range users {
		st := full.StatementFor(user)
		for _, w := range writers {
			out := renderAs(t, w, st)
			require.Contains(t, out, user, "%s's statement as %s names them", user, w.ext)
			for _, other := range users {
				if other != user {
					require.NotContains(t, out, other, "%s's statement as %s names %s", user, w.ext, other)
				}
			}
		}
	}

	// alice and bob share MIG-1: each statement shows the conflict, the other
	// holder counted.
	st := full.StatementFor("alice")
	require.Equal(t, []Conflict{{InstanceID: "MIG-1", Holders: []Holder{{"lab", "alice"}}, OtherHolders: 1,
		Kinds: []Kind{{"A100", "1g.10gb"}}, OverlapMS: 900_000, First: at(3, 10, 30, 0), Last: at(3, 10, 45, 0)}}, st.Conflicts)
	require.Contains(t, renderAs(t, writers[0], st), `"other_holders": 1`)
	// A project warning reaches only the statements of that project's users; the
	// input's warnings reach every statement.
	require.NotContains(t, strings.Join(st.Warnings, "\n"), "-lab")
	require.Contains(t, st.Warnings, "3 of 9 sample line(s) were invalid and skipped")
	require.Contains(t, strings.Join(full.StatementFor("=1+2").Warnings, "\n"), `project "-lab" is not in the catalog`)
	// carol's unpriced usage warns carol only.
	require.Contains(t, strings.Join(full.StatementFor("carol").Warnings, "\n"), "matches no SKU")
	require.NotContains(t, strings.Join(full.StatementFor("bob").Warnings, "\n"), "matches no SKU")
}

// The CSV: one header, the same number of cells on every row, a total row per
// invoice equal to the sum of its lines, a row per warning, and no cell that a
// spreadsheet would run as a formula.
func TestCSVRowsTotalsWarningsAndFormulas(t *testing.T) {
	r := writersResult(t)
	out := renderAs(t, writers[1], r)
	require.True(t, strings.HasPrefix(out, "\uFEFF"))
	rows, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "\uFEFF"))).ReadAll()
	require.NoError(t, err)
	require.Equal(t, csvHeader, rows[0])
	sums := map[string]decimal.Decimal{}
	totals := map[string]string{}
	var warnings []string
	for _, row := range rows[1:] {
		require.Len(t, row, len(csvHeader))
		for _, cell := range row {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				require.True(t, plainNumber(cell), "cell %q starts a formula", cell)
			}
		}
		switch kind, project, amount := row[4], row[1], row[15]; kind {
		case KindUsage, KindReservation:
			sums[project] = sums[project].Add(decimal.RequireFromString(amount))
		case CSVKindTotal:
			totals[project] = amount
		case CSVKindWarning:
			warnings = append(warnings, row[17])
		}
	}
	require.Len(t, totals, len(r.Invoices))
	for _, inv := range r.Invoices {
		p := CSVCell(inv.Project)
		require.Equal(t, FormatMoney(inv.Total), totals[p], p)
		require.Equal(t, FormatMoney(sums[p]), totals[p], p)
	}
	require.Equal(t, r.Warnings, warnings)
	require.Contains(t, out, ",'-lab,")
	require.Contains(t, out, ",'=1+2,")
}

func TestCSVCell(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "lab": "lab", "-lab": "'-lab", "=SUM(A1)": "'=SUM(A1)", "+1+1": "'+1+1", "@x": "'@x",
		"\tx": "'\tx", "\rx": "'\rx", "-": "'-", "-1.5": "-1.5", "+2": "+2", "12.50": "12.50", "-1.": "'-1.",
		"-.5": "'-.5", "1-2": "1-2", "a=b": "a=b",
	} {
		require.Equal(t, want, CSVCell(in), "%q", in)
	}
}

// FormatHours rounds half up exactly, in integers: 18 s is 0.005 h, which a
// double holds as a little more, 54 s is 0.015 h, which a double holds as a
// little less; both round up.
func TestFormatHoursRoundsHalfUpExactly(t *testing.T) {
	for s, want := range map[int64]string{0: "0.00", 17: "0.00", 18: "0.01", 54: "0.02", 3600: "1.00", 1854: "0.52",
		3_600_000_000: "1000000.00", 5417: "1.50", -54: "-0.02", -17: "0.00"} {
		if got := FormatHours(s); got != want {
			t.Errorf("FormatHours(%d) = %q, want %q", s, got, want)
		}
	}
}
