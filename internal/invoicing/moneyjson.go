package invoicing

import (
	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
)

// Money is an amount of a run's report: a decimal (its methods are
// promoted) that JSON writes by billing.FormatMoney, as the documents do
// ("957.60", never decimal's shortest "957.6"); reading it back takes any
// decimal string. A field of this type keeps its place in the JSON, where a
// MarshalJSON of the whole struct would move it.
type Money struct{ decimal.Decimal }

// MarshalJSON writes the amount with the currency's minor digits.
func (m Money) MarshalJSON() ([]byte, error) {
	return []byte(`"` + billing.FormatMoney(m.Decimal) + `"`), nil
}
