package export

import (
	"bytes"
	"testing"
	"time"

	js "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas/jsonschema"
)

// finalLab is the fixture's "lab" invoice, finalized as 2026-000042.
func finalLab(t *testing.T) []byte {
	t.Helper()
	draft, err := docByProject(t, fixtureDocs(t), "lab").Marshal()
	require.NoError(t, err)
	final, err := Stamp(draft, "2026-000042", time.Date(2026, time.December, 4, 2, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	return final
}

// A reissue starts from the voided document without its number and issue
// date, so that it is a draft and finalizing stamps the next number.
func TestReissueIsADraftThatStamps(t *testing.T) {
	final := finalLab(t)
	re, err := Reissue(final)
	require.NoError(t, err)
	d, err := Parse(re)
	require.NoError(t, err)
	require.True(t, d.IsDraft())
	require.Nil(t, d.IssuedAt)
	require.NotContains(t, string(re), `"number"`)
	require.NotContains(t, string(re), `"issued_at"`)
	draft, err := docByProject(t, fixtureDocs(t), "lab").Marshal()
	require.NoError(t, err)
	require.Equal(t, string(draft), string(re), "the reissue is the voided draft's content")
	next, err := Stamp(re, "2026-000043", time.Date(2026, time.December, 5, 2, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Contains(t, string(next), `"number": "2026-000043"`)
	_, err = Reissue([]byte("{"))
	require.Error(t, err)
}

// A credit note is a document: the voided invoice's lines negated, its own
// number and issue date, the invoice it cancels, the currency.
func TestCreditNoteDocument(t *testing.T) {
	final := finalLab(t)
	inv, err := Parse(final)
	require.NoError(t, err)
	require.True(t, inv.Total.IsPositive(), "the fixture bills something")
	at := time.Date(2026, time.December, 6, 3, 0, 0, 0, time.UTC)
	b, err := CreditNote(final, "2026-000042-CN1", at)
	require.NoError(t, err)
	cn, err := Parse(b)
	require.NoError(t, err)
	require.Equal(t, "2026-000042-CN1", cn.Number)
	require.Equal(t, "2026-000042", cn.CreditFor)
	require.Equal(t, inv.Currency, cn.Currency)
	require.Equal(t, inv.Project, cn.Project)
	require.Equal(t, inv.Period, cn.Period)
	require.True(t, cn.IssuedAt.Equal(at))
	require.Equal(t, "+08:00", cn.IssuedAt.Format("-07:00"), "issued in the invoice's time zone")
	require.True(t, cn.Total.Equal(inv.Total.Neg()), "total %s, want -%s", cn.Total, inv.Total)
	require.Len(t, cn.Lines, len(inv.Lines))
	var sum = inv.Total.Sub(inv.Total)
	for _, l := range cn.Lines {
		sum = sum.Add(l.Amount)
		require.False(t, l.Amount.IsPositive(), "line %+v", l)
		require.False(t, l.UnitPrice.IsNegative(), "a unit price stays a price: %+v", l)
	}
	require.True(t, sum.Equal(cn.Total), "lines sum to %s, total %s", sum, cn.Total)
	for i, st := range cn.Students {
		require.True(t, st.Total.Equal(inv.Students[i].Total.Neg()), "%+v", st)
	}
	require.Empty(t, cn.Warnings)
	require.Contains(t, string(b), `"credit_for": "2026-000042"`)
	require.Contains(t, string(b), `"total": "-`+inv.Total.StringFixed(2)+`"`)
	again, err := CreditNote(final, "2026-000042-CN1", at)
	require.NoError(t, err)
	require.Equal(t, b, again, "the same credit note gives the same bytes")
	back, err := cn.Marshal()
	require.NoError(t, err)
	require.Equal(t, string(b), string(back), "canonical")

	// The schema takes it.
	sd, err := js.UnmarshalJSON(bytes.NewReader(jsonschema.InvoiceV1))
	require.NoError(t, err)
	c := js.NewCompiler()
	const url = "https://cardhour.dev/schemas/cardhour.invoice.v1.json"
	require.NoError(t, c.AddResource(url, sd))
	sch, err := c.Compile(url)
	require.NoError(t, err)
	v, err := js.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(v))

	// A draft, a credit note or a statement cannot be credited.
	draft, err := docByProject(t, fixtureDocs(t), "lab").Marshal()
	require.NoError(t, err)
	_, err = CreditNote(draft, "X-CN1", at)
	require.ErrorContains(t, err, "draft")
	_, err = CreditNote(b, "X-CN1", at)
	require.ErrorContains(t, err, "credit note itself")
	_, err = Reissue(b)
	require.ErrorContains(t, err, "credit note")
	_, err = CreditNote(final, "", at)
	require.Error(t, err)
}

// Documents that differ only in generated_at and data_cutoff have the same
// content; any other field is content.
func TestSameContent(t *testing.T) {
	lab := docByProject(t, fixtureDocs(t), "lab")
	a, err := lab.Marshal()
	require.NoError(t, err)
	later := *lab.clone()
	later.GeneratedAt = later.GeneratedAt.Add(time.Hour)
	later.DataCutoff = later.DataCutoff.Add(time.Minute)
	b, err := later.Marshal()
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	same, err := SameContent(a, b)
	require.NoError(t, err)
	require.True(t, same)
	for name, change := range map[string]func(d *Document){
		"a line's amount": func(d *Document) { d.Lines[0].Amount = d.Lines[0].Amount.Add(d.Lines[0].Amount) },
		"a warning":       func(d *Document) { d.Warnings = append(d.Warnings, Warning{Code: "x", Message: "new"}) },
		"a student name":  func(d *Document) { d.Students[0].Name = "Someone Else" },
		"a release": func(d *Document) {
			d.Releases = append(d.Releases, Release{InstanceID: "MIG-9", Status: billing.ReleaseDone})
		},
		"an over-subscribed card": func(d *Document) {
			d.DataQuality.Oversubscribed = append(d.DataQuality.Oversubscribed, Oversubscription{GPU: "GPU-x", Basis: "memory",
				Peak: decimal.RequireFromString("1.5"), OverMS: 1000, First: d.GeneratedAt, Last: d.GeneratedAt})
		},
		"the catalog": func(d *Document) { d.CatalogVersion++ },
		"the funding": func(d *Document) { d.Funding = "NSFC-0" },
	} {
		c := lab.clone()
		change(c)
		cb, err := c.Marshal()
		require.NoError(t, err)
		same, err := SameContent(a, cb)
		require.NoError(t, err)
		require.False(t, same, name)
	}
	_, err = SameContent(a, []byte("{"))
	require.Error(t, err)
}
