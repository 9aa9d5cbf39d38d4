package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/watch/alert"
)

// Senders makes one Sender per channel, by channel name.
func (c *Config) Senders() (map[string]Sender, error) {
	out := make(map[string]Sender, len(c.Channels))
	for i := range c.Channels {
		s, err := NewSender(c.Channels[i])
		if err != nil {
			return nil, err
		}
		out[c.Channels[i].Name] = s
	}
	return out, nil
}

// NewSender makes the sender of one channel.
func NewSender(ch Channel) (Sender, error) {
	if ch.Timeout <= 0 {
		ch.Timeout = DefaultTimeout
	}
	// Redirects are not followed: a robot URL that moved is a configuration
	// to fix, and a POST must not turn into a GET elsewhere.
	client := &http.Client{Timeout: ch.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	h := httpChannel{ch: ch, client: client, now: time.Now}
	switch ch.Type {
	case TypeWebhook:
		return &webhookSender{h}, nil
	case TypeDingTalk:
		return &dingTalkSender{h}, nil
	case TypeFeishu:
		return &feishuSender{h}, nil
	case TypeWeCom:
		return &weComSender{h}, nil
	case TypeSlack:
		return &slackSender{h}, nil
	case TypeSMTP:
		return &smtpSender{ch: ch, now: time.Now}, nil
	}
	return nil, fmt.Errorf("%w: channel %q has type %q", ErrConfig, ch.Name, ch.Type)
}

// httpChannel is what the HTTP senders share: one POST of a JSON body.
type httpChannel struct {
	ch     Channel
	client *http.Client
	now    func() time.Time
}

const maxReply = 64 << 10

// post sends body to target and returns the reply body of a 2xx answer. Any
// other answer is a *SendError: permanent for 3xx (not followed) and 4xx
// other than 408 and 429.
func (h *httpChannel) post(ctx context.Context, target string, body []byte, header http.Header) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, h.ch.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, &SendError{Channel: h.ch.Name, Msg: "bad request", Err: redact(err), permanent: true}
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "cardhour-notify")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, &SendError{Channel: h.ch.Name, Msg: "request failed", Err: redact(err)}
	}
	defer resp.Body.Close() //nolint:errcheck // read to the end below
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return nil, &SendError{Channel: h.ch.Name, Status: resp.StatusCode, Msg: "reading the reply", Err: redact(err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &SendError{
			Channel: h.ch.Name, Status: resp.StatusCode, Msg: snippet(reply),
			permanent: resp.StatusCode >= 300 && resp.StatusCode < 500 &&
				resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests,
		}
	}
	return reply, nil
}

// redact drops the URL from a *url.Error: robot URLs carry access tokens.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = truncateUTF8(s, 300) + "…"
	}
	if s == "" {
		return "empty reply"
	}
	return s
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// limitText fits a text into n bytes, marking a cut with "…".
func limitText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return truncateUTF8(s, n-len("…")) + "…"
}

func hmacSHA256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// ---------------------------------------------------------------- generic webhook

// WebhookPayload is the generic webhook's JSON body.
type WebhookPayload struct {
	Key     string            `json:"key"`          // the message's natural key
	Kind    billing.AlertKind `json:"kind"`         //
	Channel string            `json:"channel"`      //
	Lang    string            `json:"lang"`         //
	To      WebhookPerson     `json:"to"`           // the recipient (only their own details)
	Subject string            `json:"subject"`      //
	Body    string            `json:"body"`         //
	Facts   WebhookFacts      `json:"facts"`        //
	Sent    string            `json:"sent_at"`      // RFC 3339, UTC
	Deliver string            `json:"delivery_key"` // Envelope.DeliveryKey, also the Idempotency-Key header
}

// WebhookPerson is the recipient in a webhook payload.
type WebhookPerson struct {
	Role    string `json:"role"`
	Project string `json:"project,omitempty"`
	User    string `json:"user,omitempty"`
	Name    string `json:"name,omitempty"`
	Email   string `json:"email,omitempty"`
	IM      string `json:"im,omitempty"`
}

// WebhookFacts are the message's facts in a webhook payload (times RFC 3339
// in UTC, amounts as decimal strings).
type WebhookFacts struct {
	Project    string          `json:"project"`
	User       string          `json:"user,omitempty"`
	Node       string          `json:"node,omitempty"`
	GPUUUID    string          `json:"gpu_uuid,omitempty"`
	GPUModel   string          `json:"gpu_model,omitempty"`
	Profile    string          `json:"profile,omitempty"`
	InstanceID string          `json:"instance_id,omitempty"`
	HeldSince  string          `json:"held_since,omitempty"`
	IdleSince  string          `json:"idle_since,omitempty"`
	At         string          `json:"at,omitempty"`
	NextAction string          `json:"next_action,omitempty"`
	NextAt     string          `json:"next_at,omitempty"`
	Cost       string          `json:"cost"`
	Currency   string          `json:"currency,omitempty"`
	Timezone   string          `json:"timezone"`
	Budget     *WebhookBudget  `json:"budget,omitempty"`
	Outcome    string          `json:"outcome,omitempty"`
	Request    *WebhookRequest `json:"request,omitempty"`
	Link       string          `json:"link,omitempty"`
}

// WebhookRequest is an exemption request message's request.
type WebhookRequest struct {
	ID          int64  `json:"id"`
	Status      string `json:"status"`
	Until       string `json:"until"`
	Reason      string `json:"reason"`
	DecidedBy   string `json:"decided_by,omitempty"`
	Answer      string `json:"answer,omitempty"`
	ExemptionID int64  `json:"exemption_id,omitempty"`
}

// WebhookBudget are a budget message's budget facts.
type WebhookBudget struct {
	Scope     billing.BudgetScope `json:"scope"`
	Period    string              `json:"period"`
	Unit      billing.BudgetUnit  `json:"unit"`
	Limit     string              `json:"limit"`
	Used      string              `json:"used"`
	Percent   int                 `json:"percent"`      // the threshold crossed
	UsedShare string              `json:"used_percent"` // Used / Limit × 100, one decimal
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// NewWebhookPayload is the body the generic webhook posts for e.
func NewWebhookPayload(e alert.Envelope, sent time.Time) WebhookPayload {
	f := e.Message.Facts
	tz := "UTC"
	if f.TZ != nil {
		tz = f.TZ.String()
	}
	p := WebhookPayload{
		Key: e.Message.Key, Kind: e.Message.Kind, Channel: e.Channel, Lang: e.Lang,
		To:      WebhookPerson{Role: e.To.Role, Project: e.To.Project, User: e.To.User, Name: e.To.Name, Email: e.To.Email, IM: e.To.IM},
		Subject: e.Subject, Body: e.Body, Sent: rfc3339(sent), Deliver: e.DeliveryKey(),
		Facts: WebhookFacts{
			Project: f.Project, User: f.User, Node: f.Node, GPUUUID: f.GPUUUID, GPUModel: f.GPUModel,
			Profile: f.Profile, InstanceID: f.InstanceID, HeldSince: rfc3339(f.HeldSince),
			IdleSince: rfc3339(f.IdleSince), At: rfc3339(f.At), NextAction: f.NextAction,
			NextAt: rfc3339(f.NextAt), Cost: billing.FormatMoney(f.Cost.Decimal), Currency: f.Currency, Timezone: tz,
			Outcome: f.Outcome, Link: f.Link,
		},
	}
	if q := f.Request; q != nil {
		p.Facts.Request = &WebhookRequest{ID: q.ID, Status: q.Status, Until: rfc3339(q.Until), Reason: q.Reason,
			DecidedBy: q.DecidedBy, Answer: q.Answer, ExemptionID: q.ExemptionID}
	}
	if b := f.Budget; b != nil {
		p.Facts.Budget = &WebhookBudget{Scope: b.Scope, Period: b.Period, Unit: b.Unit, Limit: b.Unit.Format(b.Limit),
			Used: b.Unit.Format(b.Used), Percent: b.Percent, UsedShare: share(b)}
	}
	return p
}

// WebhookSignature is the generic webhook's X-Cardhour-Signature: hex
// HMAC-SHA256, keyed by the channel's secret, over timestamp + "." + body,
// where timestamp is the X-Cardhour-Timestamp header (Unix seconds).
func WebhookSignature(secret, timestamp string, body []byte) string {
	msg := make([]byte, 0, len(timestamp)+1+len(body))
	msg = append(msg, timestamp...)
	msg = append(msg, '.')
	msg = append(msg, body...)
	return hex.EncodeToString(hmacSHA256([]byte(secret), msg))
}

type webhookSender struct{ httpChannel }

func (s *webhookSender) Send(ctx context.Context, e alert.Envelope) error {
	now := s.now()
	body, err := json.Marshal(NewWebhookPayload(e, now))
	if err != nil {
		return &SendError{Channel: s.ch.Name, Msg: "encoding the payload", Err: err, permanent: true}
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set("X-Cardhour-Timestamp", ts)
	h.Set("X-Cardhour-Signature", WebhookSignature(s.ch.Secret, ts, body))
	h.Set("Idempotency-Key", e.DeliveryKey())
	_, err = s.post(ctx, s.ch.URL, body, h)
	return err
}

// ---------------------------------------------------------------- DingTalk

// DingTalkSign is a DingTalk custom robot's signature: base64 of
// HMAC-SHA256, keyed by the secret, over timestamp (ms) + "\n" + secret;
// sent URL-encoded as &timestamp=…&sign=….
func DingTalkSign(secret string, timestampMS int64) string {
	msg := strconv.FormatInt(timestampMS, 10) + "\n" + secret
	return base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), []byte(msg)))
}

var mobile = regexp.MustCompile(`^\+?[0-9][0-9-]{5,19}$`)

type dingTalkSender struct{ httpChannel }

type dingTalkAt struct {
	AtMobiles []string `json:"atMobiles,omitempty"`
	AtUserIDs []string `json:"atUserIds,omitempty"`
	IsAtAll   bool     `json:"isAtAll"`
}

type dingTalkText struct {
	Content string `json:"content"`
}

type dingTalkMarkdown struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

type dingTalkMessage struct {
	MsgType  string            `json:"msgtype"`
	Text     *dingTalkText     `json:"text,omitempty"`
	Markdown *dingTalkMarkdown `json:"markdown,omitempty"`
	At       dingTalkAt        `json:"at"`
}

// vendorReply is DingTalk's and WeCom's {"errcode":0,"errmsg":"ok"} and
// Feishu's {"code":0,"msg":"success"} (older Feishu robots:
// {"StatusCode":0,"StatusMessage":"success"}).
type vendorReply struct {
	ErrCode       *int64 `json:"errcode"`
	ErrMsg        string `json:"errmsg"`
	Code          *int64 `json:"code"`
	Msg           string `json:"msg"`
	StatusCode    *int64 `json:"StatusCode"`
	StatusMessage string `json:"StatusMessage"`
}

// postJSON sends msg as JSON to the channel's URL and reads the vendor's
// reply code (see checkCode), for the IM channels that answer with one.
func (h *httpChannel) postJSON(ctx context.Context, msg any, retryable ...int64) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return &SendError{Channel: h.ch.Name, Msg: "encoding the message", Err: err, permanent: true}
	}
	reply, err := h.post(ctx, h.ch.URL, body, nil)
	if err != nil {
		return err
	}
	return checkCode(h.ch.Name, reply, retryable...)
}

// checkCode reads a vendor's JSON reply: code 0 is success; codes in
// retryable are rate limits or busy servers; any other code is permanent.
func checkCode(channel string, reply []byte, retryable ...int64) error {
	var r vendorReply
	if err := json.Unmarshal(reply, &r); err != nil {
		return &SendError{Channel: channel, Msg: "reply is not the expected JSON: " + snippet(reply)}
	}
	var code int64
	var msg string
	switch {
	case r.ErrCode != nil:
		code, msg = *r.ErrCode, r.ErrMsg
	case r.Code != nil:
		code, msg = *r.Code, r.Msg
	case r.StatusCode != nil:
		code, msg = *r.StatusCode, r.StatusMessage
	default:
		return &SendError{Channel: channel, Msg: "reply has no error code: " + snippet(reply)}
	}
	if code == 0 {
		return nil
	}
	perm := true
	for _, c := range retryable {
		if code == c {
			perm = false
		}
	}
	return &SendError{Channel: channel, Code: strconv.FormatInt(code, 10), Msg: msg, permanent: perm}
}

func (s *dingTalkSender) Send(ctx context.Context, e alert.Envelope) error {
	var at dingTalkAt
	mention := ""
	if id := IMFor(e.To.IM, TypeDingTalk); id != "" {
		if mobile.MatchString(id) {
			at.AtMobiles = []string{id}
		} else {
			at.AtUserIDs = []string{id}
		}
		// DingTalk shows the mention where "@id" appears in the text.
		mention = "@" + id + " "
	}
	msg := dingTalkMessage{MsgType: s.ch.MsgType, At: at}
	if s.ch.MsgType == "markdown" {
		msg.Markdown = &dingTalkMarkdown{Title: e.Subject, Text: "#### " + e.Subject + "\n\n" + mention + markdownLines(e.Body)}
	} else {
		msg.MsgType = "text"
		msg.Text = &dingTalkText{Content: mention + e.Subject + "\n\n" + e.Body}
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return &SendError{Channel: s.ch.Name, Msg: "encoding the message", Err: err, permanent: true}
	}
	target := s.ch.URL
	if s.ch.Secret != "" {
		u, err := url.Parse(s.ch.URL)
		if err != nil {
			return &SendError{Channel: s.ch.Name, Msg: "bad URL", permanent: true}
		}
		ts := s.now().UnixMilli()
		q := u.Query()
		q.Set("timestamp", strconv.FormatInt(ts, 10))
		q.Set("sign", DingTalkSign(s.ch.Secret, ts))
		u.RawQuery = q.Encode()
		target = u.String()
	}
	reply, err := s.post(ctx, target, body, nil)
	if err != nil {
		return err
	}
	// 130101: sending too fast (20 messages a minute per robot).
	return checkCode(s.ch.Name, reply, 130101)
}

// markdownLines keeps a plain text's line breaks in Markdown (a blank line
// between lines).
func markdownLines(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\n")
}

// ---------------------------------------------------------------- Feishu / Lark

// FeishuSign is a Feishu/Lark custom bot's signature: base64 of HMAC-SHA256
// keyed by timestamp (s) + "\n" + secret over an empty message.
func FeishuSign(secret string, timestamp int64) string {
	key := strconv.FormatInt(timestamp, 10) + "\n" + secret
	return base64.StdEncoding.EncodeToString(hmacSHA256([]byte(key), nil))
}

type feishuSender struct{ httpChannel }

type feishuMessage struct {
	Timestamp string        `json:"timestamp,omitempty"`
	Sign      string        `json:"sign,omitempty"`
	MsgType   string        `json:"msg_type"`
	Content   feishuContent `json:"content"`
}

type feishuContent struct {
	Text string `json:"text"`
}

func (s *feishuSender) Send(ctx context.Context, e alert.Envelope) error {
	text := e.Subject + "\n\n" + e.Body
	if id := IMFor(e.To.IM, TypeFeishu); id != "" {
		name := e.To.Name
		if name == "" {
			name = e.To.User
		}
		text = `<at user_id="` + htmlEscape(id) + `">` + htmlEscape(name) + "</at> " + text
	}
	msg := feishuMessage{MsgType: "text", Content: feishuContent{Text: text}}
	if s.ch.Secret != "" {
		ts := s.now().Unix()
		msg.Timestamp = strconv.FormatInt(ts, 10)
		msg.Sign = FeishuSign(s.ch.Secret, ts)
	}
	// 11232: frequency limited; 9499 is a bad request (permanent).
	return s.postJSON(ctx, msg, 11232)
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// ---------------------------------------------------------------- WeCom

type weComSender struct{ httpChannel }

type weComText struct {
	Content             string   `json:"content"`
	MentionedList       []string `json:"mentioned_list,omitempty"`
	MentionedMobileList []string `json:"mentioned_mobile_list,omitempty"`
}

type weComMarkdown struct {
	Content string `json:"content"`
}

type weComMessage struct {
	MsgType  string         `json:"msgtype"`
	Text     *weComText     `json:"text,omitempty"`
	Markdown *weComMarkdown `json:"markdown,omitempty"`
}

// WeCom limits: text content 2048 bytes, markdown content 4096 bytes (UTF-8).
const (
	weComTextLimit     = 2048
	weComMarkdownLimit = 4096
)

func (s *weComSender) Send(ctx context.Context, e alert.Envelope) error {
	id := IMFor(e.To.IM, TypeWeCom)
	var msg weComMessage
	if s.ch.MsgType == "markdown" {
		// Markdown messages mention with <@userid> in the content.
		content := "**" + e.Subject + "**\n" + e.Body
		if id != "" {
			content = "<@" + id + ">\n" + content
		}
		msg = weComMessage{MsgType: "markdown", Markdown: &weComMarkdown{Content: limitText(content, weComMarkdownLimit)}}
	} else {
		t := &weComText{Content: limitText(e.Subject+"\n\n"+e.Body, weComTextLimit)}
		if id != "" {
			if mobile.MatchString(id) {
				t.MentionedMobileList = []string{id}
			} else {
				t.MentionedList = []string{id}
			}
		}
		msg = weComMessage{MsgType: "text", Text: t}
	}
	// -1: system busy; 45009: API frequency limit.
	return s.postJSON(ctx, msg, -1, 45009)
}

// ---------------------------------------------------------------- Slack

type slackSender struct{ httpChannel }

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type slackBlock struct {
	Type string     `json:"type"`
	Text *slackText `json:"text,omitempty"`
}

type slackMessage struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

// Slack limits: a header's plain text 150 characters, a section's text 3000.
const (
	slackHeaderLimit  = 150
	slackSectionLimit = 3000
)

// slackEscape escapes &, < and > as Slack's text formatting requires.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func limitRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func (s *slackSender) Send(ctx context.Context, e alert.Envelope) error {
	mention := ""
	if id := IMFor(e.To.IM, TypeSlack); id != "" {
		mention = "<@" + slackEscape(id) + "> "
	}
	body := slackEscape(e.Body)
	msg := slackMessage{
		Text: mention + slackEscape(e.Subject),
		Blocks: []slackBlock{
			{Type: "header", Text: &slackText{Type: "plain_text", Text: limitRunes(e.Subject, slackHeaderLimit)}},
			{Type: "section", Text: &slackText{Type: "mrkdwn", Text: limitRunes(mention+"\n"+body, slackSectionLimit)}},
		},
	}
	if mention == "" {
		msg.Blocks[1].Text.Text = limitRunes(body, slackSectionLimit)
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return &SendError{Channel: s.ch.Name, Msg: "encoding the message", Err: err, permanent: true}
	}
	// Slack answers 200 "ok", or an error status with a text such as
	// invalid_payload (400), channel_not_found (404), rate limiting (429).
	_, err = s.post(ctx, s.ch.URL, b, nil)
	return err
}
