package billing

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The JSON document of billing-semantics §5, what `cardhour bill` writes. It is
// not the invoice document (billing/export), on purpose: it is one object for
// the whole period, a contract of its own (docs/billing.md, "Output formats"),
// checked by golden files and compared byte for byte across the stores; it
// keeps fractional seconds where the document keeps milliseconds, a
// reservation's monthly_price, the period's warnings and conflicts once each,
// and no invoice number, names or time of making, so that the same input
// always gives the same bytes. What both say about an invoice they take from
// the same Result, and cmd/cardhour's TestBillSaysWhatTheInvoiceDocumentSays
// holds them to agree. Field order is fixed, so the output is byte-identical
// for identical inputs.
type jsonResult struct {
	Period      string          `json:"period"`
	Currency    string          `json:"currency"`
	Timezone    string          `json:"timezone"`
	Invoices    []jsonInvoice   `json:"invoices"`
	DataQuality jsonDataQuality `json:"data_quality"`
	Warnings    []string        `json:"warnings,omitempty"`
}

// jsonDataQuality is what the input looked like, beyond what the invoices bill.
type jsonDataQuality struct {
	SkippedLines int64          `json:"skipped_lines"`
	Conflicts    []jsonConflict `json:"conflicts"`
	// Oversubscribed is there when a card's shares added up to more than it.
	Oversubscribed []jsonOversubscription `json:"oversubscribed,omitempty"`
}

type jsonOversubscription struct {
	GPU          string       `json:"gpu"`
	Basis        string       `json:"basis"`
	Peak         string       `json:"peak"`
	OverSeconds  json.Number  `json:"over_seconds"`
	First        string       `json:"first"`
	Last         string       `json:"last"`
	Instances    []string     `json:"instances,omitempty"`
	Holders      []jsonHolder `json:"holders"`
	OtherHolders int          `json:"other_holders,omitempty"`
}

type jsonConflict struct {
	InstanceID     string       `json:"instance_id"`
	Holders        []jsonHolder `json:"holders"`
	OtherHolders   int          `json:"other_holders,omitempty"`
	Kinds          []jsonKind   `json:"kinds"`
	OverlapSeconds json.Number  `json:"overlap_seconds"`
	First          string       `json:"first"`
	Last           string       `json:"last"`
}

type jsonHolder struct {
	Project string `json:"project"`
	User    string `json:"user"`
}

type jsonKind struct {
	GPUModel string `json:"gpu_model"`
	Profile  string `json:"profile"`
}

type jsonInvoice struct {
	Project   string         `json:"project"`
	Name      string         `json:"name,omitempty"`
	Funding   string         `json:"funding,omitempty"`
	InCatalog bool           `json:"in_catalog"`
	Total     string         `json:"total"`
	Lines     []jsonLine     `json:"lines"`
	Unpriced  []jsonUnpriced `json:"unpriced,omitempty"`
}

type jsonLine struct {
	Kind           string       `json:"kind"`
	User           string       `json:"user"`
	SKU            string       `json:"sku"`
	Sessions       *int         `json:"sessions,omitempty"`
	UsedSeconds    *json.Number `json:"used_seconds,omitempty"`
	CoveredSeconds *json.Number `json:"covered_seconds,omitempty"`
	BilledSeconds  *int64       `json:"billed_seconds,omitempty"`
	IdleSeconds    *json.Number `json:"idle_seconds,omitempty"`
	UnitPrice      string       `json:"unit_price,omitempty"`
	Term           string       `json:"term,omitempty"`
	Quantity       int64        `json:"quantity,omitempty"`
	Billing        string       `json:"billing,omitempty"`
	Start          string       `json:"start,omitempty"`
	MonthlyPrice   string       `json:"monthly_price,omitempty"`
	Amount         string       `json:"amount"`
}

type jsonUnpriced struct {
	User        string      `json:"user"`
	GPUModel    string      `json:"gpu_model"`
	Profile     string      `json:"profile"`
	Sessions    int         `json:"sessions"`
	UsedSeconds json.Number `json:"used_seconds"`
	IdleSeconds json.Number `json:"idle_seconds"`
}

func seconds(ms int64) *json.Number {
	n := json.Number(FormatSeconds(ms))
	return &n
}

// WriteJSON writes the result as the JSON document of billing-semantics §5.
func WriteJSON(w io.Writer, r *Result) error {
	out := jsonResult{Period: r.Period.String(), Currency: r.Currency, Timezone: r.Timezone,
		Invoices: []jsonInvoice{}, Warnings: r.Warnings,
		DataQuality: jsonDataQuality{SkippedLines: r.SkippedLines, Conflicts: []jsonConflict{}}}
	loc := r.Period.Start.Location()
	for _, c := range r.Conflicts {
		jc := jsonConflict{InstanceID: c.InstanceID, Holders: []jsonHolder{}, OtherHolders: c.OtherHolders, Kinds: []jsonKind{},
			OverlapSeconds: *seconds(c.OverlapMS), First: formatRFC3339(c.First, loc), Last: formatRFC3339(c.Last, loc)}
		for _, h := range c.Holders {
			jc.Holders = append(jc.Holders, jsonHolder(h))
		}
		for _, k := range c.Kinds {
			jc.Kinds = append(jc.Kinds, jsonKind(k))
		}
		out.DataQuality.Conflicts = append(out.DataQuality.Conflicts, jc)
	}
	for _, o := range r.Oversubscribed {
		jo := jsonOversubscription{GPU: o.GPU, Basis: string(o.Basis), Peak: o.Peak.String(), OverSeconds: *seconds(o.OverMS),
			First: formatRFC3339(o.First, loc), Last: formatRFC3339(o.Last, loc), Instances: o.Instances,
			Holders: []jsonHolder{}, OtherHolders: o.OtherHolders}
		for _, h := range o.Holders {
			jo.Holders = append(jo.Holders, jsonHolder(h))
		}
		out.DataQuality.Oversubscribed = append(out.DataQuality.Oversubscribed, jo)
	}
	for _, inv := range r.Invoices {
		ji := jsonInvoice{Project: inv.Project, Name: inv.Name, Funding: inv.Funding, InCatalog: inv.InCatalog,
			Total: FormatMoney(inv.Total), Lines: []jsonLine{}}
		for _, l := range inv.Lines {
			jl := jsonLine{Kind: l.Kind, User: l.User, SKU: l.SKU, Amount: FormatMoney(l.Amount)}
			if l.Kind == KindUsage {
				sessions, billed := l.Sessions, l.BilledSeconds
				jl.Sessions, jl.BilledSeconds = &sessions, &billed
				jl.UsedSeconds, jl.CoveredSeconds, jl.IdleSeconds = seconds(l.UsedMS), seconds(l.CoveredMS), seconds(l.IdleMS)
				jl.UnitPrice = FormatPrice(l.UnitPrice)
			} else {
				jl.Term, jl.Quantity, jl.Billing, jl.Start = string(l.Term), l.Quantity, l.Billing, l.Start
				jl.MonthlyPrice = FormatPrice(l.UnitPrice)
			}
			ji.Lines = append(ji.Lines, jl)
		}
		for _, u := range inv.Unpriced {
			ji.Unpriced = append(ji.Unpriced, jsonUnpriced{User: u.User, GPUModel: u.GPUModel, Profile: u.Profile,
				Sessions: u.Sessions, UsedSeconds: *seconds(u.UsedMS), IdleSeconds: *seconds(u.IdleMS)})
		}
		out.Invoices = append(out.Invoices, ji)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// csvHeader is bilingual: finance offices in China open these files in Excel.
var csvHeader = []string{
	"period 账期", "project 项目", "project_name 项目名称", "funding 经费来源", "kind 类型", "user 用户",
	"sku 规格", "term 期限", "quantity 数量", "sessions 会话数", "used_seconds 使用秒数",
	"covered_seconds 预留覆盖秒数", "idle_seconds 空闲秒数", "billed_seconds 计费秒数",
	"unit_price 单价", "amount 金额", "currency 币种", "message 说明",
}

// CSV row kinds besides the line kinds; the total and warning kinds, and the
// unpriced rows' note, are also those of the invoice document's CSV
// (billing/export).
const (
	CSVKindUnpriced = "unpriced"
	CSVKindTotal    = "total 合计"
	CSVKindWarning  = "warning 警告"
	CSVUnpricedNote = "matches no SKU: not priced (无对应规格，未计价)"
)

// WriteCSV writes one row per invoice line, UTF-8 with a byte-order mark so that
// Excel shows the Chinese headers and names correctly. Unpriced usage gets rows of
// kind "unpriced" with an empty amount; each invoice ends with a row of kind
// "total 合计" carrying its total; every warning follows as a row of kind
// "warning 警告" with its text in the last column (and its project, and its user
// when it is about one). A program skips the rows whose kind is not a line kind.
// No cell starts a spreadsheet formula: one that begins with =, +, -, @, a tab or
// a carriage return, and is not a plain number, gets a leading apostrophe.
func WriteCSV(w io.Writer, r *Result) error {
	if _, err := io.WriteString(w, "\uFEFF"); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	write := func(row []string) error {
		for i := range row {
			row[i] = CSVCell(row[i])
		}
		return cw.Write(row)
	}
	period := r.Period.String()
	for _, inv := range r.Invoices {
		for _, l := range inv.Lines {
			row := []string{period, inv.Project, inv.Name, inv.Funding, l.Kind, l.User, l.SKU}
			if l.Kind == KindUsage {
				row = append(row, "", "", strconv.Itoa(l.Sessions), FormatSeconds(l.UsedMS), FormatSeconds(l.CoveredMS),
					FormatSeconds(l.IdleMS), strconv.FormatInt(l.BilledSeconds, 10), FormatPrice(l.UnitPrice))
			} else {
				row = append(row, string(l.Term), strconv.FormatInt(l.Quantity, 10), "", "", "", "", "", FormatPrice(l.UnitPrice))
			}
			row = append(row, FormatMoney(l.Amount), r.Currency, "")
			if err := write(row); err != nil {
				return err
			}
		}
		for _, u := range inv.Unpriced {
			row := []string{period, inv.Project, inv.Name, inv.Funding, CSVKindUnpriced, u.User, u.GPUModel + " " + u.Profile,
				"", "", strconv.Itoa(u.Sessions), FormatSeconds(u.UsedMS), "", FormatSeconds(u.IdleMS), "", "", "", r.Currency,
				CSVUnpricedNote}
			if err := write(row); err != nil {
				return err
			}
		}
		row := []string{period, inv.Project, inv.Name, inv.Funding, CSVKindTotal, "", "",
			"", "", "", "", "", "", "", "", FormatMoney(inv.Total), r.Currency, ""}
		if err := write(row); err != nil {
			return err
		}
	}
	for _, msg := range r.Warnings {
		wn := r.WarningFor(msg)
		user := ""
		if len(wn.Users) == 1 {
			user = wn.Users[0]
		}
		row := []string{period, wn.Project, "", "", CSVKindWarning, user, "",
			"", "", "", "", "", "", "", "", "", "", msg}
		if err := write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// CSVCell neutralises a cell a spreadsheet would read as a formula (CSV
// injection): it prefixes an apostrophe unless the cell is a plain number. Every
// CSV cardhour writes goes through it.
func CSVCell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		if plainNumber(s) {
			return s
		}
		return "'" + s
	}
	return s
}

// CSVText is CSVCell for a cell that must stay text, such as an ID: a value a
// spreadsheet would read as a number (a student ID 2023001, "-5") gets the same
// leading apostrophe, so that it is neither converted nor stripped of zeros.
func CSVText(s string) string {
	if plainNumber(s) {
		return "'" + s
	}
	return CSVCell(s)
}

// plainNumber reports whether s is an optionally signed decimal number: digits
// with at most one decimal point.
func plainNumber(s string) bool {
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	digits, dot := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot && digits > 0 && i < len(s)-1:
			dot = true
		default:
			return false
		}
	}
	return digits > 0
}

// WriteTable writes a plain-text rendering of the invoices for people.
func WriteTable(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "Invoices for %s (%s), amounts in %s\n", r.Period, r.Timezone, r.Currency)
	if len(r.Invoices) == 0 {
		fmt.Fprintf(tw, "\nno invoices for this period (本期无账单)\n")
	}
	for _, inv := range r.Invoices {
		title := inv.Project
		if inv.Name != "" {
			title += " — " + inv.Name
		}
		if inv.Funding != "" {
			title += " — funding " + inv.Funding
		}
		fmt.Fprintf(tw, "\n%s\n", title)
		fmt.Fprintln(tw, "kind\tuser\tsku\tsessions\tused h\tcovered h\tidle h\tbilled h\tunit price\tamount\t")
		for _, l := range inv.Lines {
			if l.Kind == KindUsage {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", l.Kind, orDash(l.User), l.SKU, l.Sessions,
					hours(l.UsedMS), hours(l.CoveredMS), hours(l.IdleMS), hours(l.BilledSeconds*1000),
					FormatPrice(l.UnitPrice)+"/h", FormatMoney(l.Amount))
			} else {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d × %s\t\t\t\t\t%s\t%s\t\n", l.Kind, "-", l.SKU, l.Quantity,
					string(l.Term)+" "+l.Billing, FormatPrice(l.UnitPrice)+"/mo", FormatMoney(l.Amount))
			}
		}
		fmt.Fprintf(tw, "total\t\t\t\t\t\t\t\t\t%s\t\n", FormatMoney(inv.Total))
		for _, u := range inv.Unpriced {
			fmt.Fprintf(tw, "UNPRICED\t%s\t%s\t%d\t%s\t\t%s\t\t\t-\t\n", orDash(u.User), u.GPUModel+" "+u.Profile,
				u.Sessions, hours(u.UsedMS), hours(u.IdleMS))
		}
	}
	if r.SkippedLines > 0 || len(r.Conflicts) > 0 || len(r.Oversubscribed) > 0 {
		fmt.Fprintf(tw, "\ndata quality (数据质量):\n")
		if r.SkippedLines > 0 {
			fmt.Fprintf(tw, "  invalid lines skipped, not billed: %d\n", r.SkippedLines)
		}
		if len(r.Conflicts) > 0 {
			loc := r.Period.Start.Location()
			fmt.Fprintln(tw, "instance\tholders\tkinds\toverlap s\tfirst\tlast\t")
			for _, c := range r.Conflicts {
				holders := make([]string, 0, len(c.Holders)+1)
				for _, h := range c.Holders {
					holders = append(holders, h.String())
				}
				if c.OtherHolders > 0 {
					holders = append(holders, fmt.Sprintf("+%d other %s", c.OtherHolders, plural(c.OtherHolders, "holder", "holders")))
				}
				kinds := make([]string, len(c.Kinds))
				for i, k := range c.Kinds {
					kinds[i] = k.GPUModel + " " + k.Profile
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", c.InstanceID, strings.Join(holders, ", "), strings.Join(kinds, ", "),
					FormatSeconds(c.OverlapMS), formatLocal(c.First, loc), formatLocal(c.Last, loc))
			}
		}
		writeOversubscribed(tw, r)
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintf(tw, "\nwarnings (警告):\n")
		for _, wmsg := range r.Warnings {
			fmt.Fprintf(tw, "  %s\n", strings.ReplaceAll(wmsg, "\t", " "))
		}
	}
	return tw.Flush()
}

func hours(ms int64) string { return strconv.FormatFloat(float64(ms)/3_600_000, 'f', 2, 64) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatRFC3339 renders Unix ms as RFC 3339 in loc, with milliseconds only when
// there are any.
func formatRFC3339(ms int64, loc *time.Location) string {
	return time.UnixMilli(ms).In(loc).Format("2006-01-02T15:04:05.999Z07:00")
}

// writeOversubscribed is the table of the cards whose shares added up to more
// than the card.
func writeOversubscribed(tw io.Writer, r *Result) {
	if len(r.Oversubscribed) == 0 {
		return
	}
	loc := r.Period.Start.Location()
	fmt.Fprintln(tw, "over-subscribed card (超配)\tbasis\tpeak %\tover s\tfirst\tlast\t")
	for _, o := range r.Oversubscribed {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", o.GPU, o.Basis, o.Peak.Shift(2).String(),
			FormatSeconds(o.OverMS), formatLocal(o.First, loc), formatLocal(o.Last, loc))
	}
}
