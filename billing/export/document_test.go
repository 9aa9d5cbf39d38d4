package export

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	js "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas/jsonschema"
)

func TestBuildOneDocumentPerProjectSorted(t *testing.T) {
	res := fixtureResult(t)
	docs := Build(res, fixtureMeta)
	var projects []string
	for _, d := range docs {
		projects = append(projects, d.Project)
	}
	require.Equal(t, []string{"-lab", "lab", "other"}, projects)
	lab := docByProject(t, docs, "lab")
	require.Equal(t, Schema, lab.Schema)
	require.Equal(t, "2026-11", lab.Period)
	require.Equal(t, "Asia/Shanghai", lab.Timezone)
	require.Equal(t, "CNY", lab.Currency)
	require.Equal(t, "F-1", lab.Funding)
	require.Equal(t, int64(7), lab.CatalogVersion)
	require.Empty(t, lab.Number)
	require.Nil(t, lab.IssuedAt)
	_, off := lab.GeneratedAt.Zone()
	require.Equal(t, 8*3600, off, "times are in the catalog time zone")
	require.Equal(t, int64(3), lab.DataQuality.SkippedLines)
	for i := range res.Invoices {
		require.True(t, res.Invoices[i].Total.Equal(docs[i].Total), "document total = billing's total")
	}
}

func TestStudentTotalsAreDecimalSumsOfLines(t *testing.T) {
	lab := docByProject(t, Build(fixtureResult(t), fixtureMeta), "lab")
	want := map[string]decimal.Decimal{}
	sessions := map[string]int{}
	reserved := decimal.Zero
	for _, l := range lab.Lines {
		if l.Kind == billing.KindUsage {
			want[l.User] = want[l.User].Add(l.Amount)
			sessions[l.User] += l.Sessions
		} else {
			reserved = reserved.Add(l.Amount)
		}
	}
	sum := decimal.Zero
	var users []string
	for _, st := range lab.Students {
		users = append(users, st.User)
		require.True(t, want[st.User].Equal(st.Total), "%s: %s != %s", st.User, want[st.User], st.Total)
		require.Equal(t, sessions[st.User], st.Sessions)
		sum = sum.Add(st.Total)
	}
	require.Equal(t, []string{"alice", "bob", "carol"}, users, "carol has unpriced usage only: listed with zero")
	require.True(t, sum.Add(reserved).Equal(lab.Total), "students + reservations = total")
	// bob's 3g line: 1 234.567 s → 1 235 s billed × 5.125/h = 1.758… → 1.76.
	i := slices.IndexFunc(lab.Lines, func(l Line) bool { return l.User == "bob" && l.SKU == "a3g" })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, "1.76", billing.FormatMoney(lab.Lines[i].Amount))
	require.Equal(t, "5.125", billing.FormatPrice(lab.Lines[i].UnitPrice))
}

func TestMarshalIsCanonical(t *testing.T) {
	docs := fixtureDocs(t)
	for i := range docs {
		d := &docs[i]
		a, err := d.Marshal()
		require.NoError(t, err)
		b, err := d.Marshal()
		require.NoError(t, err)
		require.Equal(t, a, b)

		// The order of lists without meaning does not change the bytes.
		sh := d.clone()
		r := rand.New(rand.NewPCG(1, uint64(i)))
		r.Shuffle(len(sh.Lines), func(x, y int) { sh.Lines[x], sh.Lines[y] = sh.Lines[y], sh.Lines[x] })
		r.Shuffle(len(sh.Students), func(x, y int) { sh.Students[x], sh.Students[y] = sh.Students[y], sh.Students[x] })
		r.Shuffle(len(sh.Warnings), func(x, y int) { sh.Warnings[x], sh.Warnings[y] = sh.Warnings[y], sh.Warnings[x] })
		c, err := sh.Marshal()
		require.NoError(t, err)
		require.Equal(t, string(a), string(c))

		// Parse then Marshal returns the same bytes.
		p, err := Parse(a)
		require.NoError(t, err)
		e, err := p.Marshal()
		require.NoError(t, err)
		require.Equal(t, string(a), string(e))

		// A document built again from the same result has the same bytes.
		again := docByProject(t, fixtureDocs(t), d.Project)
		f, err := again.Marshal()
		require.NoError(t, err)
		require.Equal(t, string(a), string(f))
	}
}

func TestMarshalMoneyAsDecimalStrings(t *testing.T) {
	lab := docByProject(t, fixtureDocs(t), "lab")
	b, err := lab.Marshal()
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, billing.FormatMoney(lab.Total), m["total"])
	line := m["lines"].([]any)[0].(map[string]any)
	require.IsType(t, "", line["amount"])
	require.IsType(t, "", line["unit_price"])
	require.Regexp(t, `^\d+\.\d\d$`, line["amount"])
	require.Contains(t, string(b), `"generated_at": "2026-12-04T09:02:03+08:00"`)
}

func TestGoldenDocument(t *testing.T) {
	lab := docByProject(t, fixtureDocs(t), "lab")
	b, err := lab.Marshal()
	require.NoError(t, err)
	golden(t, "invoice-lab.json", b)
	s, err := lab.Statement("bob").Marshal()
	require.NoError(t, err)
	golden(t, "statement-lab-bob.json", s)
}

func TestParseRejectsBadDocuments(t *testing.T) {
	lab := docByProject(t, fixtureDocs(t), "lab")
	good, err := lab.Marshal()
	require.NoError(t, err)
	for name, tc := range map[string]struct{ from, to, want string }{
		"schema":        {`"schema": "cardhour.invoice.v1"`, `"schema": "cardhour.invoice.v2"`, "schema"},
		"unknown field": {`"project": "lab"`, `"projekt": "lab"`, "projekt"},
		"period":        {`"period": "2026-11"`, `"period": "2026-13"`, "period"},
		"amount":        {`"total": "`, `"total": "x`, "total: x"},
		"line amount":   {`"amount": "0.20"`, `"amount": 0.2`, "lines[0].amount: 0.2 is not a decimal string"},
		"kind":          {`"kind": "usage"`, `"kind": "refund"`, "lines[0].kind"},
		"not json":      {`{`, `[`, "invoice document"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := strings.Replace(string(good), tc.from, tc.to, 1)
			require.NotEqual(t, string(good), bad)
			_, err := Parse([]byte(bad))
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err = Parse(append(slices.Clone(good), []byte("{}")...))
	require.Error(t, err)
}

func TestStamp(t *testing.T) {
	lab := docByProject(t, fixtureDocs(t), "lab")
	draft, err := lab.Marshal()
	require.NoError(t, err)
	issued := time.Date(2026, time.December, 4, 2, 0, 0, 0, time.UTC)
	final, err := Stamp(draft, "2026-000042", issued)
	require.NoError(t, err)
	require.Contains(t, string(final), `"number": "2026-000042"`)
	require.Contains(t, string(final), `"issued_at": "2026-12-04T10:00:00+08:00"`)
	d, err := Parse(final)
	require.NoError(t, err)
	require.Equal(t, "2026-000042", d.Number)
	require.True(t, d.IssuedAt.Equal(issued))
	// Only the number and the issue date changed.
	d.Number, d.IssuedAt = "", nil
	back, err := d.Marshal()
	require.NoError(t, err)
	require.Equal(t, string(draft), string(back))
	// Stamped bytes are canonical.
	again, err := d.Marshal()
	require.NoError(t, err)
	require.Equal(t, back, again)

	viaFunc, err := StampFunc(issued)("2026-000042", draft)
	require.NoError(t, err)
	require.Equal(t, string(final), string(viaFunc))

	_, err = Stamp(final, "2026-000043", issued)
	require.ErrorContains(t, err, "already has number")
	_, err = Stamp(draft, "", issued)
	require.Error(t, err)
	_, err = Stamp([]byte("{"), "2026-1", issued)
	require.Error(t, err)
}

func TestStatementNamesNoOtherStudent(t *testing.T) {
	docs := fixtureDocs(t)
	everyone := []string{"alice", "bob", "carol", "dave", "=1+2", "Alice 李", "Bob 王", "Dave 张"}
	names := map[string]string{"alice": "Alice 李", "bob": "Bob 王", "dave": "Dave 张"}
	for i := range docs {
		for _, user := range []string{"alice", "bob", "carol", "dave", "=1+2", "nobody"} {
			st := docs[i].Statement(user)
			b, err := st.Marshal()
			require.NoError(t, err)
			for _, other := range everyone {
				if other == user || other == names[user] {
					continue
				}
				require.NotContains(t, string(b), `"`+other+`"`, "%s's statement on %s", user, docs[i].Project)
				require.NotContains(t, string(b), "/"+other, "%s's statement on %s", user, docs[i].Project)
				require.NotContains(t, string(b), `\"`+other+`\"`, "%s's statement on %s", user, docs[i].Project)
			}
			require.Equal(t, user, st.User)
			for _, l := range st.Lines {
				require.Equal(t, billing.KindUsage, l.Kind)
				require.Equal(t, user, l.User)
			}
		}
	}
	// bob's statement on lab: his lines, his total, his conflict with one other holder counted.
	lab := docByProject(t, docs, "lab")
	bob := lab.Statement("bob")
	require.Len(t, bob.Lines, 2)
	require.Len(t, bob.Students, 1)
	require.True(t, bob.Students[0].Total.Equal(bob.Total))
	require.Equal(t, "Bob 王", bob.Students[0].Name)
	require.Len(t, bob.DataQuality.Conflicts, 1)
	require.Equal(t, 1, bob.DataQuality.Conflicts[0].OtherHolders)
	codes := map[string]bool{}
	for _, w := range bob.Warnings {
		codes[w.Code] = true
	}
	require.True(t, codes[billing.WarnConflict])
	require.True(t, codes[billing.WarnInput], "warnings about the whole input are kept")
	require.False(t, codes[billing.WarnUnpriced], "carol's unpriced usage is not in bob's statement")
	// Someone without usage gets an empty statement that says so.
	nobody := lab.Statement("nobody")
	require.Empty(t, nobody.Lines)
	require.True(t, nobody.Total.IsZero())
	require.True(t, slices.ContainsFunc(nobody.Warnings, func(w Warning) bool { return w.Code == billing.WarnNoUsage }))
}

// The statement applies the same rule as bill --user (billing.Result.StatementFor).
func TestStatementMatchesBillingStatement(t *testing.T) {
	res := fixtureResult(t)
	docs := Build(res, fixtureMeta)
	for _, user := range []string{"alice", "bob", "carol", "dave"} {
		want := res.StatementFor(user)
		var got []string
		total := decimal.Zero
		for i := range docs {
			st := docs[i].Statement(user)
			if len(st.Lines) == 0 && len(st.Unpriced) == 0 {
				continue
			}
			total = total.Add(st.Total)
			for _, w := range st.Warnings {
				got = append(got, w.Message)
			}
		}
		wantTotal := decimal.Zero
		for _, inv := range want.Invoices {
			wantTotal = wantTotal.Add(inv.Total)
		}
		require.True(t, wantTotal.Equal(total), user)
		slices.Sort(got)
		got = slices.Compact(got)
		require.Equal(t, want.Warnings, got, user)
	}
}

func TestProjectDocumentNamesNoStudentOfAnotherProject(t *testing.T) {
	docs := fixtureDocs(t)
	lab, _ := docByProject(t, docs, "lab").Marshal()
	other, _ := docByProject(t, docs, "other").Marshal()
	require.NotContains(t, string(lab), "dave")
	require.NotContains(t, string(other), "alice")
	require.Contains(t, string(other), "and 1 other holder", "dave's conflict with alice is counted, not named")
}

func TestDocumentsMatchJSONSchema(t *testing.T) {
	doc, err := js.UnmarshalJSON(bytes.NewReader(jsonschema.InvoiceV1))
	require.NoError(t, err)
	c := js.NewCompiler()
	c.AssertFormat()
	const url = "https://cardhour.dev/schemas/cardhour.invoice.v1.json"
	require.NoError(t, c.AddResource(url, doc))
	sch, err := c.Compile(url)
	require.NoError(t, err)
	validate := func(b []byte) error {
		v, err := js.UnmarshalJSON(bytes.NewReader(b))
		require.NoError(t, err)
		return sch.Validate(v)
	}
	docs := fixtureDocs(t)
	for i := range docs {
		b, err := docs[i].Marshal()
		require.NoError(t, err)
		require.NoError(t, validate(b), docs[i].Project)
		stamped, err := Stamp(b, "2026-000001", fixtureMeta.GeneratedAt)
		require.NoError(t, err)
		require.NoError(t, validate(stamped))
		for _, u := range []string{"alice", "bob", "nobody"} {
			s, err := docs[i].Statement(u).Marshal()
			require.NoError(t, err)
			require.NoError(t, validate(s), "%s/%s", docs[i].Project, u)
		}
	}
	// The schema rejects what Parse rejects.
	b, _ := docs[0].Marshal()
	require.Error(t, validate(bytes.Replace(b, []byte(`"period": "2026-11"`), []byte(`"period": "2026-13"`), 1)))
	require.Error(t, validate(bytes.Replace(b, []byte(`"project": "-lab"`), []byte(`"projekt": "-lab"`), 1)))
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// Releases of the period are on the project's document; a statement keeps
// only the student's own, and a document without releases has no field.
func TestReleasesOnDocumentsAndStatements(t *testing.T) {
	docs := fixtureDocs(t)
	lab := docByProject(t, docs, "lab")
	require.Len(t, lab.Releases, 2)
	require.Equal(t, "MIG-1", lab.Releases[0].InstanceID, "sorted by time")
	alice := lab.Statement("alice")
	require.Len(t, alice.Releases, 1)
	require.Equal(t, billing.ReleaseFailed, alice.Releases[0].Status)
	require.Equal(t, "no handle: the holder reference is empty", alice.Releases[0].Failure)
	b, err := lab.Statement("carol").Marshal()
	require.NoError(t, err)
	require.NotContains(t, string(b), `"releases"`)
	other, err := docByProject(t, docs, "other").Marshal()
	require.NoError(t, err)
	require.NotContains(t, string(other), `"releases"`)

	full, err := lab.Marshal()
	require.NoError(t, err)
	back, err := Parse(full)
	require.NoError(t, err)
	again, err := back.Marshal()
	require.NoError(t, err)
	require.Equal(t, full, again)
	_, err = Parse(bytes.Replace(full, []byte(`"status": "done"`), []byte(`"status": "maybe"`), 1))
	require.ErrorContains(t, err, `releases[1].status: "maybe"`)
}
