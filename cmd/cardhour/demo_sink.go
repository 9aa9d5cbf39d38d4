//go:build !collector

package main

import (
	"crypto/hmac"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cardhour/cardhour/collector/fleet"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/watch/release"
)

// demoSinkKeep is how many notifications and releases the sink keeps.
const demoSinkKeep = 2000

// demoSink stands for the site's services in the demo: it receives the
// notify webhook channel's messages (and logs them) and the release
// webhook's requests, which it carries out by freeing the instance in the
// simulated fleet. Admins read what it received at /demo/api/webhooks and
// on the page /demo/.
type demoSink struct {
	secret string
	fleet  *fleet.Fleet
	log    *slog.Logger

	mu            sync.Mutex
	notifications []json.RawMessage
	releases      []demoRelease
}

// demoRelease is one release request the sink received and what it did.
type demoRelease struct {
	ReceivedAt time.Time              `json:"received_at"`
	Request    release.WebhookRequest `json:"request"`
	Released   bool                   `json:"released"`
	Detail     string                 `json:"detail"`
}

func newDemoSink(f *fleet.Fleet, log *slog.Logger) *demoSink {
	return &demoSink{secret: randomHex(16), fleet: f, log: log}
}

// routes adds the sink's routes to the API's router.
func (s *demoSink) routes(e *gin.Engine, led ledger.Store) {
	e.POST("/demo/hooks/notify", s.notify)
	e.POST("/demo/hooks/release", s.release)
	e.GET("/demo/api/webhooks", func(c *gin.Context) { s.list(c, led) })
	e.GET("/demo/", func(c *gin.Context) { c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(demoPage)) })
}

// body reads a signed request's body; false (and the answer written) when
// it is not signed with the sink's secret.
func (s *demoSink) body(c *gin.Context) ([]byte, bool) {
	b, err := io.ReadAll(io.LimitReader(c.Request.Body, 1<<20))
	if err != nil {
		c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
		return nil, false
	}
	want := release.Sign(s.secret, c.GetHeader("X-Cardhour-Timestamp"), b)
	if !hmac.Equal([]byte(want), []byte(c.GetHeader("X-Cardhour-Signature"))) {
		c.JSON(http.StatusUnauthorized, gin.H{"error": "the signature does not match"})
		return nil, false
	}
	return b, true
}

func (s *demoSink) notify(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	var m struct {
		Kind    string `json:"kind"`
		Key     string `json:"key"`
		Subject string `json:"subject"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		c.JSON(http.StatusBadRequest, gin.H{"error": "not a notification: " + err.Error()})
		return
	}
	s.log.Info("alert received by the demo's webhook sink", "kind", m.Kind, "subject", m.Subject)
	s.mu.Lock()
	s.notifications = keepLast(append(s.notifications, json.RawMessage(b)), demoSinkKeep)
	s.mu.Unlock()
	c.Status(http.StatusNoContent)
}

func (s *demoSink) release(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	var r release.WebhookRequest
	if err := json.Unmarshal(b, &r); err != nil || r.Target.InstanceID == "" {
		c.JSON(http.StatusBadRequest, gin.H{"error": "not a release request"})
		return
	}
	rec := demoRelease{ReceivedAt: time.Now().UTC(), Request: r}
	switch {
	case r.DryRun:
		rec.Detail = "dry run: the simulated fleet would free " + r.Target.InstanceID + " on " + r.Target.Node
	default:
		if holder, ok := s.fleet.Release(r.Target.InstanceID); ok {
			rec.Released = true
			rec.Detail = "the simulated fleet freed " + r.Target.InstanceID + " on " + r.Target.Node + " (" + holder + ")"
		} else {
			rec.Detail = "nobody holds " + r.Target.InstanceID + " in the simulated fleet now"
		}
	}
	s.log.Info("release request received by the demo's webhook sink", "instance", r.Target.InstanceID,
		"project", r.Target.Project, "user", r.Target.User, "released", rec.Released, "detail", rec.Detail)
	s.mu.Lock()
	s.releases = keepLast(append(s.releases, rec), demoSinkKeep)
	s.mu.Unlock()
	c.JSON(http.StatusOK, release.WebhookReply{Released: rec.Released, Detail: rec.Detail})
}

// list answers what the sink received, newest last, to admins.
func (s *demoSink) list(c *gin.Context, led ledger.Store) {
	scheme, secret, _ := strings.Cut(c.GetHeader("Authorization"), " ")
	tok, err := led.LookupToken(c.Request.Context(), strings.TrimSpace(secret))
	switch {
	case !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "":
		c.Header("WWW-Authenticate", `Bearer realm="cardhour"`)
		c.JSON(http.StatusUnauthorized, gin.H{"error": "this request needs Authorization: Bearer <token>"})
		return
	case errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrTokenExpired), errors.Is(err, ledger.ErrTokenRevoked):
		c.Header("WWW-Authenticate", `Bearer realm="cardhour"`)
		c.JSON(http.StatusUnauthorized, gin.H{"error": "the token is not valid"})
		return
	case err != nil:
		c.JSON(http.StatusServiceUnavailable, gin.H{"error": "the state store did not answer"})
		return
	case tok.Role != ledger.RoleAdmin:
		c.JSON(http.StatusForbidden, gin.H{"error": "only admins read the demo's webhook sink"})
		return
	}
	s.mu.Lock()
	out := gin.H{"notifications": append([]json.RawMessage{}, s.notifications...), "releases": append([]demoRelease{}, s.releases...)}
	s.mu.Unlock()
	c.JSON(http.StatusOK, out)
}

func keepLast[T any](s []T, n int) []T {
	if len(s) > n {
		return append(s[:0:0], s[len(s)-n:]...)
	}
	return s
}

// demoPage lists what the sink received, with the dashboard's token (the
// same origin's session storage) or one pasted here.
const demoPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>cardhour demo: webhook sink</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1rem auto;max-width:72rem;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%;margin-bottom:2rem}th,td{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}pre{white-space:pre-wrap;margin:0}.ok{color:#16794c}.no{color:#a33}
</style></head><body>
<h1>cardhour demo: what the webhook sink received</h1>
<p>The watcher's alerts (notify webhook channel) and release requests (release webhook) of this demo, newest first.
Back to the <a href="/ui/">dashboard</a>.</p>
<form id="f" hidden><label>Admin token <input id="t" type="password" size="40" autocomplete="off"></label> <button>Show</button></form>
<p id="err" class="no" role="alert"></p>
<h2>Releases</h2><table><thead><tr><th>received</th><th>instance</th><th>project / user</th><th>idle streak</th><th>outcome</th></tr></thead><tbody id="rel"></tbody></table>
<h2>Alerts</h2><table><thead><tr><th>sent</th><th>kind</th><th>subject and body</th></tr></thead><tbody id="ntf"></tbody></table>
<script>
const KEY='cardhour.token';
const esc=s=>String(s??'').replace(/[&<>"']/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
async function load(){
  const tok=sessionStorage.getItem(KEY)||'';
  const f=document.getElementById('f');
  if(!tok){f.hidden=false;return}
  const r=await fetch('/demo/api/webhooks',{headers:{Authorization:'Bearer '+tok}});
  if(!r.ok){document.getElementById('err').textContent='HTTP '+r.status+': '+(await r.text());f.hidden=false;return}
  const d=await r.json();
  document.getElementById('rel').innerHTML=d.releases.slice().reverse().map(x=>'<tr><td>'+esc(x.received_at)+'</td><td>'+esc(x.request.target.node)+'<br>'+esc(x.request.target.instance_id)+'</td><td>'+esc(x.request.target.project)+' / '+esc(x.request.target.user)+'</td><td>'+esc(x.request.evidence.streak_start)+' → '+esc(x.request.evidence.streak_end)+'</td><td class="'+(x.released?'ok':'no')+'">'+esc(x.detail)+'</td></tr>').join('');
  document.getElementById('ntf').innerHTML=d.notifications.slice().reverse().map(x=>'<tr><td>'+esc(x.sent_at)+'</td><td>'+esc(x.kind)+'</td><td><strong>'+esc(x.subject)+'</strong><pre>'+esc(x.body)+'</pre></td></tr>').join('');
}
document.getElementById('f').addEventListener('submit',e=>{e.preventDefault();sessionStorage.setItem(KEY,document.getElementById('t').value.trim());load()});
load();setInterval(load,5000);
</script></body></html>
`
