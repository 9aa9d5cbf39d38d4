package ledgerdsn_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
	"github.com/cardhour/cardhour/internal/testenv"
)

var clock = func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }

func TestOpenSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := ledgerdsn.Open(context.Background(), "sqlite://"+path, ledgerdsn.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() //nolint:errcheck // test
	if _, _, err := s.PutCatalog(context.Background(), "cli", []byte("x")); err != nil {
		t.Fatal(err)
	}
}

func TestOpenPostgres(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	s, err := ledgerdsn.Open(context.Background(), dsn, ledgerdsn.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() //nolint:errcheck // test
	if _, _, err := s.PutCatalog(context.Background(), "cli", []byte("x")); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRejects(t *testing.T) {
	for dsn, want := range map[string]string{
		"":                         `unknown scheme ""`,
		"/tmp/x.db":                `unknown scheme ""`,
		"clickhouse://h:9000/db":   `unknown scheme "clickhouse"`,
		"sqlite://":                "want sqlite:///path/to/file.db",
		"sqlite:///x.db?mode=ro":   "takes no parameters",
		"postgres:///db":           "want postgres://user@host:port/database",
		"postgres://h:bad port/db": "invalid port",
	} {
		_, err := ledgerdsn.Open(context.Background(), dsn, ledgerdsn.Options{Clock: clock})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", dsn, err, want)
		}
	}
	if _, err := ledgerdsn.Open(context.Background(), "sqlite:///x.db", ledgerdsn.Options{}); err == nil || !strings.Contains(err.Error(), "clock") {
		t.Errorf("Open without a clock: %v", err)
	}
}
