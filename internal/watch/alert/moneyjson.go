package alert

import "encoding/json"

// An alert's cost is a billing.Money (its JSON is billing.FormatMoney's);
// a budget's limit and use are in the budget's unit.

// MarshalJSON writes a budget's limit and use as its unit does
// (billing.BudgetUnit.Format: money with the currency's minor digits,
// card-hours as they are), after the other members.
func (b BudgetFacts) MarshalJSON() ([]byte, error) {
	type plain BudgetFacts
	return json.Marshal(struct {
		plain
		Limit string `json:"limit"`
		Used  string `json:"used"`
	}{plain(b), b.Unit.Format(b.Limit), b.Unit.Format(b.Used)})
}
