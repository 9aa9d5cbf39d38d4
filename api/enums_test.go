package api

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cardhour/cardhour/billing"
)

// The document's alert kinds are billing's one list, in its order.
func TestAlertKindEnumsAreBillingsList(t *testing.T) {
	names := make([]string, len(billing.AlertKinds))
	for i, k := range billing.AlertKinds {
		names[i] = string(k)
	}
	want := strings.Join(names, ",")
	for _, typ := range []reflect.Type{reflect.TypeFor[AlertBody](), reflect.TypeFor[alertListInput]()} {
		f, ok := typ.FieldByName("Kind")
		if !ok {
			t.Fatalf("%s has no Kind", typ)
		}
		if got := f.Tag.Get("enum"); got != want {
			t.Errorf("%s.Kind enum %q, want billing.AlertKinds %q", typ, got, want)
		}
	}
}

// The document's release statuses are billing's one list, in its order.
func TestReleaseStatusEnumsAreBillingsList(t *testing.T) {
	names := make([]string, len(billing.ReleaseStatuses))
	for i, s := range billing.ReleaseStatuses {
		names[i] = string(s)
	}
	want := strings.Join(names, ",")
	for _, typ := range []reflect.Type{reflect.TypeFor[ReleaseBody](), reflect.TypeFor[releaseListInput]()} {
		f, ok := typ.FieldByName("Status")
		if !ok {
			t.Fatalf("%s has no Status", typ)
		}
		if got := f.Tag.Get("enum"); got != want {
			t.Errorf("%s.Status enum %q, want billing.ReleaseStatuses %q", typ, got, want)
		}
	}
}
