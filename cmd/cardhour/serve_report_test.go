//go:build !collector

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/reads"
)

// jsonNames are the JSON member names of struct type t's exported fields.
func jsonNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// requireEveryField checks that the JSON object v has exactly the members
// of struct type t, and so on down every field whose type is a struct of
// internal/invoicing (Money is a string).
func requireEveryField(t *testing.T, typ reflect.Type, v any, path string) {
	obj, ok := v.(map[string]any)
	require.True(t, ok, "%s: %T, want an object", path, v)
	var got []string
	for k := range obj {
		got = append(got, k)
	}
	slices.Sort(got)
	require.Equal(t, jsonNames(typ), got, "%s: the members of %s", path, typ)
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() != reflect.Struct || ft.PkgPath() != typ.PkgPath() || ft == reflect.TypeFor[billing.Money]() {
			continue
		}
		switch x := obj[name].(type) {
		case []any:
			require.NotEmpty(t, x, "%s.%s: the test needs one", path, name)
			for i, e := range x {
				requireEveryField(t, ft, e, fmt.Sprintf("%s.%s[%d]", path, name, i))
			}
		default:
			requireEveryField(t, ft, x, path+"."+name)
		}
	}
}

// The API serves the invoice flow's report as it is: the body is the
// report the flow stored in the ledger, in the report's own JSON (no copy
// in between that could drop or rename a field); it has a member for every
// field of the report and of its drafts, kept invoices, unpriced usage,
// differences and data quality, and reads back into the report unchanged.
func TestTheServedRunReportIsTheFlowsReport(t *testing.T) {
	s := startStack(t, exampleSamples, afterNovember, nil)
	ctx := context.Background()
	var first invoicing.RunReport
	s.must(t, http.MethodPost, "/api/v1/billing-runs", `{"period":"2026-11"}`, &first)
	d := first.Drafts[0]
	s.must(t, http.MethodPost, fmt.Sprintf("/api/v1/invoices/%d/finalize", d.InvoiceID), fmt.Sprintf(`{"if_sha256":%q}`, d.SHA256), nil)
	b, err := os.ReadFile(exampleCatalog)
	require.NoError(t, err)
	changed := bytes.Replace(b, []byte(`hourly_price: "1.80"`), []byte(`hourly_price: "1.95"`), 1)
	_, _, err = s.led.PutCatalog(ctx, "cli:test", changed)
	require.NoError(t, err)
	body := s.must(t, http.MethodPost, "/api/v1/billing-runs", `{"period":"2026-11"}`, nil)

	readBack := func(b []byte) *invoicing.RunReport {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var r invoicing.RunReport
		require.NoError(t, dec.Decode(&r), "%s", b)
		return &r
	}
	served := readBack(body)
	rec, err := s.led.BillingRun(ctx, served.ID)
	require.NoError(t, err)
	stored := readBack(rec.Report)
	stored.ID = rec.ID // the ledger numbers the run after storing its report
	want, err := reads.MarshalNoEscape(stored)
	require.NoError(t, err)
	require.Equal(t, string(want), strings.TrimSuffix(string(body), "\n"), "the body is the report the flow made")

	var v any
	require.NoError(t, json.Unmarshal(body, &v))
	requireEveryField(t, reflect.TypeFor[invoicing.RunReport](), v, "report")
	var names []string
	for k := range v.(map[string]any)["data_quality"].(map[string]any) {
		names = append(names, k)
	}
	slices.Sort(names)
	require.Equal(t, jsonNames(reflect.TypeFor[reads.DataQuality]()), names, "the data-quality report's members")
}
