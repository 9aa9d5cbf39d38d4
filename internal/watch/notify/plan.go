package notify

import (
	"fmt"
	"strings"

	"github.com/cardhour/cardhour/internal/watch/alert"
)

// Plan routes a message to people and renders it for each, in the person's
// language (or the default). Each person gets one envelope per channel that
// serves their role for the message's project:
//   - smtp: people with an Email;
//   - group robots (dingtalk, feishu, wecom, slack): a post in the group that
//     @mentions the person when their IM names an id for that type; people
//     without one share a single post without a mention;
//   - webhook: everyone served, the recipient named in the payload; each
//     person (alert.Person.Identity: their user, else email, else IM, else name) is one
//     recipient, so that two admins or two leads without a user each get
//     their own.
//
// A person with the same address on a channel (a lead who is also the
// holder) gets one envelope there, in the first role listed.
//
// A student's messages never carry other students' details: a holder must be
// the message's user (or, for a project-wide message without a user, a member
// of its project), and a lead must lead the message's project. Anything else
// is an error, as are unknown roles and facts that cannot be rendered.
// People who no channel serves get no envelope.
func (c *Config) Plan(m alert.Message, people []alert.Person) ([]alert.Envelope, error) {
	for i, p := range people {
		switch p.Role {
		case alert.RoleHolder:
			if m.Facts.User != "" && p.User != m.Facts.User {
				return nil, fmt.Errorf("notify: person %d (holder %q) is not the holder %q of message %s", i, p.User, m.Facts.User, m.Key)
			}
			if p.Project != "" && p.Project != m.Facts.Project {
				return nil, fmt.Errorf("notify: person %d (holder %q) is in project %q, the message %s is about project %q", i, p.User, p.Project, m.Key, m.Facts.Project)
			}
		case alert.RoleLead:
			if p.Project != "" && p.Project != m.Facts.Project {
				return nil, fmt.Errorf("notify: person %d (lead %q) leads project %q, the message %s is about project %q", i, p.User, p.Project, m.Key, m.Facts.Project)
			}
		case alert.RoleAdmin:
		default:
			return nil, fmt.Errorf("notify: person %d (%q) has role %q (want holder, lead or admin)", i, p.User, p.Role)
		}
	}
	type rendered struct {
		m             alert.Message
		subject, body string
	}
	cache := map[string]rendered{}
	render := func(lang string) (rendered, error) {
		if r, ok := cache[lang]; ok {
			return r, nil
		}
		mm := m
		if mm.Facts.ExemptionHint == "" {
			mm.Facts.ExemptionHint = c.ExemptionHint(lang)
		}
		s, b, err := Render(mm, lang)
		if err != nil {
			return rendered{}, err
		}
		r := rendered{m: mm, subject: s, body: b}
		cache[lang] = r
		return r, nil
	}
	var out []alert.Envelope
	seen := map[string]bool{} // channel + "\x00" + address
	for _, ch := range c.Channels {
		for _, p := range people {
			if !ch.Serves(m.Facts.Project, p.Role) {
				continue
			}
			var addr string
			switch {
			case ch.Type == TypeSMTP:
				if p.Email == "" {
					continue
				}
				addr = strings.ToLower(p.Email)
			case isGroup(ch.Type):
				addr = IMFor(p.IM, ch.Type)
			default:
				addr = p.Identity()
			}
			if seen[ch.Name+"\x00"+addr] {
				continue
			}
			seen[ch.Name+"\x00"+addr] = true
			lang := c.langFor(p)
			r, err := render(lang)
			if err != nil {
				return nil, err
			}
			out = append(out, alert.Envelope{Channel: ch.Name, To: p, Lang: lang, Subject: r.subject, Body: r.body, Message: r.m})
		}
	}
	return out, nil
}

func (c *Config) langFor(p alert.Person) string {
	if l, ok := NormalizeLang(p.Lang); ok {
		for _, have := range c.Languages {
			if have == l {
				return l
			}
		}
	}
	return c.DefaultLang()
}

// IMFor picks a person's id for a channel type from alert.Person.IM: the entry
// "type:id" for that type when IM lists ids per type ("dingtalk:0412,
// feishu:ou_7d8a"), "" when it lists others only, or IM itself when it is a
// bare id.
func IMFor(im, typ string) string {
	im = strings.TrimSpace(im)
	if im == "" {
		return ""
	}
	typed := false
	for _, part := range strings.Split(im, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || !isChannelType(strings.TrimSpace(k)) {
			continue
		}
		typed = true
		if strings.TrimSpace(k) == typ {
			return strings.TrimSpace(v)
		}
	}
	if typed {
		return ""
	}
	return im
}

func isChannelType(s string) bool {
	for _, t := range channelTypes {
		if s == t {
			return true
		}
	}
	return false
}
