package export

import (
	"bytes"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	js "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
	"github.com/cardhour/cardhour/schemas/jsonschema"
)

// sharesResult is worked example 7 of docs/billing.md (three HAMi shares of
// one A100 80GB, nlp-lab, 10 November, under the example catalog) with a
// fourth share of the same card held by cv-lab's student from 11:40 to
// 12:00: from 11:30 to 12:00 the memory shares add up to 0.05 + 0.96 (+ 0.10
// from 11:40) of the card, peak 111 %, 1 800 s over.
func sharesResult(t testing.TB) *billing.Result {
	t.Helper()
	cat, err := schemas.LoadCatalog("../../schemas/examples/catalog.yaml")
	require.NoError(t, err)
	at := func(h, m int) int64 { return time.Date(2026, 11, 10, h, m, 0, 0, cat.Location).UnixMilli() }
	acc := billing.NewAccumulator(cat, billing.NewPeriod(2026, time.November, cat.Location))
	hold := func(project, ns, pod, user, profile string, from, to int64) {
		for ts := from; ts < to; ts += 60_000 {
			s := schemas.Sample{StartMS: ts, IntervalMS: 60_000, Node: "gpu-node-07", GPUUUID: "GPU-a",
				GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: "GPU-a/share/" + ns + "/" + pod + "/main", Profile: profile,
				Project: project, User: user, UtilKnown: true, Util: 0.6, Processes: 1}
			require.NoError(t, s.Validate())
			acc.Add(&s)
		}
	}
	hold("nlp-lab", "nlp", "nb-1", "2023110042", "1/20", at(10, 0), at(12, 0))
	hold("nlp-lab", "nlp", "nb-2", "2023110043", "mem=10%", at(10, 0), at(11, 0))
	hold("nlp-lab", "nlp", "train", "2023110044", "mem=96%", at(11, 30), at(12, 0))
	hold("cv-lab", "cv", "exp", "2022310101", "mem=10%", at(11, 40), at(12, 0))
	return acc.Invoices()
}

// sharesDocs are its documents, finalized, the students named in Chinese.
func sharesDocs(t *testing.T) map[string]*Document {
	t.Helper()
	out := map[string]*Document{}
	for _, d := range Build(sharesResult(t), fixtureMeta) {
		d.SetNames(map[string]string{"2023110042": "李雷", "2023110043": "韩梅梅", "2023110044": "王芳", "2022310101": "张伟"})
		draft, err := d.Marshal()
		require.NoError(t, err)
		final, err := Stamp(draft, "2026-000077", fixtureMeta.GeneratedAt)
		require.NoError(t, err)
		out[d.Project], err = Parse(final)
		require.NoError(t, err)
	}
	return out
}

func invoiceSchema(t *testing.T) *js.Schema {
	t.Helper()
	sd, err := js.UnmarshalJSON(bytes.NewReader(jsonschema.InvoiceV1))
	require.NoError(t, err)
	c := js.NewCompiler()
	const url = "https://cardhour.dev/schemas/cardhour.invoice.v1.json"
	require.NoError(t, c.AddResource(url, sd))
	sch, err := c.Compile(url)
	require.NoError(t, err)
	return sch
}

func validate(t *testing.T, sch *js.Schema, b []byte) {
	t.Helper()
	v, err := js.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(v))
}

// Each project's invoice records the over-subscribed card its shares were
// on, as the project sees it: its holders and shares named, the other
// project's holder counted, with a warning; the document is canonical and
// the JSON Schema takes it.
func TestDocumentOversubscribedScopedToProject(t *testing.T) {
	docs := sharesDocs(t)
	sch := invoiceSchema(t)
	nlp, cv := docs["nlp-lab"], docs["cv-lab"]
	require.NotNil(t, nlp)
	require.NotNil(t, cv)

	require.Len(t, nlp.DataQuality.Oversubscribed, 1)
	o := nlp.DataQuality.Oversubscribed[0]
	require.Equal(t, "GPU-a", o.GPU)
	require.Equal(t, "memory", o.Basis)
	require.Equal(t, "1.11", o.Peak.String())
	require.EqualValues(t, 1_800_000, o.OverMS)
	require.Equal(t, "2026-11-10T11:30:00+08:00", o.First.Format(time.RFC3339))
	require.Equal(t, "2026-11-10T12:00:00+08:00", o.Last.Format(time.RFC3339))
	require.Equal(t, []Holder{{"nlp-lab", "2023110042"}, {"nlp-lab", "2023110044"}}, o.Holders)
	require.Equal(t, 1, o.OtherHolders, "cv-lab's student is counted")
	require.Equal(t, []string{"GPU-a/share/nlp/nb-1/main", "GPU-a/share/nlp/train/main"}, o.Instances)

	require.Len(t, cv.DataQuality.Oversubscribed, 1)
	require.Equal(t, []Holder{{"cv-lab", "2022310101"}}, cv.DataQuality.Oversubscribed[0].Holders)
	require.Equal(t, 2, cv.DataQuality.Oversubscribed[0].OtherHolders)
	require.Equal(t, []string{"GPU-a/share/cv/exp/main"}, cv.DataQuality.Oversubscribed[0].Instances)

	var warned []Warning
	for _, w := range nlp.Warnings {
		if w.Code == billing.WarnOversubscribed {
			warned = append(warned, w)
		}
	}
	require.Len(t, warned, 1)
	require.Equal(t, "nlp-lab", warned[0].Project)
	require.Equal(t, []string{"2023110042", "2023110044"}, warned[0].Users)
	require.Contains(t, warned[0].Message, `card "GPU-a": its shares' memory (显存) added up to 111 % of the card`)
	require.Contains(t, warned[0].Message, "nlp-lab/2023110042, nlp-lab/2023110044 and 1 other holder")

	for project, d := range docs {
		b, err := d.Marshal()
		require.NoError(t, err)
		validate(t, sch, b)
		back, err := Parse(b)
		require.NoError(t, err)
		again, err := back.Marshal()
		require.NoError(t, err)
		require.Equal(t, string(b), string(again), "%s: Parse then Marshal gives the bytes back", project)
		other := map[string][]string{"nlp-lab": {"2022310101", "cv/exp"}, "cv-lab": {"2023110042", "2023110044", "nb-1", "train"}}
		for _, s := range other[project] {
			require.NotContains(t, string(b), s, "%s's invoice names another project's holder or share", project)
		}
		if project == "nlp-lab" {
			golden(t, "invoice-oversub.json", b)
		}
	}
}

// A student's statement keeps the over-subscription they took part in,
// with no other holder named and no share listed, worded as `cardhour bill
// --user` words it; a student whose share had ended before has none.
func TestStatementOversubscribed(t *testing.T) {
	nlp := sharesDocs(t)["nlp-lab"]
	res := sharesResult(t)
	sch := invoiceSchema(t)
	for _, user := range []string{"2023110042", "2023110044"} {
		st := nlp.Statement(user)
		require.Len(t, st.DataQuality.Oversubscribed, 1, user)
		o := st.DataQuality.Oversubscribed[0]
		require.Equal(t, []Holder{{"nlp-lab", user}}, o.Holders)
		require.Equal(t, 2, o.OtherHolders)
		require.Empty(t, o.Instances)
		var got []string
		for _, w := range st.Warnings {
			if w.Code == billing.WarnOversubscribed {
				got = append(got, w.Message)
				require.Equal(t, []string{user}, w.Users)
			}
		}
		var want []string
		bill := res.StatementFor(user)
		for _, msg := range bill.Warnings {
			if bill.WarningFor(msg).Code == billing.WarnOversubscribed {
				want = append(want, msg)
			}
		}
		require.Len(t, want, 1)
		require.Equal(t, want, got, "the statement says what bill --user says")
		b, err := st.Marshal()
		require.NoError(t, err)
		validate(t, sch, b)
		for _, other := range []string{"2023110042", "2023110044", "2022310101", "nb-1", "train"} {
			if other != user {
				require.NotContains(t, string(b), other, "%s's statement", user)
			}
		}
	}
	st := nlp.Statement("2023110043")
	require.Empty(t, st.DataQuality.Oversubscribed, "nb-2 ended before the card was over-subscribed")
	for _, w := range st.Warnings {
		require.NotEqual(t, billing.WarnOversubscribed, w.Code)
	}
}

// A document without over-subscriptions has no such field (a document
// stored before them keeps its bytes), and Parse refuses a malformed one.
func TestOversubscribedOptionalAndChecked(t *testing.T) {
	b, err := docByProject(t, fixtureDocs(t), "lab").Marshal()
	require.NoError(t, err)
	require.NotContains(t, string(b), "oversubscribed")
	good, err := sharesDocs(t)["nlp-lab"].Marshal()
	require.NoError(t, err)
	for name, bad := range map[string][2]string{
		"basis": {`"basis": "memory"`, `"basis": "max"`},
		"peak":  {`"peak": "1.11"`, `"peak": "1"`},
		"gpu":   {`"gpu": "GPU-a"`, `"gpu": ""`},
	} {
		require.Contains(t, string(good), bad[0])
		_, err := Parse([]byte(strings.Replace(string(good), bad[0], bad[1], 1)))
		require.ErrorContains(t, err, "data_quality.oversubscribed[0]."+name, name)
	}
}

// The CSV has a row of kind "oversubscribed 超配" with the finding in both
// languages; the workbook a sheet of its own (only when a document has
// one); both are golden files.
func TestCSVAndXLSXOversubscribed(t *testing.T) {
	nlp := sharesDocs(t)["nlp-lab"]
	var csvBuf bytes.Buffer
	require.NoError(t, WriteCSV(&csvBuf, nlp))
	out := csvBuf.String()
	require.Contains(t, out, "oversubscribed 超配")
	require.Contains(t, out, "card GPU-a, memory 显存: peak 111 % of the card, 1800 s above it (2026-11-10 11:30:00 – 12:00:00)")
	require.Contains(t, out, "卡 GPU-a 的切片合计峰值为整卡的 111 %，超出 1800 秒")
	golden(t, "invoice-oversub.csv", csvBuf.Bytes())

	var xb bytes.Buffer
	require.NoError(t, WriteXLSX(&xb, nlp))
	dump := dumpXLSX(t, xb.Bytes())
	require.Contains(t, dump, "== "+SheetOversubscribed)
	require.Contains(t, dump, `fmt="0.0%" "1.11" shown="111.0%"`)
	golden(t, "invoice-oversub.xlsx.txt", []byte(dump))

	var again bytes.Buffer
	require.NoError(t, WriteXLSX(&again, nlp))
	require.Equal(t, xb.Bytes(), again.Bytes(), "the same document gives the same workbook")

	var plain bytes.Buffer
	require.NoError(t, WriteXLSX(&plain, docByProject(t, fixtureDocs(t), "lab")))
	require.NotContains(t, dumpXLSX(t, plain.Bytes()), SheetOversubscribed, "no sheet without an over-subscription")
}

// The PDF, as a viewer draws it: every glyph of the zh-CN invoice is in its
// font (writePDF checks each), its text has the section, and its first page,
// rendered by poppler, is testdata/invoice-oversub.png within the tolerance
// of TestPDFGoldenImage (regenerate with CARDHOUR_UPDATE_GOLDEN=1 and look at it).
func TestPDFOversubscribed(t *testing.T) {
	needPDFTools(t)
	nlp := sharesDocs(t)["nlp-lab"]
	pdf := writePDF(t, nlp, PDFOptions{})
	require.Equal(t, pdf, writePDF(t, nlp, PDFOptions{}), "the same document gives the same PDF")
	txt := pdfText(t, pdf)
	for _, want := range []string{"Over-subscribed cards 超配", "GPU-a", "memory 显存", "111 %", "0.50",
		"nlp-lab/2023110042, nlp-lab/2023110044", "+ 1 other 另有 1 个", "各切片按各自时间计费", "GPU-a/share/nlp/train/main"} {
		require.Contains(t, txt, want)
	}
	require.NotContains(t, txt, "2022310101")
	golden(t, "invoice-oversub.pdf.txt", []byte(txt))
	st := writePDF(t, nlp.Statement("2023110044"), PDFOptions{})
	stText := pdfText(t, st)
	require.Contains(t, stText, "nlp-lab/2023110044")
	require.Contains(t, stText, "+ 2 others 另有 2 个")
	require.NotContains(t, stText, "2023110042")

	got := pdfPage(t, pdf, 1, 60)
	path := filepath.Join("testdata", "invoice-oversub.png")
	if updateGolden() {
		var buf bytes.Buffer
		require.NoError(t, png.Encode(&buf, got))
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	f, err := os.Open(path)
	require.NoError(t, err, "CARDHOUR_UPDATE_GOLDEN=1 go test -run TestPDFOversubscribed ./billing/export/ creates it")
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	want := image.NewGray(img.Bounds())
	draw.Draw(want, want.Bounds(), img, img.Bounds().Min, draw.Src)
	if diff := goldenPNGDiff(got, want); diff > 0.002 {
		t.Fatalf("page 1 differs from %s in %.2f%% of its pixels (tolerance 0.2%%)", path, 100*diff)
	}
}
