package ingest_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// The rollup holds each (node, minute) of the samples once, in the order first
// seen, and every unheld busy sample, however the samples are split into
// pieces and whether they come in runs of one node (as messages bring them)
// or shuffled.
func TestActivityRollup(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	nodes := []string{"", "gpu-a", "gpu-b", "gpu-c"}
	for round := range 200 {
		n := rng.IntN(300)
		samples := make([]schemas.Sample, n)
		for i := range samples {
			s := &samples[i]
			if i > 0 && rng.IntN(4) > 0 {
				*s = samples[i-1] // a run of one node and tick
			} else {
				s.Node = nodes[rng.IntN(len(nodes))]
				s.StartMS = int64(rng.IntN(5)) * 40_000
			}
			s.Project = []string{"", "lab"}[rng.IntN(2)]
			s.Processes = int64(rng.IntN(2))
		}
		var want []ingest.NodeMinute
		seen := map[ingest.NodeMinute]bool{}
		var unheld []schemas.Sample
		for i := range samples {
			m := ingest.NodeMinute{Node: samples[i].Node, MinuteMS: ingest.MinuteOf(samples[i].StartMS)}
			if !seen[m] {
				seen[m] = true
				want = append(want, m)
			}
			if ingest.UnheldBusy(&samples[i]) {
				unheld = append(unheld, samples[i])
			}
		}
		var a ingest.Activity
		for rest := samples; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(40))
			a.Add(rest[:k])
			rest = rest[k:]
		}
		require.Equal(t, want, a.Nodes, "round %d", round)
		require.Equal(t, unheld, a.Unheld, "round %d", round)
	}
}
