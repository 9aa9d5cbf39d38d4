package watch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/yamlwalk"
)

// File is the watch configuration file of `cardhour serve --watch FILE`:
//
//	watch:
//	  interval: 30s            # how often a cycle runs (--watch-every when absent)
//	  budget_every: 5m         # how often budgets are checked (a billing run each)
//	  delivery_retry_for: 24h  # how long a failed delivery is retried before it fails for good (default 24h)
//	  exemption_hint: "ask your lead in the course chat"
//	  dashboard_url: https://gpu.example.edu   # links to the exemption request form (default: serve's --public-url)
//	  admins:
//	    - {name: Ops, email: ops@example.edu, im: ops-robot, lang: en}
//	  leads:
//	    nlp: [{name: Prof. Li, email: li@example.edu, lang: zh-CN}]
//	notify:                    # parsed by the notifier (channels, routing, templates)
//	  ...
//	release:                   # parsed by the releasers (Kubernetes, command, webhook)
//	  ...
//
// The notify: and release: sections are handed over as their own YAML
// text, with their lines where they are in the file (the lines before them
// blank), so that the errors their parsers report name the file's lines.
type File struct {
	Interval    time.Duration // 0: not set
	BudgetEvery time.Duration
	// DeliveryRetryFor is watch.delivery_retry_for (0: not set, the
	// default DefaultDeliveryRetryFor).
	DeliveryRetryFor time.Duration
	ExemptionHint    string
	DashboardURL     string // watch.dashboard_url: where people reach the dashboard; "" not set
	Admins           []alert.Person
	Leads            map[string][]alert.Person
	Notify           []byte // nil when the file has no notify: section
	Release          []byte // nil when the file has no release: section
}

// LoadFile parses a watch configuration file; every problem is reported at
// once, each as name:line: field: reason.
func LoadFile(data []byte, name string) (*File, error) {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty watch configuration (it needs a watch:, notify: or release: section)", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &fileParser{name: name}
	f := &File{}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		p.errf(doc.Line, "", "expected a mapping with the sections watch:, notify: and release:")
		return nil, errors.Join(p.errs...)
	}
	lines := strings.SplitAfter(string(data), "\n")
	// A section is text: its value as written (an alias is not followed),
	// up to the line before the next top-level key (0: the end).
	raw, next := map[*yaml.Node]*yaml.Node{}, map[*yaml.Node]int{}
	var prev *yaml.Node
	for k, v := range yamlwalk.Pairs(doc) {
		raw[k] = v
		if prev != nil {
			next[prev] = k.Line
		}
		prev = k
	}
	yamlwalk.Mapping(doc, "", nil, p.report, func(k, v *yaml.Node, _ string) {
		switch k.Value {
		case "watch":
			p.watch(v, f)
		case "notify":
			f.Notify = section(lines, k, raw[k], next[k])
		case "release":
			f.Release = section(lines, k, raw[k], next[k])
		default:
			p.errf(k.Line, k.Value, "unknown section (allowed: watch, notify, release)")
		}
	})
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return f, nil
}

// section returns the YAML text of the value of top-level key k: the
// file's own lines (comments kept), dedented, after k.Line blank lines so
// that line numbers stay those of the file. A value on the key's own line
// (flow style) is re-encoded.
func section(lines []string, k, v *yaml.Node, next int) []byte {
	if isNullNode(v) {
		return []byte{}
	}
	if v.Line == k.Line || v.Style&yaml.FlowStyle != 0 {
		b, err := yaml.Marshal(v)
		if err != nil {
			return nil
		}
		return append([]byte(strings.Repeat("\n", k.Line-1)), b...)
	}
	end := len(lines)
	if next > 0 {
		end = next - 1
	}
	body := lines[k.Line:end] // lines k.Line+1 .. end (1-based)
	indent := -1
	for _, l := range body {
		if t := strings.TrimLeft(l, " "); strings.TrimSpace(t) != "" && !strings.HasPrefix(t, "#") {
			if n := len(l) - len(t); indent < 0 || n < indent {
				indent = n
			}
		}
	}
	var b strings.Builder
	b.WriteString(strings.Repeat("\n", k.Line))
	for _, l := range body {
		if len(l) >= indent && strings.TrimSpace(l[:max(indent, 0)]) == "" {
			l = l[max(indent, 0):]
		} else {
			l = strings.TrimLeft(l, " ")
		}
		b.WriteString(l)
	}
	return []byte(b.String())
}

type fileParser struct {
	name string
	errs []error
}

func (p *fileParser) errf(line int, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s", p.name, line, msg))
}

// report is errf as a yamlwalk.Report.
func (p *fileParser) report(n *yaml.Node, path, format string, args ...any) {
	p.errf(n.Line, path, format, args...)
}

func isNullNode(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// pairs walks a mapping (internal/yamlwalk), reporting unknown and
// repeated keys. Unlike yamlwalk.Mapping it takes no null for an empty
// mapping: a section, lead list or person left empty is a mistake here.
func (p *fileParser) pairs(n *yaml.Node, path string, allowed []string, fn func(key string, k, v *yaml.Node)) {
	if n = yamlwalk.Deref(n); n.Kind != yaml.MappingNode {
		p.errf(n.Line, path, "expected a mapping (key: value lines)")
		return
	}
	yamlwalk.Mapping(n, path, allowed, p.report, func(k, v *yaml.Node, _ string) { fn(k.Value, k, v) })
}

func (p *fileParser) scalar(v *yaml.Node, path string) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		p.errf(v.Line, path, "must be a single value, not a list or mapping")
		return "", false
	}
	return v.Value, true
}

func (p *fileParser) duration(v *yaml.Node, path string) time.Duration {
	s, ok := p.scalar(v, path)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		p.errf(v.Line, path, "%q is not a positive duration (e.g. 30s, 5m)", s)
		return 0
	}
	return d
}

func (p *fileParser) watch(n *yaml.Node, f *File) {
	p.pairs(n, "watch", []string{"interval", "budget_every", "delivery_retry_for", "exemption_hint", "dashboard_url", "admins", "leads"}, func(key string, _, v *yaml.Node) {
		path := "watch." + key
		switch key {
		case "interval":
			f.Interval = p.duration(v, path)
		case "budget_every":
			f.BudgetEvery = p.duration(v, path)
		case "delivery_retry_for":
			f.DeliveryRetryFor = p.duration(v, path)
		case "exemption_hint":
			f.ExemptionHint, _ = p.scalar(v, path)
		case "dashboard_url":
			if s, ok := p.scalar(v, path); ok {
				if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
					p.report(v, path, "%q: want the dashboard's http(s) URL, e.g. https://gpu.example.edu", s)
				} else {
					f.DashboardURL = strings.TrimRight(s, "/")
				}
			}
		case "admins":
			f.Admins = p.people(v, path)
		case "leads":
			f.Leads = map[string][]alert.Person{}
			p.pairs(v, path, nil, func(project string, _, pv *yaml.Node) {
				f.Leads[project] = p.people(pv, path+"."+project)
			})
		}
	})
}

func (p *fileParser) people(n *yaml.Node, path string) []alert.Person {
	if n = yamlwalk.Deref(n); n.Kind != yaml.SequenceNode {
		p.errf(n.Line, path, "must be a list (lines starting with '- ')")
		return nil
	}
	var out []alert.Person
	for i, item := range n.Content {
		item = yamlwalk.Deref(item)
		ip := fmt.Sprintf("%s[%d]", path, i)
		var pr alert.Person
		p.pairs(item, ip, []string{"name", "email", "im", "lang", "user"}, func(key string, _, v *yaml.Node) {
			s, ok := p.scalar(v, ip+"."+key)
			if !ok {
				return
			}
			switch key {
			case "name":
				pr.Name = s
			case "email":
				if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
					p.errf(v.Line, ip+".email", "%q is not an email address", s)
				}
				pr.Email = s
			case "im":
				pr.IM = s
			case "lang":
				if s != "en" && s != "zh-CN" {
					p.errf(v.Line, ip+".lang", "%q: want en or zh-CN", s)
				}
				pr.Lang = s
			case "user":
				pr.User = s
			}
		})
		if item.Kind == yaml.MappingNode && pr.Email == "" && pr.IM == "" {
			p.errf(item.Line, ip, "needs an email or an im handle (otherwise no alert can reach them)")
		}
		out = append(out, pr)
	}
	return out
}
