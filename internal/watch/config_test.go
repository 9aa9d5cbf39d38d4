package watch

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const sampleFile = `# watch configuration
watch:
  interval: 30s
  budget_every: 5m
  exemption_hint: ask your lead
  admins:
    - {name: Ops, email: ops@example.edu, im: ops-robot, lang: en}
  leads:
    nlp:
      - name: Prof. Li
        email: li@example.edu
        lang: zh-CN
notify:
  # channels
  channels:
    mail: {type: smtp, host: 127.0.0.1}
  routes: [a, b]
release: {kubernetes: {allowed_namespaces: [ml]}}
`

func TestLoadFile(t *testing.T) {
	f, err := LoadFile([]byte(sampleFile), "watch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if f.Interval != 30*time.Second || f.BudgetEvery != 5*time.Minute || f.ExemptionHint != "ask your lead" {
		t.Fatalf("%+v", f)
	}
	if len(f.Admins) != 1 || f.Admins[0].IM != "ops-robot" || len(f.Leads["nlp"]) != 1 || f.Leads["nlp"][0].Lang != "zh-CN" {
		t.Fatalf("people %+v %+v", f.Admins, f.Leads)
	}
	// The notify section keeps its lines: "channels:" is on line 15 of the file.
	var n yaml.Node
	if err := yaml.Unmarshal(f.Notify, &n); err != nil {
		t.Fatal(err)
	}
	m := n.Content[0]
	if m.Content[0].Value != "channels" || m.Content[0].Line != 15 || m.Content[2].Value != "routes" || m.Content[2].Line != 17 {
		t.Fatalf("notify section:\n%s", f.Notify)
	}
	if err := yaml.Unmarshal(f.Release, &n); err != nil || !strings.Contains(string(f.Release), "allowed_namespaces") {
		t.Fatalf("release section %q: %v", f.Release, err)
	}
}

func TestLoadFileErrors(t *testing.T) {
	bad := `watch:
  interval: soon
  admins:
    - {name: Ops}
    - {email: not-an-address, lang: fr}
  colour: blue
notfy: {}
`
	_, err := LoadFile([]byte(bad), "w.yaml")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`w.yaml:2: watch.interval: "soon" is not a positive duration`,
		`w.yaml:4: watch.admins[0]: needs an email or an im handle`,
		`w.yaml:5: watch.admins[1].email: "not-an-address" is not an email address`,
		`w.yaml:5: watch.admins[1].lang: "fr": want en or zh-CN`,
		`w.yaml:6: watch.colour: unknown field`,
		`w.yaml:7: notfy: unknown section`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := LoadFile(nil, "e.yaml"); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty: %v", err)
	}
}

func TestLoadFileDeliveryRetryFor(t *testing.T) {
	f, err := LoadFile([]byte("watch:\n  delivery_retry_for: 36h\n"), "watch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if f.DeliveryRetryFor != 36*time.Hour {
		t.Fatalf("delivery_retry_for %s", f.DeliveryRetryFor)
	}
	if _, err := LoadFile([]byte("watch:\n  delivery_retry_for: -1h\n"), "watch.yaml"); err == nil || !strings.Contains(err.Error(), "watch.delivery_retry_for") {
		t.Fatalf("a negative horizon: %v", err)
	}
}

// The watch section is walked as notify's and release's are
// (internal/yamlwalk): an alias stands for the person it names, checked as
// that person is, and an empty person is still refused.
func TestLoadFileFollowsAliases(t *testing.T) {
	f, err := LoadFile([]byte("watch:\n  admins:\n    - &ops {name: Ops, email: ops@example.edu}\n  leads:\n    nlp: [*ops]\n"), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Leads["nlp"]; len(got) != 1 || got[0].Email != "ops@example.edu" {
		t.Fatalf("leads of nlp = %+v, want the aliased admin", got)
	}
	_, err = LoadFile([]byte("watch:\n  admins:\n    - &nobody {name: Nobody}\n  leads:\n    nlp: [*nobody]\n    cv:\n      - ~\n"), "w.yaml")
	for _, want := range []string{
		"w.yaml:3: watch.admins[0]: needs an email or an im handle",
		"w.yaml:3: watch.leads.nlp[0]: needs an email or an im handle",
		"w.yaml:7: watch.leads.cv[0]: expected a mapping",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// The top level is walked as every mapping is (internal/yamlwalk): each
// problem word for word, all at once, in the file's order.
func TestLoadFileTopLevelErrorsWordForWord(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"- a\n", "w.yaml:1: expected a mapping with the sections watch:, notify: and release:"},
		{"word\n", "w.yaml:1: expected a mapping with the sections watch:, notify: and release:"},
		{"watch: {interval: 1s}\nwatch: {interval: 2s}\nnotify: {}\n", "w.yaml:2: watch: appears more than once (first at line 1)"},
		{"notify: {a: 1}\nnotfy: x\nrelease:\n  b: 2\nnotify: 3\n",
			"w.yaml:2: notfy: unknown section (allowed: watch, notify, release)\nw.yaml:5: notify: appears more than once (first at line 1)"},
		{"watch: ~\n", "w.yaml:1: watch: expected a mapping (key: value lines)"},
		{"watch: [a]\nwatch: 1\n", "w.yaml:1: watch: expected a mapping (key: value lines)\nw.yaml:2: watch: appears more than once (first at line 1)"},
		{"x: &a 1\n*a : 2\n", "w.yaml:1: x: unknown section (allowed: watch, notify, release)\nw.yaml:2: a: unknown section (allowed: watch, notify, release)"},
	} {
		_, err := LoadFile([]byte(c.in), "w.yaml")
		if err == nil || err.Error() != c.want {
			t.Errorf("LoadFile(%q):\n%v\nwant:\n%s", c.in, err, c.want)
		}
	}
}

// A section is text handed to its parser: given as an alias it is handed
// over as written (that parser refuses the unknown anchor), not as the
// aliased node, whose lines lie elsewhere and would leave it silently empty.
func TestLoadFileSectionAliasIsHandedOverAsWritten(t *testing.T) {
	f, err := LoadFile([]byte("notify: &n\n  a: 1\nrelease: *n\n"), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(f.Notify) != "&n\na: 1\n" || string(f.Release) != "\n\n*n\n" {
		t.Fatalf("notify %q, release %q", f.Notify, f.Release)
	}
}
