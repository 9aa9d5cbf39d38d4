package signin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/go-ldap/ldap/v3"
	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/yamlwalk"
)

// Mapping is the role mapping file: who may do what. It is read once, at
// start (a change needs a restart), and applied at every sign-in, so that a
// person's grants are those of the file and the rosters at that sign-in:
//
//	help: "Ask the HPC office, hpc@example.edu.cn, room 301."   # shown to a person with no role
//	help_zh: "请联系高性能计算办公室 hpc@example.edu.cn（301 室）。"
//	admin:
//	  - group: cn=gpu-admins,ou=groups,dc=example,dc=edu
//	  - user: t0001
//	finance:
//	  - group: finance
//	  - attribute: eduPersonAffiliation
//	    value: finance
//	projects:
//	  dl-course:
//	    lead:
//	      - group: lab-dl
//	    student:
//	      - group: course-dl-2026
//	      - user: "2022110315"
//	    roster: true   # the people on dl-course's roster are its students (default true)
//
// Every field is optional; help and help_zh come together (what a person
// sees is in both languages). A matcher is exactly one of:
//
//   - user: the identity's ID (the configured claim or attribute), exactly;
//   - group: one of the identity's groups, exactly; a group the provider
//     names by its LDAP DN (cn=lab-dl,ou=groups,dc=example,dc=edu) also
//     matches its DN written out (compared as a DN: case and spaces
//     around separators aside) and the value of its first RDN (lab-dl);
//   - attribute and value: the identity has that attribute (claim) with
//     that value among its values, exactly.
//
// Projects are named exactly (no patterns). A project's roster in the state
// store makes the people on it its students unless roster: false; a roster
// project the file does not name does too. See testdata/mapping.yaml.
type Mapping struct {
	help, helpZH   string
	admin, finance []Matcher
	projects       map[string]*ProjectRoles
}

// Matcher is one line of a role's list: exactly one of User, Group, or
// Attribute with Value.
type Matcher struct {
	User, Group, Attribute, Value string
}

// ProjectRoles is one project of the mapping.
type ProjectRoles struct {
	Lead, Student []Matcher
	// Roster: the project's roster in the state store makes students.
	Roster bool
}

// RosterLookup returns the projects on whose roster user is (the api
// implements it with the ledger's Students).
type RosterLookup func(ctx context.Context, user string) (projects []string, err error)

// Help is what a person with no role is told, in English ("" when the file
// gives none).
func (m *Mapping) Help() string { return m.help }

// HelpZH is Help in zh-CN.
func (m *Mapping) HelpZH() string { return m.helpZH }

// Project returns project's roles, nil when the file does not name it.
func (m *Mapping) Project(name string) *ProjectRoles { return m.projects[name] }

// LoadMapping reads and parses the role mapping file at path.
func LoadMapping(path string) (*Mapping, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("role mapping: %w", err)
	}
	return ParseMapping(path, data)
}

// ParseMapping parses a role mapping file; every problem is reported at
// once, each as name:line: field: reason.
func ParseMapping(name string, data []byte) (*Mapping, error) {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty role mapping (it needs at least one of admin:, finance:, projects:)", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &mappingParser{name: name}
	m := &Mapping{projects: map[string]*ProjectRoles{}}
	var helpLine, helpZHLine int
	yamlwalk.Mapping(root.Content[0], "", []string{"help", "help_zh", "admin", "finance", "projects"}, p.report, func(k, v *yaml.Node, path string) {
		switch k.Value {
		case "help":
			m.help, helpLine = p.text(v, path), k.Line
		case "help_zh":
			m.helpZH, helpZHLine = p.text(v, path), k.Line
		case "admin":
			m.admin = p.matchers(v, path)
		case "finance":
			m.finance = p.matchers(v, path)
		case "projects":
			yamlwalk.Mapping(v, path, nil, p.report, func(pk, pv *yaml.Node, ppath string) {
				if strings.TrimSpace(pk.Value) == "" {
					p.errf(pk.Line, ppath, "a project needs a name")
					return
				}
				m.projects[pk.Value] = p.project(pv, ppath)
			})
		}
	})
	switch {
	case m.help != "" && m.helpZH == "":
		p.errf(helpLine, "help_zh", "missing: help is shown to people, so it is needed in zh-CN too")
	case m.help == "" && m.helpZH != "":
		p.errf(helpZHLine, "help", "missing: help_zh is shown to people, so it is needed in English too")
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return m, nil
}

type mappingParser struct {
	name string
	errs []error
}

func (p *mappingParser) errf(line int, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s", p.name, line, msg))
}

// report is errf as a yamlwalk.Report.
func (p *mappingParser) report(n *yaml.Node, path, format string, args ...any) {
	p.errf(n.Line, path, format, args...)
}

// text is a non-empty single value.
func (p *mappingParser) text(v *yaml.Node, path string) string {
	if v.Kind != yaml.ScalarNode || yamlwalk.IsNull(v) {
		p.errf(v.Line, path, "must be a single value, not %s", yamlwalk.Kind(v))
		return ""
	}
	if strings.TrimSpace(v.Value) == "" {
		p.errf(v.Line, path, "must not be empty")
		return ""
	}
	return v.Value
}

func (p *mappingParser) project(n *yaml.Node, path string) *ProjectRoles {
	pr := &ProjectRoles{Roster: true}
	yamlwalk.Mapping(n, path, []string{"lead", "student", "roster"}, p.report, func(k, v *yaml.Node, kp string) {
		switch k.Value {
		case "lead":
			pr.Lead = p.matchers(v, kp)
		case "student":
			pr.Student = p.matchers(v, kp)
		case "roster":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
				p.errf(v.Line, kp, "must be true or false, not %s", yamlwalk.Kind(v))
				return
			}
			pr.Roster = v.Value == "true" || v.Value == "True" || v.Value == "TRUE"
		}
	})
	return pr
}

// matchers reads a role's list; nothing (role:) is an empty list.
func (p *mappingParser) matchers(n *yaml.Node, path string) []Matcher {
	if yamlwalk.IsNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errf(n.Line, path, "must be a list (lines starting with '- '), not %s", yamlwalk.Kind(n))
		return nil
	}
	var out []Matcher
	for i, item := range n.Content {
		item = yamlwalk.Deref(item)
		ip := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind != yaml.MappingNode {
			p.errf(item.Line, ip, "expected a mapping (user:, group:, or attribute: with value:), not %s", yamlwalk.Kind(item))
			continue
		}
		var mt Matcher
		yamlwalk.Mapping(item, ip, []string{"user", "group", "attribute", "value"}, p.report, func(k, v *yaml.Node, kp string) {
			s := p.text(v, kp)
			switch k.Value {
			case "user":
				mt.User = s
			case "group":
				mt.Group = s
			case "attribute":
				mt.Attribute = s
			case "value":
				mt.Value = s
			}
		})
		if problem := mt.check(); problem != "" {
			p.errf(item.Line, ip, "%s", problem)
			continue
		}
		out = append(out, mt)
	}
	return out
}

// check says what is wrong with a matcher as written ("" when nothing).
func (mt Matcher) check() string {
	kinds := 0
	for _, s := range []string{mt.User, mt.Group, mt.Attribute} {
		if s != "" {
			kinds++
		}
	}
	switch {
	case kinds == 0 && mt.Value != "":
		return "value needs an attribute"
	case kinds == 0:
		return "needs exactly one of user, group, or attribute with value"
	case kinds > 1:
		return "give exactly one of user, group, or attribute with value"
	case mt.Attribute != "" && mt.Value == "":
		return "attribute needs a value"
	case mt.Attribute == "" && mt.Value != "":
		return "value goes with attribute only"
	}
	return ""
}

// Matches reports whether id is what mt names.
func (mt Matcher) Matches(id Identity) bool {
	switch {
	case mt.User != "":
		return id.ID == mt.User
	case mt.Group != "":
		return slices.ContainsFunc(id.Groups, func(g string) bool { return groupMatches(mt.Group, g) })
	case mt.Attribute != "":
		return slices.Contains(id.Attributes[mt.Attribute], mt.Value)
	}
	return false
}

// groupMatches: want as written in the mapping, got as the provider names
// it (a name, or an LDAP DN).
func groupMatches(want, got string) bool {
	if want == got {
		return true
	}
	if !strings.Contains(got, "=") {
		return false
	}
	gdn, err := ldap.ParseDN(got)
	if err != nil || len(gdn.RDNs) == 0 {
		return false
	}
	if strings.Contains(want, "=") {
		wdn, err := ldap.ParseDN(want)
		return err == nil && wdn.EqualFold(gdn)
	}
	first := gdn.RDNs[0]
	return len(first.Attributes) == 1 && first.Attributes[0].Value == want
}

func anyMatches(ms []Matcher, id Identity) bool {
	return slices.ContainsFunc(ms, func(mt Matcher) bool { return mt.Matches(id) })
}

// Grants is what id may do: admin, finance, lead of each project whose lead
// list matches, student of each project whose student list matches or on
// whose roster id.ID is (unless the project turns its roster off). The
// order is stable: admin, finance, then the leads and the students, each
// by project name; no grant twice. rosters nil reads no roster. No grant
// at all is no error: the api refuses the sign-in (no_role) with Help.
func (m *Mapping) Grants(ctx context.Context, id Identity, rosters RosterLookup) ([]ledger.Grant, error) {
	var out []ledger.Grant
	if anyMatches(m.admin, id) {
		out = append(out, ledger.Grant{Role: ledger.RoleAdmin})
	}
	if anyMatches(m.finance, id) {
		out = append(out, ledger.Grant{Role: ledger.RoleFinance})
	}
	names := make([]string, 0, len(m.projects))
	for name := range m.projects {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if anyMatches(m.projects[name].Lead, id) {
			out = append(out, ledger.Grant{Role: ledger.RoleLead, Project: name})
		}
	}
	if id.ID == "" {
		return out, nil // a student grant names the user
	}
	students := map[string]string{} // project → Via
	for _, name := range names {
		if anyMatches(m.projects[name].Student, id) {
			students[name] = ""
		}
	}
	if rosters != nil {
		onRoster, err := rosters(ctx, id.ID)
		if err != nil {
			return nil, fmt.Errorf("role mapping: the rosters of %s: %w", id.ID, err)
		}
		for _, name := range onRoster {
			if _, mapped := students[name]; mapped {
				continue
			}
			if pr := m.projects[name]; name != "" && (pr == nil || pr.Roster) {
				students[name] = ledger.GrantViaRoster
			}
		}
	}
	studentOf := make([]string, 0, len(students))
	for name := range students {
		studentOf = append(studentOf, name)
	}
	slices.Sort(studentOf)
	for _, name := range studentOf {
		out = append(out, ledger.Grant{Role: ledger.RoleStudent, Project: name, User: id.ID, Via: students[name]})
	}
	return out, nil
}
