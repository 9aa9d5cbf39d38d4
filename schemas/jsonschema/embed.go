// Package jsonschema embeds the JSON Schema files of cardhour's formats so that
// they ship inside the binary (and the API can serve them).
package jsonschema

import _ "embed"

// SampleV1 is the JSON Schema of cardhour.sample.v1.
//
//go:embed sample.v1.schema.json
var SampleV1 []byte

// CatalogV1 is the JSON Schema of the price catalog.
//
//go:embed catalog.v1.schema.json
var CatalogV1 []byte

// InvoiceV1 is the JSON Schema of the invoice document cardhour.invoice.v1.
//
//go:embed invoice.v1.schema.json
var InvoiceV1 []byte
