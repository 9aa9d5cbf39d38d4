package notify

import (
	"testing"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/stretchr/testify/require"
)

func planConfig(t *testing.T) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(`
languages: [zh-CN, en]
exemption_hint:
  zh-CN: 请项目负责人登记豁免
  en: ask your lead for an exemption
channels:
  - name: nlp-ding
    type: dingtalk
    url: https://oapi.dingtalk.com/robot/send?access_token=abc
    scope: [nlp-lab]
    roles: [holder, lead]
  - name: mail
    type: smtp
    addr: 127.0.0.1:25
    from: cardhour@example.org
  - name: ops
    type: webhook
    url: https://hooks.example.org/x
    secret: s
    roles: [admin]
`))
	require.NoError(t, err)
	return c
}

type route struct{ channel, role, user, lang string }

func routes(envs []alert.Envelope) []route {
	var out []route
	for _, e := range envs {
		out = append(out, route{e.Channel, e.To.Role, e.To.User, e.Lang})
	}
	return out
}

func TestPlanRoutes(t *testing.T) {
	c := planConfig(t)
	m := goldenCases(t)["idle_warning"] // alice in nlp-lab
	m.Facts.ExemptionHint = ""
	people := []alert.Person{
		{Role: alert.RoleHolder, Project: "nlp-lab", User: "alice", Name: "Alice", Email: "alice@example.edu", IM: "dingtalk:0412,slack:U1"},
		{Role: alert.RoleLead, Project: "nlp-lab", User: "prof", Email: "prof@example.edu", IM: "13800001111", Lang: "en"},
		{Role: alert.RoleAdmin, User: "root", Email: "gpu-admin@example.edu", Lang: "fr"},
	}
	envs, err := c.Plan(m, people)
	require.NoError(t, err)
	require.Equal(t, []route{
		{"nlp-ding", alert.RoleHolder, "alice", LangZH},
		{"nlp-ding", alert.RoleLead, "prof", LangEN},
		{"mail", alert.RoleHolder, "alice", LangZH},
		{"mail", alert.RoleLead, "prof", LangEN},
		{"mail", alert.RoleAdmin, "root", LangZH}, // no templates for fr: the default
		{"ops", alert.RoleAdmin, "root", LangZH},
	}, routes(envs))
	for _, e := range envs {
		s, b, err := Render(e.Message, e.Lang)
		require.NoError(t, err)
		require.Equal(t, s, e.Subject)
		require.Equal(t, b, e.Body)
		// The configured hint, in the envelope's language.
		if e.Lang == LangEN {
			require.Contains(t, e.Body, "ask your lead for an exemption")
		} else {
			require.Contains(t, e.Body, "请项目负责人登记豁免")
		}
	}

	// Another project: the nlp-lab robot stays silent.
	m.Facts.Project = "vision"
	for i := range people[:2] {
		people[i].Project = "vision"
	}
	envs, err = c.Plan(m, people)
	require.NoError(t, err)
	for _, e := range envs {
		require.NotEqual(t, "nlp-ding", e.Channel)
	}
}

func TestPlanDeduplicates(t *testing.T) {
	c := planConfig(t)
	m := goldenCases(t)["idle_warning"]
	people := []alert.Person{
		{Role: alert.RoleHolder, Project: "nlp-lab", User: "alice", Email: "Alice@Example.edu"},
		{Role: alert.RoleLead, Project: "nlp-lab", User: "alice", Email: "alice@example.edu"}, // a lead holding a slice
		{Role: alert.RoleLead, Project: "nlp-lab", User: "co-lead"},                           // no email, no IM
	}
	envs, err := c.Plan(m, people)
	require.NoError(t, err)
	// One mail to alice (as holder); one unmentioned group post (alice's: neither has an IM id).
	require.Equal(t, []route{
		{"nlp-ding", alert.RoleHolder, "alice", LangZH},
		{"mail", alert.RoleHolder, "alice", LangZH},
	}, routes(envs))
}

// A student's messages never reach another student, nor a lead of another project.
func TestPlanPrivacy(t *testing.T) {
	c := planConfig(t)
	m := goldenCases(t)["idle_warning"]
	_, err := c.Plan(m, []alert.Person{{Role: alert.RoleHolder, Project: "nlp-lab", User: "bob", Email: "bob@example.edu"}})
	require.ErrorContains(t, err, `person 0 (holder "bob") is not the holder "alice"`)
	_, err = c.Plan(m, []alert.Person{{Role: alert.RoleLead, Project: "vision", User: "v-prof"}})
	require.ErrorContains(t, err, `leads project "vision"`)
	_, err = c.Plan(m, []alert.Person{{Role: "student", User: "alice"}})
	require.ErrorContains(t, err, `has role "student"`)

	// A project-wide budget message may go to the project's students: it
	// names no student.
	pb := goldenCases(t)["budget_project"]
	envs, err := c.Plan(pb, []alert.Person{
		{Role: alert.RoleHolder, Project: "nlp-lab", User: "alice", Email: "alice@example.edu"},
		{Role: alert.RoleHolder, Project: "nlp-lab", User: "bob", Email: "bob@example.edu"},
	})
	require.NoError(t, err)
	require.Len(t, envs, 3) // one group post (no IM ids), two mails
	for _, e := range envs {
		require.NotContains(t, e.Body, "alice")
		require.NotContains(t, e.Body, "bob")
	}
	_, err = c.Plan(pb, []alert.Person{{Role: alert.RoleHolder, Project: "vision", User: "carol"}})
	require.ErrorContains(t, err, `is in project "vision"`)
}

func TestPlanRenderErrors(t *testing.T) {
	c := planConfig(t)
	m := goldenCases(t)["idle_warning"]
	m.Kind = "nope"
	_, err := c.Plan(m, []alert.Person{{Role: alert.RoleAdmin, Email: "a@b.c"}})
	require.ErrorContains(t, err, `unknown message kind "nope"`)
}

func TestIMFor(t *testing.T) {
	require.Equal(t, "0412", IMFor("dingtalk:0412, feishu:ou_7d", TypeDingTalk))
	require.Equal(t, "ou_7d", IMFor("dingtalk:0412, feishu:ou_7d", TypeFeishu))
	require.Equal(t, "", IMFor("dingtalk:0412, feishu:ou_7d", TypeSlack))
	require.Equal(t, "U024BE7LH", IMFor("U024BE7LH", TypeSlack))
	require.Equal(t, "", IMFor("  ", TypeSlack))
}
