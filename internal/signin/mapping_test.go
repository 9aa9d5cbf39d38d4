package signin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/signin"
)

func loadExample(t *testing.T) *signin.Mapping {
	t.Helper()
	m, err := signin.LoadMapping("testdata/mapping.yaml")
	require.NoError(t, err)
	return m
}

// rosterOf answers as the ledger would: user -> the projects they are on.
func rosterOf(on map[string][]string) signin.RosterLookup {
	return func(_ context.Context, user string) ([]string, error) { return on[user], nil }
}

func TestExampleMappingParses(t *testing.T) {
	m := loadExample(t)
	require.Equal(t, "Ask the HPC office, hpc@example.edu.cn, room 301.", m.Help())
	require.Equal(t, "请联系高性能计算办公室 hpc@example.edu.cn（301 室）。", m.HelpZH())
	dl := m.Project("dl-course")
	require.NotNil(t, dl)
	require.True(t, dl.Roster)
	require.Equal(t, []signin.Matcher{{Group: "lab-dl"}}, dl.Lead)
	require.Equal(t, []signin.Matcher{{Group: "course-dl-2026"}, {User: "2022110315"}}, dl.Student)
	require.False(t, m.Project("nlp").Roster)
	require.Nil(t, m.Project("unknown"))
}

func TestGrantsOrderAndDeduplication(t *testing.T) {
	m := loadExample(t)
	id := signin.Identity{
		Provider: "ldap", ID: "2022110315",
		Groups: []string{
			"cn=GPU-Admins, ou=groups, dc=example, dc=edu", // the admin DN, written otherwise
			"cn=lab-dl,ou=groups,dc=example,dc=edu",        // lead of dl-course by its first RDN
			"course-dl-2026",                               // and student of it twice over
		},
		Attributes: map[string][]string{"eduPersonAffiliation": {"staff", "finance"}},
	}
	got, err := m.Grants(context.Background(), id, rosterOf(map[string][]string{
		"2022110315": {"dl-course", "zz-other", "nlp", "a-unnamed", "dl-course"},
	}))
	require.NoError(t, err)
	require.Equal(t, []ledger.Grant{
		{Role: ledger.RoleAdmin},
		{Role: ledger.RoleFinance},
		{Role: ledger.RoleLead, Project: "dl-course"},
		// nlp turns its roster off; projects the file does not name still
		// count, through the roster alone (they hold while on it).
		{Role: ledger.RoleStudent, Project: "a-unnamed", User: "2022110315", Via: ledger.GrantViaRoster},
		{Role: ledger.RoleStudent, Project: "dl-course", User: "2022110315"},
		{Role: ledger.RoleStudent, Project: "zz-other", User: "2022110315", Via: ledger.GrantViaRoster},
	}, got)
	for _, g := range got {
		nt := ledger.NewToken{Role: g.Role, Project: g.Project, User: g.User, TTL: 1}
		require.NoError(t, ledger.CheckNewToken(&nt), "every grant is a valid token scope: %+v", g)
	}
}

func TestGrantsMatchersAreExact(t *testing.T) {
	m := loadExample(t)
	for _, tc := range []struct {
		name string
		id   signin.Identity
		want []ledger.Grant
	}{
		{"user", signin.Identity{ID: "t0001"}, []ledger.Grant{{Role: ledger.RoleAdmin}}},
		{"user is case-sensitive", signin.Identity{ID: "T0001"}, nil},
		{"lead by user", signin.Identity{ID: "t0042"}, []ledger.Grant{{Role: ledger.RoleLead, Project: "nlp"}}},
		{"group by name", signin.Identity{ID: "f1", Groups: []string{"finance"}}, []ledger.Grant{{Role: ledger.RoleFinance}}},
		{"group name is not a prefix", signin.Identity{ID: "f1", Groups: []string{"finance-students", "cn=finance-x,dc=edu"}}, nil},
		{"a DN's later RDNs do not count", signin.Identity{ID: "f1", Groups: []string{"cn=x,ou=finance,dc=edu"}}, nil},
		{"attribute value", signin.Identity{ID: "f2", Attributes: map[string][]string{"eduPersonAffiliation": {"finance"}}}, []ledger.Grant{{Role: ledger.RoleFinance}}},
		{"attribute other value", signin.Identity{ID: "f2", Attributes: map[string][]string{"eduPersonAffiliation": {"student"}, "finance": {"finance"}}}, nil},
		{"nobody", signin.Identity{ID: "x", Groups: []string{"cn=gpu-admins,ou=groups,dc=example,dc=edu,dc=cn"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.Grants(context.Background(), tc.id, nil)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestGrantsRosterErrorIsReturned(t *testing.T) {
	m := loadExample(t)
	boom := errors.New("store down")
	_, err := m.Grants(context.Background(), signin.Identity{ID: "s1"}, func(context.Context, string) ([]string, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
}

func TestGrantsNoIDNoStudent(t *testing.T) {
	m, err := signin.ParseMapping("m.yaml", []byte("projects:\n  p:\n    student:\n      - group: g\n"))
	require.NoError(t, err)
	got, err := m.Grants(context.Background(), signin.Identity{Groups: []string{"g"}}, rosterOf(map[string][]string{"": {"q"}}))
	require.NoError(t, err)
	require.Empty(t, got, "a student grant names the user: no ID, no student grant")
	got, err = m.Grants(context.Background(), signin.Identity{ID: "u", Groups: []string{"g"}}, nil)
	require.NoError(t, err)
	require.Equal(t, []ledger.Grant{{Role: ledger.RoleStudent, Project: "p", User: "u"}}, got)
}

func TestParseMappingReportsEveryProblemAtItsLine(t *testing.T) {
	doc := `help: "ask"
admin:
  - user: a
    group: g
  - value: v
  - attribute: a
  - {}
  - plain
finance: finance
projects:
  p:
    lead:
      - usr: x
    roster: maybe
    owner: []
  q: [1]
extra: 1
admin: []
`
	_, err := signin.ParseMapping("roles.yaml", []byte(doc))
	require.Error(t, err)
	want := []string{
		"roles.yaml:3: admin[0]: give exactly one of user, group, or attribute with value",
		"roles.yaml:5: admin[1]: value needs an attribute",
		"roles.yaml:6: admin[2]: attribute needs a value",
		"roles.yaml:7: admin[3]: needs exactly one of user, group, or attribute with value",
		`roles.yaml:8: admin[4]: expected a mapping (user:, group:, or attribute: with value:), not the value "plain"`,
		`roles.yaml:9: finance: must be a list (lines starting with '- '), not the value "finance"`,
		"roles.yaml:13: projects.p.lead[0].usr: unknown field (allowed: user, group, attribute, value)",
		"roles.yaml:13: projects.p.lead[0]: needs exactly one of user, group, or attribute with value",
		`roles.yaml:14: projects.p.roster: must be true or false, not the value "maybe"`,
		"roles.yaml:15: projects.p.owner: unknown field (allowed: lead, student, roster)",
		"roles.yaml:16: projects.q: expected a mapping (key: value lines), not a list",
		"roles.yaml:17: extra: unknown field (allowed: help, help_zh, admin, finance, projects)",
		"roles.yaml:18: admin: appears more than once (first at line 2)",
		"roles.yaml:1: help_zh: missing: help is shown to people, so it is needed in zh-CN too",
	}
	require.Equal(t, want, strings.Split(err.Error(), "\n"))
}

func TestParseMappingEmptyAndBroken(t *testing.T) {
	_, err := signin.ParseMapping("roles.yaml", nil)
	require.ErrorContains(t, err, "roles.yaml: empty role mapping")
	_, err = signin.ParseMapping("roles.yaml", []byte("admin: [\n"))
	require.ErrorContains(t, err, "roles.yaml: yaml:")
	_, err = signin.ParseMapping("roles.yaml", []byte("help_zh: 问\nadmin:\n  - user: \"\"\n"))
	require.Equal(t, "roles.yaml:3: admin[0].user: must not be empty\n"+
		"roles.yaml:3: admin[0]: needs exactly one of user, group, or attribute with value\n"+
		"roles.yaml:1: help: missing: help_zh is shown to people, so it is needed in English too", err.Error())
	_, err = signin.LoadMapping("testdata/none.yaml")
	require.ErrorContains(t, err, "role mapping: open testdata/none.yaml")
}

func TestParseMappingRosterOffAndNullLists(t *testing.T) {
	m, err := signin.ParseMapping("m.yaml", []byte("admin:\nprojects:\n  p:\n    lead:\n    roster: false\n"))
	require.NoError(t, err)
	got, err := m.Grants(context.Background(), signin.Identity{ID: "u"}, rosterOf(map[string][]string{"u": {"p"}}))
	require.NoError(t, err)
	require.Empty(t, got)
}
