package billing

import "github.com/shopspring/decimal"

// This file is the one place where money is rounded. Everything before it is
// exact decimal arithmetic; everything after it adds already-rounded amounts.

// MoneyDigits is the minor unit of every amount: the decimal places of the
// currencies cardhour bills in (a catalog's currency must have 2 in ISO
// 4217, see schemas/currency.go).
const MoneyDigits = 2

var (
	secondsPerHour = decimal.NewFromInt(3600)
	cent           = int32(MoneyDigits)
)

// RoundMoney rounds an exact amount once, half away from zero, to 0.01
// (四舍五入到分).
func RoundMoney(exact decimal.Decimal) decimal.Decimal {
	return exact.Round(cent)
}

// UsageAmount is billedSeconds × hourlyPrice / 3600, computed exactly (as a
// rational number, not a truncated quotient) and rounded once to the cent.
func UsageAmount(billedSeconds int64, hourlyPrice decimal.Decimal) decimal.Decimal {
	num := hourlyPrice.Mul(decimal.NewFromInt(billedSeconds))
	// DivRound decides the last digit from the exact remainder, so this is the
	// exact quotient rounded half away from zero, not a rounded rounding.
	return num.DivRound(secondsPerHour, cent)
}

// ReservationAmount is monthlyPrice × months × (1 − discount) × quantity, rounded
// once to the cent.
func ReservationAmount(monthlyPrice decimal.Decimal, months int, discount decimal.Decimal, quantity int64) decimal.Decimal {
	exact := monthlyPrice.
		Mul(decimal.NewFromInt(int64(months))).
		Mul(decimal.NewFromInt(1).Sub(discount)).
		Mul(decimal.NewFromInt(quantity))
	return RoundMoney(exact)
}

// FormatMoney renders an amount with exactly the currency's minor digits
// (MoneyDigits: "957.60", "880.00", "-10.00"). It is the one function that
// writes an amount: documents and their exports, billing-run reports and
// their differences, usage costs, budgets and alert facts. Amounts reaching
// this point are already rounded, so this never rounds again.
func FormatMoney(d decimal.Decimal) string { return d.StringFixed(cent) }

// FormatPrice renders a catalog price with at least two decimals, keeping any
// further digits the catalog gave (a price is shown, never rounded).
func FormatPrice(d decimal.Decimal) string {
	if d.Exponent() < -cent {
		return d.String()
	}
	return d.StringFixed(cent)
}

// ShareAmount is the part num/den of an amount (the unused share of a
// reservation's cost, say), computed exactly and rounded once to the cent.
func ShareAmount(amount decimal.Decimal, num, den int64) decimal.Decimal {
	return amount.Mul(decimal.NewFromInt(num)).DivRound(decimal.NewFromInt(den), cent)
}
