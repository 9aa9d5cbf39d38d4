package schemas

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseShareProfile(t *testing.T) {
	for _, tc := range []struct {
		profile    string
		mem, cores string // "" = unknown
	}{
		{"1/2", "0.5", "0.5"},
		{"1/20", "0.05", "0.05"},
		{"1/16", "0.0625", "0.0625"},
		{"1/4", "0.25", "0.25"},
		{"1/10000", "0.0001", "0.0001"},
		{"mem=5%", "0.05", ""},
		{"cores=30%", "", "0.3"},
		{"mem=7.5%,cores=30%", "0.075", "0.3"},
		{"mem=0.01%", "0.0001", ""},
		{"mem=100%", "1", ""},
	} {
		s, ok := ParseShareProfile(tc.profile)
		require.True(t, ok, tc.profile)
		m, mok := s.By(ShareByMemory)
		c, cok := s.By(ShareByCores)
		require.Equal(t, tc.mem != "", mok, tc.profile)
		require.Equal(t, tc.cores != "", cok, tc.profile)
		if mok {
			require.Equal(t, tc.mem, m.String(), tc.profile)
		}
		if cok {
			require.Equal(t, tc.cores, c.String(), tc.profile)
		}
	}
	for _, p := range []string{
		"", "full", "1g.10gb", "A16-1Q", "share", "1/1", "1/0", "1/3", "1/7", "1/03", "1/+4", "1/20000",
		"2/20", "mem=0%", "mem=101%", "mem=7.50%", "mem=05%", "mem=7.555%", "mem=-5%", "mem=+5%",
		"mem=5", "mem=.5%", "mem=5.%", "cores=30%,mem=5%", "mem=5%,mem=5%", "mem=5%,cores=3%,x=1%", "gpu=5%",
	} {
		_, ok := ParseShareProfile(p)
		require.False(t, ok, "%q is not a share profile", p)
	}
}

func TestShareByMax(t *testing.T) {
	s, _ := ParseShareProfile("mem=7.5%,cores=30%")
	f, ok := s.By(ShareByMax)
	require.True(t, ok)
	require.Equal(t, "0.3", f.String())
	s, _ = ParseShareProfile("mem=40%")
	f, ok = s.By(ShareByMax)
	require.True(t, ok)
	require.Equal(t, "0.4", f.String())
}

// The collector's profiles are share profiles that state what it measured.
func TestShareProfileRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		mem, cores float64
		want       string
	}{
		{4096.0 / 81920, 0, "1/20"},
		{0.05, 0.05, "1/20"},
		{0, 0.25, "1/4"},
		{0.05, 0.3, "mem=5%,cores=30%"},
		{0, 1.0 / 3, "cores=33.33%"},
		{6144.0 / 81920, 0, "mem=7.5%"},
		{0.000001, 0, "mem=0.01%"},
		{0, 0, "share"},
		{1, 0, "mem=100%"},
	} {
		got := ShareProfile(tc.mem, tc.cores)
		require.Equal(t, tc.want, got, "%v %v", tc.mem, tc.cores)
		if got != "share" {
			_, ok := ParseShareProfile(got)
			require.True(t, ok, got)
		}
	}
}

const shareCatalog = `
currency: CNY
timezone: Asia/Shanghai
skus:
  - {id: a100-full, gpu_model: A100, profile: full, hourly_price: "5.00", monthly_price: "2500", discounts: {year: "0.15"}}
  - {id: a100-1-20, gpu_model: A100, profile: "1/20", hourly_price: "1.80", monthly_price: "900"}
  - {id: a100-share, gpu_model: A100, share_of: a100-full, share: %s}
  - {id: t4, gpu_model: T4, profile: full, hourly_price: "1.80"}
  - {id: t4-share, gpu_model: T4, share_of: t4, share: cores}
projects:
  - id: lab
    reservations: [{sku: "a100-share[1/10]", quantity: 2, term: year, start: 2026-09}]
`

func TestShareSKUs(t *testing.T) {
	cat, err := ParseCatalog([]byte(fmt.Sprintf(shareCatalog, "memory")), "shares")
	require.NoError(t, err)

	fixed, ok := cat.ResolveSKU("A100", "1/20")
	require.True(t, ok)
	require.Equal(t, "a100-1-20", fixed.ID, "a SKU listed for the profile wins over the share price")

	d, ok := cat.ResolveSKU("A100", "mem=7.5%,cores=30%")
	require.True(t, ok)
	require.Equal(t, "a100-share[mem=7.5%,cores=30%]", d.ID)
	require.Equal(t, "0.375", d.HourlyPrice.String()) // 5.00 × 0.075, exact
	require.Equal(t, "187.5", d.MonthlyPrice.String())
	require.True(t, d.HasMonthly)
	require.Equal(t, "0.15", cat.Discount(d, TermYear).String(), "the card's discounts")
	same, ok := cat.SKUByID(d.ID)
	require.True(t, ok)
	require.Same(t, d, same)

	_, ok = cat.ResolveSKU("A100", "cores=30%")
	require.False(t, ok, "a memory-priced share needs the memory share")
	_, ok = cat.ResolveSKU("A100", "3g.40gb")
	require.False(t, ok)
	_, ok = cat.ResolveSKU("V100", "1/4")
	require.False(t, ok, "no share SKU for that model")

	t4, ok := cat.ResolveSKU("T4", "1/4")
	require.True(t, ok)
	require.Equal(t, "0.45", t4.HourlyPrice.String())
	require.False(t, t4.HasMonthly)

	res := cat.Projects[0].Reservations[0]
	r, ok := cat.SKUByID(res.SKU)
	require.True(t, ok)
	require.Equal(t, "250", r.MonthlyPrice.String())

	_, ok = cat.SKUByID("a100-share[1/3]")
	require.False(t, ok)
	_, ok = cat.SKUByID("a100-full[1/4]")
	require.False(t, ok, "only a SKU priced by share derives")

	max, err := ParseCatalog([]byte(fmt.Sprintf(shareCatalog, "max")), "shares")
	require.NoError(t, err)
	m, ok := max.ResolveSKU("A100", "mem=7.5%,cores=30%")
	require.True(t, ok)
	require.Equal(t, "1.5", m.HourlyPrice.String())
}

// Derived SKUs are made under a lock: one catalog serves many goroutines.
func TestShareSKUsConcurrently(t *testing.T) {
	cat, err := ParseCatalog([]byte(fmt.Sprintf(shareCatalog, "memory")), "shares")
	require.NoError(t, err)
	var wg sync.WaitGroup
	got := make([]*SKU, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 200 {
				s, ok := cat.ResolveSKU("A100", fmt.Sprintf("mem=%d%%", 1+n%50))
				require.True(t, ok)
				got[i] = s
			}
		}()
	}
	wg.Wait()
	for _, s := range got {
		require.Same(t, got[0], s)
	}
}
