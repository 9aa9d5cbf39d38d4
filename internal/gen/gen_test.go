package gen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

func TestWriteIsDeterministicValidAndExact(t *testing.T) {
	cfg := Config{Samples: 5000, StartMS: 1793462400000, Seed: 3, DuplicateEvery: 100}
	var a, b bytes.Buffer
	n, err := Write(&a, cfg)
	require.NoError(t, err)
	require.EqualValues(t, 5000, n)
	_, err = Write(&b, cfg)
	require.NoError(t, err)
	require.Equal(t, a.String(), b.String(), "same seed, same bytes")

	lines := strings.Split(strings.TrimSpace(a.String()), "\n")
	require.Len(t, lines, 5000)
	dec := schemas.NewDecoder()
	held, idle, known := 0, 0, 0
	for i, l := range lines {
		var s schemas.Sample
		require.NoError(t, dec.Decode([]byte(l), &s), "line %d", i+1)
		if s.Project != "" {
			held++
			if s.Processes == 0 {
				idle++
			}
		}
		if s.UtilKnown {
			known++
		}
	}
	// A trace with a mix of everything billing has to handle.
	require.Greater(t, held, 1000)
	require.Greater(t, idle, 10)
	require.Greater(t, known, 100)
	require.Less(t, known, 5000)

	var c bytes.Buffer
	_, err = Write(&c, Config{Samples: 5000, StartMS: 1793462400000, Seed: 4})
	require.NoError(t, err)
	require.NotEqual(t, a.String(), c.String())
}
