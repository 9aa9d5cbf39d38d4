package export

import (
	"fmt"
	"strings"
	"time"

	"github.com/cardhour/cardhour/billing"
)

// How the renderings show the over-subscribed cards of a document
// (DataQuality.Oversubscribed, rule 11 of docs/billing.md): a CSV row each
// (RowOversubscribed), a sheet of the workbook (SheetOversubscribed, only when
// a document has one) and a section of the PDF, in English and Chinese. A
// document without them renders as before, byte for byte.

// RowOversubscribed is the CSV row kind of an over-subscribed card.
const RowOversubscribed = "oversubscribed 超配"

// SheetOversubscribed is the workbook's sheet of over-subscribed cards.
const SheetOversubscribed = "超配 Oversubscribed"

// XLSXOversubscribedHeader is its header, Chinese then English in each cell.
var XLSXOversubscribedHeader = []string{
	"项目 Project", "卡 Card", "依据 Basis", "峰值 Peak", "超出秒数 Seconds over", "首次 First", "最后 Last",
	"占用者 Holders", "其他占用者 Other holders", "切片 Shares",
}

// basisText names a basis in both languages.
func basisText(basis string) string {
	switch basis {
	case "memory":
		return "memory 显存"
	case "cores":
		return "compute 算力"
	}
	return basis
}

// peakText is the peak as a percentage of the card ("101 %").
func peakText(o *Oversubscription) string { return o.Peak.Shift(2).String() + " %" }

// holdersText names the holders and counts the others, in both languages:
// "lab/alice, lab/bob + 1 other 另有 1 个".
func holdersText(o *Oversubscription) string {
	names := make([]string, 0, len(o.Holders))
	for _, h := range o.Holders {
		names = append(names, billing.Holder(h).String())
	}
	s := strings.Join(names, ", ")
	if o.OtherHolders > 0 {
		others := "others"
		if o.OtherHolders == 1 {
			others = "other"
		}
		s += fmt.Sprintf(" + %d %s 另有 %d 个", o.OtherHolders, others, o.OtherHolders)
	}
	return s
}

// spanText is the first and last instant above the card, in the document's
// zone (the times carry it).
func spanText(o *Oversubscription) string {
	const layout = "2006-01-02 15:04:05"
	last := o.Last.Format(layout)
	if o.First.Format(time.DateOnly) == o.Last.Format(time.DateOnly) {
		last = o.Last.Format(time.TimeOnly)
	}
	return o.First.Format(layout) + " – " + last
}

// oversubscriptionNote is the over-subscription in one sentence, English then
// Chinese, for the CSV's message cell.
func oversubscriptionNote(o *Oversubscription) string {
	secs := billing.FormatSeconds(o.OverMS)
	s := fmt.Sprintf("card %s, %s: peak %s of the card, %s s above it (%s); held by %s",
		o.GPU, basisText(o.Basis), peakText(o), secs, spanText(o), holdersText(o))
	if len(o.Instances) > 0 {
		s += "; shares " + strings.Join(o.Instances, ", ")
	}
	return s + fmt.Sprintf("; each share is billed for its own time / 卡 %s 的切片合计峰值为整卡的 %s，超出 %s 秒，各切片各自计费，请核查调度超配",
		o.GPU, peakText(o), secs)
}

// oversubscribedRows are the CSV rows of a document's over-subscribed cards;
// head gives the first columns (the user column names the holder when the
// row names one only).
func oversubscribedRows(d *Document, head func(kind, user string) []string) [][]string {
	if d.DataQuality == nil {
		return nil
	}
	var rows [][]string
	for i := range d.DataQuality.Oversubscribed {
		o := &d.DataQuality.Oversubscribed[i]
		user := ""
		if len(o.Holders) == 1 {
			user = o.Holders[0].User
		}
		row := append(head(RowOversubscribed, user), "", "", "", "", "", "", "", "", "", "", "", "", "", "", "",
			billing.CSVCell(oversubscriptionNote(o)))
		rows = append(rows, row)
	}
	return rows
}

// hasOversubscribed reports whether one of docs records an over-subscribed card.
func hasOversubscribed(docs []*Document) bool {
	for _, d := range docs {
		if d.DataQuality != nil && len(d.DataQuality.Oversubscribed) > 0 {
			return true
		}
	}
	return false
}

// oversubscribed is the workbook's sheet of over-subscribed cards: a row per
// card, basis and project.
func (x *xlsxWriter) oversubscribed(docs []*Document) error {
	s, err := x.open(SheetOversubscribed, XLSXOversubscribedHeader, 16, 24, 14, 10, 14, 26, 26, 40, 12, 60)
	if err != nil {
		return err
	}
	for _, d := range docs {
		if d.DataQuality == nil {
			continue
		}
		for i := range d.DataQuality.Oversubscribed {
			o := &d.DataQuality.Oversubscribed[i]
			names := make([]string, 0, len(o.Holders))
			for _, h := range o.Holders {
				names = append(names, billing.Holder(h).String())
			}
			if err := s.add(text(d.Project), text(o.GPU), text(basisText(o.Basis)), s.num(o.Peak, x.rate), s.secs(o.OverMS),
				text(o.First.Format(time.RFC3339)), text(o.Last.Format(time.RFC3339)), text(strings.Join(names, ", ")),
				s.int(int64(o.OtherHolders), 0), text(strings.Join(o.Instances, ", "))); err != nil {
				return err
			}
		}
	}
	return s.done()
}

// oversubscribedTable is the PDF's section of over-subscribed cards, when
// the document has some: a row per card and basis, the shares listed below.
func (r *pdfDoc) oversubscribedTable() {
	if r.d.DataQuality == nil || len(r.d.DataQuality.Oversubscribed) == 0 {
		return
	}
	r.section("Over-subscribed cards 超配")
	cols := []pdfCol{{"Card 卡", 30, "L", true}, {"Basis 依据", 18, "L", false}, {"Peak 峰值", 14, "R", false},
		{"Hours over 超出小时", 16, "R", false}, {"When 时间", 38, "L", false}, {"Holders 占用者", 64, "L", false}}
	r.begin(cols)
	var shares []string
	for i := range r.d.DataQuality.Oversubscribed {
		o := &r.d.DataQuality.Oversubscribed[i]
		r.row(cols, 8, o.GPU, basisText(o.Basis), peakText(o), hoursOf(o.OverMS/1000), spanText(o), holdersText(o))
		if len(o.Instances) > 0 {
			shares = append(shares, "• "+o.GPU+" ("+basisText(o.Basis)+"): "+strings.Join(o.Instances, ", "))
		}
	}
	r.end()
	r.para("The shares of a card held at once added up to more than the whole card. Each share is billed for its own time; "+
		"no amount is changed. 同一张卡上同时占用的切片合计超过整卡；各切片按各自时间计费，金额不变，请核查调度超配。", 8.5)
	if len(shares) > 0 {
		r.para("Shares 切片:", 8.5)
		for _, s := range shares {
			r.para(s, 8.5)
		}
	}
}
