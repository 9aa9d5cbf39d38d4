package notify

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/yamlwalk"
)

// Channel types.
const (
	TypeWebhook  = "webhook"
	TypeDingTalk = "dingtalk"
	TypeFeishu   = "feishu"
	TypeWeCom    = "wecom"
	TypeSlack    = "slack"
	TypeSMTP     = "smtp"
)

var channelTypes = []string{TypeWebhook, TypeDingTalk, TypeFeishu, TypeWeCom, TypeSlack, TypeSMTP}

// isGroup reports whether a channel type posts to a group chat (a robot),
// where everyone in the group reads what is posted.
func isGroup(typ string) bool {
	switch typ {
	case TypeDingTalk, TypeFeishu, TypeWeCom, TypeSlack:
		return true
	}
	return false
}

// DefaultTimeout bounds one delivery attempt when a channel sets no timeout.
const DefaultTimeout = 10 * time.Second

// Config is the notify section of the watch configuration.
type Config struct {
	// Languages with templates, the default first (default: zh-CN). A person
	// without a language (or with one that has no templates) gets the first.
	Languages []string
	// ExemptionHints says how to ask for an exemption, by language; a
	// language without one uses the first language's (Render has a generic
	// default when there is none at all).
	ExemptionHints map[string]string
	Channels       []Channel
}

// Channel is one configured delivery channel.
type Channel struct {
	Name string
	Type string // webhook | dingtalk | feishu | wecom | slack | smtp
	URL  string // the HTTP channels' endpoint (DingTalk: with access_token; WeCom: with key)
	Addr string // smtp: host:port

	// Secret signs requests: the generic webhook's HMAC key, DingTalk's and
	// Feishu's signing secret (optional for those two). Read from secret or
	// secret_file.
	Secret string

	// MsgType: dingtalk and wecom: text (default) or markdown.
	MsgType string

	// smtp only.
	From     string // RFC 5322 address, e.g. "cardhour <cardhour@example.org>"
	Username string // AUTH PLAIN user; "" sends without AUTH
	Password string // read from password_file
	StartTLS bool   // issue STARTTLS before anything else (fails if the server does not offer it)

	// Scope lists the projects whose messages the channel carries; empty:
	// every project. A group robot that serves holders must name its projects.
	Scope []string
	// Roles lists the recipients' roles the channel serves (holder, lead,
	// admin); default all three.
	Roles []string
	// Timeout bounds one attempt (default DefaultTimeout).
	Timeout time.Duration

	Line int // where the channel starts in the configuration
}

// Serves reports whether the channel carries a message of project to a
// person in role.
func (ch *Channel) Serves(project, role string) bool {
	if !slices.Contains(ch.Roles, role) {
		return false
	}
	return len(ch.Scope) == 0 || slices.Contains(ch.Scope, project)
}

// Channel returns the channel named name.
func (c *Config) Channel(name string) (*Channel, bool) {
	for i := range c.Channels {
		if c.Channels[i].Name == name {
			return &c.Channels[i], true
		}
	}
	return nil, false
}

// DefaultLang is the language of people without one.
func (c *Config) DefaultLang() string {
	if len(c.Languages) == 0 {
		return LangZH
	}
	return c.Languages[0]
}

// ExemptionHint is the configured hint for lang ("" when none is configured).
func (c *Config) ExemptionHint(lang string) string {
	if h, ok := c.ExemptionHints[lang]; ok {
		return h
	}
	return c.ExemptionHints[c.DefaultLang()]
}

// ---------------------------------------------------------------- parsing

// ParseConfig reads the notify configuration (YAML):
//
//	languages: [zh-CN, en]          # default [zh-CN]; the first is the default
//	exemption_hint:                 # a string, or one per language
//	  zh-CN: 请在 cardhour 中由项目负责人登记豁免
//	  en: ask your project lead to grant an exemption in cardhour
//	channels:
//	  - name: p1-group
//	    type: dingtalk               # webhook | dingtalk | feishu | wecom | slack | smtp
//	    url: https://oapi.dingtalk.com/robot/send?access_token=…
//	    secret_file: /etc/cardhour/dingtalk-p1.secret   # or secret: SEC…
//	    msgtype: markdown            # dingtalk, wecom: text | markdown
//	    scope: [p1]                  # projects; empty: all
//	    roles: [holder, lead]        # default holder, lead, admin
//	    timeout: 10s
//	  - name: mail
//	    type: smtp
//	    addr: smtp.example.org:587
//	    from: cardhour <cardhour@example.org>
//	    username: cardhour
//	    password_file: /etc/cardhour/smtp.password
//	    starttls: true
//
// Unknown fields, wrong types and missing required fields are errors that
// name the line and the field; all of them are reported at once. Secret and
// password files are read here (relative paths from the working directory).
func ParseConfig(b []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("notify config: %w", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, errors.New("notify config: empty document (want languages, exemption_hint, channels)")
	}
	return ParseConfigNode(doc.Content[0])
}

// ParseConfigNode reads the notify configuration from a node of a larger
// YAML document (the value of its notify: key), so that errors name the
// lines of that document.
func ParseConfigNode(root *yaml.Node) (*Config, error) {
	p := &parser{}
	c := &Config{}
	root = yamlwalk.Deref(root)
	if yamlwalk.IsNull(root) {
		return nil, fmt.Errorf("notify config:%d: empty (want languages, exemption_hint, channels)", root.Line)
	}
	langLine := 0
	p.mapping(root, "", map[string]func(k, v *yaml.Node, path string){
		"languages": func(k, v *yaml.Node, path string) {
			langLine = k.Line
			for i, s := range p.strings(v, path) {
				l, ok := NormalizeLang(s)
				if !ok {
					p.errf(v.Content[i], fmt.Sprintf("%s[%d]", path, i), "no templates for %q (have %s)", s, strings.Join(Langs, ", "))
					continue
				}
				if slices.Contains(c.Languages, l) {
					p.errf(v.Content[i], fmt.Sprintf("%s[%d]", path, i), "%s is listed twice", l)
					continue
				}
				c.Languages = append(c.Languages, l)
			}
		},
		"exemption_hint": func(k, v *yaml.Node, path string) {
			c.ExemptionHints = map[string]string{}
			if v.Kind == yaml.ScalarNode {
				if s := p.str(v, path); s != "" {
					c.ExemptionHints[""] = s
				}
				return
			}
			p.mapping(v, path, nil, func(k, v *yaml.Node, path string) {
				l, ok := NormalizeLang(k.Value)
				if !ok {
					p.errf(k, path, "no templates for language %q (have %s)", k.Value, strings.Join(Langs, ", "))
					return
				}
				c.ExemptionHints[l] = p.str(v, path)
			})
		},
		"channels": func(k, v *yaml.Node, path string) {
			if v.Kind != yaml.SequenceNode {
				if !yamlwalk.IsNull(v) {
					p.errf(v, path, "must be a list (lines starting with '- '), not %s", yamlwalk.Kind(v))
				}
				return
			}
			for i, n := range v.Content {
				ch := p.channel(n, fmt.Sprintf("%s[%d]", path, i))
				if ch == nil {
					continue
				}
				if prev, dup := c.Channel(ch.Name); dup {
					p.errf(n, fmt.Sprintf("%s[%d].name", path, i), "channel %q is defined twice (first at line %d)", ch.Name, prev.Line)
					continue
				}
				c.Channels = append(c.Channels, *ch)
			}
		},
	}, nil)
	if len(c.Languages) == 0 {
		if langLine != 0 {
			p.errs = append(p.errs, fmt.Errorf("notify config:%d: languages: must list at least one language", langLine))
		}
		c.Languages = []string{LangZH}
	}
	// A single hint applies to the default language.
	if h, ok := c.ExemptionHints[""]; ok {
		delete(c.ExemptionHints, "")
		c.ExemptionHints[c.DefaultLang()] = h
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return c, nil
}

var channelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func (p *parser) channel(n *yaml.Node, path string) *Channel {
	if n.Kind != yaml.MappingNode {
		p.errf(n, path, "expected a mapping (name, type, url, …), not %s", yamlwalk.Kind(n))
		return nil
	}
	d := &channelDraft{p: p, n: n, path: path, ch: &Channel{Line: n.Line}, set: map[string]*yaml.Node{}}
	errsBefore := len(p.errs)
	d.read()
	if len(p.errs) > errsBefore {
		return nil
	}
	d.checkName()
	if !d.checkType() {
		return nil
	}
	d.checkForeignFields()
	d.readSecretFile()
	if d.ch.Type == TypeSMTP {
		d.checkSMTP()
	} else {
		d.checkURL()
	}
	d.checkSecret()
	d.defaultMsgType()
	d.checkRoles()
	d.checkScope()
	if d.set["timeout"] == nil {
		d.ch.Timeout = DefaultTimeout
	} else if d.ch.Timeout <= 0 {
		d.bad("timeout", "must be positive")
	}
	return d.ch
}

// channelDraft is a channel being read: its fields as given, the key of
// each field given (errors name its line) and the files its secrets come from.
type channelDraft struct {
	p            *parser
	n            *yaml.Node
	path         string
	ch           *Channel
	set          map[string]*yaml.Node
	secretFile   string
	passwordFile string
}

// bad reports a problem with field, at its key or, when it is missing, at
// the channel.
func (d *channelDraft) bad(field, format string, args ...any) {
	at := d.n
	if k, ok := d.set[field]; ok {
		at = k
	}
	d.p.errf(at, d.path+"."+field, format, args...)
}

// read takes the channel's fields as given, checking only their YAML shape.
func (d *channelDraft) read() {
	p, ch := d.p, d.ch
	str := func(dst *string) func(v *yaml.Node, path string) {
		return func(v *yaml.Node, path string) { *dst = p.str(v, path) }
	}
	fields := map[string]func(v *yaml.Node, path string){
		"name":          str(&ch.Name),
		"type":          str(&ch.Type),
		"url":           str(&ch.URL),
		"addr":          str(&ch.Addr),
		"secret":        str(&ch.Secret),
		"secret_file":   str(&d.secretFile),
		"msgtype":       str(&ch.MsgType),
		"from":          str(&ch.From),
		"username":      str(&ch.Username),
		"password_file": str(&d.passwordFile),
		"starttls":      func(v *yaml.Node, path string) { ch.StartTLS = p.boolean(v, path) },
		"scope":         func(v *yaml.Node, path string) { ch.Scope = p.strings(v, path) },
		"roles":         func(v *yaml.Node, path string) { ch.Roles = p.strings(v, path) },
		"timeout":       func(v *yaml.Node, path string) { ch.Timeout = p.duration(v, path) },
	}
	walk := make(map[string]func(k, v *yaml.Node, path string), len(fields))
	for name, f := range fields {
		walk[name] = func(k, v *yaml.Node, path string) { f(v, path); d.set[name] = k }
	}
	p.mapping(d.n, d.path, walk, nil)
}

func (d *channelDraft) checkName() {
	switch {
	case d.ch.Name == "":
		d.bad("name", "required: a name for the channel (letters, digits, _ . -)")
	case !channelName.MatchString(d.ch.Name):
		d.bad("name", "%q: use letters, digits, _ . - (starting with a letter or digit)", d.ch.Name)
	}
}

// checkType reports whether the type is known: the other checks depend on it.
func (d *channelDraft) checkType() bool {
	if slices.Contains(channelTypes, d.ch.Type) {
		return true
	}
	if d.ch.Type == "" {
		d.bad("type", "required: one of %s", strings.Join(channelTypes, ", "))
	} else {
		d.bad("type", "%q is not a channel type (want one of %s)", d.ch.Type, strings.Join(channelTypes, ", "))
	}
	return false
}

// onlyOf lists the fields that belong to some channel types only.
var onlyOf = map[string][]string{
	"url":           {TypeWebhook, TypeDingTalk, TypeFeishu, TypeWeCom, TypeSlack},
	"addr":          {TypeSMTP},
	"secret":        {TypeWebhook, TypeDingTalk, TypeFeishu},
	"secret_file":   {TypeWebhook, TypeDingTalk, TypeFeishu},
	"msgtype":       {TypeDingTalk, TypeWeCom},
	"from":          {TypeSMTP},
	"username":      {TypeSMTP},
	"password_file": {TypeSMTP},
	"starttls":      {TypeSMTP},
}

// checkForeignFields reports the fields that belong to other types.
func (d *channelDraft) checkForeignFields() {
	for field, types := range onlyOf {
		if d.set[field] != nil && !slices.Contains(types, d.ch.Type) {
			d.bad(field, "not a setting of a %s channel (only of %s)", d.ch.Type, strings.Join(types, ", "))
		}
	}
}

func (d *channelDraft) readSecretFile() {
	if d.set["secret"] != nil && d.set["secret_file"] != nil {
		d.bad("secret_file", "give secret or secret_file, not both")
	}
	if d.secretFile != "" {
		s, err := readSecret(d.secretFile)
		if err != nil {
			d.bad("secret_file", "%v", err)
		}
		d.ch.Secret = s
	}
}

// checkSMTP checks the mail server, the sender and the login, reading the
// password file.
func (d *channelDraft) checkSMTP() {
	ch := d.ch
	if ch.Addr == "" {
		d.bad("addr", "required for an smtp channel: host:port of the mail server")
	} else if host, port, err := net.SplitHostPort(ch.Addr); err != nil || host == "" || port == "" {
		d.bad("addr", "%q is not host:port", ch.Addr)
	} else if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		d.bad("addr", "%q: bad port %q", ch.Addr, port)
	}
	if ch.From == "" {
		d.bad("from", "required for an smtp channel: the sender address")
	} else if _, err := mail.ParseAddress(ch.From); err != nil {
		d.bad("from", "%q is not an email address: %v", ch.From, err)
	}
	switch {
	case ch.Username != "" && d.passwordFile == "":
		d.bad("password_file", "required with username")
	case ch.Username == "" && d.passwordFile != "":
		d.bad("username", "required with password_file")
	case d.passwordFile != "":
		s, err := readSecret(d.passwordFile)
		if err != nil {
			d.bad("password_file", "%v", err)
		}
		ch.Password = s
	}
}

func (d *channelDraft) checkURL() {
	if d.ch.URL == "" {
		d.bad("url", "required for a %s channel", d.ch.Type)
	} else if u, err := url.Parse(d.ch.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Never echo the URL: it holds the robot's access token.
		d.bad("url", "not an http(s) URL with a host")
	}
}

// checkSecret requires the webhook's signing secret and rejects an empty one.
func (d *channelDraft) checkSecret() {
	given := d.set["secret"] != nil || d.set["secret_file"] != nil
	if d.ch.Type == TypeWebhook && d.ch.Secret == "" && !given {
		d.bad("secret", "required for a webhook channel (secret or secret_file): every request is signed")
	} else if given && d.ch.Secret == "" && d.secretFile == "" {
		d.bad("secret", "is empty")
	}
}

func (d *channelDraft) defaultMsgType() {
	switch d.ch.Type {
	case TypeDingTalk, TypeWeCom:
		switch d.ch.MsgType {
		case "":
			d.ch.MsgType = "text"
		case "text", "markdown":
		default:
			d.bad("msgtype", "%q: want text or markdown", d.ch.MsgType)
		}
	}
}

func (d *channelDraft) checkRoles() {
	if d.set["roles"] == nil {
		d.ch.Roles = []string{alert.RoleHolder, alert.RoleLead, alert.RoleAdmin}
		return
	}
	if len(d.ch.Roles) == 0 {
		d.bad("roles", "must list at least one of holder, lead, admin")
	}
	for _, r := range d.ch.Roles {
		if r != alert.RoleHolder && r != alert.RoleLead && r != alert.RoleAdmin {
			d.bad("roles", "%q is not a role (want holder, lead or admin)", r)
		}
	}
}

func (d *channelDraft) checkScope() {
	for _, s := range d.ch.Scope {
		if s == "" {
			d.bad("scope", "an empty project id")
		}
	}
	if isGroup(d.ch.Type) && len(d.ch.Scope) == 0 && slices.Contains(d.ch.Roles, alert.RoleHolder) {
		d.bad("scope", "a %s group robot that serves holders must name its projects: everyone in the group reads what it posts about a student", d.ch.Type)
	}
}

// readSecret reads a secret file; one trailing newline (or CRLF) is dropped.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		return "", fmt.Errorf("%s is empty", path)
	}
	return string(b), nil
}

// ---------------------------------------------------------------- YAML helpers

type parser struct{ errs []error }

func (p *parser) errf(n *yaml.Node, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	p.errs = append(p.errs, fmt.Errorf("notify config:%d: %s", n.Line, msg))
}

// mapping walks a mapping's keys: known ones go to fields[key], others to any
// (nil: an unknown key is an error naming the allowed ones).
func (p *parser) mapping(n *yaml.Node, path string, fields map[string]func(k, v *yaml.Node, path string), any func(k, v *yaml.Node, path string)) {
	var allowed []string
	if any == nil {
		allowed = append([]string{}, slices.Sorted(maps.Keys(fields))...)
	}
	yamlwalk.Mapping(n, path, allowed, p.errf, func(k, v *yaml.Node, path string) {
		if f, ok := fields[k.Value]; ok {
			f(k, v, path)
			return
		}
		any(k, v, path)
	})
}

func (p *parser) str(v *yaml.Node, path string) string {
	if v.Kind != yaml.ScalarNode || yamlwalk.IsNull(v) {
		p.errf(v, path, "must be a single value, not %s", yamlwalk.Kind(v))
		return ""
	}
	return strings.TrimSpace(v.Value)
}

func (p *parser) strings(v *yaml.Node, path string) []string {
	if yamlwalk.IsNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		p.errf(v, path, "must be a list ([a, b] or lines starting with '- '), not %s", yamlwalk.Kind(v))
		return nil
	}
	out := make([]string, 0, len(v.Content))
	for i, e := range v.Content {
		out = append(out, p.str(yamlwalk.Deref(e), fmt.Sprintf("%s[%d]", path, i)))
	}
	return out
}

func (p *parser) boolean(v *yaml.Node, path string) bool {
	s := p.str(v, path)
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	if s != "" {
		p.errf(v, path, "%q: want true or false", s)
	}
	return false
}

func (p *parser) duration(v *yaml.Node, path string) time.Duration {
	s := p.str(v, path)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.errf(v, path, "%q is not a duration (like 10s, 1m30s)", s)
		return 0
	}
	return d
}
