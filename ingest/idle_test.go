package ingest_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/schemas"
	chmigrations "github.com/cardhour/cardhour/schemas/clickhouse"
)

// The ClickHouse migration that carried exact-util idle runs over to classes
// spells the class bounds in SQL: they must be ingest.IdleClassBounds.
func TestClickHouseMigrationIdleClassesMatchGo(t *testing.T) {
	ms, err := chmigrations.Migrations()
	require.NoError(t, err)
	n := 0
	for _, m := range ms {
		if strings.Contains(m.SQL, "INSERT INTO idle_spans") {
			storetest.RequireIdleClassSQL(t, m.SQL)
			n++
		}
	}
	require.Equal(t, 1, n)
}

// The bounds are a fixed, increasing list ending at 1 (thresholds are at most
// 1), and IdleClassOf follows them.
func TestIdleClassBounds(t *testing.T) {
	b := ingest.IdleClassBounds()
	require.Equal(t, 1.0, b[len(b)-1])
	for i := range b {
		if i > 0 {
			require.Less(t, b[i-1], b[i])
		}
		for _, u := range []float64{b[i] - 1e-9, b[i]} {
			class, ok := ingest.IdleClassOf(&schemas.Sample{UtilKnown: true, Util: u})
			if u == b[i] && i == len(b)-1 {
				require.False(t, ok, "util %g is never idle", u)
				continue
			}
			require.True(t, ok)
			want := i + 1
			if u == b[i] {
				want = i + 2
			}
			require.EqualValues(t, want, class, "util %g", u)
		}
	}
}
