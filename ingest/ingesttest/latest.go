package ingesttest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// LatestFields is s with the fields billing.LatestRows returns (those of
// billing.HeldRows): memory, util source and schema cleared, util 0 when
// unknown.
func LatestFields(s schemas.Sample) schemas.Sample {
	s.MemUsed, s.MemTotal, s.UtilSource, s.SchemaField = 0, 0, "", ""
	if !s.UtilKnown {
		s.Util = 0
	}
	return s
}

// LatestOf is what a store's latest samples are once samples are written:
// per instance its held sample with the greatest start (ties: the later one
// in samples), with LatestFields.
func LatestOf(samples []schemas.Sample) map[string]schemas.Sample {
	out := map[string]schemas.Sample{}
	for _, s := range samples {
		if cur, ok := out[s.InstanceID]; s.Project != "" && (!ok || s.StartMS >= cur.StartMS) {
			out[s.InstanceID] = LatestFields(s)
		}
	}
	return out
}

// Latest reads st's latest samples from fromMS, by instance; an instance
// returned twice fails the test.
func Latest(t testing.TB, st billing.LatestRows, fromMS int64) map[string]schemas.Sample {
	t.Helper()
	out := map[string]schemas.Sample{}
	require.NoError(t, st.LatestSamples(context.Background(), fromMS, func(s *schemas.Sample) error {
		_, dup := out[s.InstanceID]
		require.False(t, dup, "instance %s returned twice", s.InstanceID)
		out[s.InstanceID] = *s
		return nil
	}))
	return out
}
