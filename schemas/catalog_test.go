package schemas

import (
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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
			requireNoGoTypes(t, err, data)
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
			if s.ShareSKU() {
				_, ok := cat.SKUByID(s.ShareOf)
				require.True(t, ok, "a SKU priced by share names a SKU of the catalog")
				continue
			}
			got, ok := cat.ResolveSKU(s.GPUModel, s.Profile)
			require.True(t, ok)
			require.Equal(t, s.ID, got.ID)
		}
	})
}

// requireNoGoTypes checks that a catalog error speaks in catalog terms; a
// word the input itself contains (a field named "raw") may be quoted back.
func requireNoGoTypes(t *testing.T, err error, input ...[]byte) {
	t.Helper()
	for _, goWord := range []string{"yaml.Node", "[]", "map[", "schemas.", "raw", " into ", "!!"} {
		if len(input) > 0 && bytes.Contains(input[0], []byte(goWord)) {
			continue
		}
		require.NotContains(t, err.Error(), goWord)
	}
}

func TestCatalogEmpty(t *testing.T) {
	for _, doc := range []string{"", "\n\n", "# only a comment\n", "---\n", "~\n", "null\n"} {
		_, err := ParseCatalog([]byte(doc), "prices.yaml")
		require.ErrorContains(t, err, "catalog prices.yaml is empty", "%q", doc)
	}
	_, err := LoadCatalog(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "cannot read catalog")
}

// Documents of the wrong shape get errors that name the field and line in
// catalog terms, never a Go type of the loader.
func TestCatalogShapeErrors(t *testing.T) {
	for doc, want := range map[string]string{
		"skus: abc\n":                    `c.yaml:1: skus: must be a list (lines starting with '- '), not the single value "abc"`,
		"projects: {a: b}\n":             `c.yaml:1: projects: must be a list (lines starting with '- '), not a mapping (key: value lines)`,
		"currency: CNY\ncurrency: USD\n": `c.yaml:2: currency: appears more than once (first at line 1)`,
		"- a\n- b\n":                     `c.yaml:1: expected a mapping (key: value lines)`,
		"currency: CNY\ntimezone: UTC\nskus:\n  - [a, b]\n":                              `c.yaml:4: skus[0]: expected a mapping (key: value lines)`,
		"currency: CNY\ntimezone: UTC\ndefaults: 3\n":                                    `c.yaml:3: defaults: expected a mapping (key: value lines)`,
		"currency: CNY\ntimezone: UTC\nprojects:\n  - id: p\n    reservations: {a: 1}\n": `c.yaml:5: projects[0].reservations: must be a list`,
		"currency: CNY\ntimezone: UTC\nskus:\n  - id: a\n    id: b\n":                    `c.yaml:5: skus[0].id: appears more than once (first at line 4)`,
		"apiVersion: v1\nkind: ConfigMap\n":                                              `c.yaml:1: this is not a price catalog: its fields (apiVersion, kind) are none of a catalog's`,
	} {
		_, err := ParseCatalog([]byte(doc), "c.yaml")
		require.Error(t, err, doc)
		require.Contains(t, err.Error(), want, doc)
		requireNoGoTypes(t, err)
	}
	// The repository's fleet example, given as a catalog.
	data, err := os.ReadFile("../collector/testdata/fleet.example.yaml")
	require.NoError(t, err)
	_, err = ParseCatalog(data, "fleet.example.yaml")
	require.ErrorContains(t, err, "this is not a price catalog")
	requireNoGoTypes(t, err)
}

// Only IANA zone names: not Local (the billing machine's zone), not files of
// the host's zoneinfo directory that are not zones.
func TestCatalogTimezones(t *testing.T) {
	load := func(tz string) (*Catalog, error) {
		return ParseCatalog([]byte("currency: CNY\ntimezone: "+tz+"\n"), "c.yaml")
	}
	for _, tz := range []string{"UTC", "Asia/Shanghai", "Europe/Berlin", "America/New_York", "Etc/GMT-8", "PRC"} {
		cat, err := load(tz)
		require.NoError(t, err, tz)
		require.Equal(t, tz, cat.Location.String())
	}
	for tz, want := range map[string]string{
		"Local":                   `"Local" is the zone of the machine that bills`,
		"local":                   `"local" is the zone of the machine that bills`,
		"localtime":               `"localtime" is the zone of the machine that bills`,
		"posixrules":              `"posixrules" is not an IANA time zone`,
		"posix/Europe/Berlin":     `"posix/Europe/Berlin" is not an IANA time zone`,
		"right/UTC":               `"right/UTC" is not an IANA time zone`,
		"europe/berlin":           `"europe/berlin" is not an IANA time zone; did you mean "Europe/Berlin"?`,
		"Asia/Beijing":            `"Asia/Beijing" is not an IANA time zone`,
		"../../../etc/passwd":     `"../../../etc/passwd" is not an IANA time zone`,
		"/usr/share/zoneinfo/UTC": `"/usr/share/zoneinfo/UTC" is not an IANA time zone`,
	} {
		_, err := load(`"` + tz + `"`)
		require.ErrorContains(t, err, "c.yaml:2: timezone: "+want, tz)
	}
	_, err := load(`""`)
	require.ErrorContains(t, err, "c.yaml:2: timezone: must not be empty")
}

// Every name in the table loads (from the host's zoneinfo or the copy embedded
// in the binary), and the table is the toolchain's list (when it is at hand).
func TestIANAZoneTable(t *testing.T) {
	require.True(t, slices.IsSorted(ianaZones))
	require.Greater(t, len(ianaZones), 500)
	for _, z := range ianaZones {
		_, err := time.LoadLocation(z)
		require.NoError(t, err, z)
	}
	z, err := zip.OpenReader(filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		t.Skipf("no toolchain zoneinfo.zip to compare with: %v", err)
	}
	defer z.Close()
	var names []string
	for _, f := range z.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	require.Equal(t, names, ianaZones, "run 'go generate ./schemas' after a Go upgrade (tzdata %s)", tzdataVersion)
}

// Currencies: codes of ISO 4217 list one with two decimal places; others are
// refused with the reason.
func TestCatalogCurrencies(t *testing.T) {
	load := func(c string) (*Catalog, error) {
		return ParseCatalog([]byte("currency: "+c+"\ntimezone: UTC\n"), "c.yaml")
	}
	for _, c := range billableCurrencies() {
		cat, err := load(c)
		require.NoError(t, err, c)
		require.Equal(t, c, cat.Currency)
	}
	for c, want := range map[string]string{
		"JPY":  `"JPY" has 0 decimal places in ISO 4217, but cardhour rounds amounts to 0.01: only currencies with 2 decimal places are supported`,
		"KRW":  `"KRW" has 0 decimal places`,
		"KWD":  `"KWD" has 3 decimal places`,
		"CLF":  `"CLF" has 4 decimal places`,
		"XAU":  `"XAU" has no minor unit in ISO 4217`,
		"XXX":  `"XXX" has no minor unit in ISO 4217`,
		"XYZ":  `"XYZ" is not an ISO 4217 code`,
		"RMB":  `"RMB" is not an ISO 4217 code; did you mean CNY?`,
		"cny":  `"cny": write the ISO 4217 code in upper case: CNY`,
		"Eur":  `"Eur": write the ISO 4217 code in upper case: EUR`,
		"HRK":  `"HRK" is not an ISO 4217 code`, // withdrawn in 2023
		"yuan": `"yuan" is not an ISO 4217 code`,
	} {
		_, err := load(c)
		require.ErrorContains(t, err, "c.yaml:1: currency: "+want, c)
	}
	n, ok := CurrencyMinorUnits("JPY")
	require.True(t, ok)
	require.Equal(t, 0, n)
	n, ok = CurrencyMinorUnits("CNY")
	require.True(t, ok)
	require.Equal(t, 2, n)
	_, ok = CurrencyMinorUnits("RMB")
	require.False(t, ok)
}

// The cardhour binary carries the zone database (time/tzdata, imported by this
// package), so a host without /usr/share/zoneinfo loads catalog zones too.
func TestBinaryEmbedsZoneDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	for _, tags := range []string{"", "collector"} {
		out, err := exec.Command(goBin, "list", "-deps", "-tags", tags, "../cmd/cardhour").CombinedOutput()
		require.NoError(t, err, string(out))
		require.Contains(t, strings.Fields(string(out)), "time/tzdata", "tags %q", tags)
	}
}
