//go:build !collector

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector/nvmlmock"
	"github.com/cardhour/cardhour/internal/testenv"
)

func TestStandaloneConfigErrors(t *testing.T) {
	f := func(yaml string, want ...string) {
		t.Helper()
		_, err := parseStandalone([]byte(yaml), "/etc/cardhour/standalone.yaml")
		require.Error(t, err)
		for _, w := range want {
			require.Contains(t, err.Error(), w)
		}
	}
	f("store: /var/lib/cardhour/usage.db\ncatalog: c.yaml\ncolour: red\n", "standalone.yaml:3: colour: unknown field")
	f("store: /x.db\ncatalog: c.yaml\ncollector:\n  interval: 5ms\n", `standalone.yaml:4: collector.interval: "5ms"`)
	f("store: /x.db\ncatalog: c.yaml\ncollector:\n  attribution:\n    resolvers: [kube, slurm]\n", `:5: collector.attribution.resolvers: "slurm" is not a resolver`)
	f("store: /x.db\ncatalog: c.yaml\ncollector:\n  attribution:\n    static: m.yaml\n", ":5: collector.attribution.static: unknown field")
	f("addr: 127.0.0.1:1\n", "store: required", "catalog: required")
	f("store: [a]\ncatalog: c.yaml\n", ":1: store: want a string")
	f("store: /x.db\nstore: /y.db\ncatalog: c.yaml\n", ":2: store: given twice (also on line 1)")
	f("- a\n", "want a mapping")

	c, err := parseStandalone([]byte("store: data/usage.db\ncatalog: catalog.yaml\naddr: 0.0.0.0:9000\ncollector:\n  node: gpu-07\n  interval: 30s\n"+
		"  attribution:\n    resolvers: [static]\n    static_map: map.yaml\n    namespace_projects: {ml: nlp-lab}\n"), "/etc/cardhour/standalone.yaml")
	require.NoError(t, err)
	require.Equal(t, "/etc/cardhour/data/usage.db", c.Store)
	require.Equal(t, "/etc/cardhour/data/state.db", c.State, "the state store defaults to the store's directory")
	require.Equal(t, "/etc/cardhour/catalog.yaml", c.Catalog)
	require.Equal(t, "/etc/cardhour/map.yaml", c.StaticMap)
	require.Equal(t, 30*time.Second, c.Interval)
	require.Equal(t, "gpu-07", c.Node)
	require.Equal(t, []string{"static"}, c.Resolvers)
	require.Equal(t, map[string]string{"ml": "nlp-lab"}, c.NamespaceProjects)

	code, _, stderr := runCLI(t, "", "standalone")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--config is required")
	bad := filepath.Join(t.TempDir(), "s.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("store: x.db\ncatalog: c.yaml\nwatch_file: w.yaml\n"), 0o600))
	code, _, stderr = runCLI(t, "", "standalone", "--config", bad)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "s.yaml:3: watch_file: unknown field")
}

// TestStandaloneMockGPU runs `cardhour standalone` over go-nvml's mock of an
// A100 (two MIG slices and a whole card): the collector's samples reach the
// SQLite store through the channel, and the API shows the slice a static map
// attributes as held, busy.
func TestStandaloneMockGPU(t *testing.T) {
	dir := t.TempDir()
	node, err := nvmlmock.New("a100-80gb", []nvmlmock.Layout{{"1g.10gb", "1g.10gb"}, nil}, "standalone-test")
	require.NoError(t, err)
	slice := node.GPUs[0].Instances[0]
	slice.Dynamic(func() nvmlmock.State {
		return nvmlmock.State{MemUsed: 4 << 30, Util: 0.9, Processes: []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 4 << 30}}}
	})
	static := filepath.Join(dir, "static.yaml")
	require.NoError(t, os.WriteFile(static, []byte(fmt.Sprintf("instances:\n  %s: {project: nlp-lab, user: \"2023110042\"}\n", slice.UUID)), 0o600))
	cat, err := filepath.Abs(exampleCatalog)
	require.NoError(t, err)
	cfgPath := filepath.Join(dir, "standalone.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`store: data/usage.db
catalog: %s
addr: 127.0.0.1:0
collector:
  node: gpu-test-01
  interval: 1s
  attribution:
    resolvers: [static]
    static_map: static.yaml
`, cat)), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	standaloneNVML = func() nvml.Interface { return node.Lib() }
	standaloneContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	standaloneReady = func(url string) { ready <- url }
	defer func() {
		standaloneNVML = func() nvml.Interface { return nvml.New() }
		standaloneContext = func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
		standaloneReady = nil
	}()
	done := make(chan int, 1)
	var stdout, stderr strings.Builder
	go func() { done <- run([]string{"standalone", "--config", cfgPath}, &stdout, &stderr) }()
	var url string
	select {
	case url = <-ready:
	case code := <-done:
		t.Fatalf("standalone exited with %d: %s", code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("standalone did not start")
	}
	code, out, errOut := runCLI(t, "", "token", "create", "--state", "sqlite://"+filepath.Join(dir, "data", "state.db"), "--role", "admin")
	require.Equal(t, 0, code, errOut)
	token := strings.TrimSpace(out)
	if i := strings.LastIndex(token, "\n"); i >= 0 {
		token = strings.TrimSpace(token[i+1:])
	}
	resp, err := http.Get(url + "/healthz")
	require.NoError(t, err)
	resp.Body.Close() //nolint:errcheck,gosec // test
	require.Equal(t, http.StatusOK, resp.StatusCode)

	type held struct {
		Instance, Node, Project, User, SKU string
		Idle                               bool
	}
	var got []held
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest("GET", url+"/api/v1/held", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close() //nolint:errcheck // test
		var page struct{ Items []held }
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&page) != nil {
			return false
		}
		got = page.Items
		return len(got) > 0
	}, 20*time.Second, 200*time.Millisecond, "the slice shows as held")
	require.Equal(t, []held{{Instance: slice.UUID, Node: "gpu-test-01", Project: "nlp-lab", User: "2023110042", SKU: "a100-80g-1g.10gb"}}, got)

	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("standalone did not stop")
	}
	require.Contains(t, stdout.String(), "cardhour standalone: node gpu-test-01, dashboard http://127.0.0.1:")
	// Everything taken was stored: the store bills what the collector saw.
	code, out, errOut = runCLI(t, "", "bill", "--catalog", cat, "--store", "sqlite://"+filepath.Join(dir, "data", "usage.db"),
		"--period", time.Now().In(time.FixedZone("CST", 8*3600)).Format("2006-01"), "--format", "csv")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "nlp-lab")
}

// The example configuration next to the systemd unit is valid.
func TestStandaloneExampleConfig(t *testing.T) {
	path := "../../deployments/systemd/cardhour-standalone.yaml"
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	c, err := parseStandalone(data, path)
	require.NoError(t, err)
	require.Equal(t, "/var/lib/cardhour/usage.db", c.Store)
	require.Equal(t, "/var/lib/cardhour/state.db", c.State)
	require.Equal(t, []string{"unix"}, c.Resolvers)
	require.Equal(t, 10*time.Second, c.Interval)
}

// The file is walked as every configuration file is (internal/yamlwalk):
// each problem word for word, all at once, in the file's order; a field's
// dotted path is the field, wherever it is written.
func TestStandaloneConfigErrorsWordForWord(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"store: /x.db\ncatalog: c.yaml\ncollector: ~\n", "/etc/s.yaml:3: collector: want a mapping"},
		{"store: /x.db\ncatalog: c.yaml\ncollector: [a]\n", "/etc/s.yaml:3: collector: want a mapping"},
		{"store: /x.db\ncatalog: c.yaml\ncollector:\n  node: a\n  node: b\n  attribution:\n    roster: r\n    roster: s\n    namespace_projects: {a: b, a: c, '': d}\n    resolvers: kube\n  colour: x\n",
			"/etc/s.yaml:5: collector.node: given twice (also on line 4)\n" +
				"/etc/s.yaml:8: collector.attribution.roster: given twice (also on line 7)\n" +
				"/etc/s.yaml:9: collector.attribution.namespace_projects.a: given twice (also on line 9)\n" +
				"/etc/s.yaml:10: collector.attribution.resolvers: want a list of kube, unix, static\n" +
				"/etc/s.yaml:11: collector.colour: unknown field (want node, interval, attribution)"},
		{"store: /x.db\ncatalog: c.yaml\ncollector:\n  attribution: 3\n", "/etc/s.yaml:4: collector.attribution: want a mapping"},
		{"store: /x.db\ncatalog: c.yaml\ncollector:\n  attribution:\n    namespace_projects: x\n", "/etc/s.yaml:5: collector.attribution.namespace_projects: want a mapping"},
		{"store: ~\ncatalog: c.yaml\n", "/etc/s.yaml:1: store: want a string"},
		{"collector.node: a\nstore: /x.db\ncatalog: c.yaml\ncollector:\n  node: b\n",
			"/etc/s.yaml:1: collector.node: unknown field (want store, state, catalog, addr, watch, collector)\n/etc/s.yaml:5: collector.node: given twice (also on line 1)"},
		{"store: /x.db\ncatalog: c.yaml\ncollector:\n  node: b\ncollector.node: a\n", "/etc/s.yaml:5: collector.node: given twice (also on line 4)"},
		{"", "/etc/s.yaml: empty: store and catalog are required"},
		{"a: [\n", "/etc/s.yaml: invalid YAML: yaml: line 1: did not find expected node content"},
	} {
		_, err := parseStandalone([]byte(c.in), "/etc/s.yaml")
		require.EqualError(t, err, c.want, "parseStandalone(%q)", c.in)
	}
}

// An alias stands for the value it names, as in the watch, notify, release
// and catalog files (internal/yamlwalk); before the walk was shared, it was
// refused here as "want a string".
func TestStandaloneConfigFollowsAliases(t *testing.T) {
	c, err := parseStandalone([]byte("store: /x.db\ncatalog: c.yaml\ncollector:\n  node: &n gpu-07\n  attribution:\n    namespace_projects: {ml: *n}\n"), "/etc/s.yaml")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"ml": "gpu-07"}, c.NamespaceProjects)
}

// Shares of cards on one machine, end to end through the commands: `cardhour
// simulate` writes three days of the shared fleet (vGPU, HAMi, time-slicing)
// and two days of a HAMi card over-subscribed on memory, `cardhour migrate`
// and `cardhour ingest --from-file` store them in SQLite, and `cardhour bill --store` prints what
// `cardhour bill --samples` prints, in every format, with the same
// over-subscription warning.
func TestSharedFleetBillsFromSQLiteLikeTheFile(t *testing.T) {
	sharedFleetBillsFromStoreLikeTheFile(t, "sqlite://"+filepath.Join(t.TempDir(), "usage.db"))
}

// The same from ClickHouse.
func TestSharedFleetBillsFromClickHouseLikeTheFile(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	db := testenv.UniqueName(t, "shares")
	dropDatabaseAtEnd(t, addr, db)
	sharedFleetBillsFromStoreLikeTheFile(t, "clickhouse://"+addr+"/"+db)
}

func sharedFleetBillsFromStoreLikeTheFile(t *testing.T, store string) {
	t.Helper()
	dir := t.TempDir()
	var all []byte
	for _, sim := range []struct{ fleet, to string }{
		{"../../collector/testdata/fleet.shared.yaml", "2026-11-05T00:00:00+08:00"},
		{"../../ingest/e2e/testdata/fleet.oversub.yaml", "2026-11-04T00:00:00+08:00"},
	} {
		out := filepath.Join(dir, filepath.Base(sim.fleet)+".jsonl")
		code, _, errOut := runCLI(t, "", "simulate", "--fleet", sim.fleet, "--from", "2026-11-02T00:00:00+08:00", "--to", sim.to, "--out", out)
		require.Equal(t, 0, code, errOut)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		all = append(all, b...)
	}
	samples := filepath.Join(dir, "shares.jsonl")
	require.NoError(t, os.WriteFile(samples, all, 0o644))
	code, _, errOut := runCLI(t, "", "migrate", "--store", store)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = runCLI(t, "", "ingest", "--store", store, "--from-file", samples, "--listen", "")
	require.Equal(t, 0, code, errOut)
	const oversub = `its shares' memory (显存) added up to 120 % of the card (held by dl-course/2025030120, nlp-lab/2024210008) for 18000 s`
	for _, format := range []string{"json", "table", "csv"} {
		code, fromFile, fileErr := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--samples", samples, "--period", "2026-11", "--format", format)
		require.Equal(t, 0, code, fileErr)
		code, fromStore, storeErr := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", store, "--period", "2026-11", "--format", format)
		require.Equal(t, 0, code, storeErr)
		require.Equal(t, fromFile, fromStore, format)
		require.Contains(t, fileErr, oversub, format)
		require.Contains(t, storeErr, oversub, format)
		require.NotContains(t, fileErr, "matches no SKU", "every share is priced")
	}
	_, js, _ := runCLI(t, "", "bill", "--catalog", exampleCatalog, "--store", store, "--period", "2026-11", "--format", "json")
	for _, want := range []string{`"oversubscribed"`, `"peak": "1.2"`, `"sku": "a16-1q"`, `"sku": "t4-share[1/4]"`, `"sku": "a100-80g-share[mem=60%,cores=50%]"`} {
		require.Contains(t, js, want)
	}
}
