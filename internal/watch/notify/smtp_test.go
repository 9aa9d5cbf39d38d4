package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/internal/watch/alert"
)

func TestBuildEmail(t *testing.T) {
	e := testEnvelope(t, "mail", alice)
	from, err := mail.ParseAddress("cardhour <cardhour@gpu.example.edu>")
	require.NoError(t, err)
	date := time.Date(2026, 11, 30, 8, 40, 0, 0, shanghai(t))
	raw := BuildEmail(e, from, date)
	require.NotContains(t, strings.ReplaceAll(string(raw), "\r\n", ""), "\n", "every line ends in CRLF")

	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Equal(t, `"cardhour" <cardhour@gpu.example.edu>`, msg.Header.Get("From"))
	require.Equal(t, `"Alice Zhang" <alice@example.edu>`, msg.Header.Get("To"))
	require.Equal(t, "Mon, 30 Nov 2026 08:40:00 +0800", msg.Header.Get("Date"))
	require.Equal(t, "text/plain; charset=UTF-8", msg.Header.Get("Content-Type"))
	require.Equal(t, "quoted-printable", msg.Header.Get("Content-Transfer-Encoding"))
	require.Equal(t, "zh-CN", msg.Header.Get("Content-Language"))
	require.Equal(t, "auto-generated", msg.Header.Get("Auto-Submitted"))
	// The Message-ID comes from the delivery key: the same envelope, the same id.
	id := msg.Header.Get("Message-ID")
	require.Regexp(t, `^<cardhour\.[0-9a-f]{32}@gpu\.example\.edu>$`, id)
	require.Equal(t, id, MessageID(e, from))
	other := e
	other.To = alert.Person{Role: alert.RoleLead, Project: "nlp-lab", User: "prof", Email: "prof@example.edu"}
	require.NotEqual(t, id, MessageID(other, from))

	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	require.NoError(t, err)
	require.Equal(t, e.Subject, subject)
	require.True(t, strings.HasPrefix(msg.Header.Get("Subject"), "=?UTF-8?q?"), "non-ASCII subject is encoded")
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	require.NoError(t, err)
	require.Equal(t, strings.ReplaceAll(e.Body, "\n", "\r\n"), string(body))
}

func TestSMTPNoRecipient(t *testing.T) {
	s := sender(t, Channel{Name: "mail", Type: TypeSMTP, Addr: "127.0.0.1:1", From: "a@b.c"})
	e := testEnvelope(t, "mail", alert.Person{Role: alert.RoleAdmin, User: "root"})
	err := s.Send(context.Background(), e)
	require.ErrorIs(t, err, ErrConfig)
	require.True(t, Permanent(err))
}

func TestSMTPUnreachableIsRetryable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	s := sender(t, Channel{Name: "mail", Type: TypeSMTP, Addr: addr, From: "a@b.c", Timeout: 2 * time.Second})
	err = s.Send(context.Background(), testEnvelope(t, "mail", alice))
	require.Error(t, err)
	require.False(t, Permanent(err), err.Error())
}

// A zh-CN message through a real SMTP server on loopback, read back from
// its maildir.
func TestSMTPDeliversToRealServer(t *testing.T) {
	sink := testenv.SMTP(t)
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	instance := "MIG-smtp-test-" + hex.EncodeToString(nonce[:])

	m := goldenCases(t)["idle_warning"]
	m.Key = "idle_warning|" + instance + "|1764463200000"
	m.Facts.InstanceID = instance
	cfg, err := ParseConfig([]byte(`
languages: [zh-CN]
channels:
  - name: mail
    type: smtp
    addr: ` + sink.Addr + `
    from: cardhour <cardhour@gpu.example.edu>
    username: ` + testenv.SMTPUser + `
    password_file: ` + writeFile(t, "pw", testenv.SMTPPassword+"\n") + `
`))
	require.NoError(t, err)
	envs, err := cfg.Plan(m, []alert.Person{alice})
	require.NoError(t, err)
	require.Len(t, envs, 1)
	senders, err := cfg.Senders()
	require.NoError(t, err)
	require.NoError(t, senders["mail"].Send(context.Background(), envs[0]))

	from, _ := mail.ParseAddress("cardhour@gpu.example.edu")
	wantID := MessageID(envs[0], from)
	var found *mail.Message
	for _, raw := range sink.Messages(t) {
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		if err == nil && msg.Header.Get("Message-ID") == wantID {
			found = msg
		}
	}
	require.NotNil(t, found, "message %s not in %s/new", wantID, sink.Maildir)
	require.Equal(t, "alice@example.edu", found.Header.Get("X-Sink-Rcpt-To"))
	require.Equal(t, "cardhour@gpu.example.edu", found.Header.Get("X-Sink-Mail-From"))
	subject, err := new(mime.WordDecoder).DecodeHeader(found.Header.Get("Subject"))
	require.NoError(t, err)
	require.Contains(t, subject, instance)
	require.Contains(t, subject, "空闲提醒")
	body, err := io.ReadAll(quotedprintable.NewReader(found.Body))
	require.NoError(t, err)
	require.Contains(t, string(body), instance)
	require.Contains(t, string(body), "自 2026-11-29 22:40 起一直空闲")
	require.Contains(t, string(body), "截至目前费用：¥ 1,234.50")
	require.Contains(t, string(body), "将于 2026-11-30 22:40 自动释放")
}

func TestSMTPRealServerRefusals(t *testing.T) {
	sink := testenv.SMTP(t)
	e := testEnvelope(t, "mail", alice)

	// Wrong password: 535, permanent.
	s := sender(t, Channel{Name: "mail", Type: TypeSMTP, Addr: sink.Addr, From: "cardhour@gpu.example.edu",
		Username: testenv.SMTPUser, Password: "wrong"})
	err := s.Send(context.Background(), e)
	require.Error(t, err)
	require.True(t, Permanent(err), err.Error())
	require.Contains(t, err.Error(), "535")

	// STARTTLS required but not offered by the sink: permanent.
	s = sender(t, Channel{Name: "mail", Type: TypeSMTP, Addr: sink.Addr, From: "cardhour@gpu.example.edu", StartTLS: true})
	err = s.Send(context.Background(), e)
	require.ErrorContains(t, err, "does not offer STARTTLS")
	require.True(t, Permanent(err))
}
