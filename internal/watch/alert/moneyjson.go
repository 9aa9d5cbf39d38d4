package alert

import (
	"encoding/json"

	"github.com/cardhour/cardhour/billing"
)

// Amounts in alert facts are written by billing.FormatMoney, as in the
// invoice documents ("880.00", never decimal's shortest "880"); reading them
// back takes any decimal string.

// MarshalJSON writes the cost with the currency's minor digits.
func (f Facts) MarshalJSON() ([]byte, error) {
	type plain Facts
	return json.Marshal(struct {
		plain
		Cost string `json:"cost"`
	}{plain(f), billing.FormatMoney(f.Cost)})
}

// MarshalJSON writes a money budget's limit and use with the currency's
// minor digits (a card-hour budget's are hours, as they are).
func (b BudgetFacts) MarshalJSON() ([]byte, error) {
	type plain BudgetFacts
	limit, used := b.Limit.String(), b.Used.String()
	if b.Unit == "money" { // the state store's BudgetMoney
		limit, used = billing.FormatMoney(b.Limit), billing.FormatMoney(b.Used)
	}
	return json.Marshal(struct {
		plain
		Limit string `json:"limit"`
		Used  string `json:"used"`
	}{plain(b), limit, used})
}
