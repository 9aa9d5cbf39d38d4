package advice

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cardhour/cardhour/billing"
)

// WriteJSON writes the report as one indented JSON document.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

func mixText(m Mix) string {
	var parts []string
	if m.Year > 0 {
		parts = append(parts, fmt.Sprintf("%d×year", m.Year))
	}
	if m.Quarter > 0 {
		parts = append(parts, fmt.Sprintf("%d×quarter", m.Quarter))
	}
	var ms []string
	monthly := false
	for _, q := range m.Month {
		ms = append(ms, strconv.FormatInt(q, 10))
		monthly = monthly || q > 0
	}
	if monthly {
		parts = append(parts, "month "+strings.Join(ms, "/"))
	}
	if len(parts) == 0 {
		return "hourly"
	}
	return strings.Join(parts, " + ")
}

func reservedText(rs []Reserved) string {
	if len(rs) == 0 {
		return "-"
	}
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%d×%s from %s", r.Quantity, r.Term, r.Start))
	}
	return strings.Join(parts, ", ")
}

// WriteTable writes the report for people: one row per project and SKU, the
// sentences, then the reservations that covered little.
func WriteTable(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "Advice %s to %s (%d months, %s days, %s)\n%s\n%s\n\n", r.From, r.To, r.Months, r.Days, r.Currency, r.Assumption.En, r.Assumption.Zh)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "project\tsku\tpeak\tcurrent\tadvised mix\tbilled (monthly shares)\tadvised\tsaving\tif use halves")
	for _, a := range r.Advice {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Project, a.SKU, a.Peak, reservedText(a.Current), mixText(a.Mix),
			a.BilledBase, a.Advised, a.Saving, a.IfHalved.Advised)
	}
	fmt.Fprintf(tw, "total\t\t\t\t\t%s\t%s\t%s\t\n", r.BilledBasis, r.Advised, r.Saving)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, a := range r.Advice {
		fmt.Fprintf(w, "%s / %s:\n  %s\n  %s\n", a.Project, a.SKU, a.Text.En, a.Text.Zh)
	}
	if len(r.Underused) > 0 {
		fmt.Fprintf(w, "\nReservations that covered less than %s of their hours:\n", pctS(r.MinCoverage))
		for _, u := range r.Underused {
			fmt.Fprintf(w, "%s / %s #%d (%d×%s from %s): coverage %s, unused %s of %s\n  %s\n  %s\n",
				u.Project, u.SKU, u.Index, u.Quantity, u.Term, u.Start, pctS(u.Coverage), u.Unused, u.Cost, u.Text.En, u.Text.Zh)
		}
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings of the bills:")
		for _, m := range r.Warnings {
			fmt.Fprintln(w, "  "+m)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// CSVHeader is the header row of WriteCSV.
var CSVHeader = []string{"kind", "project", "sku", "peak", "current", "advice", "billed", "billed_monthly_equivalent",
	"advised", "saving", "if_halves_advised", "if_halves_hourly_only", "coverage", "unused", "text_en", "text_zh"}

// WriteCSV writes one row per project and SKU (kind advice), one per
// reservation that covered little (kind underused) and one per warning of the
// bills (kind warning, its text in text_en).
func WriteCSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	cell := billing.CSVCell
	for _, a := range r.Advice {
		row := []string{"advice", billing.CSVText(a.Project), billing.CSVText(a.SKU), strconv.FormatInt(a.Peak, 10),
			cell(reservedText(a.Current)), cell(mixText(a.Mix)), a.Billed, a.BilledBase, a.Advised, a.Saving,
			a.IfHalved.Advised, a.IfHalved.HourlyOnly, "", "", cell(a.Text.En), cell(a.Text.Zh)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	for _, u := range r.Underused {
		row := []string{"underused", billing.CSVText(u.Project), billing.CSVText(u.SKU), "",
			cell(reservedText([]Reserved{u.Reserved})), "", "", u.WindowCost, "", "", "", "", u.Coverage, u.Unused, cell(u.Text.En), cell(u.Text.Zh)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	for _, m := range r.Warnings {
		row := make([]string, len(CSVHeader))
		row[0], row[len(row)-2] = "warning", cell(m)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
