package api

import (
	"html/template"

	"github.com/gin-gonic/gin"
)

// The pages a person sees when a sign-in does not open a session: in
// English and Chinese at once (the person has no dashboard language yet),
// each naming what happened and what to do.

type pageKind int

const (
	pageRefused pageKind = iota
	pageNoRole
	pageFailed
	pageNoProvider
)

type pageData struct {
	Kind             pageKind
	Provider         string
	Code, Reason     string
	Person, Name     string
	Help, HelpZH     string
	TitleEN, TitleZH string
}

var signInPageTmpl = template.Must(template.New("signin").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.TitleEN}} · cardhour</title><link rel="stylesheet" href="/ui/style.css"></head>
<body><main class="card login" id="signin-page" data-kind="{{.Kind}}" data-code="{{.Code}}">
<section lang="en">
<h1>{{.TitleEN}}</h1>
{{- if eq .Kind 0}}
<p id="signin-reason">{{.Reason}}</p>
<p>No session was opened. Go back to the dashboard and sign in again; if this happens again, give the administrator the time and this code: <code>{{.Code}}</code>.</p>
{{- else if eq .Kind 1}}
<p>You signed in as <strong id="signin-person">{{.Person}}</strong>{{with .Name}} ({{.}}){{end}}, but cardhour has no role for you: you are not an administrator, in finance, the lead of a project, or on a project's roster.</p>
<p id="signin-help">{{if .Help}}{{.Help}}{{else}}Ask your lab lead or course teacher to add your ID to the project's roster, or the administrator of cardhour to map your group.{{end}}</p>
{{- else if eq .Kind 2}}
<p>The sign-in could not be completed because a service did not answer. Nothing was changed; try again in a minute.</p>
{{- else}}
<p>This way of signing in is not configured here.</p>
{{- end}}
<p><a href="/ui/">Back to the dashboard</a></p>
</section>
<section lang="zh-CN">
<h1>{{.TitleZH}}</h1>
{{- if eq .Kind 0}}
<p>未建立会话。请返回控制台重新登录；若再次出现，请将时间和此代码告知管理员：<code>{{.Code}}</code>。</p>
{{- else if eq .Kind 1}}
<p>您已以 <strong>{{.Person}}</strong>{{with .Name}}（{{.}}）{{end}} 身份登录，但您在 cardhour 中没有任何角色：您不是管理员、财务人员、项目负责人，也不在任何项目的名单上。</p>
<p>{{if .HelpZH}}{{.HelpZH}}{{else if .Help}}{{.Help}}{{else}}请联系您的课题组负责人或任课教师将您的学号加入项目名单，或联系 cardhour 管理员为您的用户组配置角色。{{end}}</p>
{{- else if eq .Kind 2}}
<p>有服务未响应，登录未能完成。未做任何更改，请稍后重试。</p>
{{- else}}
<p>此处未配置该登录方式。</p>
{{- end}}
<p><a href="/ui/">返回控制台</a></p>
</section>
</main></body></html>
`))

var pageTitles = map[pageKind][2]string{
	pageRefused:    {"Sign-in refused", "登录被拒绝"},
	pageNoRole:     {"No access yet", "暂无访问权限"},
	pageFailed:     {"Sign-in did not complete", "登录未完成"},
	pageNoProvider: {"Not configured", "未配置"},
}

// signInPage writes one of the sign-in pages with status.
func (s *Server) signInPage(c *gin.Context, status int, kind pageKind, provider string, d *pageData) {
	if d == nil {
		d = &pageData{}
	}
	d.Kind, d.Provider = kind, provider
	d.TitleEN, d.TitleZH = pageTitles[kind][0], pageTitles[kind][1]
	if kind == pageNoRole && s.cfg.SignIn != nil && s.cfg.SignIn.Mapping != nil {
		d.Help, d.HelpZH = s.cfg.SignIn.Mapping.Help(), s.cfg.SignIn.Mapping.HelpZH()
	}
	c.Header("Cache-Control", "no-store")
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Status(status)
	if err := signInPageTmpl.Execute(c.Writer, d); err != nil {
		logFrom(c.Request.Context()).Error("cannot write the sign-in page", "err", err)
	}
}
