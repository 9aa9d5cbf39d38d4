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

// enumOf is the enum tag a document's field is generated from: values, in
// order, comma-separated.
func enumOf[T ~string](values []T) string {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = string(v)
	}
	return strings.Join(names, ",")
}

// A budget's scope, period kind, unit and action in the document are
// billing's one lists, in their order, for a budget served, set and
// filtered.
func TestBudgetEnumsAreTheLists(t *testing.T) {
	body, ok := reflect.TypeFor[budgetInput]().FieldByName("Body")
	if !ok {
		t.Fatal("budgetInput has no Body")
	}
	want := map[string]string{"Scope": enumOf(billing.BudgetScopes), "Unit": enumOf(billing.BudgetUnits),
		"Period": enumOf(billing.BudgetPeriodKinds), "Action": enumOf(billing.BudgetActions)}
	for _, c := range []struct {
		name   string
		typ    reflect.Type
		fields []string
	}{
		{"BudgetBody", reflect.TypeFor[BudgetBody](), []string{"Scope", "Unit", "Period", "Action"}},
		{"budgetInput.Body", body.Type, []string{"Scope", "Unit", "Period", "Action"}},
		{"budgetListInput", reflect.TypeFor[budgetListInput](), []string{"Scope"}},
	} {
		for _, name := range c.fields {
			f, ok := c.typ.FieldByName(name)
			if !ok {
				t.Fatalf("%s has no %s", c.name, name)
			}
			if got := f.Tag.Get("enum"); got != want[name] {
				t.Errorf("%s.%s enum %q, want %q", c.name, name, got, want[name])
			}
		}
	}
}

// The usage report's order_by values in the document are the measures the
// usage reads order by.
func TestUsageOrderByEnumIsTheReadsOrders(t *testing.T) {
	f, ok := reflect.TypeFor[usageInput]().FieldByName("OrderBy")
	if !ok {
		t.Fatal("usageInput has no OrderBy")
	}
	if got, want := f.Tag.Get("enum"), strings.Join(reads.UsageOrders, ","); got != want {
		t.Errorf("usage order_by enum %q, want reads.UsageOrders %q", got, want)
	}
}
