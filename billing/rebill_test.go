package billing

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// InvoicesUnder bills the accumulated usage under another catalog: the same
// invoices as feeding the usage to an accumulator of that catalog, and the
// accumulator's own invoices are unchanged.
func TestInvoicesUnder(t *testing.T) {
	plain := catalogWith(t, 0, "")
	reserved := catalogWith(t, 0, `[{sku: a1g, quantity: 1, term: month, start: 2026-11, billing: monthly}]`)
	ss := []smp{
		{project: "p", user: "u1", inst: "i1", start: at(3, 9, 0, 0), end: at(3, 12, 0, 0), util: -1, procs: 1},
		{project: "p", user: "u2", inst: "i2", start: at(3, 10, 0, 0), end: at(3, 11, 30, 0), util: -1, procs: 1},
	}
	acc := NewAccumulator(plain, nov)
	for _, x := range ss {
		s := schemas.Sample{StartMS: x.start, IntervalMS: x.end - x.start, Node: "n", GPUUUID: "g", GPUModel: "A100",
			InstanceID: x.inst, Profile: "1g.10gb", Project: x.project, User: x.user, Processes: x.procs}
		acc.Add(&s)
	}
	before := acc.Invoices()
	under, err := acc.InvoicesUnder(reserved)
	require.NoError(t, err)
	require.Equal(t, bill(t, reserved, nov, ss...), under)
	require.Equal(t, before, acc.Invoices())
	require.Equal(t, "8.10", before.Invoices[0].Total.StringFixed(2))  // 4.5 h × 1.80
	require.Equal(t, "902.70", under.Invoices[0].Total.StringFixed(2)) // 900 + 1.5 h × 1.80

	other := *reserved
	other.Defaults.GapToleranceMS = 60_000
	_, err = acc.InvoicesUnder(&other)
	require.ErrorContains(t, err, "gap tolerance 60000 ms")
}
