//go:build !collector

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/schemas"
)

// amountKeys are the JSON fields that hold an amount of money; priceKeys
// those that hold a catalog price (at least the minor digits: a price keeps
// the catalog's further digits).
var (
	amountKeys = map[string]bool{"total": true, "amount": true, "cost": true, "old_total": true, "new_total": true,
		"delta": true, "old": true, "new": true, "used_money": true}
	priceKeys = map[string]bool{"unit_price": true, "monthly_price": true}
)

// checkAmounts walks a JSON value and returns every amount-like field that
// does not have exactly digits decimals (a price: at least digits), by
// path; n counts the amounts seen. A budget's limit and use are money when
// its unit is.
func checkAmounts(v any, path string, digits int, n *int) []string {
	exact := regexp.MustCompile(fmt.Sprintf(`^-?[0-9]+\.[0-9]{%d}$`, digits))
	atLeast := regexp.MustCompile(fmt.Sprintf(`^-?[0-9]+\.[0-9]{%d,}$`, digits))
	var bad []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case map[string]any:
			money := x["unit"] == "money"
			for k, e := range x {
				p := path + "." + k
				s, isString := e.(string)
				_, isNumber := e.(float64)
				switch {
				case amountKeys[k] || money && (k == "limit" || k == "used"):
					if isNumber || isString {
						*n++
						if !isString || !exact.MatchString(s) {
							bad = append(bad, fmt.Sprintf("%s = %v", p, e))
						}
						continue
					}
				case priceKeys[k]:
					*n++
					if !isString || !atLeast.MatchString(s) {
						bad = append(bad, fmt.Sprintf("%s = %v", p, e))
					}
					continue
				}
				walk(e, p)
			}
		case []any:
			for i, e := range x {
				walk(e, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(v, path)
	return bad
}

// Every amount in the API's responses has the currency's minor digits: a
// billing run's report and its differences from finalized invoices, the
// invoices and their documents, statements, usage and budgets.
func TestEveryAmountHasTheCurrencysMinorDigits(t *testing.T) {
	s := startStack(t, exampleSamples, afterNovember, nil)
	ctx := context.Background()
	cur, err := s.led.CurrentCatalog(ctx)
	require.NoError(t, err)
	cat, err := schemas.ParseCatalog(cur.Content, "catalog")
	require.NoError(t, err)
	digits, ok := schemas.CurrencyMinorUnits(cat.Currency)
	require.True(t, ok)

	responses := map[string][]byte{}
	var run invoicing.RunReport
	responses["POST billing-runs"] = s.must(t, http.MethodPost, "/api/v1/billing-runs", `{"period":"2026-11"}`, &run)
	require.NotEmpty(t, run.Drafts)
	for _, d := range run.Drafts {
		s.must(t, http.MethodPost, fmt.Sprintf("/api/v1/invoices/%d/finalize", d.InvoiceID), fmt.Sprintf(`{"if_sha256":%q}`, d.SHA256), nil)
	}
	// A new price for the A100 slices: the next run differs from every
	// finalized invoice billing them.
	b, err := os.ReadFile(exampleCatalog)
	require.NoError(t, err)
	changed := bytes.Replace(b, []byte(`profile: 1g.10gb, hourly_price: "1.80"`), []byte(`profile: 1g.10gb, hourly_price: "1.95"`), 1)
	require.NotEqual(t, b, changed)
	_, _, err = s.led.PutCatalog(ctx, "cli:test", changed)
	require.NoError(t, err)
	var rerun invoicing.RunReport
	responses["POST billing-runs (diff)"] = s.must(t, http.MethodPost, "/api/v1/billing-runs", `{"period":"2026-11"}`, &rerun)
	require.NotEmpty(t, rerun.Diffs, "the new price makes a difference")

	s.must(t, http.MethodPut, "/api/v1/budgets", `{"scope":"project","project":"ai101","period":"month","unit":"money","limit":"880"}`, nil)
	s.must(t, http.MethodPut, "/api/v1/budgets", `{"scope":"project","project":"nlp-lab","period":"month","unit":"money","limit":"10.5"}`, nil)
	s.must(t, http.MethodPut, "/api/v1/budgets", `{"scope":"project","project":"cv-lab","period":"month","unit":"card_hours","limit":"40"}`, nil)
	responses["GET budgets"] = s.must(t, http.MethodGet, "/api/v1/budgets", "", nil)

	responses["GET usage"] = s.must(t, http.MethodGet, "/api/v1/usage?period=2026-11&group_by=project,user,sku", "", nil)
	responses["GET invoices"] = s.must(t, http.MethodGet, "/api/v1/invoices?period=2026-11", "", nil)
	for _, d := range run.Drafts {
		responses[fmt.Sprintf("GET invoices/%d", d.InvoiceID)] = s.must(t, http.MethodGet, fmt.Sprintf("/api/v1/invoices/%d", d.InvoiceID), "", nil)
		responses[fmt.Sprintf("GET invoices/%d/export json", d.InvoiceID)] = s.must(t, http.MethodGet, fmt.Sprintf("/api/v1/invoices/%d/export?format=json", d.InvoiceID), "", nil)
	}
	var doc struct {
		Lines []struct{ User string } `json:"lines"`
	}
	inv, err := s.led.Invoice(ctx, run.Drafts[0].InvoiceID)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(inv.Document, &doc))
	for _, l := range doc.Lines {
		if l.User != "" {
			responses["GET statements"] = s.must(t, http.MethodGet, "/api/v1/statements?user="+l.User, "", nil)
			responses["GET statement"] = s.must(t, http.MethodGet, fmt.Sprintf("/api/v1/invoices/%d/statements/%s", inv.ID, l.User), "", nil)
			break
		}
	}

	var problems []string
	for name, b := range responses {
		var v any
		require.NoError(t, json.Unmarshal(b, &v), "%s: %s", name, b)
		n := 0
		problems = append(problems, checkAmounts(v, name, digits, &n)...)
		if name != "GET invoices" { // the list carries no amounts (the documents do)
			require.Positive(t, n, "%s has amounts to check", name)
		}
	}
	require.Empty(t, problems, "amounts without exactly %d decimals (%s):\n%s", digits, cat.Currency, strings.Join(problems, "\n"))

	code, body := s.call(t, http.MethodPut, "/api/v1/budgets", `{"scope":"project","project":"ai101","period":"term","unit":"money","limit":"10.005"}`)
	require.Equal(t, http.StatusUnprocessableEntity, code, "a money limit finer than the minor unit: %s", body)
	require.Contains(t, string(body), "body.limit")
}
