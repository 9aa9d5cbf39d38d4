package invoicing

import (
	"encoding/json"

	"github.com/cardhour/cardhour/billing"
)

// The amounts of a run's report are written by billing.FormatMoney, as in
// the documents ("957.60", never decimal's shortest "957.6"); reading them
// back takes any decimal string.

// MarshalJSON writes the total with the currency's minor digits.
func (d RunDraft) MarshalJSON() ([]byte, error) {
	type plain RunDraft
	return json.Marshal(struct {
		plain
		Total string `json:"total"`
	}{plain(d), billing.FormatMoney(d.Total)})
}

// MarshalJSON writes the totals and the delta with the currency's minor
// digits.
func (d Diff) MarshalJSON() ([]byte, error) {
	type plain Diff
	return json.Marshal(struct {
		plain
		OldTotal string `json:"old_total"`
		NewTotal string `json:"new_total"`
		Delta    string `json:"delta"`
	}{plain(d), billing.FormatMoney(d.OldTotal), billing.FormatMoney(d.NewTotal), billing.FormatMoney(d.Delta)})
}

// MarshalJSON writes the amounts with the currency's minor digits.
func (l DiffLine) MarshalJSON() ([]byte, error) {
	type plain DiffLine
	return json.Marshal(struct {
		plain
		Old   string `json:"old"`
		New   string `json:"new"`
		Delta string `json:"delta"`
	}{plain(l), billing.FormatMoney(l.Old), billing.FormatMoney(l.New), billing.FormatMoney(l.Delta)})
}
