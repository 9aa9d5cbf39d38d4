package export

import "time"

// Marks of a rendering: what a draft, a voided invoice and a credit note say
// on every PDF page, in a CSV row before the document's rows and at the top of
// every XLSX sheet. They are applied when rendering: the stored document's
// bytes never change (a voided invoice's Void is set by the caller, never stored).
const (
	MarkDraft  = "draft 草稿"
	MarkVoid   = "void 已作废"
	MarkCredit = "credit_note 红字发票"
)

// Mark is one mark of a document: its kind (MarkDraft, MarkVoid, MarkCredit)
// and the sentence shown.
type Mark struct {
	Kind, Text string
}

// Marks are the document's marks, in the order they are shown: a draft's, a
// voided invoice's, a credit note's. None for a finalized invoice.
func (d *Document) Marks() []Mark {
	var out []Mark
	if d.IsDraft() {
		out = append(out, Mark{MarkDraft, "草稿 DRAFT — not a valid invoice until it is finalized 定稿前不是有效账单"})
	}
	if v := d.Void; v != nil {
		text := "已作废 VOID — voided by credit note 由红字发票 " + orNone(v.CreditNote) + " 作废"
		if !v.VoidedAt.IsZero() {
			text += ", " + v.VoidedAt.Format(time.RFC3339)
		}
		if v.Reason != "" {
			text += " · reason 原因: " + v.Reason
		}
		out = append(out, Mark{MarkVoid, text})
	}
	if d.CreditFor != "" {
		out = append(out, Mark{MarkCredit, "红字发票 Credit note — voids invoice 冲销发票 " + d.CreditFor})
	}
	return out
}
