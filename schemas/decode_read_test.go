package schemas

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With Ordered, ReadSamples hands the chunks to the sink in input order,
// one call at a time, though several workers decode them and finish in any
// order; without it the same samples arrive, in some order.
func TestReadSamplesOrdered(t *testing.T) {
	var sb strings.Builder
	const n = 40_000 // about 30 chunks
	for i := range n {
		s := Sample{StartMS: 1793462400000 + int64(i)*1000, IntervalMS: 1000, Node: "n", GPUUUID: "g", GPUModel: "m",
			InstanceID: fmt.Sprint("MIG-", i%7), Profile: "1g.10gb", Project: "p", User: "u"}
		sb.Write(s.AppendJSON(nil))
		sb.WriteByte('\n')
		if i%5000 == 17 {
			sb.WriteString(`{"broken` + "\n") // invalid lines do not stop the order
		}
	}
	in := sb.String()
	for _, ordered := range []bool{true, false} {
		var mu sync.Mutex
		var got []int64
		inSink, most := 0, 0
		r := rand.New(rand.NewPCG(1, 2))
		stats, err := ReadSamples(strings.NewReader(in), ReadOptions{Workers: 4, Ordered: ordered, SkipInvalid: true},
			func(_ int, samples []Sample) error {
				mu.Lock()
				inSink++
				most = max(most, inSink)
				d := time.Duration(r.IntN(3)) * time.Millisecond
				mu.Unlock()
				time.Sleep(d) // a slow sink: the workers finish out of order
				mu.Lock()
				defer mu.Unlock()
				inSink--
				for i := range samples {
					got = append(got, samples[i].StartMS)
				}
				return nil
			})
		require.NoError(t, err)
		if ordered {
			require.Equal(t, 1, most, "one sink call at a time")
		}
		require.EqualValues(t, n, stats.Valid)
		require.EqualValues(t, 8, stats.InvalidCount)
		require.Len(t, got, n)
		inOrder := true
		for i := range got {
			if got[i] != 1793462400000+int64(i)*1000 {
				inOrder = false
				break
			}
		}
		if ordered {
			require.True(t, inOrder, "ordered delivery")
		} else {
			slices.Sort(got) // the same samples
			for i := range got {
				require.Equal(t, 1793462400000+int64(i)*1000, got[i])
			}
		}
	}
}
