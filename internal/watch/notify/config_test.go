package notify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func exampleConfig(t *testing.T) string {
	secret := writeFile(t, "ding.secret", "SECdingtalk-secret\n")
	pw := writeFile(t, "smtp.pw", "mail-password\r\n")
	return `
languages: [zh-CN, en]
exemption_hint:
  zh-CN: 请项目负责人在 cardhour 中登记豁免
  en: ask your project lead to grant an exemption in cardhour
channels:
  - name: ops
    type: webhook
    url: https://hooks.example.org/cardhour
    secret: whsec-1
    roles: [admin]
  - name: nlp-ding
    type: dingtalk
    url: https://oapi.dingtalk.com/robot/send?access_token=abc
    secret_file: ` + secret + `
    msgtype: markdown
    scope: [nlp-lab]
    roles: [holder, lead]
    timeout: 5s
  - name: vision-feishu
    type: feishu
    url: https://open.feishu.cn/open-apis/bot/v2/hook/xyz
    scope: [vision]
  - name: wecom-leads
    type: wecom
    url: https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k
    roles: [lead, admin]
  - name: slack
    type: slack
    url: https://hooks.slack.com/services/T/B/X
    scope: [nlp-lab, vision]
  - name: mail
    type: smtp
    addr: smtp.example.org:587
    from: cardhour <cardhour@example.org>
    username: cardhour
    password_file: ` + pw + `
    starttls: true
`
}

func TestParseConfigExample(t *testing.T) {
	c, err := ParseConfig([]byte(exampleConfig(t)))
	require.NoError(t, err)
	require.Equal(t, []string{LangZH, LangEN}, c.Languages)
	require.Equal(t, "ask your project lead to grant an exemption in cardhour", c.ExemptionHint(LangEN))
	require.Len(t, c.Channels, 6)

	ops, ok := c.Channel("ops")
	require.True(t, ok)
	require.Equal(t, TypeWebhook, ops.Type)
	require.Equal(t, "whsec-1", ops.Secret)
	require.Equal(t, []string{alert.RoleAdmin}, ops.Roles)
	require.Equal(t, DefaultTimeout, ops.Timeout)

	ding, _ := c.Channel("nlp-ding")
	require.Equal(t, "SECdingtalk-secret", ding.Secret) // trailing newline dropped
	require.Equal(t, "markdown", ding.MsgType)
	require.Equal(t, 5*time.Second, ding.Timeout)
	require.True(t, ding.Serves("nlp-lab", alert.RoleHolder))
	require.False(t, ding.Serves("vision", alert.RoleHolder))
	require.False(t, ding.Serves("nlp-lab", alert.RoleAdmin))

	wc, _ := c.Channel("wecom-leads")
	require.Equal(t, "text", wc.MsgType)
	require.True(t, wc.Serves("any-project", alert.RoleLead))

	mail, _ := c.Channel("mail")
	require.Equal(t, "mail-password", mail.Password)
	require.True(t, mail.StartTLS)
	require.Equal(t, []string{alert.RoleHolder, alert.RoleLead, alert.RoleAdmin}, mail.Roles)

	_, err = c.Senders()
	require.NoError(t, err)
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte("exemption_hint: 找负责人\nchannels: []\n"))
	require.NoError(t, err)
	require.Equal(t, []string{LangZH}, c.Languages)
	require.Equal(t, LangZH, c.DefaultLang())
	require.Equal(t, "找负责人", c.ExemptionHint(LangZH))
	require.Equal(t, "找负责人", c.ExemptionHint(LangEN)) // falls back to the default language's
}

func TestParseConfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.secret")
	for _, c := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top field", "langs: [en]\n", []string{"notify config:1: langs: unknown field (allowed: channels, exemption_hint, languages)"}},
		{"bad language", "languages: [zh-CN, fr]\n", []string{`notify config:1: languages[1]: no templates for "fr"`}},
		{"no language", "languages: []\n", []string{"notify config:1: languages: must list at least one language"}},
		{"channels not a list", "channels:\n  name: x\n", []string{"notify config:2: channels: must be a list"}},
		{"unknown channel field", "channels:\n  - name: a\n    type: webhook\n    url: https://x\n    secret: s\n    token: t\n",
			[]string{"notify config:6: channels[0].token: unknown field (allowed: addr, from, msgtype, name, password_file, roles, scope, secret, secret_file, starttls, timeout, type, url, username)"}},
		{"bad type", "channels:\n  - name: a\n    type: telegram\n    url: https://x\n",
			[]string{`notify config:3: channels[0].type: "telegram" is not a channel type`}},
		{"missing type", "channels:\n  - name: a\n", []string{"notify config:2: channels[0].type: required"}},
		{"webhook without secret", "channels:\n  - name: a\n    type: webhook\n    url: https://x\n",
			[]string{"notify config:2: channels[0].secret: required for a webhook channel"}},
		{"url missing", "channels:\n  - name: a\n    type: slack\n", []string{"notify config:2: channels[0].url: required for a slack channel"}},
		{"url not http", "channels:\n  - name: a\n    type: wecom\n    url: ftp://x/y\n    roles: [lead]\n",
			[]string{"notify config:4: channels[0].url: not an http(s) URL with a host"}},
		{"secret on wecom", "channels:\n  - name: a\n    type: wecom\n    url: https://x\n    secret: s\n    roles: [lead]\n",
			[]string{"notify config:5: channels[0].secret: not a setting of a wecom channel (only of webhook, dingtalk, feishu)"}},
		{"both secrets", "channels:\n  - name: a\n    type: dingtalk\n    url: https://x\n    secret: s\n    secret_file: /x\n    roles: [lead]\n",
			[]string{"notify config:6: channels[0].secret_file: give secret or secret_file, not both"}},
		{"unreadable secret file", "channels:\n  - name: a\n    type: feishu\n    url: https://x\n    secret_file: " + missing + "\n    roles: [admin]\n",
			[]string{"notify config:5: channels[0].secret_file: open " + missing}},
		{"group for holders without scope", "channels:\n  - name: a\n    type: dingtalk\n    url: https://x\n",
			[]string{"notify config:2: channels[0].scope: a dingtalk group robot that serves holders must name its projects"}},
		{"bad role", "channels:\n  - name: a\n    type: slack\n    url: https://x\n    roles: [lead, student]\n",
			[]string{`notify config:5: channels[0].roles: "student" is not a role`}},
		{"bad msgtype", "channels:\n  - name: a\n    type: dingtalk\n    url: https://x\n    msgtype: card\n    scope: [p]\n",
			[]string{`notify config:5: channels[0].msgtype: "card": want text or markdown`}},
		{"msgtype on slack", "channels:\n  - name: a\n    type: slack\n    url: https://x\n    msgtype: text\n    scope: [p]\n",
			[]string{"notify config:5: channels[0].msgtype: not a setting of a slack channel"}},
		{"bad timeout", "channels:\n  - name: a\n    type: slack\n    url: https://x\n    scope: [p]\n    timeout: soon\n",
			[]string{`notify config:6: channels[0].timeout: "soon" is not a duration`}},
		{"smtp without addr and from", "channels:\n  - name: m\n    type: smtp\n",
			[]string{"notify config:2: channels[0].addr: required for an smtp channel", "notify config:2: channels[0].from: required for an smtp channel"}},
		{"smtp bad from", "channels:\n  - name: m\n    type: smtp\n    addr: h:25\n    from: not an address\n",
			[]string{`notify config:5: channels[0].from: "not an address" is not an email address`}},
		{"smtp bad port", "channels:\n  - name: m\n    type: smtp\n    addr: h:99999\n    from: a@b.c\n",
			[]string{`notify config:4: channels[0].addr: "h:99999": bad port`}},
		{"smtp username without password", "channels:\n  - name: m\n    type: smtp\n    addr: h:25\n    from: a@b.c\n    username: u\n",
			[]string{"notify config:2: channels[0].password_file: required with username"}},
		{"smtp starttls not bool", "channels:\n  - name: m\n    type: smtp\n    addr: h:25\n    from: a@b.c\n    starttls: yes please\n",
			[]string{`notify config:6: channels[0].starttls: "yes please": want true or false`}},
		{"from on webhook", "channels:\n  - name: a\n    type: webhook\n    url: https://x\n    secret: s\n    from: a@b.c\n",
			[]string{"notify config:6: channels[0].from: not a setting of a webhook channel (only of smtp)"}},
		{"duplicate name", "channels:\n  - {name: a, type: slack, url: 'https://x', roles: [admin]}\n  - {name: a, type: slack, url: 'https://y', roles: [admin]}\n",
			[]string{`notify config:3: channels[1].name: channel "a" is defined twice (first at line 2)`}},
		{"duplicate key", "channels:\n  - name: a\n    name: b\n    type: slack\n    url: https://x\n    roles: [admin]\n",
			[]string{"notify config:3: channels[0].name: appears more than once (first at line 2)"}},
		{"bad name", "channels:\n  - name: 'a b'\n    type: slack\n    url: https://x\n    roles: [admin]\n",
			[]string{`notify config:2: channels[0].name: "a b": use letters`}},
		{"channel not a mapping", "channels:\n  - slack\n", []string{`notify config:2: channels[0]: expected a mapping (name, type, url, …), not the value "slack"`}},
		{"hint for unknown language", "exemption_hint:\n  de: fragen\n", []string{`notify config:2: exemption_hint.de: no templates for language "de"`}},
		{"not yaml", "channels: [\n", []string{"notify config: yaml:"}},
		{"empty", "", []string{"notify config: empty document"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.yaml))
			require.Error(t, err)
			require.Nil(t, cfg)
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// A notify: section inside a larger file: errors name that file's lines.
func TestParseConfigNode(t *testing.T) {
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte("watch:\n  interval: 60s\nnotify:\n  languages: [en]\n  channels:\n    - name: a\n      type: slack\n"), &doc))
	root := doc.Content[0]
	_, err := ParseConfigNode(root.Content[3])
	require.ErrorContains(t, err, "notify config:6: channels[0].url: required for a slack channel")

	require.NoError(t, yaml.Unmarshal([]byte("notify:\n  languages: [en]\n"), &doc))
	c, err := ParseConfigNode(doc.Content[0].Content[1])
	require.NoError(t, err)
	require.Equal(t, LangEN, c.DefaultLang())

	require.NoError(t, yaml.Unmarshal([]byte("notify:\n"), &doc))
	_, err = ParseConfigNode(doc.Content[0].Content[1])
	require.ErrorContains(t, err, "notify config:1: empty")
}

// The robot URL holds its access token: errors never show it.
func TestParseConfigHidesURL(t *testing.T) {
	_, err := ParseConfig([]byte("channels:\n  - name: a\n    type: dingtalk\n    url: 'oapi.dingtalk.com/robot/send?access_token=SECRET123'\n    scope: [p]\n"))
	require.Error(t, err)
	require.False(t, strings.Contains(err.Error(), "SECRET123"), err.Error())
}

// Every error is reported at once.
func TestParseConfigAllErrors(t *testing.T) {
	_, err := ParseConfig([]byte("languages: [xx]\nchannels:\n  - name: a\n    type: nope\n  - name: b\n    type: slack\n"))
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, "notify config:1: languages[0]")
	require.Contains(t, msg, "notify config:4: channels[0].type")
	require.Contains(t, msg, "notify config:5: channels[1].url")
}
