package schemas

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// Every testdata/catalog/*.good.yaml loads; every *.bad.yaml fails with each of
// the errors its "# want:" lines name (file, line, field path and reason).
func TestCatalogTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/catalog/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			_, err = ParseCatalog(data, name)
			if strings.HasSuffix(name, ".good.yaml") {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var wants int
			for _, line := range strings.Split(string(data), "\n") {
				if want, ok := strings.CutPrefix(line, "# want: "); ok {
					wants++
					require.Contains(t, err.Error(), want)
				}
			}
			require.Positive(t, wants, "a .bad.yaml file needs '# want:' lines")
			require.Len(t, strings.Split(err.Error(), "\n"), wants, "every error is expected:\n%v", err)
		})
	}
}

func TestExampleCatalog(t *testing.T) {
	cat, err := LoadCatalog("examples/catalog.yaml")
	require.NoError(t, err)
	require.Equal(t, "CNY", cat.Currency)
	require.Equal(t, "Asia/Shanghai", cat.Location.String())
	require.Equal(t, RoundSecond, cat.Defaults.Rounding)
	require.EqualValues(t, 30_000, cat.Defaults.GapToleranceMS)

	sku, ok := cat.ResolveSKU("NVIDIA A100-SXM4-80GB", "1g.10gb")
	require.True(t, ok)
	require.Equal(t, "a100-80g-1g.10gb", sku.ID)
	require.Equal(t, "1.8", sku.HourlyPrice.String())
	require.True(t, cat.Discount(sku, TermYear).Equal(decimal.RequireFromString("0.2")))
	require.True(t, cat.Discount(sku, TermQuarter).Equal(decimal.RequireFromString("0.05")))
	require.True(t, cat.Discount(sku, TermMonth).IsZero())

	h100, ok := cat.SKUByID("h100-1g.10gb")
	require.True(t, ok)
	require.True(t, cat.Discount(h100, TermYear).Equal(decimal.RequireFromString("0.15")), "per-SKU override")
	require.True(t, cat.Discount(h100, TermQuarter).Equal(decimal.RequireFromString("0.05")), "falls back to the catalog")

	require.Equal(t, RoundHour, cat.RoundingFor("cv-lab"))
	require.Equal(t, RoundSecond, cat.RoundingFor("nlp-lab"))
	require.Equal(t, RoundSecond, cat.RoundingFor("not-in-catalog"))
	ai := cat.IdlePolicyFor("ai101")
	require.Equal(t, 10*time.Minute, ai.WarnAfter)
	require.True(t, ai.AutoRelease)
	require.InDelta(t, 0.05, ai.Threshold, 0, "inherited from defaults")

	nlp, ok := cat.Project("nlp-lab")
	require.True(t, ok)
	require.Len(t, nlp.Reservations, 1)
	r := nlp.Reservations[0]
	require.True(t, r.ActiveIn(2026*12+8), "2026-09")
	require.True(t, r.ActiveIn(2027*12+7), "2027-08")
	require.False(t, r.ActiveIn(2027*12+8), "2027-09")
	require.False(t, r.ActiveIn(2026*12+7), "2026-08")
}

func TestCatalogDefaults(t *testing.T) {
	cat, err := ParseCatalog([]byte("currency: USD\ntimezone: UTC\nskus: [{id: a, gpu_model: M, profile: full, hourly_price: 2.5}]\n"), "")
	require.NoError(t, err)
	require.Equal(t, RoundSecond, cat.Defaults.Rounding)
	require.EqualValues(t, 30_000, cat.Defaults.GapToleranceMS)
	require.EqualValues(t, 0, cat.Defaults.MinBilledS)
	require.Equal(t, DefaultIdlePolicy, cat.Defaults.Idle)
	require.Equal(t, "2.5", cat.SKUs[0].HourlyPrice.String(), "an unquoted price keeps its exact text")
}

func FuzzParseCatalog(f *testing.F) {
	for _, p := range []string{"examples/catalog.yaml", "testdata/catalog/minimal.good.yaml", "testdata/catalog/reservations.bad.yaml"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cat, err := ParseCatalog(data, "fuzz")
		if err != nil {
			require.Nil(t, cat)
			require.NotEmpty(t, err.Error())
			return
		}
		// A catalog that loads is internally consistent.
		require.NotNil(t, cat.Location)
		for _, p := range cat.Projects {
			for _, r := range p.Reservations {
				sku, ok := cat.SKUByID(r.SKU)
				require.True(t, ok)
				require.True(t, sku.HasMonthly)
				require.Positive(t, r.Quantity)
			}
		}
		for _, s := range cat.SKUs {
			got, ok := cat.ResolveSKU(s.GPUModel, s.Profile)
			require.True(t, ok)
			require.Equal(t, s.ID, got.ID)
		}
	})
}
