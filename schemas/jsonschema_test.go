package schemas

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	js "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/schemas/jsonschema"
)

// These tests hold the JSON Schema files and the Go decoders together: the same
// fields, the same required set, and the same verdict on a corpus of documents.

func compileSchema(t *testing.T, data []byte, url string) *js.Schema {
	t.Helper()
	doc, err := js.UnmarshalJSON(bytes.NewReader(data))
	require.NoError(t, err)
	c := js.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource(url, doc))
	s, err := c.Compile(url)
	require.NoError(t, err)
	return s
}

func schemaDoc(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestSampleSchemaMatchesDecoderFields(t *testing.T) {
	doc := schemaDoc(t, jsonschema.SampleV1)
	var known []string
	for _, k := range keys(doc["properties"].(map[string]any)) {
		bit, _ := fieldBit([]byte(k))
		require.NotZero(t, bit, "schema property %q is unknown to the decoder", k)
		known = append(known, k)
	}
	var required []string
	for _, r := range doc["required"].([]any) {
		required = append(required, r.(string))
	}
	var goRequired []string
	for _, r := range requiredOrder {
		goRequired = append(goRequired, r.name)
		require.Contains(t, known, r.name)
	}
	require.Equal(t, goRequired, required, "required fields (in order)")
	require.Len(t, known, len(requiredOrder)+6, "plus the optional schema, util_source, holder_ref and the three share fields")
}

func TestSampleSchemaAndDecoderAgree(t *testing.T) {
	schema := compileSchema(t, jsonschema.SampleV1, "sample.json")
	r := func(old, new string) string { return strings.Replace(validLine, old, new, 1) }
	corpus := []string{
		validLine,
		r(`"util":null`, `"util":0.5,"util_source":"gpm"`),
		r(`"util":null`, `"util":null,"holder_ref":"k8s:nlp-lab/nb-0"`),
		r(`"util":null`, `"util":1`),
		r(`"util":null`, `"util":0`),
		r(`"interval_s":10`, `"interval_s":0.001`),
		r(`"interval_s":10`, `"interval_s":3600`),
		r(`"project":"nlp-lab"`, `"project":""`),
		r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-11-01T00:00:00Z"`),
		r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-11-01T00:00:00.100000Z"`),
		`{"schema":"cardhour.sample.v1",` + validLine[1:],
		r(`"processes":1`, `"processes":1,"share_kind":"hami","share_mem":0.05,"share_cores":0.25`),
		r(`"processes":1`, `"processes":1,"share_kind":"vgpu","share_mem":1`),
		r(`"processes":1`, `"share_cores":0.25,"processes":1,"share_kind":"timeslice"`),
		// invalid
		r(`"processes":1`, `"processes":1,"share_kind":"mig","share_mem":0.5`),
		r(`"processes":1`, `"processes":1,"share_kind":"","share_mem":0.5`),
		r(`"processes":1`, `"processes":1,"share_kind":"hami"`),
		r(`"processes":1`, `"processes":1,"share_mem":0.5`),
		r(`"processes":1`, `"processes":1,"share_cores":0.5`),
		r(`"processes":1`, `"processes":1,"share_kind":"hami","share_mem":0`),
		r(`"processes":1`, `"processes":1,"share_kind":"hami","share_mem":1.5`),
		r(`"processes":1`, `"processes":1,"share_kind":"hami","share_cores":-0.5`),
		r(`"processes":1`, `"processes":1,"share_kind":"hami","share_cores":"0.5"`),
		r(`"processes":1`, `"processes":1,"share_kind":"hami","share_cores":null`),
		// invalid
		`[]`,
		r(`"interval_s":10`, `"interval_s":-10`),
		r(`"interval_s":10`, `"interval_s":0`),
		r(`"interval_s":10`, `"interval_s":"10"`),
		r(`"interval_s":10`, `"interval_s":1e300`),
		r(`"interval_s":10`, `"interval_s":3600.5`),
		r(`"interval_s":10`, `"interval_s":2592000`),
		r(`"interval_s":10,`, ``),
		r(`"ts":"2026-11-01T08:00:00.250+08:00",`, ``),
		r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-11-01 08:00:00"`),
		r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-11-01T08:00:00"`),
		r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-02-30T08:00:00Z"`),
		r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":"2026-11-01T08:00:00.2501Z"`),
		r(`"ts":"2026-11-01T08:00:00.250+08:00"`, `"ts":1700000000`),
		r(`"util":null`, `"util":1.5`),
		r(`"util":null`, `"util":-0.1`),
		r(`"util":null`, `"util":"high"`),
		r(`"util":null,`, ``),
		r(`"processes":1`, `"processes":-1`),
		r(`"processes":1`, `"processes":1.5`),
		r(`"project":"nlp-lab"`, `"project":null`),
		r(`"user":"2023110042",`, ``),
		r(`"instance_id":"MIG-1"`, `"instance_id":""`),
		r(`"node":"gpu-01"`, `"node":""`),
		`{"schema":"cardhour.sample.v2",` + validLine[1:],
	}
	for _, line := range corpus {
		_, decErr := DecodeSample([]byte(line))
		inst, err := js.UnmarshalJSON(strings.NewReader(line))
		require.NoError(t, err, line)
		schemaErr := schema.Validate(inst)
		require.Equal(t, decErr == nil, schemaErr == nil, "decoder says %v, schema says %v, for\n%s", decErr, schemaErr, line)
	}
}

// yamlTree converts a YAML document into the JSON data model the schema sees.
func yamlTree(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal(data, &v))
	b, err := json.Marshal(v)
	require.NoError(t, err)
	out, err := js.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return out
}

func TestCatalogSchemaMatchesGoTypes(t *testing.T) {
	doc := schemaDoc(t, jsonschema.CatalogV1)
	defs := doc["$defs"].(map[string]any)
	props := func(m any) []string { return keys(m.(map[string]any)["properties"].(map[string]any)) }
	goKeys := func(v any) []string {
		k := yamlFields(reflect.TypeOf(v))
		slices.Sort(k)
		return k
	}
	top := doc["properties"].(map[string]any)
	require.Equal(t, goKeys(rawCatalog{}), keys(top))
	require.Equal(t, goKeys(rawDefaults{}), props(top["defaults"]))
	require.Equal(t, goKeys(rawDiscounts{}), props(defs["discounts"]))
	require.Equal(t, goKeys(rawIdle{}), props(defs["idle"]))
	require.Equal(t, goKeys(rawSKU{}), props(top["skus"].(map[string]any)["items"]))
	proj := top["projects"].(map[string]any)["items"].(map[string]any)
	require.Equal(t, goKeys(rawProject{}), props(proj))
	res := proj["properties"].(map[string]any)["reservations"].(map[string]any)["items"]
	require.Equal(t, goKeys(rawReservation{}), props(res))
}

func TestCatalogSchemaAndLoaderAgree(t *testing.T) {
	schema := compileSchema(t, jsonschema.CatalogV1, "catalog.json")
	files, err := filepath.Glob("testdata/catalog/*.yaml")
	require.NoError(t, err)
	files = append(files, "examples/catalog.yaml")
	for _, path := range files {
		if strings.Contains(path, "syntax.bad") || strings.Contains(path, "two-documents.bad") {
			continue // not YAML at all; a second document the schema (which sees the first) cannot judge
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		_, loadErr := ParseCatalog(data, path)
		schemaErr := schema.Validate(yamlTree(t, data))
		require.Equal(t, loadErr == nil, schemaErr == nil, "%s: loader says %v, schema says %v", path, loadErr, schemaErr)
	}
}

// The schema's currencies are those of the Go table with two decimal places.
func TestCatalogSchemaCurrencies(t *testing.T) {
	doc := schemaDoc(t, jsonschema.CatalogV1)
	var enum []string
	for _, c := range doc["properties"].(map[string]any)["currency"].(map[string]any)["enum"].([]any) {
		enum = append(enum, c.(string))
	}
	require.Equal(t, billableCurrencies(), enum)
	require.Contains(t, enum, "CNY")
	require.NotContains(t, enum, "JPY")

	// Every IANA zone name passes the schema's timezone rule; Local does not.
	schema := compileSchema(t, jsonschema.CatalogV1, "catalog.json")
	doc1 := func(tz string) any { return map[string]any{"currency": "CNY", "timezone": tz} }
	for _, z := range ianaZones {
		require.NoError(t, schema.Validate(doc1(z)), z)
	}
	for _, z := range []string{"Local", "localtime", "", "/etc/localtime", "../UTC"} {
		require.Error(t, schema.Validate(doc1(z)), z)
	}
}
