package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// vendor is a fake vendor endpoint: it records each request and answers
// with status and reply.
type vendor struct {
	mu      sync.Mutex
	reqs    []recorded
	status  int
	reply   string
	srv     *httptest.Server
	started time.Time
}

type recorded struct {
	method string
	url    *url.URL
	header http.Header
	body   []byte
}

func newVendor(t *testing.T, status int, reply string) *vendor {
	v := &vendor{status: status, reply: reply, started: time.Now()}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		v.mu.Lock()
		v.reqs = append(v.reqs, recorded{r.Method, r.URL, r.Header.Clone(), b})
		v.mu.Unlock()
		w.WriteHeader(v.status)
		_, _ = io.WriteString(w, v.reply)
	}))
	t.Cleanup(v.srv.Close)
	return v
}

func (v *vendor) only(t *testing.T) recorded {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	require.Len(t, v.reqs, 1)
	r := v.reqs[0]
	require.Equal(t, http.MethodPost, r.method)
	require.Equal(t, "application/json; charset=utf-8", r.header.Get("Content-Type"))
	return r
}

// fresh checks that a timestamp (in unit) was taken during the test.
func (v *vendor) fresh(t *testing.T, ts string, unit time.Duration) {
	t.Helper()
	n, err := strconv.ParseInt(ts, 10, 64)
	require.NoError(t, err, "timestamp %q", ts)
	at := time.Unix(0, n*int64(unit))
	require.False(t, at.Before(v.started.Truncate(unit)), "timestamp %s before the test", at)
	require.False(t, at.After(time.Now()), "timestamp %s in the future", at)
}

func sender(t *testing.T, ch Channel) Sender {
	t.Helper()
	s, err := NewSender(ch)
	require.NoError(t, err)
	return s
}

func testEnvelope(t *testing.T, channel string, to alert.Person) alert.Envelope {
	m := goldenCases(t)["idle_warning"]
	subject, body, err := Render(m, LangZH)
	require.NoError(t, err)
	return alert.Envelope{Channel: channel, To: to, Lang: LangZH, Subject: subject, Body: body, Message: m}
}

var alice = alert.Person{Role: alert.RoleHolder, Project: "nlp-lab", User: "alice", Name: "Alice Zhang", Email: "alice@example.edu",
	IM: "dingtalk:0412,feishu:ou_7d8a6e6df7621556ce0d21922b676706ccs,wecom:zhangsan,slack:U024BE7LH"}

// ---------------------------------------------------------------- generic webhook

func TestWebhookSignedPost(t *testing.T) {
	v := newVendor(t, 202, "")
	s := sender(t, Channel{Name: "ops", Type: TypeWebhook, URL: v.srv.URL + "/hook", Secret: "whsec-test"})
	e := testEnvelope(t, "ops", alice)
	require.NoError(t, s.Send(context.Background(), e))

	r := v.only(t)
	require.Equal(t, "/hook", r.url.Path)
	ts := r.header.Get("X-Cardhour-Timestamp")
	v.fresh(t, ts, time.Second)
	// The signature, computed here from the documented recipe.
	mac := hmac.New(sha256.New, []byte("whsec-test"))
	mac.Write([]byte(ts + "." + string(r.body)))
	require.Equal(t, hex.EncodeToString(mac.Sum(nil)), r.header.Get("X-Cardhour-Signature"))
	require.Equal(t, "k1|ops|holder|nlp-lab|alice", r.header.Get("Idempotency-Key"))

	var got map[string]any
	require.NoError(t, json.Unmarshal(r.body, &got))
	sent := got["sent_at"]
	wantJSON := `{
	  "key": "k1", "kind": "idle_warning", "channel": "ops", "lang": "zh-CN",
	  "delivery_key": "k1|ops|holder|nlp-lab|alice",
	  "to": {"role": "holder", "project": "nlp-lab", "user": "alice", "name": "Alice Zhang",
	         "email": "alice@example.edu", "im": "dingtalk:0412,feishu:ou_7d8a6e6df7621556ce0d21922b676706ccs,wecom:zhangsan,slack:U024BE7LH"},
	  "subject": ` + jsonString(e.Subject) + `, "body": ` + jsonString(e.Body) + `,
	  "sent_at": ` + jsonString(sent.(string)) + `,
	  "facts": {"project": "nlp-lab", "user": "alice", "node": "gpu-node-07",
	    "gpu_uuid": "GPU-5f1c2e8a-93b4-4c1d-8e2f-0a1b2c3d4e5f", "gpu_model": "A100-SXM4-40GB", "profile": "1g.5gb",
	    "instance_id": "MIG-2b7e0c44-1f1e-5a3c-9d2b-77aa01c4e8f0",
	    "held_since": "2026-11-27T06:05:00Z", "idle_since": "2026-11-29T14:40:00Z", "at": "2026-11-30T00:40:00Z",
	    "next_action": "release", "next_at": "2026-11-30T14:40:00Z", "cost": "1234.50", "currency": "CNY",
	    "timezone": "Asia/Shanghai"}
	}`
	require.JSONEq(t, wantJSON, string(r.body))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ---------------------------------------------------------------- DingTalk

func TestDingTalkSignedText(t *testing.T) {
	v := newVendor(t, 200, `{"errcode":0,"errmsg":"ok"}`)
	s := sender(t, Channel{Name: "ding", Type: TypeDingTalk, URL: v.srv.URL + "/robot/send?access_token=tok123", Secret: "SECabc", MsgType: "text"})
	e := testEnvelope(t, "ding", alice)
	require.NoError(t, s.Send(context.Background(), e))

	r := v.only(t)
	q := r.url.Query()
	require.Equal(t, "tok123", q.Get("access_token"))
	ts := q.Get("timestamp")
	v.fresh(t, ts, time.Millisecond)
	// sign = urlEncode(base64(HmacSHA256(key=secret, timestamp+"\n"+secret)))
	mac := hmac.New(sha256.New, []byte("SECabc"))
	mac.Write([]byte(ts + "\n" + "SECabc"))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	require.Equal(t, want, q.Get("sign"))
	require.Contains(t, r.url.RawQuery, "sign="+url.QueryEscape(want))

	require.JSONEq(t, `{
	  "msgtype": "text",
	  "text": {"content": `+jsonString("@0412 "+e.Subject+"\n\n"+e.Body)+`},
	  "at": {"atUserIds": ["0412"], "isAtAll": false}
	}`, string(r.body))
}

func TestDingTalkMarkdownMobile(t *testing.T) {
	v := newVendor(t, 200, `{"errcode":0,"errmsg":"ok"}`)
	s := sender(t, Channel{Name: "ding", Type: TypeDingTalk, URL: v.srv.URL + "/robot/send?access_token=t", MsgType: "markdown"})
	lead := alert.Person{Role: alert.RoleLead, Project: "nlp-lab", User: "prof", IM: "+86-13800001111"}
	e := testEnvelope(t, "ding", lead)
	e.Body = "line one\nline two\n"
	require.NoError(t, s.Send(context.Background(), e))
	r := v.only(t)
	require.Empty(t, r.url.Query().Get("sign"), "no secret, no signature")
	require.JSONEq(t, `{
	  "msgtype": "markdown",
	  "markdown": {"title": `+jsonString(e.Subject)+`, "text": `+jsonString("#### "+e.Subject+"\n\n@+86-13800001111 line one\n\nline two")+`},
	  "at": {"atMobiles": ["+86-13800001111"], "isAtAll": false}
	}`, string(r.body))
}

// ---------------------------------------------------------------- Feishu

func TestFeishuSignedText(t *testing.T) {
	v := newVendor(t, 200, `{"code":0,"msg":"success","data":{}}`)
	s := sender(t, Channel{Name: "fs", Type: TypeFeishu, URL: v.srv.URL + "/open-apis/bot/v2/hook/abc", Secret: "fs-secret"})
	e := testEnvelope(t, "fs", alice)
	require.NoError(t, s.Send(context.Background(), e))
	r := v.only(t)

	var body struct {
		Timestamp string `json:"timestamp"`
		Sign      string `json:"sign"`
	}
	require.NoError(t, json.Unmarshal(r.body, &body))
	v.fresh(t, body.Timestamp, time.Second)
	// sign = base64(HmacSHA256(key = timestamp+"\n"+secret, message = ""))
	mac := hmac.New(sha256.New, []byte(body.Timestamp+"\n"+"fs-secret"))
	require.Equal(t, base64.StdEncoding.EncodeToString(mac.Sum(nil)), body.Sign)
	require.JSONEq(t, `{
	  "timestamp": `+jsonString(body.Timestamp)+`, "sign": `+jsonString(body.Sign)+`,
	  "msg_type": "text",
	  "content": {"text": `+jsonString(`<at user_id="ou_7d8a6e6df7621556ce0d21922b676706ccs">Alice Zhang</at> `+e.Subject+"\n\n"+e.Body)+`}
	}`, string(r.body))
}

func TestFeishuUnsigned(t *testing.T) {
	v := newVendor(t, 200, `{"StatusCode":0,"StatusMessage":"success"}`) // older robots' reply
	s := sender(t, Channel{Name: "fs", Type: TypeFeishu, URL: v.srv.URL})
	e := testEnvelope(t, "fs", alert.Person{Role: alert.RoleAdmin, User: "root"})
	require.NoError(t, s.Send(context.Background(), e))
	require.JSONEq(t, `{"msg_type":"text","content":{"text":`+jsonString(e.Subject+"\n\n"+e.Body)+`}}`, string(v.only(t).body))
}

// ---------------------------------------------------------------- WeCom

func TestWeComText(t *testing.T) {
	v := newVendor(t, 200, `{"errcode":0,"errmsg":"ok"}`)
	s := sender(t, Channel{Name: "wc", Type: TypeWeCom, URL: v.srv.URL + "/cgi-bin/webhook/send?key=k-1", MsgType: "text"})
	e := testEnvelope(t, "wc", alice)
	require.NoError(t, s.Send(context.Background(), e))
	r := v.only(t)
	require.Equal(t, "k-1", r.url.Query().Get("key"))
	require.JSONEq(t, `{"msgtype":"text","text":{"content":`+jsonString(e.Subject+"\n\n"+e.Body)+`,"mentioned_list":["zhangsan"]}}`, string(r.body))
}

func TestWeComMarkdownAndLimit(t *testing.T) {
	v := newVendor(t, 200, `{"errcode":0,"errmsg":"ok"}`)
	s := sender(t, Channel{Name: "wc", Type: TypeWeCom, URL: v.srv.URL, MsgType: "markdown"})
	e := testEnvelope(t, "wc", alice)
	e.Body = strings.Repeat("空闲", 1000) // 6000 bytes: over the 4096-byte limit
	require.NoError(t, s.Send(context.Background(), e))
	var got struct {
		MsgType  string `json:"msgtype"`
		Markdown struct {
			Content string `json:"content"`
		} `json:"markdown"`
	}
	require.NoError(t, json.Unmarshal(v.only(t).body, &got))
	require.Equal(t, "markdown", got.MsgType)
	require.True(t, strings.HasPrefix(got.Markdown.Content, "<@zhangsan>\n**"+e.Subject+"**\n空闲"))
	require.LessOrEqual(t, len(got.Markdown.Content), 4096)
	require.True(t, strings.HasSuffix(got.Markdown.Content, "…"))
}

// ---------------------------------------------------------------- Slack

func TestSlackBlocks(t *testing.T) {
	v := newVendor(t, 200, "ok")
	s := sender(t, Channel{Name: "sl", Type: TypeSlack, URL: v.srv.URL + "/services/T000/B000/XXXX"})
	e := testEnvelope(t, "sl", alice)
	e.Body = "cost < limit & more\n"
	require.NoError(t, s.Send(context.Background(), e))
	require.JSONEq(t, `{
	  "text": `+jsonString("<@U024BE7LH> "+e.Subject)+`,
	  "blocks": [
	    {"type": "header", "text": {"type": "plain_text", "text": `+jsonString(e.Subject)+`}},
	    {"type": "section", "text": {"type": "mrkdwn", "text": "<@U024BE7LH> \ncost &lt; limit &amp; more\n"}}
	  ]
	}`, string(v.only(t).body))
}

// ---------------------------------------------------------------- errors

func TestSendErrorsClassified(t *testing.T) {
	for _, c := range []struct {
		name      string
		ch        Channel
		status    int
		reply     string
		permanent bool
		contains  string
	}{
		{"dingtalk keyword or sign mismatch", Channel{Type: TypeDingTalk, MsgType: "text"}, 200, `{"errcode":310000,"errmsg":"sign not match"}`, true, "error code 310000: sign not match"},
		{"dingtalk too fast", Channel{Type: TypeDingTalk, MsgType: "text"}, 200, `{"errcode":130101,"errmsg":"send too fast"}`, false, "130101"},
		{"feishu sign failed", Channel{Type: TypeFeishu}, 200, `{"code":19021,"msg":"sign match fail or timestamp is not within one hour from current time"}`, true, "19021"},
		{"feishu frequency limited", Channel{Type: TypeFeishu}, 200, `{"code":11232,"msg":"frequency limited"}`, false, "11232"},
		{"wecom invalid key", Channel{Type: TypeWeCom, MsgType: "text"}, 200, `{"errcode":93000,"errmsg":"invalid webhook url"}`, true, "93000"},
		{"wecom rate limit", Channel{Type: TypeWeCom, MsgType: "text"}, 200, `{"errcode":45009,"errmsg":"api freq out of limit"}`, false, "45009"},
		{"wecom reply not json", Channel{Type: TypeWeCom, MsgType: "text"}, 200, `<html>`, false, "not the expected JSON"},
		{"slack channel not found", Channel{Type: TypeSlack}, 404, "channel_not_found", true, "status 404: channel_not_found"},
		{"slack rate limited", Channel{Type: TypeSlack}, 429, "rate_limited", false, "status 429"},
		{"webhook server error", Channel{Type: TypeWebhook, Secret: "s"}, 503, "", false, "status 503: empty reply"},
		{"webhook bad request", Channel{Type: TypeWebhook, Secret: "s"}, 400, "bad signature", true, "status 400"},
		{"webhook request timeout", Channel{Type: TypeWebhook, Secret: "s"}, 408, "", false, "status 408"},
		{"webhook moved", Channel{Type: TypeWebhook, Secret: "s"}, 301, "", true, "status 301"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newVendor(t, c.status, c.reply)
			ch := c.ch
			ch.Name, ch.URL = "x", v.srv.URL+"/?access_token=TOKEN"
			err := sender(t, ch).Send(context.Background(), testEnvelope(t, "x", alert.Person{Role: alert.RoleAdmin}))
			require.Error(t, err)
			require.Contains(t, err.Error(), c.contains)
			require.Equal(t, c.permanent, Permanent(err), err.Error())
			var se *SendError
			require.True(t, errors.As(err, &se))
		})
	}
}

func TestSendNetworkErrorRetryableAndRedacted(t *testing.T) {
	v := newVendor(t, 200, "ok")
	target := v.srv.URL + "/services/T/B/SECRETTOKEN"
	v.srv.Close() // nothing listens any more
	err := sender(t, Channel{Name: "sl", Type: TypeSlack, URL: target}).Send(context.Background(), testEnvelope(t, "sl", alice))
	require.Error(t, err)
	require.False(t, Permanent(err))
	require.NotContains(t, err.Error(), "SECRETTOKEN")
}

func TestSendTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	s := sender(t, Channel{Name: "sl", Type: TypeSlack, URL: srv.URL, Timeout: 50 * time.Millisecond})
	err := s.Send(context.Background(), testEnvelope(t, "sl", alice))
	require.Error(t, err)
	require.False(t, Permanent(err), "a timeout is retryable")
}

func TestPermanent(t *testing.T) {
	require.False(t, Permanent(nil))
	require.False(t, Permanent(errors.New("connection reset")))
	require.True(t, Permanent(ErrConfig))
	require.True(t, Permanent(&SendError{Channel: "x", permanent: true}))
	_, err := NewSender(Channel{Name: "x", Type: "pigeon"})
	require.True(t, Permanent(err))
}

func TestBackoff(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for attempt := -1; attempt < 64; attempt++ {
		ceil := BackoffCap
		if a := max(attempt, 0); a < 20 && BackoffBase<<a < BackoffCap {
			ceil = BackoffBase << a
		}
		var sum time.Duration
		const n = 400
		for range n {
			d := Backoff(attempt, r)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.Less(t, d, ceil, "attempt %d", attempt)
			sum += d
		}
		// Full jitter: uniform over [0, ceil), so the mean is near ceil/2.
		mean := sum / n
		require.InDelta(t, float64(ceil/2), float64(mean), float64(ceil)/8, "attempt %d", attempt)
	}
	// Grows, then stops at the cap.
	require.Equal(t, 15*time.Second, BackoffBase)
	require.Less(t, Backoff(0, rand.New(rand.NewPCG(3, 4))), BackoffBase)
	require.NotPanics(t, func() { _ = Backoff(5, nil) })
	require.NotPanics(t, func() { _ = Backoff(1<<30, nil) })
}

func TestMetricsCountDeliveries(t *testing.T) {
	ok := newVendor(t, 200, "ok")
	bad := newVendor(t, 404, "channel_not_found")
	busy := newVendor(t, 503, "")
	c := &Config{Channels: []Channel{
		{Name: "good", Type: TypeSlack, URL: ok.srv.URL},
		{Name: "gone", Type: TypeSlack, URL: bad.srv.URL},
		{Name: "busy", Type: TypeSlack, URL: busy.srv.URL},
	}}
	senders, err := c.Senders()
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	senders = m.Instrument(c, senders)
	e := testEnvelope(t, "", alice)
	require.NoError(t, senders["good"].Send(context.Background(), e))
	require.NoError(t, senders["good"].Send(context.Background(), e))
	require.Error(t, senders["gone"].Send(context.Background(), e))
	require.Error(t, senders["busy"].Send(context.Background(), e))
	require.Equal(t, 2.0, testutil.ToFloat64(m.Delivered.WithLabelValues("good", "slack")))
	require.Equal(t, 0.0, testutil.ToFloat64(m.Delivered.WithLabelValues("gone", "slack")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Failed.WithLabelValues("gone", "slack", "permanent")))
	require.Equal(t, 0.0, testutil.ToFloat64(m.Failed.WithLabelValues("gone", "slack", "retryable")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Failed.WithLabelValues("busy", "slack", "retryable")))
	n, err := testutil.GatherAndCount(reg, "cardhour_notify_delivered_total", "cardhour_notify_failed_total")
	require.NoError(t, err)
	require.Equal(t, 9, n) // 3 channels × (delivered + 2 failed series)
}

func TestNotifierSendsByChannel(t *testing.T) {
	v := newVendor(t, 200, `{"errcode":0,"errmsg":"ok"}`)
	c := &Config{Languages: []string{LangZH}, Channels: []Channel{
		{Name: "leads", Type: TypeWeCom, URL: v.srv.URL, MsgType: "text", Roles: []string{alert.RoleLead}},
	}}
	reg := prometheus.NewRegistry()
	n, err := NewNotifier(c, reg)
	require.NoError(t, err)
	m := goldenCases(t)["budget_project"]
	envs, err := n.Plan(m, []alert.Person{{Role: alert.RoleLead, Project: "nlp-lab", User: "prof", IM: "prof"}, {Role: alert.RoleAdmin, User: "root"}})
	require.NoError(t, err)
	require.Len(t, envs, 1)
	require.NoError(t, n.Send(context.Background(), envs[0]))
	require.Len(t, v.reqs, 1)
	require.Equal(t, 1.0, testutil.ToFloat64(n.Metrics().Delivered.WithLabelValues("leads", "wecom")))

	envs[0].Channel = "gone"
	err = n.Send(context.Background(), envs[0])
	require.ErrorIs(t, err, ErrConfig)
	require.True(t, n.Permanent(err))
	require.Less(t, n.Backoff(0), BackoffBase)
}

func TestWebhookBudgetPayload(t *testing.T) {
	m := goldenCases(t)["budget_student_release"]
	p := NewWebhookPayload(alert.Envelope{Channel: "ops", To: alert.Person{Role: alert.RoleAdmin, User: "root"}, Message: m}, time.Unix(0, 0))
	b, err := json.Marshal(p.Facts)
	require.NoError(t, err)
	require.JSONEq(t, `{"project": "nlp-lab", "user": "bob", "at": "2027-01-05T01:00:00Z",
	  "next_action": "release", "next_at": "2027-01-05T01:10:00Z", "cost": "0.00", "timezone": "Asia/Shanghai",
	  "budget": {"scope": "student", "period": "2026 autumn term", "unit": "card_hours",
	             "limit": "1500", "used": "1503.25", "percent": 100, "used_percent": "100.2"}}`, string(b))
}
