// Package archtest holds the module's layering, checked over the whole import
// graph: docs/architecture.md draws the same table.
package archtest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/cardhour/cardhour"

// rule says which module packages a package may import (non-test code). The
// first rule whose pattern matches a package applies; "x/..." matches x and
// everything under it.
type rule struct {
	pkg, why string
	may      []string
}

// layers runs from the bottom up: schemas; billing (the engine) above it,
// with ingest and the collector beside it; the state store, the reads, then
// invoicing and the watcher; api; cmd at the top. Nothing imports cmd.
var layers = []rule{
	{"schemas/...", "the wire, catalog and row formats: the bottom (with the YAML walker, a leaf)", []string{"schemas/...", "internal/yamlwalk"}},
	{"internal/storefail", "classifies store errors; imported by every store", nil},
	{"internal/retry", "the one backoff", nil},
	{"internal/yamlwalk", "the one way the configuration parsers walk YAML", nil},
	{"internal/rungroup", "a command's actors, stopped in order", nil},
	{"internal/testenv", "test services; imported by tests", nil},
	{"internal/archtest", "this test", nil},
	{"collector/...", "the node agent links no billing, store or service code", []string{"schemas/...", "collector/...", "internal/yamlwalk"}},
	{"ingest/...", "ingest writes the stored rows and knows nothing of how they are read", []string{"schemas/...", "ingest/...", "internal/storefail", "internal/retry"}},
	{"billing", "the engine: pure, over schemas alone", []string{"schemas/..."}},
	{"billing/...", "computed purely from the engine: the invoice document, its renderers, advice", []string{"billing/...", "schemas/..."}},
	{"internal/gen", "synthetic samples", []string{"schemas/..."}},
	{"internal/ledger/...", "the state store", []string{"internal/ledger/...", "internal/storefail", "schemas/...", "billing/..."}},
	{"internal/catalogs", "the one cache of the parsed catalog versions", []string{"internal/ledger", "schemas/..."}},
	{"internal/signin", "sign-in providers (OpenID Connect, LDAP, CAS) and the role mapping", []string{"internal/ledger", "internal/yamlwalk"}},
	{"internal/reads", "the engine over a usage store: billing, usage, held-now, data quality", []string{"billing", "schemas/..."}},
	{"internal/advicerun", "runs the pure advice: months billed at once, pairs priced on workers, progress", []string{"billing/...", "schemas/..."}},
	{"internal/storetest", "the conformance suite of the usage stores", []string{"billing", "internal/reads", "internal/gen", "ingest/...", "schemas/..."}},
	{"internal/invoicing", "billing runs, finalize, void, exports: the engine against the stores, written to the ledger", []string{"billing/...", "schemas/...", "internal/catalogs", "internal/ledger", "internal/reads", "internal/retry", "internal/storefail"}},
	{"internal/watch/alert", "what the watcher and its edges exchange: messages, envelopes, release requests", []string{"billing"}},
	{"internal/watch/release", "releasers: no billing", []string{"internal/watch/alert", "internal/yamlwalk"}},
	{"internal/watch/notify", "notifiers: messages from facts", []string{"billing", "schemas/...", "internal/watch/alert", "internal/yamlwalk"}},
	{"internal/watch/...", "the watcher and its tests", []string{"billing/...", "schemas/...", "internal/ledger", "internal/reads", "internal/watch/alert", "internal/yamlwalk"}},
	{"api/...", "the HTTP API: ports, no store; serves the invoice flow's and the reads' own types", []string{"api/...", "billing/...", "schemas/...", "internal/catalogs", "internal/invoicing", "internal/ledger", "internal/reads", "internal/signin", "internal/storefail"}},
	{"cmd/...", "the binary wires everything", []string{"..."}},
	{"scripts/...", "benchmarks and tools", []string{"!cmd/...", "..."}},
	{"deployments/...", "deployment tests", []string{"!cmd/...", "..."}},
}

func match(pattern, pkg string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func ruleFor(pkg string) (rule, bool) {
	for _, r := range layers {
		if match(r.pkg, pkg) {
			return r, true
		}
	}
	return rule{}, false
}

func allowed(r rule, imp string) bool {
	for _, m := range r.may {
		if neg, ok := strings.CutPrefix(m, "!"); ok {
			if match(neg, imp) {
				return false
			}
			continue
		}
		if match(m, imp) {
			return true
		}
	}
	return false
}

type pkgInfo struct {
	ImportPath   string
	Deps         []string // every package linked, the standard library's too
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// violations is every import of graph that breaks the layers, and every
// package no rule covers.
func violations(graph []pkgInfo) []string {
	var out []string
	for _, p := range graph {
		pkg := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		r, ok := ruleFor(pkg)
		if !ok {
			out = append(out, fmt.Sprintf("%s: no layer (add it to internal/archtest and docs/architecture.md)", pkg))
			continue
		}
		for _, imp := range p.Imports {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if !ok || rel == pkg {
				continue
			}
			if !allowed(r, rel) {
				out = append(out, fmt.Sprintf("%s imports %s (%s %s)", pkg, rel, r.pkg, r.why))
			}
		}
		// Tests may reach further down or sideways, but never into cmd.
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if ok && match("cmd/...", rel) && !match("cmd/...", pkg) {
				out = append(out, fmt.Sprintf("%s's tests import %s (nothing imports cmd)", pkg, rel))
			}
		}
	}
	sort.Strings(out)
	return out
}

func goList(t *testing.T, args ...string) []pkgInfo {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the layering test needs the go command: %v", err)
	}
	cmd := exec.Command(goBin, append([]string{"list", "-json"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var ps []pkgInfo
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkgInfo
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

func TestLayers(t *testing.T) {
	graph := goList(t, "./...")
	if len(graph) < 30 {
		t.Fatalf("go list found only %d packages", len(graph))
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}

// The checker itself fails on an arrow that breaks the layers.
func TestViolationsFindsBadArrows(t *testing.T) {
	m := func(s string) string { return module + "/" + s }
	bad := []pkgInfo{
		{ImportPath: m("billing"), Imports: []string{m("schemas"), m("internal/ledger")}},
		{ImportPath: m("ingest/sqlite"), Imports: []string{m("ingest"), m("billing")}},
		{ImportPath: m("api"), Imports: []string{m("cmd/cardhour")}},
		{ImportPath: m("scripts/x"), Imports: []string{m("cmd/cardhour")}},
		{ImportPath: m("schemas"), XTestImports: []string{m("cmd/cardhour")}},
		{ImportPath: m("newthing")},
	}
	got := violations(bad)
	want := []string{
		"api imports cmd/cardhour",
		"billing imports internal/ledger",
		"ingest/sqlite imports billing",
		"newthing: no layer",
		"schemas's tests import cmd/cardhour",
		"scripts/x imports cmd/cardhour",
	}
	if len(got) != len(want) {
		t.Fatalf("violations: %q", got)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %d: %q, want %q…", i, got[i], want[i])
		}
	}
	good := []pkgInfo{{ImportPath: m("internal/invoicing"), Imports: []string{m("billing/export"), m("internal/ledger"), "fmt"}}}
	if v := violations(good); len(v) != 0 {
		t.Errorf("allowed imports reported: %q", v)
	}
}

// docs/architecture.md draws the layers as a table: the same rows, in the
// same order, with the same imports.
func TestArchitectureDocDrawsTheLayers(t *testing.T) {
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []rule
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) != 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		r := rule{pkg: strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")}
		switch may := cells[1]; may {
		case "—":
		case "anything":
			r.may = []string{"..."}
		case "anything but `cmd/...`":
			r.may = []string{"!cmd/...", "..."}
		default:
			for _, m := range strings.Split(may, ", ") {
				r.may = append(r.may, strings.Trim(m, "`"))
			}
		}
		rows = append(rows, r)
	}
	if len(rows) != len(layers) {
		t.Fatalf("docs/architecture.md has %d layer rows, internal/archtest %d", len(rows), len(layers))
	}
	for i, r := range layers {
		if rows[i].pkg != r.pkg || !slices.Equal(rows[i].may, r.may) {
			t.Errorf("row %d: docs say %s may import %q; the test says %s may import %q", i+1, rows[i].pkg, rows[i].may, r.pkg, r.may)
		}
	}
}
