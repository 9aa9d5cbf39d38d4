package billing

import (
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

func TestShareAmount(t *testing.T) {
	d := decimal.RequireFromString
	require.Equal(t, "3370.55", ShareAmount(d("4320.00"), 3408, 4368).StringFixed(2)) // 3370.5494…
	require.Equal(t, "0.01", ShareAmount(d("0.01"), 1, 2).StringFixed(2))             // 0.005: half away from zero
	require.Equal(t, "0.33", ShareAmount(d("1"), 1, 3).StringFixed(2))
	require.Equal(t, "0.00", ShareAmount(d("900"), 0, 7).StringFixed(2))
}
