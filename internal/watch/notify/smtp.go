package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"

	"github.com/cardhour/cardhour/internal/watch/alert"
)

type smtpSender struct {
	ch  Channel
	now func() time.Time
}

// Send delivers e by SMTP to e.To.Email: one connection, STARTTLS when the
// channel asks for it, AUTH PLAIN when it has a username, one message.
// Replies 5xx are permanent; 4xx, network errors and timeouts are retryable.
func (s *smtpSender) Send(ctx context.Context, e alert.Envelope) error {
	from, to, err := s.addresses(e)
	if err != nil {
		return err
	}
	msg := BuildEmail(e, from, s.now())

	timeout := s.ch.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.ch.Addr)
	if err != nil {
		return s.fail("connect", err)
	}
	defer conn.Close() //nolint:errcheck // closed by Quit on success
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	host, _, _ := net.SplitHostPort(s.ch.Addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return s.fail("greeting", err)
	}
	if err := s.secure(c, host); err != nil {
		return err
	}
	return s.transmit(c, from, to, msg)
}

// addresses are the sender's and the recipient's; a bad one is permanent.
func (s *smtpSender) addresses(e alert.Envelope) (from, to *mail.Address, _ error) {
	if e.To.Email == "" {
		return nil, nil, &SendError{Channel: s.ch.Name, Msg: "recipient has no email address", Err: ErrConfig, permanent: true}
	}
	to, err := mail.ParseAddress(e.To.Email)
	if err != nil {
		return nil, nil, &SendError{Channel: s.ch.Name, Msg: "recipient address", Err: err, permanent: true}
	}
	to.Name = e.To.Name
	from, err = mail.ParseAddress(s.ch.From)
	if err != nil {
		return nil, nil, &SendError{Channel: s.ch.Name, Msg: "sender address", Err: fmt.Errorf("%w: %w", ErrConfig, err), permanent: true}
	}
	return from, to, nil
}

// secure issues STARTTLS and AUTH PLAIN when the channel asks for them.
func (s *smtpSender) secure(c *smtp.Client, host string) error {
	if s.ch.StartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return &SendError{Channel: s.ch.Name, Msg: "the server does not offer STARTTLS (starttls: true)", permanent: true}
		}
		if err := c.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return s.fail("starttls", err)
		}
	}
	if s.ch.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.ch.Username, s.ch.Password, host)); err != nil {
			return s.fail("auth", err)
		}
	}
	return nil
}

// transmit sends the one message and says goodbye.
func (s *smtpSender) transmit(c *smtp.Client, from, to *mail.Address, msg []byte) error {
	if err := c.Mail(from.Address); err != nil {
		return s.fail("MAIL FROM", err)
	}
	if err := c.Rcpt(to.Address); err != nil {
		return s.fail("RCPT TO", err)
	}
	w, err := c.Data()
	if err != nil {
		return s.fail("DATA", err)
	}
	if _, err := w.Write(msg); err != nil {
		return s.fail("DATA", err)
	}
	if err := w.Close(); err != nil {
		return s.fail("DATA", err)
	}
	// The message was accepted (250 after DATA); a failed goodbye is no failure.
	_ = c.Quit()
	return nil
}

// fail is the SendError of a failed stage: a 5xx reply is permanent, a 4xx,
// a network error or a timeout retryable.
func (s *smtpSender) fail(stage string, err error) error {
	se := &SendError{Channel: s.ch.Name, Msg: stage, Err: err}
	var tp *textproto.Error
	var ne net.Error
	switch {
	case errors.As(err, &tp):
		se.Status = tp.Code
		se.permanent = tp.Code >= 500
	case errors.As(err, &ne), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
	case stage == "auth" || stage == "starttls":
		// net/smtp's own refusals (no TLS for PLAIN, no AUTH offered), TLS
		// handshake failures: the configuration must change.
		se.permanent = true
	}
	return se
}

// MessageID is the Message-ID of an envelope's email: derived from its
// DeliveryKey, so a retried delivery has the same one.
func MessageID(e alert.Envelope, from *mail.Address) string {
	domain := "cardhour.invalid"
	if at := strings.LastIndexByte(from.Address, '@'); at >= 0 && at+1 < len(from.Address) {
		domain = from.Address[at+1:]
	}
	return "<cardhour." + deliveryHash(e) + "@" + domain + ">"
}

// BuildEmail writes e as an RFC 5322 message: text/plain in UTF-8,
// quoted-printable, the subject as an RFC 2047 encoded word, CRLF line ends.
func BuildEmail(e alert.Envelope, from *mail.Address, date time.Time) []byte {
	var b bytes.Buffer
	to := &mail.Address{Name: e.To.Name, Address: e.To.Email}
	h := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	h("From", from.String())
	h("To", to.String())
	h("Subject", mime.QEncoding.Encode("UTF-8", e.Subject))
	h("Date", date.Format(time.RFC1123Z))
	h("Message-ID", MessageID(e, from))
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=UTF-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	if l, ok := NormalizeLang(e.Lang); ok {
		h("Content-Language", l)
	}
	h("Auto-Submitted", "auto-generated")
	if e.Message.Kind.Valid() {
		h("X-Cardhour-Kind", string(e.Message.Kind))
	}
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(e.Body))
	_ = qp.Close()
	return b.Bytes()
}
