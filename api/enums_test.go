package api

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/reads"
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

// A billing run's draft outcomes in the document are invoicing's one list.
func TestRunOutcomeEnumIsInvoicingsList(t *testing.T) {
	names := make([]string, len(invoicing.Outcomes))
	for i, o := range invoicing.Outcomes {
		names[i] = string(o)
	}
	f, ok := reflect.TypeFor[invoicing.RunDraft]().FieldByName("Outcome")
	if !ok {
		t.Fatal("invoicing.RunDraft has no Outcome")
	}
	if got, want := f.Tag.Get("enum"), strings.Join(names, ","); got != want {
		t.Errorf("RunDraft.Outcome enum %q, want invoicing.Outcomes %q", got, want)
	}
}

// The usage report's group_by values in the document are the dimensions
// the usage reads group by.
func TestUsageGroupByEnumIsTheReadsDimensions(t *testing.T) {
	f, ok := reflect.TypeFor[usageInput]().FieldByName("GroupBy")
	if !ok {
		t.Fatal("usageInput has no GroupBy")
	}
	if got, want := f.Tag.Get("enum"), strings.Join(reads.UsageDimensions, ","); got != want {
		t.Errorf("usage group_by enum %q, want reads.UsageDimensions %q", got, want)
	}
}
