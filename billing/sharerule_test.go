package billing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// Worked example 7 of docs/billing.md: three HAMi shares of one A100 80GB card
// under the example catalog, no holder conflict, one over-subscription.
func TestWorkedExampleShares(t *testing.T) {
	cat, err := schemas.LoadCatalog("../schemas/examples/catalog.yaml")
	require.NoError(t, err)
	p := NewPeriod(2026, time.November, cat.Location)
	at := func(h, m int) int64 { return time.Date(2026, 11, 10, h, m, 0, 0, cat.Location).UnixMilli() }
	hold := func(pod, user, profile string, from, to int64) []schemas.Sample {
		var out []schemas.Sample
		for t := from; t < to; t += 60_000 {
			out = append(out, schemas.Sample{StartMS: t, IntervalMS: 60_000, Node: "gpu-node-07", GPUUUID: "GPU-a",
				GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: "GPU-a/share/nlp/" + pod + "/main", Profile: profile,
				Project: "nlp-lab", User: user, UtilKnown: true, Util: 0.6, Processes: 1})
		}
		return out
	}
	var samples []schemas.Sample
	samples = append(samples, hold("nb-1", "2023110042", "1/20", at(10, 0), at(12, 0))...)
	samples = append(samples, hold("nb-2", "2023110043", "mem=10%", at(10, 0), at(11, 0))...)
	samples = append(samples, hold("train", "2023110044", "mem=96%", at(11, 30), at(12, 0))...)
	acc := NewAccumulator(cat, p)
	for i := range samples {
		acc.Add(&samples[i])
	}
	res := acc.Invoices()
	require.Empty(t, res.Conflicts, "shares held at once are not a holder conflict")
	var inv *Invoice
	for i := range res.Invoices {
		if res.Invoices[i].Project == "nlp-lab" {
			inv = &res.Invoices[i]
		}
	}
	require.NotNil(t, inv)
	got := map[string]string{}
	for _, l := range inv.Lines {
		if l.Kind == KindUsage {
			got[l.User+" "+l.SKU] = FormatPrice(l.UnitPrice) + " × " + FormatSeconds(l.BilledSeconds*1000) + " s = " + FormatMoney(l.Amount)
		}
	}
	require.Equal(t, map[string]string{
		"2023110042 a100-80g-1-20":           "1.80 × 7200 s = 3.60",
		"2023110043 a100-80g-share[mem=10%]": "0.50 × 3600 s = 0.50",
		"2023110044 a100-80g-share[mem=96%]": "4.80 × 1800 s = 2.40",
	}, got)
	require.Equal(t, "6.50", FormatMoney(inv.Total), "the usage lines and the annual reservation's 0.00 after its first month")
	require.Len(t, res.Oversubscribed, 1)
	o := res.Oversubscribed[0]
	require.Equal(t, "GPU-a", o.GPU)
	require.Equal(t, schemas.ShareByMemory, o.Basis)
	require.Equal(t, "1.01", o.Peak.String())
	require.EqualValues(t, 1_800_000, o.OverMS)
	require.Equal(t, at(11, 30), o.First)
	require.Equal(t, at(12, 0), o.Last)
	require.Equal(t, []string{"GPU-a/share/nlp/nb-1/main", "GPU-a/share/nlp/train/main"}, o.Instances)

	// The statement of one student shows the finding with the others counted.
	st := res.StatementFor("2023110044")
	require.Len(t, st.Oversubscribed, 1)
	require.Equal(t, []Holder{{"nlp-lab", "2023110044"}}, st.Oversubscribed[0].Holders)
	require.Equal(t, 1, st.Oversubscribed[0].OtherHolders)
	require.Empty(t, res.StatementFor("2023110043").Oversubscribed, "nb-2 ended before the card was over-subscribed")
}
