package schemas

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWithReservations(t *testing.T) {
	cat, err := LoadCatalog("examples/catalog.yaml")
	require.NoError(t, err)
	rs := []Reservation{{SKU: "t4-16g", Quantity: 2, Term: TermYear, StartYear: 2026, StartMonth: time.September, Billing: BillingMonthly}}

	// A project of the catalog keeps its rules and gets exactly rs.
	c := cat.WithReservations("cv-lab", rs)
	p, ok := c.Project("cv-lab")
	require.True(t, ok)
	require.Equal(t, rs, p.Reservations)
	require.Equal(t, RoundHour, c.RoundingFor("cv-lab"))
	orig, _ := cat.Project("cv-lab")
	require.Len(t, orig.Reservations, 1, "the original is unchanged")
	require.Equal(t, "a100-80g-1g.10gb", orig.Reservations[0].SKU)
	rs[0].Quantity = 5
	require.Equal(t, int64(2), p.Reservations[0].Quantity, "rs is copied")

	// A project the catalog does not list is added with the defaults.
	c = cat.WithReservations("physics-lab", rs)
	p, ok = c.Project("physics-lab")
	require.True(t, ok)
	require.Equal(t, int64(5), p.Reservations[0].Quantity)
	require.Equal(t, RoundSecond, c.RoundingFor("physics-lab"))
	_, ok = cat.Project("physics-lab")
	require.False(t, ok, "the original does not list it")
	nlp, ok := c.Project("nlp-lab")
	require.True(t, ok)
	require.Len(t, nlp.Reservations, 1, "the other projects keep theirs")
	sku, ok := c.SKUByID("t4-16g")
	require.True(t, ok)
	require.Equal(t, "900", sku.MonthlyPrice.String())
}
