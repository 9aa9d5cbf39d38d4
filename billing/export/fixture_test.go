package export

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const fixtureCatalog = `
currency: CNY
timezone: Asia/Shanghai
defaults: {rounding: second, gap_tolerance_s: 30}
skus:
  - {id: a1g, gpu_model: A100, profile: 1g.10gb, hourly_price: "1.80", monthly_price: "900"}
  - {id: a3g, gpu_model: A100, profile: 3g.40gb, hourly_price: "5.125", monthly_price: "2700"}
projects:
  - id: lab
    name: Lab 课题组
    funding: F-1
    reservations:
      - {sku: a1g, quantity: 1, term: quarter, start: "2026-10", billing: monthly}
  - id: other
    name: Other 项目
    funding: F-2
`

var shanghai = mustZone("Asia/Shanghai")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// at is Unix ms at a wall-clock time in Shanghai in November 2026.
func at(day, hour, minute int) int64 {
	return time.Date(2026, time.November, day, hour, minute, 0, 0, shanghai).UnixMilli()
}

type held struct {
	project, user, inst, model, profile string
	start, end                          int64
}

// fixtureResult is a month with a bit of everything: a reservation, usage lines
// for several students, a holder conflict inside the project and one across
// projects, unpriced usage, a project not in the catalog whose IDs a spreadsheet
// would take for formulas, and skipped input lines.
func fixtureResult(t testing.TB) *billing.Result {
	t.Helper()
	cat, err := schemas.ParseCatalog([]byte(fixtureCatalog), "fixture")
	require.NoError(t, err)
	t0 := at(3, 10, 0)
	hs := []held{
		{project: "lab", user: "alice", inst: "MIG-1", start: t0, end: t0 + 3_600_000},
		{project: "lab", user: "bob", inst: "MIG-1", start: t0 + 1_800_000, end: t0 + 2_700_000},
		{project: "lab", user: "bob", inst: "MIG-2", start: t0, end: t0 + 5_400_000},
		{project: "lab", user: "bob", inst: "MIG-4", profile: "3g.40gb", start: t0, end: t0 + 1_234_567},
		{project: "other", user: "dave", inst: "MIG-5", start: t0, end: t0 + 7_200_000},
		{project: "lab", user: "alice", inst: "MIG-5", start: t0 + 3_600_000, end: t0 + 4_000_000},
		{project: "-lab", user: "=1+2", inst: "MIG-3", start: t0, end: t0 + 600_500},
		{project: "lab", user: "carol", inst: "GPU-9", model: "NVIDIA L40S", profile: "full", start: t0, end: t0 + 1_200_000},
	}
	acc := billing.NewAccumulator(cat, billing.NewPeriod(2026, time.November, shanghai))
	for _, h := range hs {
		model, profile := h.model, h.profile
		if model == "" {
			model = "A100"
		}
		if profile == "" {
			profile = "1g.10gb"
		}
		s := schemas.Sample{StartMS: h.start, IntervalMS: h.end - h.start, Node: "n", GPUUUID: "GPU-1", GPUModel: model,
			InstanceID: h.inst, Profile: profile, Project: h.project, User: h.user, Processes: 1}
		require.NoError(t, s.Validate())
		acc.Add(&s)
	}
	res := acc.Invoices()
	// The watcher released bob's idle MIG-2 and failed to release alice's
	// MIG-1 (the invoicing service adds these from the state store).
	for i := range res.Invoices {
		if res.Invoices[i].Project == "lab" {
			res.Invoices[i].Releases = []billing.Release{
				{InstanceID: "MIG-2", Node: "n", User: "bob", IdleSince: time.UnixMilli(t0 + 3_600_000), At: time.UnixMilli(t0 + 5_400_000),
					Status: "done", Action: "deleted pod ml/nb-bob"},
				{InstanceID: "MIG-1", Node: "n", User: "alice", IdleSince: time.UnixMilli(t0 + 1_800_000), At: time.UnixMilli(t0 + 3_000_000),
					Status: "failed", Failure: "no handle: the holder reference is empty"},
			}
		}
	}
	res.SkippedLines = 3
	res.AddWarning(billing.WarnInput, "3 of 11 sample line(s) were invalid and skipped")
	return res
}

var fixtureMeta = Meta{
	CatalogVersion: 7,
	DataCutoff:     time.Date(2026, time.December, 3, 16, 0, 0, 0, time.UTC),
	GeneratedAt:    time.Date(2026, time.December, 4, 1, 2, 3, 0, time.UTC),
}

// fixtureDocs are the fixture's documents, the students of "lab" named.
func fixtureDocs(t testing.TB) []Document {
	t.Helper()
	docs := Build(fixtureResult(t), fixtureMeta)
	for i := range docs {
		docs[i].SetNames(map[string]string{"alice": "Alice 李", "bob": "Bob 王", "dave": "Dave 张"})
	}
	return docs
}

func docByProject(t testing.TB, docs []Document, project string) *Document {
	t.Helper()
	for i := range docs {
		if docs[i].Project == project {
			return &docs[i]
		}
	}
	t.Fatalf("no document for project %q", project)
	return nil
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run 'go test ./billing/export -update' to create it")
	require.Equal(t, string(want), string(got), "output differs from %s (rerun with -update if the change is intended)", path)
}
