package ingest_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// /metrics shows the dead-letter counter for every reject reason from the
// start, and for no other reason.
func TestDLQCounterExportsEveryRejectReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	ingest.NewMetrics(reg)
	families, err := reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, f := range families {
		if f.GetName() != "cardhour_ingest_dlq_messages_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			require.Zero(t, m.GetCounter().GetValue())
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					got = append(got, l.GetValue())
				}
			}
		}
	}
	var want []string
	for _, r := range schemas.RejectReasons {
		want = append(want, string(r))
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got)
}

// docs/operations.md lists the reasons a dead letter carries: the same list,
// in the same order; and every `reason=…` the docs quote is one of them.
func TestOperationsDocListsTheRejectReasons(t *testing.T) {
	b, err := os.ReadFile("../docs/operations.md")
	require.NoError(t, err)
	doc := string(b)
	const intro = "`reason` ("
	i := strings.Index(doc, intro)
	require.GreaterOrEqual(t, i, 0, "docs/operations.md lists the reasons after %q", intro)
	list := doc[i+len(intro):]
	list = list[:strings.IndexByte(list, ')')]
	var listed []schemas.RejectReason
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(list, -1) {
		listed = append(listed, schemas.RejectReason(m[1]))
	}
	require.Equal(t, schemas.RejectReasons, listed, "docs/operations.md: %q", list)

	for _, name := range []string{"../docs/operations.md", "../docs/billing.md"} {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile("reason=([a-z_]+)").FindAllStringSubmatch(string(b), -1) {
			require.True(t, schemas.RejectReason(m[1]).Valid(), "%s names reason %s", name, m[1])
		}
	}
}
