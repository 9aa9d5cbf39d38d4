package export

import (
	"encoding/csv"
	"io"
	"strconv"
	"time"

	"github.com/cardhour/cardhour/billing"
)

// CSVHeader is the header row of WriteCSV: English then Chinese in each cell,
// since finance offices in China open these files in Excel.
var CSVHeader = []string{
	"period 账期", "invoice_number 发票号", "issued_at 开具日期", "project 项目", "project_name 项目名称",
	"funding 经费来源", "kind 类型", "user 学号/用户", "student_name 姓名", "sku 规格", "term 期限",
	"quantity 数量", "sessions 会话数", "used_seconds 使用秒数", "covered_seconds 预留覆盖秒数",
	"idle_seconds 空闲秒数", "billed_seconds 计费秒数", "unit_price 单价", "months_charged 计费月数",
	"list_amount 标价金额", "discount_rate 折扣率", "discount_amount 折扣金额", "amount 金额", "currency 币种",
	"message 说明",
}

// discountCells are a reservation line's months charged, list amount,
// discount rate (the fraction) and discount amount, and its note (the
// invoice that prepaid it); empty on other lines and on documents made
// before the discount was recorded.
func discountCells(l *Line) (cells []string, note string) {
	if !l.HasDiscount() {
		return []string{"", "", "", ""}, ""
	}
	return []string{strconv.Itoa(l.MonthsCharged), billing.FormatMoney(*l.ListAmount), billing.FormatPrice(*l.DiscountRate),
		billing.FormatMoney(*l.DiscountAmount)}, prepaidNote(l)
}

// prepaidNote says which invoice charged an upfront reservation's whole
// term, on its later months' lines; "" on others.
func prepaidNote(l *Line) string {
	if l.PrepaidIn == "" {
		return ""
	}
	return "prepaid on the " + l.PrepaidIn + " invoice / 已于 " + l.PrepaidIn + " 账单预付"
}

// Row kinds of the CSV besides the line kinds (usage, reservation); the total
// and warning rows are named as in `cardhour bill`'s CSV.
const (
	RowUnpriced = "unpriced 未计价"
	RowSubtotal = "subtotal 小计"
	RowTotal    = billing.CSVKindTotal
	RowWarning  = billing.CSVKindWarning
)

// unpricedNote is the message of an unpriced row, as in `cardhour bill`'s CSV.
const unpricedNote = billing.CSVUnpricedNote

// WriteCSV writes the documents as one CSV: UTF-8 with a byte-order mark, CRLF
// line ends, the bilingual header once, then for each document its marks (a
// row per Document.Marks: draft, void, credit note), its lines, its
// unpriced usage, one subtotal row per student, a total row, a row per
// over-subscribed card (RowOversubscribed) and its warnings. IDs
// (project, user, SKU, number) are kept as text and every cell is neutralised
// against formula injection (billing.CSVText, billing.CSVCell).
func WriteCSV(w io.Writer, docs ...*Document) error {
	if err := checkDocs(docs); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\uFEFF"); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	for _, d := range docs {
		for _, row := range csvRows(d) {
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvRows are a document's rows, each cell already neutralised.
func csvRows(d *Document) [][]string {
	issued := ""
	if d.IssuedAt != nil {
		issued = d.IssuedAt.Format(time.RFC3339)
	}
	t, c := billing.CSVText, billing.CSVCell
	names := d.studentNames()
	head := func(kind, user string) []string {
		return []string{c(d.Period), t(d.Number), c(issued), t(d.Project), c(d.Name), t(d.Funding), c(kind),
			t(user), c(names[user])}
	}
	var rows [][]string
	for _, m := range d.Marks() {
		rows = append(rows, append(head(m.Kind, ""), "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", c(m.Text)))
	}
	for _, l := range d.Lines {
		row := head(l.Kind, l.User)
		if l.Kind == billing.KindUsage {
			row = append(row, t(l.SKU), "", "", strconv.Itoa(l.Sessions), billing.FormatSeconds(l.UsedMS),
				billing.FormatSeconds(l.CoveredMS), billing.FormatSeconds(l.IdleMS), strconv.FormatInt(l.BilledSeconds, 10))
		} else {
			row = append(row, t(l.SKU), c(l.Term+" "+l.Billing), strconv.FormatInt(l.Quantity, 10), "", "", "", "", "")
		}
		disc, note := discountCells(&l)
		row = append(row, billing.FormatPrice(l.UnitPrice))
		row = append(row, disc...)
		row = append(row, billing.FormatMoney(l.Amount), c(d.Currency), c(note))
		rows = append(rows, row)
	}
	for _, u := range d.Unpriced {
		row := append(head(RowUnpriced, u.User), c(u.GPUModel+" "+u.Profile), "", "", strconv.Itoa(u.Sessions),
			billing.FormatSeconds(u.UsedMS), "", billing.FormatSeconds(u.IdleMS), "", "", "", "", "", "", "", c(d.Currency), c(unpricedNote))
		rows = append(rows, row)
	}
	for _, st := range d.Students {
		row := append(head(RowSubtotal, st.User), "", "", "", strconv.Itoa(st.Sessions), "", "", "", "", "", "", "", "", "",
			billing.FormatMoney(st.Total), c(d.Currency), "")
		rows = append(rows, row)
	}
	rows = append(rows, append(head(RowTotal, ""), "", "", "", "", "", "", "", "", "", "", "", "", "",
		billing.FormatMoney(d.Total), c(d.Currency), ""))
	rows = append(rows, oversubscribedRows(d, head)...)
	for _, wn := range d.Warnings {
		user := ""
		if len(wn.Users) == 1 {
			user = wn.Users[0]
		}
		row := head(RowWarning, user)
		row[3] = t(wn.Project) // about the whole input when empty
		if wn.Project == "" {
			row[4], row[5] = "", ""
		}
		row = append(row, "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", c(wn.Code+": "+wn.Message))
		rows = append(rows, row)
	}
	return rows
}
