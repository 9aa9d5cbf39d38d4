//go:build !collector

package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/schemas"
)

// billJSON is bill's JSON as a reader gets it, decoded without its writer's
// types: each invoice, line and unpriced entry is its fields by name, numbers
// as written (json.Number).
type billJSON struct {
	Invoices []map[string]any `json:"invoices"`
}

// fields are m's values of keys as text ("<absent>" where one is missing).
func fields(m map[string]any, keys ...string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		v, ok := m[k]
		if !ok {
			v = "<absent>"
		}
		out[i] = fmt.Sprint(v)
	}
	return out
}

// list is m's list of objects under key.
func list(t *testing.T, m map[string]any, key string) []map[string]any {
	t.Helper()
	raw, _ := m[key].([]any)
	out := make([]map[string]any, len(raw))
	for i, v := range raw {
		o, ok := v.(map[string]any)
		require.True(t, ok, "%s[%d] is %T, not an object", key, i, v)
		out[i] = o
	}
	return out
}

// exampleDocuments are the invoice documents a billing run would freeze for
// the example samples (user: the statements derived from them), as their
// stored bytes read back.
func exampleDocuments(t *testing.T, period, user string) map[string]*export.Document {
	t.Helper()
	cat, err := schemas.LoadCatalog(exampleCatalog)
	require.NoError(t, err)
	p, err := billing.ParsePeriod(period, cat.Location)
	require.NoError(t, err)
	f, err := os.Open(exampleSamples)
	require.NoError(t, err)
	defer f.Close() //nolint:errcheck // read-only
	res, _, err := billing.BillStream(f, cat, p, schemas.ReadOptions{})
	require.NoError(t, err)
	out := map[string]*export.Document{}
	for _, d := range export.Build(res, export.Meta{}) {
		if user != "" {
			d = *d.Statement(user)
		}
		b, err := d.Marshal()
		require.NoError(t, err)
		stored, err := export.Parse(b)
		require.NoError(t, err)
		out[d.Project] = stored
	}
	return out
}

// `bill` writes its own JSON and CSV (a contract of their own, see
// docs/billing.md, "Output formats"), not the invoice document; they must
// still say what the document says. For each worked example, as invoices
// and as a student's statement, every invoice of bill's JSON and CSV has the
// document's lines in the document's order, with its amounts, prices,
// times and quantities, its unpriced usage and its total.
func TestBillSaysWhatTheInvoiceDocumentSays(t *testing.T) {
	statements := 0
	for _, period := range []string{"2026-09", "2026-11", "2026-12"} {
		bill := checkBillAgainstDocuments(t, period, "")
		// Every student's statement too.
		users := map[string]bool{}
		for _, inv := range bill.Invoices {
			for _, l := range list(t, inv, "lines") {
				if u, _ := l["user"].(string); u != "" && !users[u] {
					users[u] = true
					checkBillAgainstDocuments(t, period, u)
					statements++
				}
			}
		}
	}
	require.Greater(t, statements, 5, "the examples' students' statements were checked")
}

// checkBillAgainstDocuments checks bill's JSON and CSV of period (user's
// statement when set) against the documents, and returns the JSON.
func checkBillAgainstDocuments(t *testing.T, period, user string) billJSON {
	t.Helper()
	args := []string{"bill", "--catalog", exampleCatalog, "--samples", exampleSamples, "--period", period}
	if user != "" {
		args = append(args, "--user", user)
	}
	docs := exampleDocuments(t, period, user)
	code, out, errOut := runCLI(t, "", append(args, "--format", "json")...)
	require.Equal(t, 0, code, errOut)
	var bill billJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&bill))
	require.NotEmpty(t, bill.Invoices, "%s %s", period, user)
	for _, inv := range bill.Invoices {
		p, _ := inv["project"].(string)
		d := docs[p]
		require.NotNil(t, d, "%s %s: bill invoices %q, which has no document", period, user, p)
		checkBillJSONInvoice(t, d, inv)
	}
	code, out, errOut = runCLI(t, "", append(args, "--format", "csv")...)
	require.Equal(t, 0, code, errOut)
	checkBillCSV(t, docs, out, len(bill.Invoices))
	return bill
}

func checkBillJSONInvoice(t *testing.T, d *export.Document, inv map[string]any) {
	t.Helper()
	p := d.Project
	require.Equal(t, []string{d.Name, d.Funding, strconv.FormatBool(d.InCatalog), billing.FormatMoney(d.Total)},
		fields(inv, "name", "funding", "in_catalog", "total"), "%s: name, funding, in catalog, total", p)
	lines := list(t, inv, "lines")
	require.Len(t, lines, len(d.Lines), "%s: lines", p)
	for i, l := range lines {
		dl := d.Lines[i]
		where := fmt.Sprintf("%s line %d (%s %s %s)", p, i, dl.Kind, dl.User, dl.SKU)
		if dl.Kind == billing.KindUsage {
			require.Equal(t, []string{dl.Kind, dl.User, dl.SKU, billing.FormatMoney(dl.Amount), strconv.Itoa(dl.Sessions),
				strconv.FormatInt(dl.BilledSeconds, 10), billing.FormatSeconds(dl.UsedMS), billing.FormatSeconds(dl.CoveredMS),
				billing.FormatSeconds(dl.IdleMS), billing.FormatPrice(dl.UnitPrice)},
				fields(l, "kind", "user", "sku", "amount", "sessions", "billed_seconds", "used_seconds", "covered_seconds",
					"idle_seconds", "unit_price"), where)
		} else {
			require.Equal(t, []string{dl.Kind, dl.User, dl.SKU, billing.FormatMoney(dl.Amount), dl.Term,
				strconv.FormatInt(dl.Quantity, 10), dl.Billing, dl.Start, billing.FormatPrice(dl.UnitPrice)},
				fields(l, "kind", "user", "sku", "amount", "term", "quantity", "billing", "start", "monthly_price"), where)
		}
	}
	unpriced := list(t, inv, "unpriced")
	require.Len(t, unpriced, len(d.Unpriced), "%s: unpriced", p)
	for i, u := range unpriced {
		du := d.Unpriced[i]
		require.Equal(t, []string{du.User, du.GPUModel, du.Profile, strconv.Itoa(du.Sessions), billing.FormatSeconds(du.UsedMS),
			billing.FormatSeconds(du.IdleMS)},
			fields(u, "user", "gpu_model", "profile", "sessions", "used_seconds", "idle_seconds"), "%s unpriced %d", p, i)
	}
}

// checkBillCSV checks that bill's CSV has, per invoice, the document's line
// amounts in its order and its total (the rows a finance office sums).
func checkBillCSV(t *testing.T, docs map[string]*export.Document, out string, invoices int) {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "\uFEFF"))).ReadAll()
	require.NoError(t, err)
	col := map[string]int{}
	for i, h := range rows[0] {
		col[strings.Fields(h)[0]] = i
	}
	amounts := map[string][]string{}
	totals := map[string]string{}
	for _, r := range rows[1:] {
		project := strings.TrimPrefix(r[col["project"]], "'")
		switch r[col["kind"]] {
		case billing.KindUsage, billing.KindReservation:
			amounts[project] = append(amounts[project], r[col["kind"]]+" "+strings.TrimPrefix(r[col["user"]], "'")+" "+r[col["sku"]]+" "+r[col["amount"]])
		case billing.CSVKindTotal:
			totals[project] = r[col["amount"]]
		}
	}
	require.Len(t, totals, invoices, "one total row per invoice")
	for p, total := range totals {
		d := docs[p]
		require.NotNil(t, d, "the CSV bills %s, which has no document", p)
		var want []string
		for _, l := range d.Lines {
			want = append(want, l.Kind+" "+l.User+" "+l.SKU+" "+billing.FormatMoney(l.Amount))
		}
		require.Equal(t, want, amounts[p], "%s: the CSV's lines", p)
		require.Equal(t, billing.FormatMoney(d.Total), total, "%s: the CSV's total", p)
	}
}

// example7Samples writes worked example 7 of docs/billing.md (three HAMi
// shares of one A100 80GB, nlp-lab, 10 November 2026, a sample a minute) and
// a share of the same card held by cv-lab's student from 11:40 to 12:00.
func example7Samples(t *testing.T) string {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	at := func(h, m int) time.Time { return time.Date(2026, 11, 10, h, m, 0, 0, loc) }
	var b []byte
	hold := func(project, ns, pod, user, profile string, mem float64, from, to time.Time) {
		for ts := from; ts.Before(to); ts = ts.Add(time.Minute) {
			s := schemas.Sample{StartMS: ts.UnixMilli(), IntervalMS: 60_000, Node: "gpu-node-07", GPUUUID: "GPU-a",
				GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: "GPU-a/share/" + ns + "/" + pod + "/main", Profile: profile,
				ShareKind: schemas.ShareHAMi, ShareMem: mem, Project: project, User: user, UtilKnown: true, Util: 0.6, Processes: 1}
			require.NoError(t, s.Validate())
			b = append(s.AppendJSON(b), '\n')
		}
	}
	hold("nlp-lab", "nlp", "nb-1", "2023110042", "1/20", 0.05, at(10, 0), at(12, 0))
	hold("nlp-lab", "nlp", "nb-2", "2023110043", "mem=10%", 0.10, at(10, 0), at(11, 0))
	hold("nlp-lab", "nlp", "train", "2023110044", "mem=96%", 0.96, at(11, 30), at(12, 0))
	hold("cv-lab", "cv", "exp", "2022310101", "mem=10%", 0.10, at(11, 40), at(12, 0))
	path := filepath.Join(t.TempDir(), "example7.jsonl")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// billOversub is bill's JSON of samples (user's statement when set): its
// over-subscriptions and warnings, decoded by name.
func billOversub(t *testing.T, samples, user string) (over []map[string]any, warnings []string) {
	t.Helper()
	args := []string{"bill", "--catalog", exampleCatalog, "--samples", samples, "--period", "2026-11", "--format", "json"}
	if user != "" {
		args = append(args, "--user", user)
	}
	code, out, errOut := runCLI(t, "", args...)
	require.Equal(t, 0, code, errOut)
	var doc struct {
		DataQuality map[string]any `json:"data_quality"`
		Warnings    []string       `json:"warnings"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&doc))
	return list(t, doc.DataQuality, "oversubscribed"), doc.Warnings
}

// The invoice documents say what bill says of an over-subscribed card, each
// as its project sees it: the same card, basis, peak, time above the card and
// first and last instant; the project's holders named and every other one
// counted. Each student's statement says what `bill --user` says, word for word.
func TestBillAndDocumentsSayTheSameOversubscription(t *testing.T) {
	samples := example7Samples(t)
	over, _ := billOversub(t, samples, "")
	require.Len(t, over, 1)
	o := over[0]
	billHolders := list(t, o, "holders")
	billOthers := 0
	if n, ok := o["other_holders"].(json.Number); ok {
		v, err := n.Int64()
		require.NoError(t, err)
		billOthers = int(v)
	}
	cat, err := schemas.LoadCatalog(exampleCatalog)
	require.NoError(t, err)
	f, err := os.Open(samples)
	require.NoError(t, err)
	defer f.Close() //nolint:errcheck // read-only
	res, _, err := billing.BillStream(f, cat, billing.NewPeriod(2026, time.November, cat.Location), schemas.ReadOptions{})
	require.NoError(t, err)
	seen := 0
	for _, d := range export.Build(res, export.Meta{}) {
		if d.DataQuality == nil || len(d.DataQuality.Oversubscribed) == 0 {
			continue
		}
		require.Len(t, d.DataQuality.Oversubscribed, 1, d.Project)
		do := d.DataQuality.Oversubscribed[0]
		require.Equal(t, fields(o, "gpu", "basis", "peak", "first", "last", "over_seconds"),
			[]string{do.GPU, do.Basis, do.Peak.String(), do.First.Format(time.RFC3339), do.Last.Format(time.RFC3339),
				billing.FormatSeconds(do.OverMS)}, d.Project)
		require.Equal(t, len(billHolders)+billOthers, len(do.Holders)+do.OtherHolders, "%s: every holder named or counted", d.Project)
		for _, h := range do.Holders {
			require.Equal(t, d.Project, h.Project)
			require.Contains(t, billHolders, map[string]any{"project": h.Project, "user": h.User})
			seen++
			st := d.Statement(h.User)
			stOver, stWarnings := billOversub(t, samples, h.User)
			require.Len(t, stOver, 1)
			require.Len(t, st.DataQuality.Oversubscribed, 1)
			require.Equal(t, fields(stOver[0], "other_holders"), []string{strconv.Itoa(st.DataQuality.Oversubscribed[0].OtherHolders)})
			var docWarning string
			for _, w := range st.Warnings {
				if w.Code == billing.WarnOversubscribed {
					docWarning = w.Message
				}
			}
			require.NotEmpty(t, docWarning)
			require.Contains(t, stWarnings, docWarning, "%s's statement words it as bill --user does", h.User)
		}
	}
	require.Equal(t, 3, seen, "nlp-lab's two holders and cv-lab's one")
}
