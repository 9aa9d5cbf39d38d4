package ledger

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCursorRoundTripAndRejects(t *testing.T) {
	for _, id := range []int64{1, 42, 1 << 62} {
		got, err := DecodeCursor(EncodeCursor(id))
		if err != nil || got != id {
			t.Fatalf("DecodeCursor(EncodeCursor(%d)) = %d, %v", id, got, err)
		}
	}
	if got, err := DecodeCursor(""); err != nil || got != 0 {
		t.Fatalf(`DecodeCursor("") = %d, %v`, got, err)
	}
	for _, c := range []string{"%%", "MTI", "djE6", "djE6MA", "djE6LTE", "djI6MTI"} { // garbage, "12", "v1:", "v1:0", "v1:-1", "v2:12"
		if _, err := DecodeCursor(c); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("DecodeCursor(%q): %v, want ErrInvalidArgument", c, err)
		}
	}
}

func TestNumbers(t *testing.T) {
	if got := InvoiceNumber(2026, 7); got != "2026-000007" {
		t.Errorf("InvoiceNumber = %q", got)
	}
	if got := InvoiceNumber(2026, 1234567); got != "2026-1234567" {
		t.Errorf("InvoiceNumber past six digits = %q (must stay unique, not wrap)", got)
	}
	if got := CreditNoteNumber("2026-000007", 2); got != "2026-000007-CN2" {
		t.Errorf("CreditNoteNumber = %q", got)
	}
}

func TestTokenSecretAndHash(t *testing.T) {
	a, err := NewTokenSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewTokenSecret()
	if a == b || !strings.HasPrefix(a, TokenPrefix) || len(a) != len(TokenPrefix)+43 {
		t.Fatalf("secrets %q, %q", a, b)
	}
	if h := HashToken(a); len(h) != 32 || string(h) == string(HashToken(b)) {
		t.Fatal("HashToken is not a SHA-256 per secret")
	}
}

func TestCheckDraftNamesEveryProblem(t *testing.T) {
	err := CheckDraft(&Draft{Period: "2026-1", Document: []byte("{")})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("error %v", err)
	}
	for _, want := range []string{"project is required", `period "2026-1"`, "not valid JSON", "catalog version 0", "cut-off is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %q missing", err, want)
		}
	}
	if err := CheckDraft(&Draft{Project: "p", Period: "2026-12", Document: []byte(`{}`), CatalogVersion: 1, DataCutoff: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

func TestPageLimit(t *testing.T) {
	for in, want := range map[int]int{0: DefaultLimit, 1: 1, MaxLimit: MaxLimit, MaxLimit + 1: MaxLimit} {
		if got, err := PageLimit(in); err != nil || got != want {
			t.Errorf("PageLimit(%d) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := PageLimit(-1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("PageLimit(-1): %v", err)
	}
}
