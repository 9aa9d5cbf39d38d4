package billing

import "github.com/shopspring/decimal"

// Money is an amount whose JSON is FormatMoney's ("957.60", never
// decimal's shortest "957.6"): a decimal (its methods are promoted), so
// that a field of this type keeps its place in the JSON, where a
// MarshalJSON of the whole struct would move it. Reading it back takes any
// decimal string. A billing run's report and an alert's facts write their
// amounts with it.
type Money struct{ decimal.Decimal }

// MarshalJSON writes the amount with the currency's minor digits.
func (m Money) MarshalJSON() ([]byte, error) {
	return []byte(`"` + FormatMoney(m.Decimal) + `"`), nil
}
