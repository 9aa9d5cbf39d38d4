package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

const (
	// EnvSMTP names the variable holding the test SMTP server's host:port.
	EnvSMTP = "SMTP_ADDR"
	// EnvSMTPMaildir names the variable holding the directory where the
	// test SMTP server writes what it receives (a maildir: new/ holds one
	// file per message, byte for byte as received after DATA).
	EnvSMTPMaildir = "SMTP_MAILDIR"

	defaultSMTPPort = "25"
)

// SMTP credentials the test SMTP sink accepts (AUTH is optional there).
const (
	SMTPUser     = "cardhour"
	SMTPPassword = "cardhour-smtp-test"
)

// SMTPSink is the test SMTP server: where to send and where to read back.
type SMTPSink struct {
	Addr    string // host:port
	Maildir string // messages arrive in Maildir/new
}

// SMTP returns the test SMTP sink, or skips (fails under CI=true) the test
// when there is none: SMTP_ADDR unset or not accepting TCP connections, or
// SMTP_MAILDIR not a directory with a new/ subdirectory.
func SMTP(t testing.TB) SMTPSink {
	t.Helper()
	addr := lookup(t, service{name: "SMTP sink", env: EnvSMTP, defaultPort: defaultSMTPPort})[0]
	dir := os.Getenv(EnvSMTPMaildir)
	var why string
	if dir == "" {
		why = EnvSMTPMaildir + " is not set"
	} else if st, err := os.Stat(filepath.Join(dir, "new")); err != nil || !st.IsDir() {
		why = fmt.Sprintf("%s=%q has no new/ directory", EnvSMTPMaildir, dir)
	}
	if why != "" {
		if isCI(os.Getenv("CI")) {
			t.Fatalf("FAILED integration test: SMTP sink not available under CI=true: %s. "+
				"CI must start the test services (deployments/testenv/with-services.sh or `make services-up`).", why)
		}
		t.Skipf("SKIPPED integration test: SMTP sink not available (%s); "+
			"run `make services-up` (deployments/testenv/services.sh up) and export its output, "+
			"or use deployments/testenv/with-services.sh.", why)
	}
	return SMTPSink{Addr: addr, Maildir: dir}
}

// Messages returns the raw messages in the sink's maildir (new/), oldest first.
func (s SMTPSink) Messages(t testing.TB) [][]byte {
	t.Helper()
	dir := filepath.Join(s.Maildir, "new")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("testenv: reading %s: %v", dir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names) // the sink names files by arrival time (ns) first
	out := make([][]byte, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatalf("testenv: reading %s: %v", n, err)
		}
		out = append(out, b)
	}
	return out
}
