package notify

import (
	"context"
	"maps"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/stretchr/testify/require"
)

// deliveredChannels are the channels a delivered golden goes through: every
// type, both message types of the robots that have two.
var deliveredChannels = []Channel{
	{Name: "hook", Type: TypeWebhook, URL: "/hook", Secret: "whsec-test"},
	{Name: "ding-text", Type: TypeDingTalk, URL: "/robot/send?access_token=tok", Secret: "SECabc", MsgType: "text"},
	{Name: "ding-markdown", Type: TypeDingTalk, URL: "/robot/send?access_token=tok", MsgType: "markdown"},
	{Name: "feishu", Type: TypeFeishu, URL: "/open-apis/bot/v2/hook/abc", Secret: "fs-secret"},
	{Name: "wecom-text", Type: TypeWeCom, URL: "/cgi-bin/webhook/send?key=k", MsgType: "text"},
	{Name: "wecom-markdown", Type: TypeWeCom, URL: "/cgi-bin/webhook/send?key=k", MsgType: "markdown"},
	{Name: "slack", Type: TypeSlack, URL: "/services/T000/B000/XXXX"},
}

// TestDeliveredGolden pins what every channel delivers for every golden
// message in every language, byte for byte: the HTTP request a fake vendor
// receives (its path and query, the signature and key headers, the body),
// and the email the SMTP channel writes. The clock is frozen so that the
// timestamps and signatures are the same on every run.
func TestDeliveredGolden(t *testing.T) {
	sent := time.Date(2026, 11, 30, 8, 41, 0, 0, time.UTC)
	from, err := mail.ParseAddress("cardhour <cardhour@gpu.example.edu>")
	require.NoError(t, err)
	cases := goldenCases(t)
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		m := cases[name]
		for _, lang := range Langs {
			t.Run(name+"/"+lang, func(t *testing.T) {
				subject, body, err := Render(m, lang)
				require.NoError(t, err)
				var out strings.Builder
				for _, ch := range deliveredChannels {
					v := newVendor(t, 200, `{"errcode":0,"errmsg":"ok"}`)
					ch.URL = v.srv.URL + ch.URL
					s, err := NewSender(ch)
					require.NoError(t, err)
					switch s := s.(type) {
					case *webhookSender:
						s.now = func() time.Time { return sent }
					case *dingTalkSender:
						s.now = func() time.Time { return sent }
					case *feishuSender:
						s.now = func() time.Time { return sent }
					}
					e := alert.Envelope{Channel: ch.Name, To: alice, Lang: lang, Subject: subject, Body: body, Message: m}
					require.NoError(t, s.Send(context.Background(), e))
					r := v.only(t)
					out.WriteString("== " + ch.Name + " ==\nPOST " + r.url.RequestURI() + "\n")
					for _, h := range []string{"Idempotency-Key", "X-Cardhour-Timestamp", "X-Cardhour-Signature"} {
						if val := r.header.Get(h); val != "" {
							out.WriteString(h + ": " + val + "\n")
						}
					}
					out.WriteString("\n" + string(r.body) + "\n\n")
				}
				e := alert.Envelope{Channel: "mail", To: alice, Lang: lang, Subject: subject, Body: body, Message: m}
				out.WriteString("== mail ==\n" + string(BuildEmail(e, from, sent)))
				got := out.String()
				path := filepath.Join("testdata", "golden", "delivered", name+"."+lang+".txt")
				if *update {
					require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
					require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
				}
				want, err := os.ReadFile(path)
				require.NoError(t, err, "golden file missing: run go test -run TestDeliveredGolden -update")
				require.Equal(t, string(want), got)
			})
		}
	}
}
