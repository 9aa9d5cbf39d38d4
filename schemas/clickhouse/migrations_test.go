package clickhouse

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMigrationsEmbedded(t *testing.T) {
	ms, err := Migrations()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ms), 3)
	for i, m := range ms {
		require.Equal(t, i+1, m.Version, "versions are consecutive from 1")
		out := Render(m.SQL, Features{}, 30)
		require.NotContains(t, out, "{{")
		require.NotContains(t, out, "LowCardinality")
		require.NotContains(t, out, "TTL ts")
	}
}

func TestFeaturesFor(t *testing.T) {
	f := func(v string, want Features) {
		t.Helper()
		got, err := FeaturesFor(v)
		require.NoError(t, err)
		require.Equal(t, want, got, v)
	}
	f("18.16.1", Features{})
	f("19.6.2.11", Features{TTL: true})
	f("20.1.1", Features{TTL: true, LowCardinality: true})
	f("24.8.4.13", Features{TTL: true, LowCardinality: true})
	_, err := FeaturesFor("garbage")
	require.Error(t, err)
	ms, _ := Migrations()
	require.True(t, strings.Contains(Render(ms[0].SQL, Features{TTL: true, LowCardinality: true}, 90), "TTL ts + INTERVAL 90 DAY"))
}
